"""Issue #14: the JetStream adapter with more than one client, a server restart, and an
administrator acting out of band (real nats-server, asyncio; trio:
tests/adapters/nats/test_nats_trio.py).

Each test is a schedule the issue's differential test found the adapter untruthful on; the
comment names the finding. The rule checked throughout: a definite value is right, or the
observation is ``Unknown`` — never a guess stated as fact.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import nats
import pytest

from _nats_helpers import (
    admin,
    backend,
    eventually,
    kill9_and_restart,
    prefix,
    publish,
    raw,
    start_restartable,
)
from _servers_fixtures import need_binary
from videoflow_aio.adapters.nats import JetStreamMessagingBackend
from videoflow_aio.adapters.nats._api import ApiError
from videoflow_aio.adapters.nats._names import ADV_MAX_DELIVERIES
from videoflow_aio.contracts import Known, Unknown
from videoflow_aio.contracts.errors import BackendUnavailable
from videoflow_aio.contracts.messaging import (
    Accepted,
    Completed,
    PublicationUnknown,
    Rejected,
    Retry,
    SettleConfirmed,
    SettleStale,
    SubscriptionId,
    make_channel,
    make_envelope,
    make_subscription,
)
from videoflow_aio.observe import ObservationLog
from videoflow_aio.testing.servers import ServerProcess, free_port

pytestmark = [pytest.mark.anyio, pytest.mark.server, pytest.mark.vtime(False)]
_ids = itertools.count(1)


@pytest.fixture
def srv(nats_srv: ServerProcess) -> ServerProcess:
    return nats_srv  # one server per module (conftest's fixture)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def dl(s: float = 1.0) -> float:
    return anyio.current_time() + s


def op() -> str:
    return f"op-{next(_ids)}"


async def setup(b: Any, sub_kw: dict[str, Any] | None = None, **kw: Any) -> Any:
    kw.setdefault("retention", "limits")
    ch = make_channel("f", "r", "n", kw.pop("profile", "work"), **kw)
    await b.ensure_channel(ch, op())
    sub = make_subscription(ch.channel, "w", **(sub_kw or {"ack_wait_seconds": 5.0}))
    await b.ensure_subscription(sub, op())
    return ch, sub


async def obs(b: Any, sid: SubscriptionId) -> Any:
    o = await b.observe_subscription(sid)
    assert isinstance(o, Known), o
    return o.value


# -- (1) false drops, stated as fact --------------------------------------------------------


async def test_drops_are_right_or_unknown_when_another_client_received(srv: ServerProcess) -> None:
    names = prefix()
    x, y = backend(srv, names), backend(srv, names)
    ch, sub = await setup(x, max_msgs=3)
    await publish(x, ch, "p1", "p2", "p3")
    got = await y.receive(sub.id, 8, 1 << 20, dl())
    for d in got:
        assert isinstance(await y.settle(d.token, Completed(), f"s{d.sequence}"), SettleConfirmed)
    await publish(x, ch, "p4", "p5", "p6")  # evicts p1..p3, all settled by y
    seen = await x.observe_subscription(sub.id)
    # x cannot know y received them: never a drop stated as fact (it said drop=3)
    assert isinstance(seen, Unknown) or seen.value.dropped == 0, seen
    assert (await obs(y, sub.id)).dropped == 0  # y made the deliveries: it decides
    assert (await obs(x, sub.id)).dropped == 0  # and x reads the shared accounting
    for b in (x, y):
        await b.aclose()


async def test_drops_agree_when_the_receiver_observes_between(srv: ServerProcess) -> None:
    names = prefix()
    x, y = backend(srv, names), backend(srv, names)
    ch, sub = await setup(x, max_msgs=2)
    await publish(x, ch, "p1", "p2")
    got = await y.receive(sub.id, 1, 1 << 20, dl())  # y takes p1 only
    await y.settle(got[0].token, Completed(), "s1")
    assert (await obs(y, sub.id)).dropped == 0  # the shared mark: p1 delivered and settled
    await publish(x, ch, "p3", "p4")  # evicts p1 (settled) and p2 (never delivered)
    for b in (x, y):
        o = await eventually(partial(obs, b, sub.id), lambda o: o.dropped == 1)
        assert (o.dropped, o.pending) == (1, 2)
    for b in (x, y):
        await b.aclose()


# -- (2) an ack the server lost --------------------------------------------------------------


async def retrying(receive: Any, sid: SubscriptionId, n: int, size: int, wait: float) -> Any:
    """``receive`` once the client has reconnected to the restarted server."""
    while True:
        try:
            return await receive(sid, n, size, dl(wait))
        except BackendUnavailable:
            await anyio.sleep(0.1)  # still reconnecting: not "no messages"


async def _lose_an_ack(
    tmp_path: Path,
) -> tuple[ServerProcess, Any, Any, Any, ObservationLog, int]:
    """A settle confirmed, then kill -9 before the server saved consumer state, until the
    server really lost it (its consumer state is written at most every 100 ms). The last
    item: how many of the two acks the restarted server lost (it redelivers each)."""
    for _ in range(5):
        store = tmp_path / f"js{next(_ids)}"
        srv = start_restartable(store)
        log = ObservationLog()
        b = backend(srv, log=log, request_timeout=2.0)
        ch, sub = await setup(
            b, persistence=True, sub_kw={"ack_wait_seconds": 1.0, "max_deliver": 3}
        )
        await publish(b, ch, "p1", "p2")
        got = await b.receive(sub.id, 2, 1 << 20, dl())
        for d in got:  # the second ack lands inside the 100 ms the first write started
            assert isinstance(
                await b.settle(d.token, Completed(), f"s{d.sequence}"), SettleConfirmed
            )
        srv = kill9_and_restart(srv, store)
        a = admin(b)
        info = await a.consumer_info(sub.id)
        await a.aclose()
        lost = int(info["num_ack_pending"]) + int(info["num_pending"])
        if lost:
            return srv, b, ch, sub, log, lost
        await b.aclose()
        srv.stop()
    pytest.fail("the server kept every ack through kill -9 five times")


async def test_a_lost_ack_is_resettled_and_reported(tmp_path: Path) -> None:
    need_binary("nats-server")
    srv, b, _ch, sub, log, lost = await _lose_an_ack(tmp_path)
    try:
        # the server redelivers; this client settled them: acked again, never handed out.
        # Until every lost ack came back (each ack wait lapses on its own: under load one
        # receive got p1 alone, and p2, never pulled again, stayed ack-pending: leased 1)
        with anyio.fail_after(10):
            while len(log.events("settle_forgotten")) < lost:
                assert await retrying(b.receive, sub.id, 8, 1 << 20, 0.5) == []
        assert all(e.attrs["resettled"] for e in log.events("settle_forgotten"))
        o = await eventually(lambda: obs(b, sub.id), lambda o: o.leased == 0)
        assert (o.pending, o.leased, o.unresolved) == (0, 0, 0)
        assert await b.receive(sub.id, 8, 1 << 20, dl(1.5)) == []  # settled for good
    finally:
        await b.aclose()
        srv.stop()


async def test_a_lost_ack_is_never_counted_both_leased_and_settled(tmp_path: Path) -> None:
    """Issue #25 item 6: right after the restart, before any redelivery, the first
    observation counted a message the server holds unsettled as leased (or pending) and,
    from this client's memory of its confirmed settle, settled (``ack_floor`` past it)."""
    need_binary("nats-server")
    srv, b, _ch, sub, _log, lost = await _lose_an_ack(tmp_path)
    try:
        # Unknown while still reconnecting, as it should be; then the first that says anything
        seen = await eventually(partial(b.observe_subscription, sub.id), Known.__instancecheck__)
        assert isinstance(seen, Known), seen
        o = seen.value
        # two messages (sequences 1 and 2); the server holds ``lost`` of them unsettled
        assert o.pending + o.leased == lost, o
        assert o.ack_floor <= 2 - lost, o  # it said ack_floor=2 with one leased
        f = await b.observe_ack_floor(sub.id)  # the floor alone: the same (it said 2)
        assert isinstance(f, Known) and f.value <= 2 - lost, (f, lost)
    finally:
        await b.aclose()
        srv.stop()


