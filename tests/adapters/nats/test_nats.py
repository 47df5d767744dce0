"""The NATS adapters on a real nats-server: where JetStream is silent, the adapter is truthful.

Real time, asyncio (trio through the bridge: tests/adapters/nats/test_nats_trio.py). The MSG
conformance cases run on the ``nats`` provider under both in
tests/conformance/test_conformance.py; these tests pin
the adapter's own ledgers and error mapping, each against the raw server behaviour it closes.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.lowlevel
import nats
import nats.js.errors
import pytest

from _nats_helpers import backend, eventually, paused, prefix, raw
from _security_matrix import SLACK
from _servers_fixtures import need_binary
from videoflow_aio.adapters.nats import CoreNatsMessagingBackend, JetStreamMessagingBackend
from videoflow_aio.contracts import Known, Unknown
from videoflow_aio.contracts.errors import (
    BackendUnavailable,
    IncompatibleProfile,
    NotFound,
    Unsupported,
    ValidationError,
)
from videoflow_aio.contracts.messaging import (
    Accepted,
    Completed,
    PublicationUnknown,
    PublicationUnresolvable,
    Rejected,
    Retry,
    SettleConfirmed,
    SettleStale,
    SettleUnknown,
    SubscriptionId,
    Terminal,
    make_channel,
    make_envelope,
    make_subscription,
)
from videoflow_aio.testing.servers import ServerProcess, free_port, start_nats

pytestmark = [pytest.mark.anyio, pytest.mark.server, pytest.mark.vtime(False)]
_ids = itertools.count(1)


@pytest.fixture(scope="module")
def srv() -> Iterator[ServerProcess]:
    """One nats-server for this module (we SIGSTOP it in some tests: nobody else uses it)."""
    need_binary("nats-server")
    server = start_nats()
    yield server
    server.stop()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # real time: the server's clock does not follow a virtual one


def dl(s: float = 1.0) -> float:
    return anyio.current_time() + s


async def chan_sub(b: Any, node: str = "n", sub_kw: dict[str, Any] | None = None, **kw: Any) -> Any:
    kw.setdefault("retention", "limits")
    ch = make_channel("f", "r", node, kw.pop("profile", "work"), **kw)
    await b.ensure_channel(ch, f"op-{next(_ids)}")
    sub = make_subscription(ch.channel, "w", **(sub_kw or {"ack_wait_seconds": 2.0}))
    await b.ensure_subscription(sub, f"op-{next(_ids)}")
    return ch, sub


async def obs(b: Any, sid: SubscriptionId) -> Any:
    o = await b.observe_subscription(sid)
    assert isinstance(o, Known), o
    return o.value


# -- unresolved: the server reports an exhausted message as nothing pending


async def test_unresolved_comes_from_the_durable_advisory_ledger(srv: ServerProcess) -> None:
    names = prefix()
    b = backend(srv, names)
    ch, sub = await chan_sub(b, sub_kw={"ack_wait_seconds": 0.3, "max_deliver": 1})
    await b.publish(make_envelope(ch.channel, "p1"), dl())
    got = await b.receive(sub.id, 8, 1 << 20, dl())
    assert [d.attempt for d in got] == [1]
    # the server: exhausted, and reported as nothing pending at all
    stream, consumer = b.names.stream(ch.channel), b.names.consumer(sub.id)
    info = await eventually(
        lambda: raw(b, f"CONSUMER.INFO.{stream}.{consumer}"),
        lambda i: i["num_ack_pending"] == 0,
    )
    assert (info["num_pending"], info["num_ack_pending"]) == (0, 0)
    # a fresh client (no local leases) learns it from the captured MAX_DELIVERIES advisory
    other = backend(srv, names)
    seen = await eventually(lambda: obs(other, sub.id), lambda o: o.unresolved == 1)
    assert (seen.pending, seen.leased, seen.unresolved) == (0, 0, 1)
    assert (await b.observe_channel(ch.channel)).value.messages == 1  # still retained
    assert await other.receive(sub.id, 8, 1 << 20, dl(0.5)) == []  # never delivered again
    await b.aclose()
    await other.aclose()


async def test_ack_floor_stops_below_an_unresolved_message(srv: ServerProcess) -> None:
    b = backend(srv)
    ch, sub = await chan_sub(b, sub_kw={"ack_wait_seconds": 0.3, "max_deliver": 1})
    await b.publish(make_envelope(ch.channel, "p1"), dl())
    await b.receive(sub.id, 1, 1 << 20, dl())  # p1 exhausts
    await eventually(lambda: obs(b, sub.id), lambda o: o.unresolved == 1)
    await b.publish(make_envelope(ch.channel, "p2"), dl())
    p2 = await b.receive(sub.id, 1, 1 << 20, dl())
    assert isinstance(await b.settle(p2[0].token, Completed(), "s2"), SettleConfirmed)
    stream, consumer = b.names.stream(ch.channel), b.names.consumer(sub.id)
    server_floor = (await raw(b, f"CONSUMER.INFO.{stream}.{consumer}"))["ack_floor"]
    assert server_floor["stream_seq"] == 2  # JetStream jumps past the exhausted p1
    assert await b.observe_ack_floor(sub.id) == Known(0)  # the adapter does not
    await b.aclose()


# -- drops: eviction before delivery gives no signal


async def test_evicted_before_delivery_is_a_drop_for_matching_subscriptions_only(
    srv: ServerProcess,
) -> None:
    b = backend(srv)
    ch, data = await chan_sub(b, max_msgs=2)
    eos = make_subscription(ch.channel, "e", kind="eos")
    part = make_subscription(ch.channel, "p1", partition=1)
    for s in (eos, part):
        await b.ensure_subscription(s, f"op-{next(_ids)}")
    await b.publish(make_envelope(ch.channel, "d0", partition_key="0"), dl())
    await b.publish(make_envelope(ch.channel, "d1", partition_key="1"), dl())
    await b.publish(make_envelope(ch.channel, "d2", partition_key="1"), dl())  # evicts d0
    await b.publish(make_envelope(ch.channel, "d3", partition_key="0"), dl())  # evicts d1
    # the server updates a consumer's counts a moment after the publish is acknowledged
    seen = await eventually(lambda: obs(b, data.id), lambda o: (o.dropped, o.pending) == (2, 2))
    assert (seen.dropped, seen.pending) == (2, 2)
    assert (await obs(b, part.id)).dropped == 1  # only d1 was in partition 1
    assert (await obs(b, eos.id)).dropped == 0
    assert (await obs(b, data.id)).dropped == 2  # counted once
    await b.aclose()


async def test_clients_share_the_drop_accounting(srv: ServerProcess) -> None:
    """A drop is decided once, on the server's record, whoever observes first; a client that
    did not publish the evicted message attributes it from the index stream."""
    names = prefix()
    writer = backend(srv, names)
    ch, sub = await chan_sub(writer, max_msgs=1)
    reader = backend(srv, names)
    assert isinstance(await reader.observe_subscription(sub.id), Known)
    await writer.publish(make_envelope(ch.channel, "p1"), dl())
    await writer.publish(make_envelope(ch.channel, "p2"), dl())  # evicts p1, undelivered
    assert (await obs(reader, sub.id)).dropped == 1  # the reader never saw p1: the index did
    assert (await obs(writer, sub.id)).dropped == 1  # counted once
    await writer.publish(make_envelope(ch.channel, "p3"), dl())  # evicts p2
    assert (await obs(writer, sub.id)).dropped == 2
    assert (await obs(reader, sub.id)).dropped == 2
    await writer.aclose()
    await reader.aclose()


async def test_deleted_while_leased_is_a_drop_and_its_settle_is_stale(srv: ServerProcess) -> None:
    b = backend(srv)
    ch, sub = await chan_sub(b, max_msgs=1)
    await b.publish(make_envelope(ch.channel, "p1"), dl())
    leased = await b.receive(sub.id, 1, 1 << 20, dl())
    await b.publish(make_envelope(ch.channel, "p2"), dl())  # evicts the leased p1
    o = await eventually(lambda: obs(b, sub.id), lambda o: o.dropped == 1)
    assert (o.leased, o.dropped, o.pending) == (0, 1, 1)
    assert isinstance(await b.settle(leased[0].token, Completed(), "late"), SettleStale)
    await b.aclose()


async def test_settle_after_deletion_is_stale_without_an_observation(srv: ServerProcess) -> None:
    b = backend(srv)
    ch, sub = await chan_sub(b, max_msgs=1)
    await b.publish(make_envelope(ch.channel, "p1"), dl())
    leased = await b.receive(sub.id, 1, 1 << 20, dl())
    await b.publish(make_envelope(ch.channel, "p2"), dl())  # evicts the leased p1
    chs = b._c.chans[ch.channel]
    deleted = chs.ledger(chs.stream, b.names.consumer(sub.id)).deleted
    await eventually(anyio.lowlevel.checkpoint, lambda _: leased[0].sequence in deleted)
    assert isinstance(await b.settle(leased[0].token, Completed(), "late"), SettleStale)
    await b.aclose()


# -- stale settles: the server accepts acks from expired or superseded leases


async def test_superseded_and_expired_leases_are_stale(srv: ServerProcess) -> None:
    b = backend(srv)
    ch, sub = await chan_sub(b, sub_kw={"ack_wait_seconds": 0.3, "max_deliver": 5})
    await b.publish(make_envelope(ch.channel, "p1"), dl())
    first = await b.receive(sub.id, 1, 1 << 20, dl())
    await anyio.sleep(0.35)  # the lease lapses; nobody has re-fetched yet
    ans = await b.settle(first[0].token, Completed(), "a")
    assert isinstance(ans, SettleStale) and "expired" in ans.reason
    second = await b.receive(sub.id, 1, 1 << 20, dl())
    assert [d.attempt for d in second] == [2]
    ans = await b.settle(first[0].token, Completed(), "b")
    assert isinstance(ans, SettleStale) and "superseded" in ans.reason
    assert (await obs(b, sub.id)).leased == 1  # the stale ack was never sent
    lease = await b.renew(first[0].token)
    assert not lease.held
    assert isinstance(await b.settle(second[0].token, Completed(), "c"), SettleConfirmed)
    again = await b.settle(second[0].token, Completed(), "c")
    assert again == SettleConfirmed(second[0].sequence, duplicate=True)
    assert isinstance(await b.settle(second[0].token, Completed(), "d"), SettleStale)
    await b.aclose()


async def test_completed_is_a_confirmed_double_ack(srv: ServerProcess) -> None:
    b = backend(srv)
    ch, sub = await chan_sub(b)
    await b.publish(make_envelope(ch.channel, "p1"), dl())
    got = await b.receive(sub.id, 1, 1 << 20, dl())
    assert isinstance(await b.settle(got[0].token, Completed(), "s"), SettleConfirmed)
    stream, consumer = b.names.stream(ch.channel), b.names.consumer(sub.id)
    info = await raw(b, f"CONSUMER.INFO.{stream}.{consumer}")
    assert info["ack_floor"]["stream_seq"] == got[0].sequence  # applied before we returned
    assert info["num_ack_pending"] == 0
    await b.aclose()


async def test_lost_settle_confirmation_is_settle_unknown(srv: ServerProcess) -> None:
    b = backend(srv, request_timeout=0.3)
    ch, sub = await chan_sub(b, sub_kw={"ack_wait_seconds": 5.0})
    await b.publish(make_envelope(ch.channel, "p1"), dl())
    got = await b.receive(sub.id, 1, 1 << 20, dl())
    async with paused(srv):
        ans = await b.settle(got[0].token, Completed(), "s")
    assert isinstance(ans, SettleUnknown)
    # the ack was on the wire: it applies late, and a retry is idempotent
    assert isinstance(await b.settle(got[0].token, Completed(), "s2"), SettleConfirmed)
    o = await eventually(lambda: obs(b, sub.id), lambda o: o.leased == 0)
    assert (o.leased, o.pending) == (0, 0)
    await b.aclose()


async def test_retry_and_terminal(srv: ServerProcess) -> None:
    b = backend(srv)
    ch, sub = await chan_sub(b, sub_kw={"ack_wait_seconds": 5.0, "max_deliver": 5})
    dlq = make_subscription(ch.channel, "dead", kind="dlq")
    await b.ensure_subscription(dlq, "op-dlq")
    await b.publish(make_envelope(ch.channel, "p1", body=b"poison", event_id="ev"), dl())
    got = await b.receive(sub.id, 1, 1 << 20, dl())
    assert isinstance(await b.settle(got[0].token, Retry(0.2), "r"), SettleConfirmed)
    assert (await obs(b, sub.id)).pending == 1  # waiting out its delay: pending, not leased
    released = await b.settle(got[0].token, Completed(), "late")  # the Retry gave it up
    assert isinstance(released, SettleStale) and "Retry" in released.reason
    again = await b.receive(sub.id, 1, 1 << 20, dl(2))
    assert [d.attempt for d in again] == [2]
    term = await b.settle(again[0].token, Terminal("cannot decode"), "t")
    assert isinstance(term, SettleConfirmed)
    dead = await b.receive(dlq.id, 8, 1 << 20, dl())
    assert [(d.envelope.kind, d.envelope.body, d.envelope.event_id) for d in dead] == [
        ("dlq", b"poison", "ev")
    ]
    assert dead[0].envelope.headers["dlq-reason"] == "cannot decode"
    o = await eventually(lambda: obs(b, sub.id), lambda o: o.dead_lettered == 1)
    assert (o.dead_lettered, o.pending, o.leased) == (1, 0, 0)
    assert (await b.observe_channel(ch.channel)).value.dead_letters == 1
    await b.aclose()


# -- receive: "nothing received" is not "no messages"


async def test_receive_on_a_deleted_consumer_is_not_found(srv: ServerProcess) -> None:
    b = backend(srv)
    ch, sub = await chan_sub(b)
    stream, consumer = b.names.stream(ch.channel), b.names.consumer(sub.id)
    await raw(b, f"CONSUMER.DELETE.{stream}.{consumer}")
    with pytest.raises(NotFound):
        await b.receive(sub.id, 1, 1 << 20, dl(0.3))
    await b.aclose()


async def test_receive_from_a_paused_server_is_an_error_not_empty(srv: ServerProcess) -> None:
    b = backend(srv, request_timeout=0.3)
    _ch, sub = await chan_sub(b)
    async with paused(srv):
        with pytest.raises(BackendUnavailable) as info:
            await b.receive(sub.id, 1, 1 << 20, dl(0.3))
    assert "no answer" in str(info.value) or info.value.__cause__ is not None
    await b.aclose()


async def test_byte_credit_is_sent_as_max_bytes(srv: ServerProcess) -> None:
    b = backend(srv)
    ch, sub = await chan_sub(b)
    await b.publish(make_envelope(ch.channel, "big", body=b"z" * 4000), dl())
    t0 = anyio.current_time()
    assert await b.receive(sub.id, 8, 1000, dl(0.5)) == []
    assert anyio.current_time() - t0 < 0.45  # the server said "does not fit": no waiting
    o = await obs(b, sub.id)
    assert (o.leased, o.pending) == (0, 1)  # nothing was leased under a credit it exceeds
    assert len(await b.receive(sub.id, 8, 8000, dl())) == 1
    await b.aclose()


# -- publish: deadline, late acceptance, observe_publication


async def test_publish_deadline_is_unknown_and_resolved_by_idempotent_republish(
    srv: ServerProcess,
) -> None:
    b = backend(srv)
    ch, _sub = await chan_sub(b)
    env = make_envelope(ch.channel, "p1")
    async with paused(srv):
        out = await b.publish(env, dl(0.2))
        assert isinstance(out, PublicationUnknown)
    seen = await b.observe_publication(env)
    assert seen == Accepted("p1", 1, False)
    assert (await b.observe_channel(ch.channel)).value.messages == 1  # stored once
    never = make_envelope(ch.channel, "never-sent")
    assert isinstance(await b.observe_publication(never), PublicationUnresolvable)
    await b.aclose()


async def test_outside_the_dedup_window_observe_is_unresolvable(srv: ServerProcess) -> None:
    b = backend(srv)
    ch, _sub = await chan_sub(b, dedup_window_seconds=1)
    env = make_envelope(ch.channel, "p1")
    async with paused(srv):
        assert isinstance(await b.publish(env, dl(0.2)), PublicationUnknown)
        await anyio.sleep(1.0)
    assert isinstance(await b.observe_publication(env), PublicationUnresolvable)
    await b.aclose()


async def test_rejections_are_definite(srv: ServerProcess) -> None:
    b = backend(srv, max_payload_bytes=100)
    ch, _sub = await chan_sub(b, max_msgs=1, overflow="reject")
    assert isinstance(
        await b.publish(make_envelope(ch.channel, "big", body=b"x" * 101), dl()), Rejected
    )
    assert isinstance(await b.publish(make_envelope(ch.channel, "p1"), dl()), Accepted)
    full = await b.publish(make_envelope(ch.channel, "p2"), dl())
    assert isinstance(full, Rejected) and "maximum messages" in full.reason
    assert await b.observe_publication(make_envelope(ch.channel, "p2")) == full
    with pytest.raises(ValidationError):
        await b.publish(make_envelope(ch.channel, "d", kind="dlq"), dl())
    await b.aclose()


async def test_interest_needs_its_consumers_before_the_first_publish(srv: ServerProcess) -> None:
    b = backend(srv)
    ch = make_channel("f", "r", "i", "work", "interest")
    cid = ch.channel
    with_required = make_channel(
        "f",
        "r",
        "j",
        "work",
        "interest",
        required=[SubscriptionId(make_channel("f", "r", "j", "work", "interest").channel, "a")],
    )
    await b.ensure_channel(ch, "op-i")
    await b.ensure_channel(with_required, "op-j")
    # JetStream: accepted, then dropped at once (nobody was interested)
    assert isinstance(await b.publish(make_envelope(cid, "p1"), dl()), Accepted)
    assert (await b.observe_channel(cid)).value.messages == 0
    # the adapter created the required consumer up front: the message is kept for it
    jid = with_required.channel
    assert isinstance(await b.publish(make_envelope(jid, "p1", kind="eos"), dl()), Accepted)
    assert (await b.observe_channel(jid)).value.messages == 1
    assert await b.subscription_ids(jid) == []  # a placeholder is not a subscription yet
    await b.ensure_subscription(make_subscription(jid, "a", kind="eos"), "op-a")
    got = await b.receive(SubscriptionId(jid, "a"), 8, 1 << 20, dl())
    assert [d.envelope.publication_id for d in got] == ["p1"]
    await b.settle(got[0].token, Completed(), "s")
    assert (await b.observe_channel(jid)).value.messages == 0
    await b.aclose()


# -- configuration


async def test_ensure_reads_back_and_refuses_immutable_changes(srv: ServerProcess) -> None:
    b = backend(srv)
    ch, sub = await chan_sub(b, max_msgs=10)
    with pytest.raises(IncompatibleProfile):
        await b.ensure_channel(make_channel("f", "r", "n", "work", "interest", max_msgs=10), "x")
    with pytest.raises(IncompatibleProfile):
        await b.ensure_channel(make_channel("f", "r", "n", "work", "limits", persistence=True), "x")
    # a kind change would silently re-filter the durable; the adapter refuses it
    with pytest.raises(IncompatibleProfile):
        await b.ensure_subscription(make_subscription(ch.channel, "w", kind="eos"), "x")
    stream, consumer = b.names.stream(ch.channel), b.names.consumer(sub.id)
    info = await raw(b, f"CONSUMER.INFO.{stream}.{consumer}")
    assert info["config"]["filter_subject"].endswith(".data.>")
    # the effective window is capped by max_age (JetStream refuses window > max_age)
    v = await b.ensure_channel(
        make_channel("f", "r", "m", "work", "limits", max_age_seconds=5, dedup_window_seconds=60),
        "y",
    )
    assert v.effective.dedup_window_seconds == 5
    await b.aclose()


async def test_concurrent_ensure_from_two_clients_agrees(srv: ServerProcess) -> None:
    names = prefix()
    a, b = backend(srv, names), backend(srv, names)
    spec = make_channel("f", "r", "race", "work", "limits", max_msgs=7)
    results: list[Any] = []

    async def ensure(x: Any, op: str) -> None:
        results.append(await x.ensure_channel(spec, op))

    async with anyio.create_task_group() as tg:
        tg.start_soon(ensure, a, "op-a")
        tg.start_soon(ensure, b, "op-b")
    assert sorted(r.created for r in results) == [False, True]
    assert all(r.effective.max_msgs == 7 for r in results)
    await a.aclose()
    await b.aclose()


async def test_a_deadline_already_past_is_rejected_unsent(srv: ServerProcess) -> None:
    b = backend(srv)
    ch, _sub = await chan_sub(b)
    out = await b.publish(make_envelope(ch.channel, "p1"), anyio.current_time() - 1)
    assert isinstance(out, Rejected) and "deadline" in out.reason
    assert (await b.observe_channel(ch.channel)).value.messages == 0
    await b.aclose()


async def test_names_survive_escaping(srv: ServerProcess) -> None:
    b = backend(srv)
    ch = make_channel("fl_ow", "r/un", "n-o_de", "work", "limits")
    await b.ensure_channel(ch, "op")
    sub = make_subscription(ch.channel, "con_sum/er")
    await b.ensure_subscription(sub, "op")
    assert await b.channel_ids() == [ch.channel]
    assert await b.subscription_ids(ch.channel) == [sub.id]
    await b.aclose()


# -- errors never leak nats-py


async def test_unreachable_server_is_backend_unavailable_with_cause() -> None:
    b = JetStreamMessagingBackend(
        f"nats://127.0.0.1:{free_port()}",
        request_timeout=0.3,
        connect_options={"max_reconnect_attempts": 0, "allow_reconnect": False},
    )
    with pytest.raises(BackendUnavailable) as info:
        await b.channel_ids()
    assert info.value.__cause__ is not None
    await b.aclose()


async def test_paused_server_observations_are_unknown(srv: ServerProcess) -> None:
    b = backend(srv, request_timeout=0.2)
    ch, sub = await chan_sub(b)
    async with paused(srv):
        assert isinstance(await b.observe_subscription(sub.id), Unknown)
        assert isinstance(await b.observe_channel(ch.channel), Unknown)
        assert isinstance(await b.observe_ack_floor(sub.id), Unknown)
    assert isinstance(await b.observe_subscription(sub.id), Known)
    await b.aclose()


# -- core NATS


async def test_core_slow_consumer_drops_and_no_retention(srv: ServerProcess) -> None:
    b = CoreNatsMessagingBackend(srv.url, subject_prefix=prefix()[1], client_queue_limit=3)
    ch = make_channel("f", "r", "n", "work", "limits")
    await b.ensure_channel(ch, "op")
    sub = make_subscription(ch.channel, "w")
    await b.ensure_subscription(sub, "op")
    for i in range(5):
        assert isinstance(await b.publish(make_envelope(ch.channel, f"p{i}"), dl()), Accepted)
    got = await b.receive(sub.id, 64, 1 << 20, dl())
    assert [d.envelope.publication_id for d in got] == ["p0", "p1", "p2"]
    assert (await obs(b, sub.id)).dropped == 2
    late = make_subscription(ch.channel, "late")
    await b.ensure_subscription(late, "op")
    assert await b.receive(late.id, 64, 1 << 20, dl(0.1)) == []
    assert isinstance(await b.observe_ack_floor(sub.id), Unknown)
    assert isinstance(
        await b.observe_publication(make_envelope(ch.channel, "p0")), PublicationUnresolvable
    )
    await b.aclose()


async def test_core_competing_over_two_clients_keeps_the_callers_deadline(
    srv: ServerProcess,
) -> None:
    """A competing subscription split over two clients: the server routes part of one
    client's publications to the other, so a wait for "all my own publications" never ends —
    receive overshot a 0.3 s deadline by the whole request_timeout, and observe waited it."""
    subjects = prefix()[1]
    a, b = (
        CoreNatsMessagingBackend(srv.url, subject_prefix=subjects, request_timeout=5.0)
        for _ in range(2)
    )
    ch = make_channel("f", "r", "n", "work", "limits")
    sub = make_subscription(ch.channel, "w", competing=True)
    for c in (a, b):
        await c.ensure_channel(ch, "op")
        await c.ensure_subscription(sub, "op")
    for i in range(20):
        assert isinstance(await a.publish(make_envelope(ch.channel, f"p{i}"), dl()), Accepted)
    received: list[str] = []
    for c in (a, b, a):
        start = anyio.current_time()
        got = await c.receive(sub.id, 64, 1 << 20, start + 0.3)
        assert anyio.current_time() - start < 0.3 + SLACK, "receive kept the caller's deadline"
        received += [d.envelope.publication_id for d in got]
        start = anyio.current_time()
        assert isinstance(await c.observe_subscription(sub.id), Known)
        assert anyio.current_time() - start < SLACK, "observe did not wait out request_timeout"
    assert sorted(received) == sorted(f"p{i}" for i in range(20)), "split between the two"
    await a.aclose()
    await b.aclose()


async def test_a_terminal_answered_stale_leaves_no_dead_letter(
    srv: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #25 item 2: the dead letter is stored before the ack; a purge in between made
    the ack find nothing (``SettleStale``) and left the dead letter stored, so the message
    counted both dropped and dead-lettered. Now it is withdrawn."""
    from videoflow_aio.adapters.nats import _settle

    b = backend(srv)
    ch, sub = await chan_sub(b)
    assert isinstance(await b.publish(make_envelope(ch.channel, "p1"), dl()), Accepted)
    got = await b.receive(sub.id, 1, 1 << 20, dl())
    stored = _settle.dead_letter

    async def then_purged(*args: Any) -> Any:
        letter = await stored(*args)
        await raw(b, f"STREAM.PURGE.{b.names.stream(ch.channel)}")  # an administrator, racing
        return letter

    monkeypatch.setattr(_settle, "dead_letter", then_purged)
    ans = await b.settle(got[0].token, Terminal("bad"), "t-1")
    assert isinstance(ans, SettleStale), ans
    chan = await b.observe_channel(ch.channel)
    assert isinstance(chan, Known) and chan.value.dead_letters == 0, chan
    o = await b.observe_subscription(sub.id)
    if isinstance(o, Known):  # after a purge a drop count may be Unknown: never both
        assert (o.value.dead_lettered, o.value.dropped) == (0, 1), o
    await b.aclose()


