"""MSG conformance cases: the messaging contract, run unchanged on every provider.

Written against :mod:`videoflow_aio.contracts.messaging` only. Every duration goes through
``h.seconds`` / ``h.deadline`` / ``h.sleep`` (real engines scale time down); model controls are
declared in ``controls=``. IDs are stable: MSG-018 is the durable-control profile and MSG-024 the
archive profile, as the source document fixes them.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Final

import anyio

from ...contracts import Known, Unknown
from ...contracts.errors import IncompatibleProfile, NotFound
from ...contracts.messaging import (
    Accepted,
    ChannelId,
    ChannelObservation,
    ChannelSpec,
    Completed,
    Delivery,
    PublicationUnknown,
    Rejected,
    Retry,
    SettleConfirmed,
    SettleStale,
    SubscriptionId,
    SubscriptionObservation,
    SubscriptionSpec,
    Terminal,
    make_channel,
    make_envelope,
    make_subscription,
)
from .._case import case
from .._harness import MessagingHarness as Harness  # every case here is a messaging case

M: Final = "messaging"
_ops: weakref.WeakKeyDictionary[Harness, Iterator[int]] = weakref.WeakKeyDictionary()


def _op(h: Harness) -> str:
    """A fresh operation id, counted per run (a run's log never depends on what ran before)."""
    ops = _ops.get(h)
    if ops is None:
        ops = _ops[h] = itertools.count(1)
    return f"op-{next(ops)}"


def _window(h: Harness, s: float) -> int:
    """A dedup window in whole seconds (the spec field is an int), scaled."""
    return max(1, round(h.seconds(s)))


async def _channel(h: Harness, backend: Any, node: str = "n1", **kw: Any) -> ChannelSpec:
    kw.setdefault("retention", "limits")
    spec = make_channel("flow", "run1", node, kw.pop("profile", "work"), **kw)
    await backend.ensure_channel(spec, _op(h))
    return spec


async def _sub(
    h: Harness, backend: Any, channel: ChannelId, consumer: str = "w", **kw: Any
) -> SubscriptionSpec:
    kw.setdefault("ack_wait_seconds", h.seconds(30))
    spec = make_subscription(channel, consumer, **kw)
    await backend.ensure_subscription(spec, _op(h))
    return spec


async def _publish(h: Harness, backend: Any, channel: ChannelId, pid: str, **kw: Any) -> Any:
    return await backend.publish(make_envelope(channel, pid, **kw), h.deadline(5))


async def _recv(
    h: Harness,
    backend: Any,
    sub: SubscriptionId,
    n: int = 64,
    wait: float = 1.0,
    byte_credit: int = 1 << 30,
) -> list[Delivery]:
    return list(await backend.receive(sub, n, byte_credit, h.deadline(wait)))


async def _sub_obs(h: Harness, backend: Any, sub: SubscriptionId) -> SubscriptionObservation:
    obs = await backend.observe_subscription(sub)
    h.check(isinstance(obs, Known), f"observe_subscription failed: {obs!r}")
    assert isinstance(obs, Known)
    value: SubscriptionObservation = obs.value
    return value


async def _chan_obs(h: Harness, backend: Any, channel: ChannelId) -> ChannelObservation:
    obs = await backend.observe_channel(channel)
    h.check(isinstance(obs, Known), f"observe_channel failed: {obs!r}")
    assert isinstance(obs, Known)
    value: ChannelObservation = obs.value
    return value


def _pids(deliveries: list[Delivery]) -> list[str]:
    return [d.envelope.publication_id for d in deliveries]


async def _settle_all(backend: Any, deliveries: list[Delivery], prefix: str = "s") -> None:
    for d in deliveries:
        await backend.settle(d.token, Completed(), f"{prefix}-{d.token.lease_id}-{d.sequence}")


# -- basics -------------------------------------------------------------------------------


@case(
    "MSG-001", "publish, receive and settle: a completed message is never redelivered", contract=M
)
async def basic_cycle(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel, ack_wait_seconds=h.seconds(10))
    out = await _publish(h, b, ch.channel, "p1", body=b"hello")
    h.check(isinstance(out, Accepted) and not out.duplicate, f"publish: {out!r}")
    got = await _recv(h, b, sub.id)
    h.equal(_pids(got), ["p1"], "delivered")
    h.equal(got[0].envelope.body, b"hello", "body")
    h.equal(got[0].attempt, 1, "first attempt")
    h.equal(got[0].sequence, out.sequence, "sequence matches the publish ack")
    ans = await b.settle(got[0].token, Completed(), "set-1")
    h.check(isinstance(ans, SettleConfirmed), f"settle: {ans!r}")
    again = await _recv(h, b, sub.id, wait=30)  # past the ack wait: nothing comes back
    h.equal(again, [], "no redelivery after Completed")
    obs = await _sub_obs(h, b, sub.id)
    h.equal((obs.pending, obs.leased, obs.unresolved), (0, 0, 0), "pending/leased/unresolved")
    h.equal(obs.ack_floor, out.sequence, "ack floor")


@case(
    "MSG-002",
    "dedup: a publication id seen within the window is a duplicate, stored once",
    contract=M,
)
async def dedup_inside(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b, dedup_window_seconds=_window(h, 20))
    sub = await _sub(h, b, ch.channel)
    first = await _publish(h, b, ch.channel, "p1", body=b"first")
    await h.sleep(5)
    second = await _publish(h, b, ch.channel, "p1", body=b"second")
    h.check(isinstance(first, Accepted) and not first.duplicate, f"first: {first!r}")
    h.check(isinstance(second, Accepted) and second.duplicate, f"second: {second!r}")
    h.equal(second.sequence, first.sequence, "duplicate names the original sequence")
    h.equal((await _chan_obs(h, b, ch.channel)).messages, 1, "stored once")
    got = await _recv(h, b, sub.id)
    h.equal([d.envelope.body for d in got], [b"first"], "the first body wins")


@case("MSG-003", "dedup: past the window a retry is a new message", contract=M)
async def dedup_past(h: Harness) -> None:
    b = await h.open()
    win = _window(h, 10)
    ch = await _channel(h, b, dedup_window_seconds=win)
    first = await _publish(h, b, ch.channel, "p1")
    await h.sleep(1.5 * win / h.scale)  # ``win`` is already in provider seconds
    again = await _publish(h, b, ch.channel, "p1")
    h.check(isinstance(again, Accepted) and not again.duplicate, f"retry past window: {again!r}")
    h.check(again.sequence > first.sequence, "a new sequence")
    h.equal((await _chan_obs(h, b, ch.channel)).messages, 2, "stored twice")


# -- limits -------------------------------------------------------------------------------


@case(
    "MSG-004",
    "limits evict_oldest: a drop for exactly the subscriptions that had not settled it",
    contract=M,
)
async def evict_oldest(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b, max_msgs=2, overflow="evict_oldest")
    a = await _sub(h, b, ch.channel, "a")
    c = await _sub(h, b, ch.channel, "c")
    await _publish(h, b, ch.channel, "p1")
    await _settle_all(b, await _recv(h, b, a.id, n=1))  # a settles p1, c never does
    await _publish(h, b, ch.channel, "p2")
    third = await _publish(h, b, ch.channel, "p3")
    h.check(isinstance(third, Accepted), f"evict_oldest accepts: {third!r}")
    obs = await _chan_obs(h, b, ch.channel)
    h.equal(obs.messages, 2, "retained")
    h.equal(obs.first_sequence, third.sequence - 1, "oldest evicted")
    h.equal((await _sub_obs(h, b, a.id)).dropped, 0, "a settled p1: no drop")
    oc = await _sub_obs(h, b, c.id)
    h.equal(oc.dropped, 1, "c lost p1")
    h.equal(oc.pending, 2, "c still has p2, p3")
    h.equal(_pids(await _recv(h, b, c.id)), ["p2", "p3"], "c receives what remains")


@case(
    "MSG-005", "limits reject: a full channel rejects with a reason and stores nothing", contract=M
)
async def reject_full(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b, max_msgs=2, overflow="reject")
    await _publish(h, b, ch.channel, "p1")
    await _publish(h, b, ch.channel, "p2")
    before = await _chan_obs(h, b, ch.channel)
    out = await _publish(h, b, ch.channel, "p3")
    h.check(isinstance(out, Rejected), f"full channel: {out!r}")
    h.check(bool(out.reason), "a rejection carries a reason")
    h.equal(await _chan_obs(h, b, ch.channel), before, "channel unchanged")
    dup = await _publish(h, b, ch.channel, "p1")
    h.check(isinstance(dup, Accepted) and dup.duplicate, f"dedup is checked first: {dup!r}")


@case("MSG-006", "limits: data, EOS and control share the slot", contract=M)
async def shared_slot(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b, max_msgs=3)
    eos = await _sub(h, b, ch.channel, "e", kind="eos")
    await _publish(h, b, ch.channel, "end", kind="eos")
    for i in range(3):
        await _publish(h, b, ch.channel, f"d{i}")
    h.equal((await _chan_obs(h, b, ch.channel)).messages, 3, "slot size")
    h.equal(await _recv(h, b, eos.id), [], "the EOS marker was evicted by data")
    h.equal((await _sub_obs(h, b, eos.id)).dropped, 1, "and recorded as dropped")


@case(
    "MSG-007",
    "per_subject_limits: each kind has its own slot, EOS survives a data flood",
    contract=M,
)
async def per_subject(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b, max_msgs=3, per_subject_limits=True)
    eos = await _sub(h, b, ch.channel, "e", kind="eos")
    await _publish(h, b, ch.channel, "end", kind="eos")
    for i in range(6):
        await _publish(h, b, ch.channel, f"d{i}")
    h.equal((await _chan_obs(h, b, ch.channel)).messages, 4, "3 data + 1 eos")
    h.equal(_pids(await _recv(h, b, eos.id)), ["end"], "EOS kept")


@case("MSG-008", "interest retention: kept until every required subscription settles", contract=M)
async def interest(h: Harness) -> None:
    b = await h.open()
    cid = ChannelId("flow", "run1", "n1")
    ra, rb = SubscriptionId(cid, "a"), SubscriptionId(cid, "b")
    ch = await _channel(h, b, retention="interest", required=(ra, rb))
    await _sub(h, b, cid, "a")
    await _sub(h, b, cid, "b")
    await _publish(h, b, cid, "p1")
    await _publish(h, b, cid, "p2")
    await _settle_all(b, await _recv(h, b, ra))
    h.equal((await _chan_obs(h, b, cid)).messages, 2, "b has not settled yet")
    got_b = await _recv(h, b, rb)
    await b.settle(got_b[0].token, Completed(), "b-1")
    await b.settle(got_b[1].token, Terminal("bad"), "b-2")  # terminal counts as settled
    obs = await _chan_obs(h, b, cid)
    h.equal(obs.messages, 0, "removed once every required subscription settled")
    h.equal(ch.retention, "interest", "retention")


# -- leases -------------------------------------------------------------------------------


@case(
    "MSG-009",
    "lease expiry: the message is redelivered with attempt + 1 after ack_wait",
    contract=M,
)
async def lease_expiry(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel, ack_wait_seconds=h.seconds(10))
    await _publish(h, b, ch.channel, "p1")
    # from before the delivery: the lease runs from the server's delivery, which a loaded
    # client sees late (from after the receive, nats-cluster waited 5 ms less than ack_wait)
    t0 = h.now()
    first = await _recv(h, b, sub.id)
    second = await _recv(h, b, sub.id, wait=30)
    waited = h.now() - t0
    h.equal(_pids(second), ["p1"], "redelivered")
    h.equal(second[0].attempt, first[0].attempt + 1, "attempt + 1")
    h.equal(second[0].sequence, first[0].sequence, "same stream sequence")
    h.check(waited >= h.seconds(9.9), f"not before ack_wait (waited {waited})")
    h.check(waited <= h.at_most(15), f"soon after ack_wait (waited {waited})")
    h.equal((await _sub_obs(h, b, sub.id)).redelivered, 1, "counted as redelivered")


@case("MSG-010", "renew keeps a lease alive past ack_wait", contract=M)
async def renew(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel, ack_wait_seconds=h.seconds(10))
    await _publish(h, b, ch.channel, "p1")
    got = await _recv(h, b, sub.id)
    for _ in range(6):
        await h.sleep(5)
        lease = await b.renew(got[0].token)
        h.check(lease.held, f"renewed: {lease!r}")
    h.equal(await _recv(h, b, sub.id, wait=5), [], "no redelivery while renewed")
    ans = await b.settle(got[0].token, Completed(), "s1")
    h.check(isinstance(ans, SettleConfirmed), f"settle after renewals: {ans!r}")


@case(
    "MSG-011",
    "max_deliver exhausted: unresolved is retained, undeliverable and reported",
    contract=M,
)
async def unresolved(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel, ack_wait_seconds=h.seconds(5), max_deliver=2)
    await _publish(h, b, ch.channel, "p1")
    attempts = []
    for _ in range(2):
        got = await _recv(h, b, sub.id, wait=10)
        attempts += [d.attempt for d in got]
    h.equal(attempts, [1, 2], "delivered max_deliver times")
    h.equal(await _recv(h, b, sub.id, wait=20), [], "never delivered again")
    obs = await _sub_obs(h, b, sub.id)
    h.equal(obs.unresolved, 1, "reported as unresolved")
    h.check(not (obs.pending == 0 and obs.unresolved == 0), "never reported as nothing pending")
    h.equal((await _chan_obs(h, b, ch.channel)).messages, 1, "still retained")


@case("MSG-012", "max_deliver = -1: redelivery is unlimited", contract=M)
async def unlimited(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel, ack_wait_seconds=h.seconds(2), max_deliver=-1)
    await _publish(h, b, ch.channel, "p1")
    attempts = []
    for _ in range(7):
        attempts += [d.attempt for d in await _recv(h, b, sub.id, wait=5)]
    h.equal(attempts, list(range(1, 8)), "attempts keep counting")
    h.equal((await _sub_obs(h, b, sub.id)).unresolved, 0, "never unresolved")


# -- credit -------------------------------------------------------------------------------


@case("MSG-013", "item_credit is a cap on leases shared by every competing replica", contract=M)
async def item_credit(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel, item_credit=3)
    for i in range(5):
        await _publish(h, b, ch.channel, f"p{i}")
    r1 = await _recv(h, b, sub.id, n=2)
    r2 = await _recv(h, b, sub.id, n=10)
    h.equal(len(r1) + len(r2), 3, "two replicas together lease at most item_credit")
    h.equal(len(set(_pids(r1)) | set(_pids(r2))), 3, "no message leased twice")
    blocked: list[Delivery] = []

    async def replica() -> None:
        blocked.extend(await _recv(h, b, sub.id, n=10, wait=20))

    async with anyio.create_task_group() as tg:
        tg.start_soon(replica)
        await h.sleep(2)
        h.equal(blocked, [], "a replica waits while credit is exhausted")
        await b.settle(r1[0].token, Completed(), "free-1")
    h.equal(len(blocked), 1, "one settle frees one slot")
    h.equal((await _sub_obs(h, b, sub.id)).leased, 3, "leased stays at the cap")


@case("MSG-014", "byte_credit bounds a single receive", contract=M)
async def byte_credit(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel, item_credit=64)
    for i in range(10):
        await _publish(h, b, ch.channel, f"p{i}", body=b"z" * 1000)
    got = await _recv(h, b, sub.id, n=10, byte_credit=2500)
    h.equal(len(got), 2, "2 × 1000 bytes fit 2500")
    rest = await _recv(h, b, sub.id, n=10, byte_credit=100_000)
    h.equal(len(rest), 8, "the rest comes with more credit")


# -- settle outcomes ----------------------------------------------------------------------


@case("MSG-015", "Retry redelivers (after its delay) with attempt + 1", contract=M)
async def retry(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel, ack_wait_seconds=h.seconds(60), max_deliver=5)
    await _publish(h, b, ch.channel, "p1")
    got = await _recv(h, b, sub.id)
    ans = await b.settle(got[0].token, Retry(), "r1")
    h.check(isinstance(ans, SettleConfirmed), f"retry: {ans!r}")
    again = await _recv(h, b, sub.id)
    h.equal([d.attempt for d in again], [2], "redelivered at once")
    t0 = h.now()  # before the settle: the delay runs from the server's handling of it
    await b.settle(again[0].token, Retry(h.seconds(10)), "r2")
    third = await _recv(h, b, sub.id, wait=30)
    h.equal([d.attempt for d in third], [3], "redelivered after the delay")
    h.check(h.now() - t0 >= h.seconds(9.9), "not before the delay")


@case(
    "MSG-016",
    "Terminal: never redelivered; a dead letter is stored on the origin channel",
    contract=M,
)
async def terminal(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel, ack_wait_seconds=h.seconds(5))
    dlq = await _sub(h, b, ch.channel, "dlq-reader", kind="dlq")
    await _publish(h, b, ch.channel, "p1", body=b"poison")
    got = await _recv(h, b, sub.id)
    ans = await b.settle(got[0].token, Terminal("cannot decode"), "t1")
    h.check(isinstance(ans, SettleConfirmed), f"terminal: {ans!r}")
    h.equal(await _recv(h, b, sub.id, wait=20), [], "never redelivered")
    dead = await _recv(h, b, dlq.id)
    h.equal(len(dead), 1, "one dead letter")
    h.equal(dead[0].envelope.kind, "dlq", "kind")
    h.equal(dead[0].envelope.channel, ch.channel, "on the origin channel")
    h.equal(dead[0].envelope.body, b"poison", "original body")
    h.equal(dead[0].envelope.event_id, got[0].envelope.event_id, "same event")
    obs = await _sub_obs(h, b, sub.id)
    h.equal(obs.dead_lettered, 1, "counted")
    h.equal((await _chan_obs(h, b, ch.channel)).dead_letters, 1, "channel holds it")


@case("MSG-017", "dead letters never occupy, evict or fill the channel's slot", contract=M)
async def dlq_outside_slot(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b, max_msgs=2, overflow="reject")
    sub = await _sub(h, b, ch.channel)
    await _publish(h, b, ch.channel, "p1")
    await _publish(h, b, ch.channel, "p2")
    for d in await _recv(h, b, sub.id):
        await b.settle(d.token, Terminal("x"), f"t-{d.sequence}")
    obs = await _chan_obs(h, b, ch.channel)
    h.equal((obs.messages, obs.dead_letters), (2, 2), "slot and dead letters apart")
    # the reject channel is full from its two messages alone, not from the dead letters
    h.check(isinstance(await _publish(h, b, ch.channel, "p3"), Rejected), "slot full")
    ev = await _channel(h, b, "n2", max_msgs=2)
    es = await _sub(h, b, ev.channel)
    await _publish(h, b, ev.channel, "q1")
    for d in await _recv(h, b, es.id):
        await b.settle(d.token, Terminal("x"), f"te-{d.sequence}")
    await _publish(h, b, ev.channel, "q2")
    await _publish(h, b, ev.channel, "q3")
    eobs = await _chan_obs(h, b, ev.channel)
    h.equal((eobs.messages, eobs.dead_letters), (2, 1), "a dead letter is not evicted by data")


@case(
    "MSG-018",
    "durable-control profile: versioned control records via commit_control / control_state",
    contract=M,
    needs=("durable_control",),
)
async def durable_control(h: Harness) -> None:
    b = await h.open(durable_control=True)
    h.require((await b.capabilities()).durable_control, "durable_control")
    ch = await _channel(h, b)
    h.equal(await b.control_state(ch.channel, "pause"), (None, None), "absent")
    h.check(await b.commit_control(ch.channel, "pause", None, b"on"), "create")
    value, v1 = await b.control_state(ch.channel, "pause")
    h.equal(value, b"on", "value")
    h.check(v1 is not None, "a version")
    h.check(not await b.commit_control(ch.channel, "pause", None, b"again"), "create twice loses")
    h.check(await b.commit_control(ch.channel, "pause", v1, b"off"), "update with the version")
    value2, v2 = await b.control_state(ch.channel, "pause")
    h.equal(value2, b"off", "updated")
    h.check(v2 != v1, "a new version")
    h.check(not await b.commit_control(ch.channel, "pause", v1, b"stale"), "stale version loses")
    h.equal(await b.control_state(ch.channel, "pause"), (b"off", v2), "unchanged by the loser")


@case("MSG-019", "a settle on a lease that expired and was redelivered is SettleStale", contract=M)
async def stale_settle(h: Harness) -> None:
    b = await h.open()
    h.require((await b.capabilities()).stale_settle_detection, "stale_settle_detection")
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel, ack_wait_seconds=h.seconds(5))
    await _publish(h, b, ch.channel, "p1")
    old = await _recv(h, b, sub.id)
    new = await _recv(h, b, sub.id, wait=10)
    h.equal([d.attempt for d in new], [2], "redelivered")
    ans = await b.settle(old[0].token, Completed(), "old")
    h.check(isinstance(ans, SettleStale), f"stale: {ans!r}")
    h.equal((await _sub_obs(h, b, sub.id)).leased, 1, "the new lease still stands")
    ok = await b.settle(new[0].token, Completed(), "new")
    h.check(isinstance(ok, SettleConfirmed), f"current lease settles: {ok!r}")