async def test_a_lost_ack_never_hides_an_unresolved_message(tmp_path: Path) -> None:
    """Another client gets the redeliveries and never settles: the settler's observation
    names the message unresolved (it said 0 before: the message was in its settled set)."""
    need_binary("nats-server")
    srv, b, _ch, sub, _log, _lost = await _lose_an_ack(tmp_path)
    other = JetStreamMessagingBackend(
        srv.url, stream_prefix=b.names.stream_prefix, subject_prefix=b.names.subject_prefix
    )
    try:
        with anyio.fail_after(15):
            while True:
                await retrying(other.receive, sub.id, 8, 1 << 20, 1.2)
                o = await other.observe_subscription(sub.id)
                if isinstance(o, Known) and o.value.unresolved:
                    break
        seen = await eventually(lambda: obs(b, sub.id), lambda o: o.unresolved >= 1)
        assert seen.unresolved >= 1 and (seen.pending, seen.leased) == (0, 0)
    finally:
        await other.aclose()
        await b.aclose()
        srv.stop()


async def test_an_exhausted_message_whose_advisory_was_lost_is_unresolved(
    srv: ServerProcess,
) -> None:
    """Issue #25 item 5, its server state on one server: a final attempt lapsed (max_deliver
    1) and its ``MAX_DELIVERIES`` advisory never reached ``__adv`` (on R3 a consumer leader
    election lost it, 6 of 10 rounds). Another client said pending=0, leased=0, unresolved=0
    for a message that is retained, never redelivered and above the ack floor."""
    names = prefix()
    x, y = backend(srv, names), backend(srv, names)
    ch, sub = await setup(x, sub_kw={"ack_wait_seconds": 0.3, "max_deliver": 1})
    await publish(x, ch, "p1")
    assert len(await x.receive(sub.id, 1, 1 << 20, dl())) == 1  # then its lease lapses
    a = admin(x)
    try:
        adv = x.names.adv_stream(ch.channel)
        subject = f"{ADV_MAX_DELIVERIES}.{x.names.stream(ch.channel)}.{x.names.consumer(sub.id)}"

        async def advisory() -> int:
            info = await a.consumer_info(sub.id)
            try:
                got = await a.request(f"STREAM.MSG.GET.{adv}", {"last_by_subj": subject})
            except ApiError:
                return 0
            return 0 if info["num_ack_pending"] else int(got["message"]["seq"])

        seq = await eventually(advisory, bool)
        assert seq, "the server never decided the lapsed final attempt"
        # the advisory is lost: delete it from __adv before any other client read it
        await a.request(f"STREAM.MSG.DELETE.{adv}", {"seq": seq, "no_erase": True})
    finally:
        await a.aclose()
    o = await obs(y, sub.id)
    assert (o.pending, o.leased, o.unresolved, o.ack_floor) == (0, 0, 1, 0), o
    for b in (x, y):
        await b.aclose()


