"""MSG cases, delivery (MSG-009 to MSG-020): leases, credit and settle outcomes.

Conventions in :mod:`._msg_scenarios`; IDs are stable.
"""

from __future__ import annotations

import anyio

from ...contracts.messaging import (
    Completed,
    Delivery,
    Rejected,
    Retry,
    SettleConfirmed,
    SettleStale,
    Terminal,
)
from .._case import case
from .._harness import MessagingHarness as Harness
from ._msg_scenarios import (
    M,
    _chan_obs,
    _channel,
    _pids,
    _publish,
    _recv,
    _sub,
    _sub_obs,
    _subscribed,
    _with_profile,
)

# -- leases -------------------------------------------------------------------------------


@case(
    "MSG-009",
    "lease expiry: the message is redelivered with attempt + 1 after ack_wait",
    contract=M,
)
async def lease_expiry(h: Harness) -> None:
    b, ch, sub = await _subscribed(h, ack_wait_seconds=h.seconds(10))
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
    b, ch, sub = await _subscribed(h, ack_wait_seconds=h.seconds(10))
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
    b, ch, sub = await _subscribed(h, ack_wait_seconds=h.seconds(5), max_deliver=2)
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
    b, ch, sub = await _subscribed(h, ack_wait_seconds=h.seconds(2), max_deliver=-1)
    await _publish(h, b, ch.channel, "p1")
    attempts = []
    for _ in range(7):
        attempts += [d.attempt for d in await _recv(h, b, sub.id, wait=5)]
    h.equal(attempts, list(range(1, 8)), "attempts keep counting")
    h.equal((await _sub_obs(h, b, sub.id)).unresolved, 0, "never unresolved")


# -- credit -------------------------------------------------------------------------------


@case("MSG-013", "item_credit is a cap on leases shared by every competing replica", contract=M)
async def item_credit(h: Harness) -> None:
    b, ch, sub = await _subscribed(h, item_credit=3)
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
    b, ch, sub = await _subscribed(h, item_credit=64)
    for i in range(10):
        await _publish(h, b, ch.channel, f"p{i}", body=b"z" * 1000)
    got = await _recv(h, b, sub.id, n=10, byte_credit=2500)
    h.equal(len(got), 2, "2 × 1000 bytes fit 2500")
    rest = await _recv(h, b, sub.id, n=10, byte_credit=100_000)
    h.equal(len(rest), 8, "the rest comes with more credit")


# -- settle outcomes ----------------------------------------------------------------------


@case("MSG-015", "Retry redelivers (after its delay) with attempt + 1", contract=M)
async def retry(h: Harness) -> None:
    b, ch, sub = await _subscribed(h, ack_wait_seconds=h.seconds(60), max_deliver=5)
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
    b, ch, sub = await _subscribed(h, ack_wait_seconds=h.seconds(5))
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
    b, ch, sub = await _subscribed(h, channel=dict(max_msgs=2, overflow="reject"))
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
    b, ch = await _with_profile(h, "durable_control")
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
    b, ch, sub = await _subscribed(
        h, capability="stale_settle_detection", ack_wait_seconds=h.seconds(5)
    )
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
    b, ch, sub = await _subscribed(h)
    await _publish(h, b, ch.channel, "p1")
    await _publish(h, b, ch.channel, "p2")
    got = await _recv(h, b, sub.id)
    first = await b.settle(got[0].token, Completed(), "same")
    second = await b.settle(got[0].token, Completed(), "same")
    h.check(isinstance(first, SettleConfirmed), f"first: {first!r}")
    h.check(isinstance(second, SettleConfirmed), f"retried settle confirms again: {second!r}")
    obs = await _sub_obs(h, b, sub.id)
    h.equal((obs.leased, obs.pending), (1, 0), "applied once: p2 still leased")


# cases register themselves by ID (``case``) and run through the registry: none is imported by
# name, so the module exports nothing
__all__: list[str] = []