@case("MSG-020", "settle is idempotent by settlement_id", contract=M)
async def idempotent_settle(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel)
    await _publish(h, b, ch.channel, "p1")
    await _publish(h, b, ch.channel, "p2")
    got = await _recv(h, b, sub.id)
    first = await b.settle(got[0].token, Completed(), "same")
    second = await b.settle(got[0].token, Completed(), "same")
    h.check(isinstance(first, SettleConfirmed), f"first: {first!r}")
    h.check(isinstance(second, SettleConfirmed), f"retried settle confirms again: {second!r}")
    obs = await _sub_obs(h, b, sub.id)
    h.equal((obs.leased, obs.pending), (1, 0), "applied once: p2 still leased")


# -- ambiguity and truthful observation ---------------------------------------------------


@case(
    "MSG-021",
    "ambiguous acceptance: the deadline passes (PublicationUnknown), then late acceptance",
    contract=M,
    controls=("pause_acceptance", "resume_acceptance"),
)
async def late_acceptance(h: Harness) -> None:
    b = await h.open()
    ctl = h.controls(b)
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel)
    env = make_envelope(ch.channel, "p1")
    await ctl.pause_acceptance(ch.channel)
    t0 = h.now()
    out = await b.publish(env, h.deadline(5))
    h.check(isinstance(out, PublicationUnknown), f"deadline passed: {out!r}")
    h.check(h.now() - t0 >= h.seconds(4.9), "the publisher really waited for its deadline")
    seen = await b.observe_publication(env)
    h.check(not isinstance(seen, Accepted), f"not stored while held: {seen!r}")
    await ctl.resume_acceptance(ch.channel)
    after = await b.observe_publication(env)
    h.check(isinstance(after, Accepted), f"stored late: {after!r}")
    h.equal(_pids(await _recv(h, b, sub.id)), ["p1"], "delivered after late acceptance")
    retry = await b.publish(env, h.deadline(5))
    h.check(isinstance(retry, Accepted) and retry.duplicate, f"a retry dedups: {retry!r}")