# -- (3) removals without an advisory --------------------------------------------------------


async def test_a_purge_never_confirms_a_settle_or_a_lease(srv: ServerProcess) -> None:
    b = backend(srv)
    ch, sub = await setup(b)
    await publish(b, ch, "p1", "p2", "p3", "p4", "p5")
    leased = await b.receive(sub.id, 2, 1 << 20, dl())
    a = admin(b)
    assert await a.purge(ch.channel) == 5
    await a.aclose()
    ans = await b.settle(leased[0].token, Completed(), "late")
    assert isinstance(ans, SettleStale), ans  # it said SettleConfirmed
    lease = await b.renew(leased[1].token)
    assert not lease.held, lease  # it said held
    # two leased here and purged, three never delivered: five drops (it counted three)
    o = await obs(b, sub.id)
    assert (o.dropped, o.pending, o.leased) == (5, 0, 0)
    await b.aclose()


async def test_a_purge_of_another_clients_leases_is_unknown(srv: ServerProcess) -> None:
    names = prefix()
    x, y = backend(srv, names), backend(srv, names)
    ch, sub = await setup(x)
    await publish(x, ch, "p1", "p2")
    await y.receive(sub.id, 2, 1 << 20, dl())
    assert isinstance(await x.observe_subscription(sub.id), Known)
    a = admin(x)
    await a.purge(ch.channel)
    await a.aclose()
    seen = await x.observe_subscription(sub.id)
    assert isinstance(seen, Unknown) and "purge" in seen.reason, seen
    assert (await obs(y, sub.id)).dropped == 2  # y held them: it knows
    for b in (x, y):
        await b.aclose()