class Interrupted(Exception):
    """An injected interruption of a receive (a plain exception: the test's own scope is not
    cancelled)."""


def interrupt_after_delivery(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Interrupt the next receive right after its pull got its first deliveries — as a
    cancellation there would: they are leased to this client and kept for the next receive
    (``st.late``), like deliveries that reach a cluster client after their pull ended."""
    from videoflow_aio.adapters.nats import _pull

    until, armed = _pull._until, [True]

    async def interrupted(event: Any, deadline: float) -> None:
        await until(event, deadline)
        if armed[0] and event.is_set():
            armed[0] = False
            raise Interrupted

    monkeypatch.setattr(_pull, "_until", interrupted)
    return armed


@pytest.mark.parametrize("removal", ["none", "purge", "delete"])
async def test_deliveries_kept_from_an_ended_pull_are_not_handed_out_once_removed(
    srv: ServerProcess, monkeypatch: pytest.MonkeyPatch, removal: str
) -> None:
    """Issue #25, MSG-054 on nats-cluster (CI, f2cd571): deliveries that reached the client
    after their pull ended are kept and handed out by the next receive; after an
    administrator purged the channel, that receive returned the purged messages. A kept
    delivery whose message the stream no longer holds is withheld (and counted removed under
    its lease); one still held is handed out as before."""
    b = backend(srv)
    ch, sub = await chan_sub(b, sub_kw={"ack_wait_seconds": 30.0})
    for i in range(3):
        assert isinstance(await b.publish(make_envelope(ch.channel, f"p{i}"), dl()), Accepted)
    armed = interrupt_after_delivery(monkeypatch)
    with pytest.raises(Interrupted):
        await b.receive(sub.id, 3, 1 << 20, dl(5))
    assert not armed[0]
    stream = b.names.stream(ch.channel)
    if removal == "purge":
        await raw(b, f"STREAM.PURGE.{stream}")
    elif removal == "delete":
        await raw(b, f"STREAM.MSG.DELETE.{stream}", {"seq": 2})
    got = [d.envelope.publication_id for d in await b.receive(sub.id, 3, 1 << 20, dl(0.3))]
    want = {"none": ["p0", "p1", "p2"], "purge": [], "delete": ["p0", "p2"]}[removal]
    assert sorted(got) == want, got
    o = await b.observe_subscription(sub.id)
    assert isinstance(o, Known), o
    dropped = {"none": 0, "purge": 3, "delete": 1}[removal]
    assert (o.value.dropped, o.value.leased) == (dropped, len(want)), o.value
    await b.aclose()


async def test_raw_nats_py_would_have_said_zero(srv: ServerProcess) -> None:
    """The behaviour the adapter closes: nats-py's fetch on a deleted consumer just times out."""
    b = backend(srv)
    ch, sub = await chan_sub(b)
    stream, consumer = b.names.stream(ch.channel), b.names.consumer(sub.id)
    nc = await nats.connect(srv.url)
    psub = await nc.jetstream().pull_subscribe_bind(consumer, stream)
    await raw(b, f"CONSUMER.DELETE.{stream}.{consumer}")
    # a timeout, or a bare 503: either way nothing says "this consumer was deleted"
    with pytest.raises((nats.errors.TimeoutError, nats.js.errors.ServiceUnavailableError)):
        await psub.fetch(1, timeout=0.3)
    await nc.close()
    with pytest.raises(NotFound):  # the adapter, on the same deleted consumer
        await b.receive(sub.id, 1, 1 << 20, dl(0.3))
    await b.aclose()


# -- optional profiles


async def test_durable_control_is_a_server_side_compare_and_set(srv: ServerProcess) -> None:
    names = prefix()
    a = backend(srv, names, durable_control=True)
    b = backend(srv, names, durable_control=True)  # another process
    ch, _sub = await chan_sub(a)
    assert await a.control_state(ch.channel, "pause") == (None, None)
    assert await a.commit_control(ch.channel, "pause", None, b"on")
    _, v1 = await b.control_state(ch.channel, "pause")
    assert v1 is not None
    assert await b.commit_control(ch.channel, "pause", v1, b"off")
    assert not await a.commit_control(ch.channel, "pause", v1, b"stale")  # lost the race
    assert not await a.commit_control(ch.channel, "pause", "not-a-version", b"x")
    assert (await a.control_state(ch.channel, "pause"))[0] == b"off"
    plain = backend(srv)
    with pytest.raises(Unsupported):
        await plain.control_state(ch.channel, "pause")
    for x in (a, b, plain):
        await x.aclose()


async def test_archive_outlives_close(srv: ServerProcess) -> None:
    b = backend(srv, archive=True, archive_horizon_seconds=60)
    ch, _sub = await chan_sub(b, owner_labels={"generation": "g1"})
    env = make_envelope(ch.channel, "p1", b"frame", event_id="ev-1", partition_key="3")
    assert isinstance(await b.publish(env, dl()), Accepted)
    assert (await b.close([ch.channel], "g1")).removed == (ch.channel,)
    got = await b.replay(ch.channel, "ev-1")
    assert got is not None
    assert (got.body, got.event_id, got.partition_key, got.kind) == (b"frame", "ev-1", "3", "data")
    assert await b.replay(ch.channel, "never") is None
    assert b.archive_errors == []
    await b.aclose()


# -- bounded ledgers


async def test_trimmed_delivery_records_make_drops_unknown_not_guessed(srv: ServerProcess) -> None:
    """Without its record of which messages it received, a client cannot tell a message
    skipped by eviction from one it received: Unknown, never a guess."""
    b = backend(srv)
    ch, sub = await chan_sub(b, max_msgs=2)
    await b.publish(make_envelope(ch.channel, "p0"), dl())
    assert isinstance(await b.observe_subscription(sub.id), Known)  # the record's mark: 0
    await b.publish(make_envelope(ch.channel, "p1"), dl())
    got = await b.receive(sub.id, 1, 1 << 20, dl())
    assert [d.envelope.publication_id for d in got] == ["p0"]
    await b.publish(make_envelope(ch.channel, "p2"), dl())  # evicts p0 (delivered)
    await b.publish(make_envelope(ch.channel, "p3"), dl())  # evicts p1 (not delivered)
    await b.receive(sub.id, 8, 1 << 20, dl())  # the consumer passes p1's place
    b._c.subs[sub.id].deliveries.clear()  # forget what it received
    seen = await b.observe_subscription(sub.id)
    assert isinstance(seen, Unknown) and "another client" in seen.reason
    await b.aclose()