@case(
    "MSG-022",
    "ambiguous acceptance with cancellation: nothing is stored, and observe_publication says so",
    contract=M,
    controls=("pause_acceptance", "resume_acceptance", "cancel_publication"),
)
async def cancelled(h: Harness) -> None:
    b = await h.open()
    ctl = h.controls(b)
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel)
    env = make_envelope(ch.channel, "p1")
    await ctl.pause_acceptance(ch.channel)
    out = await b.publish(env, h.deadline(5))
    h.check(isinstance(out, PublicationUnknown), f"unknown: {out!r}")
    h.check(await ctl.cancel_publication(ch.channel, "p1"), "cancelled while held")
    h.check(not await ctl.cancel_publication(ch.channel, "p1"), "nothing left to cancel")
    await ctl.resume_acceptance(ch.channel)
    seen = await b.observe_publication(env)
    h.check(not isinstance(seen, Accepted), f"never stored: {seen!r}")
    h.equal(await _recv(h, b, sub.id), [], "nothing delivered")
    h.equal((await _chan_obs(h, b, ch.channel)).messages, 0, "nothing retained")


@case(
    "MSG-023",
    "fail_observation: observe_subscription is Unknown, never zero",
    contract=M,
    controls=("fail_observation",),
)
async def failed_observation(h: Harness) -> None:
    b = await h.open()
    ctl = h.controls(b)
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel)
    await _publish(h, b, ch.channel, "p1")
    await ctl.fail_observation(sub.id, "timeout")
    obs = h.expect_type(await b.observe_subscription(sub.id), Unknown, "observation")
    h.equal(obs.reason, "timeout", "reason")
    await ctl.fail_observation(sub.id, None)
    h.equal((await _sub_obs(h, b, sub.id)).pending, 1, "readable again")


@case(
    "MSG-024",
    "archive profile: replay within the horizon, None after it, outliving close",
    contract=M,
    needs=("archive",),
)
async def archive(h: Harness) -> None:
    b = await h.open(archive=True, archive_horizon_seconds=h.seconds(100))
    h.require((await b.capabilities()).archive, "archive")
    ch = await _channel(h, b, owner_labels={"generation": "g1"})
    env = make_envelope(ch.channel, "p1", body=b"frame", event_id="ev-1")
    await b.publish(env, h.deadline(5))
    got = await b.replay(ch.channel, "ev-1")
    h.check(got is not None and got.body == b"frame", f"replayable: {got!r}")
    cleanup = await b.close([ch.channel], "g1")
    h.equal(list(cleanup.removed), [ch.channel], "channel closed")
    after_close = await b.replay(ch.channel, "ev-1")
    h.check(after_close is not None and after_close.event_id == "ev-1", "outlives close")
    await h.sleep(150)
    h.equal(await b.replay(ch.channel, "ev-1"), None, "None past the horizon")
    h.equal(await b.replay(ch.channel, "never"), None, "None for an unknown event")