async def test_a_raw_delete_of_an_undelivered_message_is_a_drop(srv: ServerProcess) -> None:
    b = backend(srv)
    ch, sub = await setup(b)
    seqs = await publish(b, ch, "p1", "p2", "p3")
    a = admin(b)
    assert await a.delete_message(ch.channel, seqs[1])
    await a.aclose()
    o = await eventually(lambda: obs(b, sub.id), lambda o: o.pending == 2)
    assert (o.dropped, o.pending) == (1, 2)  # it was never counted
    got = await b.receive(sub.id, 8, 1 << 20, dl())
    assert [d.envelope.publication_id for d in got] == ["p1", "p3"]
    assert (await obs(b, sub.id)).dropped == 1  # counted once
    await b.aclose()


# -- (4) a delayed Retry on the final attempt ------------------------------------------------


async def test_a_delayed_final_retry_is_unresolved_at_once(srv: ServerProcess) -> None:
    names = prefix()
    b, fresh = backend(srv, names), backend(srv, names)
    ch, sub = await setup(b, sub_kw={"ack_wait_seconds": 5.0, "max_deliver": 2})
    await publish(b, ch, "p1")
    for i, delay in enumerate((0.0, 3.0)):  # the second Retry gives the final attempt back
        got = await b.receive(sub.id, 1, 1 << 20, dl())
        assert isinstance(await b.settle(got[0].token, Retry(delay), f"r{i}"), SettleConfirmed)
    o = await obs(b, sub.id)
    assert (o.unresolved, o.pending, o.leased) == (1, 0, 0)  # it said pending 1
    f = await eventually(lambda: obs(fresh, sub.id), lambda o: o.unresolved == 1)
    assert (f.unresolved, f.pending, f.leased) == (1, 0, 0)  # the server decided too
    for x in (b, fresh):
        await x.aclose()


async def test_a_lapsed_final_attempt_is_decided_by_its_holder(srv: ServerProcess) -> None:
    """nats-server decides a lapsed last attempt of max_deliver >= 2 only when a pull asks
    (its expiry check counts deliveries from zero): the holder nudges it at the lapse, so
    the server itself reports it — no other client has to pull first."""
    names = prefix()
    b = backend(srv, names)
    ch, sub = await setup(b, sub_kw={"ack_wait_seconds": 0.3, "max_deliver": 2})
    await publish(b, ch, "p1")
    for _ in range(2):
        assert len(await b.receive(sub.id, 1, 1 << 20, dl())) == 1
        await anyio.sleep(0.45)  # lapses
    info = await raw(b, f"CONSUMER.INFO.{b.names.stream(ch.channel)}.w")
    assert info["num_ack_pending"] == 0  # decided (it stayed 1 until the next pull)
    await b.aclose()


async def test_a_lapsed_final_attempt_is_unresolved_for_another_client(
    srv: ServerProcess,
) -> None:
    """The holder is gone: an observer with ack-pending deliveries it does not hold nudges
    the server to decide (it said leased=1, unresolved=0)."""
    names = prefix()
    x, y = backend(srv, names), backend(srv, names)
    ch, sub = await setup(x, sub_kw={"ack_wait_seconds": 0.3, "max_deliver": 2})
    await publish(x, ch, "p1")
    assert len(await y.receive(sub.id, 1, 1 << 20, dl())) == 1
    await anyio.sleep(0.45)
    assert len(await y.receive(sub.id, 1, 1 << 20, dl())) == 1  # the final attempt
    await y.aclose()  # the holder crashes with it
    await anyio.sleep(0.45)
    o = await obs(x, sub.id)
    assert (o.unresolved, o.leased, o.pending) == (1, 0, 0), o
    await x.aclose()


@contextlib.asynccontextmanager
async def nudges_seen(b: Any, ch: Any) -> AsyncIterator[list[bytes]]:
    """The nudges (pulls that can deliver nothing) any client sends to ``ch``'s consumer
    ``w``, seen by a raw subscriber to the pull subject while the block runs."""
    seen: list[bytes] = []
    nc = await nats.connect(b.servers[0])
    subject = f"$JS.API.CONSUMER.MSG.NEXT.{b.names.stream(ch.channel)}.w"

    async def cb(msg: Any) -> None:
        if json.loads(msg.data).get("max_bytes") == 1:
            seen.append(msg.data)

    await nc.subscribe(subject, cb=cb)
    await nc.flush()
    try:
        yield seen
    finally:
        await nc.close()


async def final_attempt(b: Any, ch: Any, sub: Any, wait: float) -> Any:
    """Publish one message and receive it twice (the first lease lapses): the final attempt
    of ``max_deliver`` 2."""
    await publish(b, ch, "p1")
    assert len(await b.receive(sub.id, 1, 1 << 20, dl())) == 1
    await anyio.sleep(wait)
    got = await b.receive(sub.id, 1, 1 << 20, dl())
    assert len(got) == 1 and got[0].attempt == 2
    return got[0]


async def test_a_settled_final_attempt_is_not_nudged(srv: ServerProcess) -> None:
    """The nudge timed for the lapse of a final-attempt lease is cancelled by its settle
    (a nudge can reorder the server's redeliveries: none is sent without cause)."""
    b = backend(srv)
    ch, sub = await setup(b, sub_kw={"ack_wait_seconds": 0.5, "max_deliver": 2})
    d = await final_attempt(b, ch, sub, 0.7)
    async with nudges_seen(b, ch) as seen:
        assert isinstance(await b.settle(d.token, Completed(), "done"), SettleConfirmed)
        await anyio.sleep(0.9)  # past the lease's deadline and the nudge's grace
    assert seen == []  # it was nudged at the old lapse
    assert (await obs(b, sub.id)).unresolved == 0
    await b.aclose()


async def test_a_renewed_final_attempt_is_decided_at_its_new_lapse(srv: ServerProcess) -> None:
    """A renewal moves the nudge: not at the old deadline (the lease holds on the server),
    at the new one — the server decided nothing until a later pull, and said ack pending."""
    b = backend(srv)
    ch, sub = await setup(b, sub_kw={"ack_wait_seconds": 1.0, "max_deliver": 2})
    d = await final_attempt(b, ch, sub, 1.2)
    await anyio.sleep(0.5)
    lease = await b.renew(d.token)
    assert lease.held and lease.lease_deadline is not None
    stream = b.names.stream(ch.channel)
    await anyio.sleep_until(d.lease_deadline + 0.25)  # past the old deadline and its grace
    assert anyio.current_time() < lease.lease_deadline - 0.1
    info = await raw(b, f"CONSUMER.INFO.{stream}.w")
    assert info["num_ack_pending"] == 1  # still held on the server
    o = await obs(b, sub.id)
    assert (o.unresolved, o.leased) == (0, 1)
    await anyio.sleep_until(lease.lease_deadline + 0.2)
    info = await eventually(
        lambda: raw(b, f"CONSUMER.INFO.{stream}.w"), lambda i: i["num_ack_pending"] == 0
    )
    assert info["num_ack_pending"] == 0  # the server decided it, asked by nobody's pull
    o = await obs(b, sub.id)
    assert (o.unresolved, o.leased, o.pending) == (1, 0, 0)
    await b.aclose()


async def test_a_closed_client_sends_no_nudge_timed_before_it_closed(srv: ServerProcess) -> None:
    """Closing cancels the nudges a client timed: used again (it connects anew), it sends
    none for the leases of its previous connection."""
    names = prefix()
    b, other = backend(srv, names), backend(srv, names)
    ch, sub = await setup(b, sub_kw={"ack_wait_seconds": 0.5, "max_deliver": 2})
    d = await final_attempt(b, ch, sub, 0.7)
    async with nudges_seen(b, ch) as seen:
        await b.aclose()
        assert isinstance(await b.observe_channel(ch.channel), Known)  # connected again
        await anyio.sleep_until(d.lease_deadline + 0.4)
        assert seen == []  # the timer of the closed connection nudged
    o = await obs(other, sub.id)  # an observer decides it instead (it nudges once)
    assert (o.unresolved, o.leased, o.pending) == (1, 0, 0)
    for x in (b, other):
        await x.aclose()