@case("MSG-025", "ack floor: contiguous; a gap holds it until filled", contract=M)
async def ack_floor(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel, item_credit=8)
    for i in range(1, 5):
        await _publish(h, b, ch.channel, f"p{i}")
    got = {d.envelope.publication_id: d for d in await _recv(h, b, sub.id)}
    base = got["p1"].sequence - 1
    for pid in ("p1", "p3", "p4"):
        await b.settle(got[pid].token, Completed(), pid)
    floor = await b.observe_ack_floor(sub.id)
    h.equal(floor, Known(base + 1), "floor stops before the unsettled p2")
    await b.settle(got["p2"].token, Completed(), "p2")
    h.equal(await b.observe_ack_floor(sub.id), Known(base + 4), "floor jumps once p2 settles")


@case("MSG-026", "channel range: messages, first and last sequence", contract=M)
async def channel_range(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b, max_msgs=3)
    empty = await _chan_obs(h, b, ch.channel)
    h.equal(empty.messages, 0, "empty")
    h.equal(empty.first_sequence, empty.last_sequence + 1, "empty range: first = last + 1")
    outs = [await _publish(h, b, ch.channel, f"p{i}", body=b"abc") for i in range(5)]
    obs = await _chan_obs(h, b, ch.channel)
    h.equal(obs.messages, 3, "messages")
    h.check(obs.bytes >= 9, f"bytes cover the three bodies ({obs.bytes})")
    h.equal(obs.last_sequence, outs[-1].sequence, "last")
    h.equal(obs.first_sequence, outs[2].sequence, "first after eviction")


# -- core-only mode -----------------------------------------------------------------------


@case(
    "MSG-027",
    "core-only: no retention, nothing for a subscriber attached after the publish",
    contract=M,
    needs=("core_only",),
)
async def core_no_retention(h: Harness) -> None:
    b = await h.open(core_only=True)
    h.require((await b.capabilities()).core_only, "core_only")
    ch = await _channel(h, b)
    early = await _sub(h, b, ch.channel, "early")
    out = await _publish(h, b, ch.channel, "p1")
    h.check(isinstance(out, Accepted), f"publish: {out!r}")
    late = await _sub(h, b, ch.channel, "late")
    h.equal(_pids(await _recv(h, b, early.id)), ["p1"], "attached subscriber gets it")
    h.equal(await _recv(h, b, late.id), [], "late subscriber gets nothing")
    h.equal((await _chan_obs(h, b, ch.channel)).messages, 0, "nothing retained")


@case(
    "MSG-028",
    "core-only: a slow consumer drops past client_queue_limit",
    contract=M,
    needs=("core_only",),
)
async def core_slow_consumer(h: Harness) -> None:
    b = await h.open(core_only=True, client_queue_limit=4)
    h.require((await b.capabilities()).core_only, "core_only")
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel)
    for i in range(10):
        await _publish(h, b, ch.channel, f"p{i}")
    got = await _recv(h, b, sub.id, n=64)
    h.equal(_pids(got), [f"p{i}" for i in range(4)], "the queue holds the first four")
    h.equal((await _sub_obs(h, b, sub.id)).dropped, 6, "six slow-consumer drops")


# -- subjects, fan-out, partitions --------------------------------------------------------