# -- (5) dedup window 0 --------------------------------------------------------------------


async def test_a_zero_dedup_window_is_created_and_does_not_dedup(srv: ServerProcess) -> None:
    b = backend(srv, dedup_window_seconds=0)  # every ensure_channel failed with this
    ch, _sub = await setup(b, dedup_window_seconds=120)
    v = await b.ensure_channel(ch, op())
    assert v.effective.dedup_window_seconds == 0
    other = backend(srv)
    ch2 = make_channel("f", "r", "z", "work", "limits", dedup_window_seconds=0)
    assert (await other.ensure_channel(ch2, op())).effective.dedup_window_seconds == 0
    for x, c in ((b, ch.channel), (other, ch2.channel)):
        one = await x.publish(make_envelope(c, "same"), dl())
        two = await x.publish(make_envelope(c, "same"), dl())
        assert isinstance(two, Accepted) and not two.duplicate and two.sequence > one.sequence
    for x in (b, other):
        await x.aclose()


# -- (6) a recreated consumer ----------------------------------------------------------------


async def test_a_recreated_consumer_starts_a_fresh_ledger(srv: ServerProcess) -> None:
    names = prefix()
    b = backend(srv, names)
    ch, sub = await setup(b, sub_kw={"ack_wait_seconds": 0.3, "max_deliver": 1})
    await publish(b, ch, "p1")
    await b.receive(sub.id, 1, 1 << 20, dl())
    await eventually(lambda: obs(b, sub.id), lambda o: o.unresolved == 1)  # exhausted
    a = admin(b)
    assert await a.delete_subscription(sub.id)
    await a.aclose()
    again = make_subscription(ch.channel, "w", ack_wait_seconds=5.0, max_deliver=1)
    assert (await b.ensure_subscription(again, op())).created
    fresh = backend(srv, names)
    for x in (b, fresh):  # this client and a fresh one
        o = await obs(x, sub.id)
        assert (o.unresolved, o.pending, o.leased, o.ack_floor) == (0, 1, 0, 0), o
    await fresh.aclose()
    got = await b.receive(sub.id, 1, 1 << 20, dl())
    assert got[0].attempt == 1
    await b.settle(got[0].token, Completed(), "s")
    o = await obs(b, sub.id)
    assert (o.unresolved, o.pending, o.leased, o.ack_floor) == (0, 0, 0, got[0].sequence)
    await b.aclose()


# -- (7) the first ensure of a required subscription ------------------------------------------


async def test_the_first_ensure_of_a_required_subscription_creates_it(srv: ServerProcess) -> None:
    b = backend(srv)
    cid = make_channel("f", "r", "i", "work", "interest").channel
    spec = make_channel("f", "r", "i", "work", "interest", required=[SubscriptionId(cid, "a")])
    await b.ensure_channel(spec, op())
    v = await b.ensure_subscription(make_subscription(cid, "a"), op())
    assert (v.created, v.updated) == (True, False)  # it said created=False, updated=True
    again = await b.ensure_subscription(make_subscription(cid, "a"), op())
    assert (again.created, again.updated) == (False, False)
    await b.aclose()


# -- (8) observe_publication ------------------------------------------------------------------


async def test_observe_publication_is_stable(srv: ServerProcess) -> None:
    b = backend(srv)
    ch, _sub = await setup(b)
    env = make_envelope(ch.channel, "p1")
    first = await b.publish(env, dl())
    assert isinstance(await b.publish(env, dl()), Accepted)  # a duplicate
    seen = [await b.observe_publication(env) for _ in range(3)]
    assert seen == [Accepted("p1", first.sequence, False)] * 3  # duplicate flipped before
    await b.aclose()


# -- (9) interest: a non-required subscription holds messages on JetStream -------------------