@case(
    "MSG-029",
    "kind filtering: a data subscription never sees EOS, an EOS one never data",
    contract=M,
)
async def kinds(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    data = await _sub(h, b, ch.channel, "d", kind="data")
    eos = await _sub(h, b, ch.channel, "e", kind="eos")
    await _publish(h, b, ch.channel, "d1")
    await _publish(h, b, ch.channel, "end", kind="eos")
    await _publish(h, b, ch.channel, "d2")
    h.equal(_pids(await _recv(h, b, data.id)), ["d1", "d2"], "data only")
    h.equal(_pids(await _recv(h, b, eos.id)), ["end"], "eos only")
    h.equal((await _sub_obs(h, b, eos.id)).pending, 0, "eos pending counts eos only")


@case(
    "MSG-030",
    "competing replicas split a subscription; separate subscriptions each see all",
    contract=M,
)
async def competing(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    work = await _sub(h, b, ch.channel, "work", competing=True, item_credit=64)
    audit = await _sub(h, b, ch.channel, "audit", competing=False, item_credit=64)
    for i in range(6):
        await _publish(h, b, ch.channel, f"p{i}")
    r1 = await _recv(h, b, work.id, n=3)
    r2 = await _recv(h, b, work.id, n=3)
    h.equal(sorted(_pids(r1) + _pids(r2)), [f"p{i}" for i in range(6)], "replicas split")
    h.check(not set(_pids(r1)) & set(_pids(r2)), "no message to two replicas")
    h.equal(_pids(await _recv(h, b, audit.id)), [f"p{i}" for i in range(6)], "fan-out")


@case("MSG-031", "partitions: a partition subscription sees only its partition", contract=M)
async def partitions(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    p0 = await _sub(h, b, ch.channel, "p0", partition=0)
    p1 = await _sub(h, b, ch.channel, "p1", partition=1)
    every = await _sub(h, b, ch.channel, "all")
    for i in range(4):
        await _publish(h, b, ch.channel, f"m{i}", partition_key=str(i % 2))
    h.equal(_pids(await _recv(h, b, p0.id)), ["m0", "m2"], "partition 0")
    h.equal(_pids(await _recv(h, b, p1.id)), ["m1", "m3"], "partition 1")
    h.equal(len(await _recv(h, b, every.id)), 4, "an unpartitioned subscription sees all")


# -- lifecycle ----------------------------------------------------------------------------


@case(
    "MSG-032", "ensure_channel is idempotent and reads back the effective configuration", contract=M
)
async def ensure_idempotent(h: Harness) -> None:
    b = await h.open()
    spec = make_channel("flow", "run1", "n1", "work", "limits", max_msgs=100)
    v1 = await b.ensure_channel(spec, "op-a")
    h.check(v1.created, "created")
    v2 = await b.ensure_channel(spec, "op-b")
    h.check(not v2.created and not v2.updated, "the same spec again changes nothing")
    h.equal(v2.effective.retention, "limits", "retention read back")
    h.equal(v2.effective.max_msgs, 100, "max_msgs read back")
    bigger = make_channel("flow", "run1", "n1", "work", "limits", max_msgs=200)
    v3 = await b.ensure_channel(bigger, "op-c")
    h.check(v3.updated, "a mutable limit is reconciled")
    h.equal(v3.effective.max_msgs, 200, "new limit read back")
    h.equal(await b.channel_ids(), [spec.channel], "one channel")


@case(
    "MSG-033",
    "ensure_channel: an immutable mismatch raises IncompatibleProfile, changes nothing",
    contract=M,
)
async def ensure_incompatible(h: Harness) -> None:
    b = await h.open()
    spec = await _channel(h, b, retention="limits", max_msgs=5)
    await _publish(h, b, spec.channel, "p1")
    other = make_channel("flow", "run1", "n1", "work", "interest", max_msgs=5)
    raised = None
    try:
        await b.ensure_channel(other, _op(h))
    except IncompatibleProfile as exc:
        raised = exc
    h.check(raised is not None, "IncompatibleProfile raised")
    assert raised is not None
    h.equal(raised.fields.get("field"), "retention", "names the field")
    again = await b.ensure_channel(spec, _op(h))
    h.equal(again.effective.retention, "limits", "unchanged")
    h.equal((await _chan_obs(h, b, spec.channel)).messages, 1, "messages kept")


@case("MSG-034", "close removes exactly the owned channels", contract=M)
async def close_owned(h: Harness) -> None:
    b = await h.open()
    mine = await _channel(h, b, "a", owner_labels={"generation": "g1"})
    keep = await _channel(h, b, "b", owner_labels={"generation": "g1"})
    foreign = await _channel(h, b, "c", owner_labels={"generation": "g2"})
    gone = ChannelId("flow", "run1", "never")
    out = await b.close([mine.channel, foreign.channel, gone], "g1")
    h.equal(list(out.removed), [mine.channel], "removed")
    h.equal(list(out.refused), [foreign.channel], "another generation's channel is left alone")
    h.equal(list(out.absent), [gone], "absent reported")
    h.equal(list(out.unconfirmed), [], "nothing unconfirmed")
    h.equal(await b.channel_ids(), sorted([keep.channel, foreign.channel]), "the rest remain")
    raised = False
    try:
        await _publish(h, b, mine.channel, "p1")
    except NotFound:
        raised = True
    h.check(raised, "publishing to a closed channel is NotFound")


# -- latest per key -----------------------------------------------------------------------


@case(
    "MSG-035",
    "latest_per_key: a channel keeps only the newest envelope per key",
    contract=M,
    needs=("latest_per_key",),
)
async def latest_per_key(h: Harness) -> None:
    b = await h.open(latest_per_key=True)
    h.require((await b.capabilities()).latest_per_key, "latest_per_key")
    ch = await _channel(h, b, profile="latest_per_key")
    for i in range(3):
        await _publish(h, b, ch.channel, f"a{i}", partition_key="a", body=str(i).encode())
    await _publish(h, b, ch.channel, "b0", partition_key="b")
    sub = await _sub(h, b, ch.channel)
    got = await _recv(h, b, sub.id)
    h.equal(sorted(_pids(got)), ["a2", "b0"], "newest per key")
    h.equal((await _chan_obs(h, b, ch.channel)).messages, 2, "two keys, two messages")


@case(
    "MSG-036",
    "latest_per_key: a superseded unsettled message is a recorded drop",
    contract=M,
    needs=("latest_per_key",),
)
async def latest_supersede_drop(h: Harness) -> None:
    b = await h.open(latest_per_key=True)
    h.require((await b.capabilities()).latest_per_key, "latest_per_key")
    ch = await _channel(h, b, profile="latest_per_key")
    sub = await _sub(h, b, ch.channel)
    await _publish(h, b, ch.channel, "a0", partition_key="a")
    leased = await _recv(h, b, sub.id)
    await _publish(h, b, ch.channel, "a1", partition_key="a")
    obs = await _sub_obs(h, b, sub.id)
    h.equal(obs.dropped, 1, "the leased a0 was superseded and recorded")
    h.equal(obs.leased, 0, "its lease is gone")
    ans = await b.settle(leased[0].token, Completed(), "late")
    if (await b.capabilities()).stale_settle_detection:
        h.check(isinstance(ans, SettleStale), f"settling a superseded message: {ans!r}")
    h.equal(_pids(await _recv(h, b, sub.id)), ["a1"], "the newest is delivered")


# -- waiting ------------------------------------------------------------------------------


@case("MSG-037", "receive blocks until a message arrives and wakes at once", contract=M)
async def receive_wakes(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel)
    arrived: list[float] = []

    async def producer() -> None:
        await h.sleep(7)
        arrived.append(h.now())
        await _publish(h, b, ch.channel, "p1")

    async with anyio.create_task_group() as tg:
        tg.start_soon(producer)
        got = await _recv(h, b, sub.id, wait=60)
        woke = h.now()
    h.equal(_pids(got), ["p1"], "received")
    h.check(woke - arrived[0] <= h.at_most(1), f"woke at once ({woke - arrived[0]} s late)")


@case("MSG-038", "receive returns [] once its deadline passes", contract=M)
async def receive_deadline(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel)
    t0 = h.now()
    got = await _recv(h, b, sub.id, wait=8)
    waited = h.now() - t0
    h.equal(got, [], "nothing")
    h.check(h.seconds(7.9) <= waited <= h.at_most(12), f"waited until the deadline ({waited})")


# -- bad input ----------------------------------------------------------------------------


@case(
    "MSG-039",
    "a body over max_payload_bytes is Rejected with that reason, nothing stored",
    contract=M,
)
async def oversize(h: Harness) -> None:
    b = await h.open(max_payload_bytes=1024)
    limit = (await b.capabilities()).max_payload_bytes
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel)
    out = await _publish(h, b, ch.channel, "big", body=b"x" * (limit + 1))
    h.check(isinstance(out, Rejected), f"oversize: {out!r}")
    h.check("payload" in out.reason or "size" in out.reason, f"reason names it: {out.reason}")
    h.equal((await _chan_obs(h, b, ch.channel)).messages, 0, "nothing stored")
    h.equal(await _recv(h, b, sub.id), [], "nothing delivered")


@case("MSG-040", "unknown channel or subscription is NotFound, and changes nothing", contract=M)
async def unknown_names(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    other_run = ChannelId("flow", "run2", "n1")
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: b.publish(make_envelope(other_run, "p1"), h.deadline(1)),
        lambda: b.receive(SubscriptionId(ch.channel, "nobody"), 1, 1024, h.deadline(1)),
        lambda: b.observe_subscription(SubscriptionId(ch.channel, "nobody")),
        lambda: b.observe_channel(other_run),
        lambda: b.ensure_subscription(make_subscription(other_run, "w"), _op(h)),
        lambda: b.subscription_ids(other_run),
    ]
    for i, call in enumerate(calls):
        raised = False
        try:
            await call()
        except NotFound:
            raised = True
        h.check(raised, f"call {i} raises NotFound")
    h.equal(await b.channel_ids(), [ch.channel], "nothing created")
    h.equal((await _chan_obs(h, b, ch.channel)).messages, 0, "nothing stored")


@case(
    "MSG-041",
    "ensure_subscription: idempotent, reconciles credit, refuses a kind change",
    contract=M,
)
async def ensure_subscription(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    spec = make_subscription(ch.channel, "w", ack_wait_seconds=h.seconds(30), item_credit=4)
    v1 = await b.ensure_subscription(spec, _op(h))
    h.check(v1.created, "created")
    v2 = await b.ensure_subscription(spec, _op(h))
    h.check(not v2.created and not v2.updated, "idempotent")
    more = make_subscription(ch.channel, "w", ack_wait_seconds=h.seconds(30), item_credit=8)
    v3 = await b.ensure_subscription(more, _op(h))
    h.equal(v3.effective.item_credit, 8, "credit reconciled")
    raised = False
    try:
        await b.ensure_subscription(make_subscription(ch.channel, "w", kind="eos"), _op(h))
    except IncompatibleProfile:
        raised = True
    h.check(raised, "a kind change is an IncompatibleProfile")
    h.equal(await b.subscription_ids(ch.channel), [spec.id], "one subscription")


@case("MSG-042", "a receiver with a lease on an evicted message cannot settle it", contract=M)
async def evicted_while_leased(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b, max_msgs=1)
    sub = await _sub(h, b, ch.channel)
    await _publish(h, b, ch.channel, "p1")
    leased = await _recv(h, b, sub.id)
    await _publish(h, b, ch.channel, "p2")
    obs = await _sub_obs(h, b, sub.id)
    h.equal((obs.leased, obs.dropped, obs.pending), (0, 1, 1), "lease gone, drop recorded")
    ans = await b.settle(leased[0].token, Completed(), "late")
    if (await b.capabilities()).stale_settle_detection:
        h.check(isinstance(ans, SettleStale), f"settling an evicted message: {ans!r}")
    h.equal(_pids(await _recv(h, b, sub.id)), ["p2"], "the survivor is delivered")


@case(
    "MSG-043",
    "max_age: messages older than max_age leave the channel (a drop if unsettled)",
    contract=M,
)
async def max_age(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b, max_age_seconds=h.seconds(60), dedup_window_seconds=_window(h, 30))
    sub = await _sub(h, b, ch.channel)
    await _publish(h, b, ch.channel, "old")
    await h.sleep(40)
    await _publish(h, b, ch.channel, "young")
    await h.sleep(30)
    h.equal((await _chan_obs(h, b, ch.channel)).messages, 1, "the old one aged out")
    h.equal(_pids(await _recv(h, b, sub.id)), ["young"], "only the young one is delivered")
    h.equal((await _sub_obs(h, b, sub.id)).dropped, 1, "recorded as a drop")


@case("MSG-044", "redeliveries come before new messages", contract=M)
async def redelivery_first(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel, ack_wait_seconds=h.seconds(5), item_credit=1)
    await _publish(h, b, ch.channel, "p1")
    await _recv(h, b, sub.id)
    await _publish(h, b, ch.channel, "p2")
    got = await _recv(h, b, sub.id, n=1, wait=10)
    h.equal(_pids(got), ["p1"], "the expired lease comes back first")
    h.equal(got[0].attempt, 2, "as attempt 2")


@case("MSG-045", "a Retry counts toward max_deliver", contract=M)
async def retry_counts(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel, ack_wait_seconds=h.seconds(30), max_deliver=2)
    await _publish(h, b, ch.channel, "p1")
    for i in range(2):
        got = await _recv(h, b, sub.id)
        h.equal([d.attempt for d in got], [i + 1], f"attempt {i + 1}")
        await b.settle(got[0].token, Retry(), f"r{i}")
    h.equal(await _recv(h, b, sub.id, wait=5), [], "no third attempt")
    h.equal((await _sub_obs(h, b, sub.id)).unresolved, 1, "unresolved after two retries")


@case("MSG-046", "dedup: a duplicate does not extend the window", contract=M)
async def dedup_not_extended(h: Harness) -> None:
    b = await h.open()
    win = _window(h, 20)
    ch = await _channel(h, b, dedup_window_seconds=win)
    step = 0.75 * win / h.scale  # harness seconds: 0.75 of the window
    first = await _publish(h, b, ch.channel, "p1")
    await h.sleep(step)
    dup = await _publish(h, b, ch.channel, "p1")
    h.check(isinstance(dup, Accepted) and dup.duplicate, f"inside the window: {dup!r}")
    await h.sleep(step)  # 1.5 windows after the first accept, 0.75 after the duplicate
    late = await _publish(h, b, ch.channel, "p1")
    h.check(
        isinstance(late, Accepted) and not late.duplicate, f"window ran from the first: {late!r}"
    )
    h.check(late.sequence > first.sequence, "a new message")


@case("MSG-047", "ack floor: an evicted message counts as settled", contract=M)
async def floor_after_eviction(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b, max_msgs=2)
    sub = await _sub(h, b, ch.channel)
    outs = [await _publish(h, b, ch.channel, f"p{i}") for i in range(2)]
    got = await _recv(h, b, sub.id)
    await b.settle(got[1].token, Completed(), "second")  # the first stays unsettled
    h.equal(await b.observe_ack_floor(sub.id), Known(outs[0].sequence - 1), "held by p0")
    await _publish(h, b, ch.channel, "p2")  # evicts p0
    h.equal(await b.observe_ack_floor(sub.id), Known(outs[1].sequence), "past the evicted p0")


@case("MSG-048", "limits by bytes: max_bytes evicts the oldest, or rejects", contract=M)
async def max_bytes(h: Harness) -> None:
    b = await h.open()
    ev = await _channel(h, b, "a", max_bytes=2500)
    sub = await _sub(h, b, ev.channel)
    for i in range(3):
        await _publish(h, b, ev.channel, f"p{i}", body=b"z" * 1000)
    obs = await _chan_obs(h, b, ev.channel)
    h.equal(obs.messages, 2, "two 1000-byte bodies fit 2500")
    h.equal((await _sub_obs(h, b, sub.id)).dropped, 1, "the oldest was dropped")
    rj = await _channel(h, b, "b", max_bytes=2500, overflow="reject")
    for i in range(2):
        await _publish(h, b, rj.channel, f"q{i}", body=b"z" * 1000)
    out = await _publish(h, b, rj.channel, "q2", body=b"z" * 1000)
    h.check(isinstance(out, Rejected), f"over max_bytes with reject: {out!r}")


# -- more than one client, a restart, an administrator (issue #14) -------------------------
#
# The schedules production has every day: another process on the same channel and
# subscription (``another_client``: a new backend instance on its own connection, which
# ensures what it uses, as a replacement worker does), a server restart (``restart_server``:
# kill -9 and restart on the same store), an administrator acting out of band (``purge``,
# ``delete_message``, ``delete_subscription``). Where a provider may not be able to tell, a
# case accepts ``Unknown`` — never a wrong definite value.


async def _peer(h: Harness, b: Any, ch: ChannelSpec, *subs: SubscriptionSpec) -> Any:
    """Another client of ``b``'s broker, with the channel and subscriptions ensured."""
    c = await h.controls(b).another_client()
    seen = await c.ensure_channel(ch, _op(h))
    h.check(not seen.created, "another client finds the channel, it does not create it")
    h.equal(seen.effective.retention, ch.retention, "another client reads the same channel")
    for spec in subs:
        got = await c.ensure_subscription(spec, _op(h))
        h.check(not got.created, f"another client finds subscription {spec.id.consumer}")
    return c


def _right_or_unknown(h: Harness, obs: object, field: str, want: int, what: str) -> None:
    """``obs`` is Unknown, or its ``field`` is ``want``: never a wrong definite value."""
    if isinstance(obs, Unknown):
        h.check(bool(obs.reason), f"{what}: an Unknown says why")
        return
    h.check(isinstance(obs, Known), f"{what}: {obs!r}")
    assert isinstance(obs, Known)
    h.equal(getattr(obs.value, field), want, what)


@case(
    "MSG-049",
    "another client: competing receives split a subscription; both observe the same counts",
    contract=M,
    controls=("another_client",),
)
async def two_clients_compete(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel, item_credit=64)
    c = await _peer(h, b, ch, sub)
    outs = [await _publish(h, b, ch.channel, f"p{i}") for i in range(6)]
    r1 = await _recv(h, b, sub.id, n=3)
    r2 = await _recv(h, c, sub.id, n=3)
    h.equal(sorted(_pids(r1) + _pids(r2)), [f"p{i}" for i in range(6)], "split between clients")
    h.check(not set(_pids(r1)) & set(_pids(r2)), "no message to both clients")
    await _settle_all(b, r1, "b")
    await _settle_all(c, r2, "c")
    for who in (b, c):
        obs = await _sub_obs(h, who, sub.id)
        h.equal((obs.pending, obs.leased, obs.dropped), (0, 0, 0), "counts")
        h.equal(obs.ack_floor, outs[-1].sequence, "ack floor")


@case(
    "MSG-050",
    "another client: a message another client received and settled is never called dropped",
    contract=M,
    controls=("another_client",),
)
async def two_clients_no_false_drop(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b, max_msgs=3)
    sub = await _sub(h, b, ch.channel)
    c = await _peer(h, b, ch, sub)
    for i in range(3):
        await _publish(h, b, ch.channel, f"p{i}")
    got = await _recv(h, c, sub.id)
    h.equal(len(got), 3, "the other client receives them")
    await _settle_all(c, got, "c")
    for i in range(3, 6):
        await _publish(h, b, ch.channel, f"p{i}")  # evicts the three settled messages
    _right_or_unknown(h, await b.observe_subscription(sub.id), "dropped", 0, "publisher first")
    h.equal((await _sub_obs(h, c, sub.id)).dropped, 0, "the receiving client")
    h.equal((await _sub_obs(h, b, sub.id)).dropped, 0, "the publisher, after it")
    h.equal((await _sub_obs(h, b, sub.id)).pending, 3, "the three new ones pending")


@case(
    "MSG-051",
    "another client: a message evicted before anyone received it is one drop, for every client",
    contract=M,
    controls=("another_client",),
)
async def two_clients_one_drop(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b, max_msgs=2)
    sub = await _sub(h, b, ch.channel)
    c = await _peer(h, b, ch, sub)
    h.equal((await _sub_obs(h, c, sub.id)).dropped, 0, "nothing yet")
    for i in range(3):
        await _publish(h, b, ch.channel, f"p{i}")  # p0 is evicted unreceived
    h.equal((await _sub_obs(h, c, sub.id)).dropped, 1, "the client that did not publish it")
    h.equal((await _sub_obs(h, b, sub.id)).dropped, 1, "the publisher: counted once")
    await _publish(h, b, ch.channel, "p3")  # and p1
    h.equal((await _sub_obs(h, b, sub.id)).dropped, 2, "the publisher")
    h.equal((await _sub_obs(h, c, sub.id)).dropped, 2, "the other client agrees")
    h.equal(_pids(await _recv(h, c, sub.id)), ["p2", "p3"], "what remains is delivered")


@case(
    "MSG-052",
    "another client: a message exhausted by one client is unresolved for every client",
    contract=M,
    controls=("another_client",),
)
async def two_clients_unresolved(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel, ack_wait_seconds=h.seconds(5), max_deliver=1)
    c = await _peer(h, b, ch, sub)
    await _publish(h, b, ch.channel, "p1")
    h.equal(_pids(await _recv(h, c, sub.id)), ["p1"], "the other client leases it")
    await h.sleep(6)  # its only lease lapses
    h.equal((await _sub_obs(h, c, sub.id)).unresolved, 1, "the client that held it")
    obs = await _sub_obs(h, b, sub.id)
    with h.fail_after(100):  # a server reports it once it decided (a second or so)
        while obs.unresolved != 1:
            await h.sleep(2)
            obs = await _sub_obs(h, b, sub.id)
    h.equal((obs.unresolved, obs.pending, obs.leased), (1, 0, 0), "the other client, too")
    h.equal(await _recv(h, b, sub.id, wait=5), [], "never delivered again")


@case(
    "MSG-053",
    "another client: dedup by publication id spans clients",
    contract=M,
    controls=("another_client",),
)
async def two_clients_dedup(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b, dedup_window_seconds=_window(h, 60))
    c = await _peer(h, b, ch)
    first = await _publish(h, b, ch.channel, "p1", body=b"one")
    again = await _publish(h, c, ch.channel, "p1", body=b"two")
    h.check(isinstance(again, Accepted) and again.duplicate, f"a duplicate: {again!r}")
    h.equal(again.sequence, first.sequence, "the stored sequence")
    h.equal((await _chan_obs(h, c, ch.channel)).messages, 1, "stored once")


@case(
    "MSG-054",
    "administrator purge: no settle or renewal on a purged message is confirmed; each is a drop",
    contract=M,
    controls=("purge",),
)
async def admin_purge(h: Harness) -> None:
    b = await h.open()
    ctl = h.controls(b)
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel, ack_wait_seconds=h.seconds(60))
    for i in range(5):
        await _publish(h, b, ch.channel, f"p{i}")
    leased = await _recv(h, b, sub.id, n=2)
    await ctl.purge(ch.channel)
    ans = await b.settle(leased[0].token, Completed(), "late")
    h.check(isinstance(ans, SettleStale), f"settle on a purged message: {ans!r}")
    lease = await b.renew(leased[1].token)
    h.check(not lease.held, f"renewal on a purged message: {lease!r}")
    obs = await _sub_obs(h, b, sub.id)
    h.equal((obs.dropped, obs.pending, obs.leased), (5, 0, 0), "two leased + three pending lost")
    cobs = await _chan_obs(h, b, ch.channel)
    h.equal((cobs.messages, cobs.first_sequence), (0, cobs.last_sequence + 1), "empty")
    await _publish(h, b, ch.channel, "after")
    h.equal(_pids(await _recv(h, b, sub.id)), ["after"], "the channel works on")


@case(
    "MSG-055",
    "administrator deletes one message: a drop for each subscription that had not settled it",
    contract=M,
    controls=("delete_message",),
)
async def admin_delete_message(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    a = await _sub(h, b, ch.channel, "a")
    c = await _sub(h, b, ch.channel, "c")
    outs = [await _publish(h, b, ch.channel, f"p{i}") for i in range(3)]
    await _settle_all(b, await _recv(h, b, a.id))  # a settles all three, c none
    await h.controls(b).delete_message(ch.channel, outs[1].sequence)
    h.equal((await _sub_obs(h, b, a.id)).dropped, 0, "a had settled it")
    oc = await _sub_obs(h, b, c.id)
    h.equal((oc.dropped, oc.pending), (1, 2), "c lost it")
    h.equal(_pids(await _recv(h, b, c.id)), ["p0", "p2"], "c receives the others")
    h.equal((await _sub_obs(h, b, c.id)).dropped, 1, "counted once")


@case(
    "MSG-056",
    "administrator deletes a subscription: ensured again, it starts with no inherited ledger",
    contract=M,
    controls=("delete_subscription",),
)
async def admin_delete_subscription(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    spec = make_subscription(ch.channel, "w", ack_wait_seconds=h.seconds(5), max_deliver=1)
    await b.ensure_subscription(spec, _op(h))
    await _publish(h, b, ch.channel, "p1")
    await _recv(h, b, spec.id)
    await h.sleep(6)
    h.equal((await _sub_obs(h, b, spec.id)).unresolved, 1, "exhausted")
    await h.controls(b).delete_subscription(spec.id)
    with h.raises(NotFound, "a deleted subscription"):
        await b.observe_subscription(spec.id)
    again = await b.ensure_subscription(spec, _op(h))
    h.check(again.created, "ensured again, it is created")
    obs = await _sub_obs(h, b, spec.id)
    h.equal((obs.unresolved, obs.pending, obs.leased, obs.dropped), (0, 1, 0, 0), "fresh")
    h.equal(obs.ack_floor, 0, "nothing settled yet")
    got = await _recv(h, b, spec.id)
    h.equal([(d.envelope.publication_id, d.attempt) for d in got], [("p1", 1)], "first attempt")
    await _settle_all(b, got)
    h.equal((await _sub_obs(h, b, spec.id)).ack_floor, got[0].sequence, "the floor moves")


@case(
    "MSG-057",
    "a Retry with a delay on the final attempt leaves the message unresolved at once",
    contract=M,
)
async def final_retry_unresolved(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel, ack_wait_seconds=h.seconds(60), max_deliver=2)
    await _publish(h, b, ch.channel, "p1")
    for i, delay in enumerate((0.0, h.seconds(20))):
        got = await _recv(h, b, sub.id)
        h.equal([d.attempt for d in got], [i + 1], f"attempt {i + 1}")
        ans = await b.settle(got[0].token, Retry(delay), f"r{i}")
        h.check(isinstance(ans, SettleConfirmed), f"retry {i}: {ans!r}")
    obs = await _sub_obs(h, b, sub.id)
    h.equal((obs.unresolved, obs.pending, obs.leased), (1, 0, 0), "unresolved, not pending")
    h.equal(await _recv(h, b, sub.id, wait=30), [], "no third attempt after the delay")


@case(
    "MSG-058",
    "dedup_window_seconds=0: the backend and a channel without dedup store every publication",
    contract=M,
)
async def zero_dedup_window(h: Harness) -> None:
    b = await h.open(dedup_window_seconds=0)
    spec = await _channel(h, b, "a")
    got = await b.ensure_channel(spec, _op(h))
    h.equal(got.effective.dedup_window_seconds, 0, "capped by the backend")
    plain = await h.open()
    none = make_channel("flow", "run1", "b", "work", "limits", dedup_window_seconds=0)
    h.equal((await plain.ensure_channel(none, _op(h))).effective.dedup_window_seconds, 0, "spec 0")
    for backend, cid in ((b, spec.channel), (plain, none.channel)):
        one = await _publish(h, backend, cid, "same")
        two = await _publish(h, backend, cid, "same")
        h.check(isinstance(two, Accepted) and not two.duplicate, f"no dedup: {two!r}")
        h.check(two.sequence > one.sequence, "a second message")


@case(
    "MSG-059",
    "observe_publication keeps naming the stored sequence after a duplicate publish",
    contract=M,
)
async def observe_after_duplicate(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    env = make_envelope(ch.channel, "p1")
    first = h.expect_type(await b.publish(env, h.deadline(5)), Accepted, "first publish")
    dup = await b.publish(env, h.deadline(5))
    h.check(isinstance(dup, Accepted) and dup.duplicate, f"a duplicate: {dup!r}")
    for i in range(2):
        seen = await b.observe_publication(env)
        h.equal(seen, Accepted("p1", first.sequence, False), f"observation {i + 1}")


@case(
    "MSG-060",
    "the first ensure of a required subscription of an interest channel creates it",
    contract=M,
)
async def required_created(h: Harness) -> None:
    b = await h.open()
    cid = ChannelId("flow", "run1", "n1")
    await _channel(h, b, retention="interest", required=(SubscriptionId(cid, "a"),))
    spec = make_subscription(cid, "a", ack_wait_seconds=h.seconds(30))
    first = await b.ensure_subscription(spec, _op(h))
    h.equal((first.created, first.updated), (True, False), "created")
    again = await b.ensure_subscription(spec, _op(h))
    h.equal((again.created, again.updated), (False, False), "then found as is")


@case(
    "MSG-061",
    "server restart: a persistent channel keeps messages and settlements; none handed out twice",
    contract=M,
    controls=("restart_server",),
)
async def restart_keeps(h: Harness) -> None:
    b = await h.open(persistent=True)
    ch = await _channel(h, b, persistence=True)
    sub = await _sub(h, b, ch.channel, ack_wait_seconds=h.seconds(10), max_deliver=3)
    for i in range(4):
        await _publish(h, b, ch.channel, f"p{i}")
    done = await _recv(h, b, sub.id, n=2)
    for d in done:
        ans = await b.settle(d.token, Completed(), f"s{d.sequence}")
        h.check(isinstance(ans, SettleConfirmed), f"settled before the restart: {ans!r}")
    await h.controls(b).restart_server()
    out = await _publish(h, b, ch.channel, "p4")
    h.check(isinstance(out, Accepted), f"publish after the restart: {out!r}")
    seen: list[str] = []
    with h.move_on_after(40):  # past an ack wait: a settle the server lost comes back by then
        while True:
            got = await _recv(h, b, sub.id, wait=15)
            seen += _pids(got)
            await _settle_all(b, got, "after")
    h.equal(sorted(seen), ["p2", "p3", "p4"], "each unsettled message once, no settled one")
    obs = await _sub_obs(h, b, sub.id)
    h.equal((obs.pending, obs.leased, obs.unresolved), (0, 0, 0), "all settled")
    h.equal((await _chan_obs(h, b, ch.channel)).messages, 5, "every message retained")


@case(
    "MSG-062",
    "server restart: a channel without persistence is gone",
    contract=M,
    controls=("restart_server",),
)
async def restart_forgets(h: Harness) -> None:
    b = await h.open(persistent=True)
    kept = await _channel(h, b, "kept", persistence=True)
    lost = await _channel(h, b, "lost", persistence=False)
    for spec in (kept, lost):
        await _publish(h, b, spec.channel, "p1")
    await h.controls(b).restart_server()
    h.equal((await _chan_obs(h, b, kept.channel)).messages, 1, "the persistent channel")
    with h.raises(NotFound, "the other channel"):
        await b.observe_channel(lost.channel)
    h.equal(await b.channel_ids(), [kept.channel], "only the persistent channel is listed")


@case(
    "MSG-063",
    "interest: only required subscriptions hold a message; another one loses it as a drop",
    contract=M,
)
async def interest_required_only(h: Harness) -> None:
    b = await h.open()
    caps = await b.capabilities()
    h.require(caps.interest_required_only, "interest_required_only")
    cid = ChannelId("flow", "run1", "n1")
    await _channel(h, b, retention="interest", required=(SubscriptionId(cid, "a"),))
    a = await _sub(h, b, cid, "a")
    audit = await _sub(h, b, cid, "audit")
    await _publish(h, b, cid, "p1")
    await _settle_all(b, await _recv(h, b, a.id))
    h.equal((await _chan_obs(h, b, cid)).messages, 0, "removed once the required one settled")
    h.equal(await _recv(h, b, audit.id), [], "the other subscription does not get it")
    h.equal((await _sub_obs(h, b, audit.id)).dropped, 1, "and counts it dropped")


@case(
    "MSG-064",
    "redelivered counts every redelivery, also after the message is settled",
    contract=M,
)
async def redelivered_cumulative(h: Harness) -> None:
    b = await h.open()
    h.require((await b.capabilities()).cumulative_redelivered, "cumulative_redelivered")
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel, ack_wait_seconds=h.seconds(60), max_deliver=5)
    await _publish(h, b, ch.channel, "p1")
    got = await _recv(h, b, sub.id)
    await b.settle(got[0].token, Retry(), "r1")
    again = await _recv(h, b, sub.id)
    h.equal((await _sub_obs(h, b, sub.id)).redelivered, 1, "one redelivery")
    await b.settle(again[0].token, Completed(), "done")
    h.equal((await _sub_obs(h, b, sub.id)).redelivered, 1, "still counted once settled")


@case(
    "MSG-065",
    "core-only: another client's subscriptions see what is published once they are attached",
    contract=M,
    needs=("core_only",),
    controls=("another_client",),
)
async def core_two_clients(h: Harness) -> None:
    b = await h.open(core_only=True)
    h.require((await b.capabilities()).core_only, "core_only")
    ch = await _channel(h, b)
    mine = await _sub(h, b, ch.channel, "mine", competing=False)
    c = await h.controls(b).another_client()
    await c.ensure_channel(ch, _op(h))
    theirs = await _sub(h, c, ch.channel, "theirs", competing=False)
    for i in range(3):
        await _publish(h, b, ch.channel, f"p{i}")
    h.equal(_pids(await _recv(h, b, mine.id)), ["p0", "p1", "p2"], "the publishing client")
    got: list[Delivery] = []
    with h.move_on_after(10):  # routed to another connection: they arrive as they arrive
        while len(got) < 3:
            got += await _recv(h, c, theirs.id, wait=5)
    h.equal(_pids(got), ["p0", "p1", "p2"], "the other client, in order")
    obs = await _sub_obs(h, c, theirs.id)
    h.equal((obs.pending, obs.dropped), (0, 0), "nothing left, nothing dropped")


@case(
    "MSG-066",
    "core-only: after a server restart what was queued stays queued and delivery resumes",
    contract=M,
    needs=("core_only",),
    controls=("restart_server",),
)
async def core_restart(h: Harness) -> None:
    b = await h.open(core_only=True)
    h.require((await b.capabilities()).core_only, "core_only")
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel)
    await _publish(h, b, ch.channel, "before")
    h.equal((await _sub_obs(h, b, sub.id)).pending, 1, "queued in the client")
    await h.controls(b).restart_server()
    out = await _publish(h, b, ch.channel, "after")
    h.check(isinstance(out, Accepted), f"publish after the restart: {out!r}")
    h.equal(_pids(await _recv(h, b, sub.id)), ["before", "after"], "both, in order")


@case(
    "MSG-067",
    "another client: a last attempt that lapsed is unresolved for every client before any pull",
    contract=M,
    controls=("another_client",),
)
async def two_clients_last_attempt_lapses(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel, ack_wait_seconds=h.seconds(5), max_deliver=2)
    c = await _peer(h, b, ch, sub)
    await _publish(h, b, ch.channel, "p1")
    for attempt in (1, 2):
        got = await _recv(h, c, sub.id, wait=10)
        h.equal([d.attempt for d in got], [attempt], f"attempt {attempt} at the other client")
        await h.sleep(7)  # it lapses; nobody pulls after the last one
    for who, what in ((b, "a client that never held it"), (c, "the client that held it")):
        obs = await _sub_obs(h, who, sub.id)
        h.equal((obs.unresolved, obs.pending, obs.leased), (1, 0, 0), what)


@case(
    "MSG-068",
    "administrator deletes a subscription: a token of the old one never settles a new delivery",
    contract=M,
    controls=("another_client", "delete_subscription"),
)
async def old_token_after_recreate(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel, ack_wait_seconds=h.seconds(60))
    c = await _peer(h, b, ch, sub)
    await _publish(h, b, ch.channel, "p1")
    old = await _recv(h, c, sub.id)
    h.equal(_pids(old), ["p1"], "the other client holds it")
    await h.controls(b).delete_subscription(sub.id)
    h.check((await b.ensure_subscription(sub, _op(h))).created, "ensured again, it is new")
    new = await _recv(h, b, sub.id)
    h.equal([(d.envelope.publication_id, d.attempt) for d in new], [("p1", 1)], "redelivered")
    ans = await c.settle(old[0].token, Completed(), "old")
    h.check(isinstance(ans, SettleStale), f"the old subscription's token: {ans!r}")
    ans = await b.settle(new[0].token, Completed(), "new")
    h.check(isinstance(ans, SettleConfirmed), f"the new delivery settles: {ans!r}")
    obs = await _sub_obs(h, b, sub.id)
    h.equal((obs.pending, obs.leased), (0, 0), "settled once")


@case(
    "MSG-069",
    "administrator deletes a subscription: ensured again, it counts only its own dead letters",
    contract=M,
    controls=("delete_subscription",),
)
async def dead_letters_per_incarnation(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel, ack_wait_seconds=h.seconds(60))
    for i in range(2):
        await _publish(h, b, ch.channel, f"p{i}")
    got = await _recv(h, b, sub.id)
    await b.settle(got[0].token, Terminal("bad"), "t0")
    h.equal((await _sub_obs(h, b, sub.id)).dead_lettered, 1, "one dead letter")
    await h.controls(b).delete_subscription(sub.id)
    await b.ensure_subscription(sub, _op(h))
    h.equal((await _sub_obs(h, b, sub.id)).dead_lettered, 0, "none of its own yet")
    again = await _recv(h, b, sub.id)
    h.equal(_pids(again), ["p0", "p1"], "both delivered to the new subscription")
    await b.settle(again[0].token, Terminal("bad again"), "t1")
    h.equal((await _sub_obs(h, b, sub.id)).dead_lettered, 1, "its own dead letter")
    h.equal((await _chan_obs(h, b, ch.channel)).dead_letters, 2, "the channel keeps both")


@case(
    "MSG-070",
    "another client: a Retry received again by a third client is leased, for every client",
    contract=M,
    controls=("another_client",),
)
async def retry_received_elsewhere(h: Harness) -> None:
    b = await h.open()
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel, ack_wait_seconds=h.seconds(60), max_deliver=5)
    c = await _peer(h, b, ch, sub)
    d = await _peer(h, b, ch, sub)
    await _publish(h, b, ch.channel, "p1")
    got = await _recv(h, c, sub.id)
    h.check(isinstance(await c.settle(got[0].token, Retry(), "r"), SettleConfirmed), "Retry")
    again = await _recv(h, d, sub.id)
    h.equal([(x.envelope.publication_id, x.attempt) for x in again], [("p1", 2)], "redelivered")
    for who, what in ((b, "a bystander"), (c, "the client that gave it back"), (d, "its holder")):
        obs = await _sub_obs(h, who, sub.id)
        h.equal((obs.pending, obs.leased), (0, 1), what)