async def test_interest_non_required_subscriptions_hold_messages_on_jetstream(
    srv: ServerProcess,
) -> None:
    """Declared (capability ``interest_required_only`` not offered, see docs/nats.md): the
    model drops a message once the required subscriptions settled it; JetStream keeps it
    for every consumer that matches."""
    b = backend(srv)
    cid = make_channel("f", "r", "i", "work", "interest").channel
    spec = make_channel("f", "r", "i", "work", "interest", required=[SubscriptionId(cid, "a")])
    await b.ensure_channel(spec, op())
    await b.ensure_subscription(make_subscription(cid, "a"), op())
    await b.ensure_subscription(make_subscription(cid, "audit"), op())
    await publish(b, spec, "p1")
    got = await b.receive(SubscriptionId(cid, "a"), 8, 1 << 20, dl())
    await b.settle(got[0].token, Completed(), "s")
    assert (await b.observe_channel(cid)).value.messages == 1  # kept for "audit"
    await b.aclose()


# -- (10) redelivered is the server's current count ------------------------------------------


async def test_redelivered_is_the_current_count(srv: ServerProcess) -> None:
    """Declared (docs/nats.md): JetStream counts messages redelivered and not yet settled."""
    b = backend(srv)
    ch, sub = await setup(b, sub_kw={"ack_wait_seconds": 5.0, "max_deliver": 5})
    await publish(b, ch, "p1")
    got = await b.receive(sub.id, 1, 1 << 20, dl())
    await b.settle(got[0].token, Retry(), "r")
    again = await b.receive(sub.id, 1, 1 << 20, dl())
    assert (await obs(b, sub.id)).redelivered == 1
    await b.settle(again[0].token, Completed(), "s")
    assert (await obs(b, sub.id)).redelivered == 0
    await b.aclose()


# -- issue #11: an unreachable server --------------------------------------------------------


async def test_an_unreachable_server_fails_fast_and_names_the_cause() -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    b = JetStreamMessagingBackend(url)  # default options: no retries to configure away
    t0 = anyio.current_time()
    with pytest.raises(BackendUnavailable) as info:
        await b.channel_ids()
    assert anyio.current_time() - t0 < 1.0  # it took 10 s
    text = str(info.value)
    assert url in text and ("refused" in text.lower() or "connect call failed" in text.lower())
    assert info.value.__cause__ is not None
    await b.aclose()


async def test_each_seed_url_is_tried_once() -> None:
    urls = [f"nats://127.0.0.1:{free_port()}" for _ in range(3)]
    b = JetStreamMessagingBackend(urls)
    with pytest.raises(BackendUnavailable) as info:
        await b.channel_ids()
    assert all(u in str(info.value) for u in urls)
    await b.aclose()


async def test_a_replicated_consumer_confirms_an_ack_once_committed(
    srv: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With replicas > 1 the leader emits the ack metric before its group commits the ack,
    and answers the ack's request after: Completed is then sent as a request and confirmed
    by both (a confirmed settle survives the leader's crash). The path, forced on one node:
    a pending delivery is confirmed, a purged one is not."""
    from videoflow_aio.adapters.nats import _settle

    sent: list[object] = []

    def replicated(st: object) -> bool:
        sent.append(st)
        return True

    monkeypatch.setattr(_settle, "replicated", replicated)
    b = backend(srv)
    ch, sub = await setup(b)
    await publish(b, ch, "p1", "p2")
    got = await b.receive(sub.id, 2, 1 << 20, dl())
    assert isinstance(await b.settle(got[0].token, Completed(), "s1"), SettleConfirmed)
    a = admin(b)
    await a.purge(ch.channel)
    await a.aclose()
    assert isinstance(await b.settle(got[1].token, Completed(), "s2"), SettleStale)
    assert len(sent) == 2
    await b.aclose()


async def test_a_cancelled_publish_is_resolved_by_observe_publication(srv: ServerProcess) -> None:
    """A publish cancelled while its request was in flight may be stored: the adapter said
    PublicationUnresolvable "this client never sent it"; it resolves it as any unknown one."""
    b = backend(srv)
    ch, sub = await setup(b)
    env = make_envelope(ch.channel, "c1")
    with anyio.move_on_after(0) as scope:
        await b.publish(env, dl())
    assert scope.cancelled_caught
    seen = await b.observe_publication(env)
    assert isinstance(seen, Accepted), seen
    assert [d.envelope.publication_id for d in await b.receive(sub.id, 8, 1 << 20, dl())] == [
        "c1"
    ]  # stored once, whichever attempt stored it
    await b.aclose()


async def test_a_retry_no_leader_answered_leaves_the_first_attempt_unknown(
    srv: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a cluster, a publish whose leader died before the ack is unknown; the re-publish of
    ``observe_publication`` can meet "no responders" while the next leader is elected. That
    says nothing took the re-publish — not that the first attempt was not stored by a
    majority (MSG-801 saw it delivered after the adapter had answered Rejected)."""
    from videoflow_aio.adapters.nats import _api

    b = backend(srv)
    ch, _ = await setup(b)
    env = make_envelope(ch.channel, "lost-ack")
    first = await b.publish(env, dl())
    assert isinstance(first, Accepted), first
    c = b._c
    _, at, sent = c.pubs.get("lost-ack")
    c.pubs.put("lost-ack", (PublicationUnknown("lost-ack", "no acknowledgement"), at, sent))

    async def no_leader(*args: Any, **kwargs: Any) -> Any:
        raise _api.NoResponders("no responders available for request")

    monkeypatch.setattr(_api, "request", no_leader)
    seen = await b.observe_publication(env)
    assert isinstance(seen, PublicationUnknown), seen
    await b.aclose()


async def test_a_publish_no_stream_leader_answered_is_sent_again_until_its_deadline(
    srv: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nobody answers a stream that exists while its leader is being elected, or while a new
    R3 stream's interest has not reached this client's server ("no responders"): nothing
    was stored, so the publish is sent again until its deadline. It answered Rejected at once
    (MSG-001 on nats-cluster failed so right after ensure_channel, on an idle machine)."""
    from videoflow_aio.adapters.nats import _api

    b = backend(srv)
    ch, sub = await setup(b)
    real = _api.request
    refused: list[str] = []

    async def leaderless_twice(*args: Any, **kwargs: Any) -> Any:
        if len(refused) < 2:
            refused.append(args[1])
            raise _api.NoResponders("no responders available for request")
        return await real(*args, **kwargs)

    monkeypatch.setattr(_api, "request", leaderless_twice)
    out = await b.publish(make_envelope(ch.channel, "p1"), dl())
    monkeypatch.setattr(_api, "request", real)
    assert isinstance(out, Accepted), out
    assert len(refused) == 2
    got = await b.receive(sub.id, 8, 1 << 20, dl())
    assert [d.envelope.publication_id for d in got] == ["p1"]  # stored once
    await b.aclose()


async def test_a_publish_with_no_stream_leader_returns_by_its_deadline(
    srv: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While nobody answers a stream, its ``STREAM.INFO`` ("is it gone?") may go unanswered
    too: that read is bounded by the publication's deadline, not by ``request_timeout``. It
    waited the whole ``request_timeout`` (4 s on the cluster provider) past a 0.25 s
    deadline."""
    from videoflow_aio.adapters.nats import _api

    b = backend(srv, request_timeout=5.0)
    ch, _sub = await setup(b)
    real_api = _api.api

    async def leaderless(*args: Any, **kwargs: Any) -> Any:
        raise _api.NoResponders("no responders available for request")

    async def info_unanswered(nc: Any, subject: str, body: Any, seconds: float, into: Any) -> Any:
        if ".STREAM.INFO." not in subject:
            return await real_api(nc, subject, body, seconds, into)
        await anyio.sleep(seconds)
        raise _api.NoAnswer(f"no reply on {subject} within {seconds} s")

    monkeypatch.setattr(_api, "request", leaderless)
    monkeypatch.setattr(_api, "api", info_unanswered)
    deadline = dl(0.3)
    out = await b.publish(make_envelope(ch.channel, "p1"), deadline)
    returned = anyio.current_time()
    monkeypatch.undo()
    assert isinstance(out, Rejected), out
    assert "no stream leader answered" in out.reason
    assert returned <= deadline + 1.0, returned - deadline  # it overran by 4.7 s
    await b.aclose()
