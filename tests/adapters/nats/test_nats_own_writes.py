"""Read-your-writes where a JetStream cluster's replicas trail their leaders (real single
nats-server; the lag injected where the adapter reads).

On a cluster every consumer is a raft group of its own, which applies an ack or the
eviction a publish caused after the request that made it was answered; and a direct get is
answered by any replica of a stream, a follower maybe without the newest messages. Each test
makes one such read stale, as the cluster did in CI (``nats-cluster``: MSG-047 read an ack
floor of 1 where 2 was right), and checks the adapter answers from this client's own writes
or says ``Unknown`` — never the older state.
"""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest

from _nats_helpers import backend, publish
from videoflow_aio.adapters.nats import _observe
from videoflow_aio.contracts import Known, Unknown
from videoflow_aio.contracts.messaging import (
    Completed,
    SettleConfirmed,
    make_channel,
    make_subscription,
)
from videoflow_aio.testing.servers import ServerProcess

pytestmark = [pytest.mark.anyio, pytest.mark.server, pytest.mark.vtime(False)]


@pytest.fixture
def srv(nats_srv: ServerProcess) -> ServerProcess:
    return nats_srv


def dl(s: float = 2.0) -> float:
    return anyio.current_time() + s


async def test_the_ack_floor_reads_this_clients_settle_past_an_eviction(
    srv: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MSG-047 on a cluster: p1 settled (confirmed), p0 evicted by p2; the consumer's group
    has applied neither (its floor still 0). The floor is p1's sequence, not p0's."""
    b = backend(srv)
    try:
        ch = make_channel("f", "r", "e", "work", "limits", max_msgs=2)
        sub = make_subscription(ch.channel, "w", ack_wait_seconds=10.0)
        await b.ensure_channel(ch, "op-c")
        await b.ensure_subscription(sub, "op-s")
        seqs = await publish(b, ch, "p0", "p1")
        got = await b.receive(sub.id, 2, 1 << 20, dl())
        assert isinstance(await b.settle(got[1].token, Completed(), "s1"), SettleConfirmed)
        c = b._c
        real = c.consumer_info

        async def before_both(stream: str, consumer: str) -> Any:
            info = await real(stream, consumer)
            assert info is not None
            floor = msgspec.structs.replace(info.ack_floor, stream_seq=seqs[0] - 1)
            return msgspec.structs.replace(info, ack_floor=floor)  # neither applied yet

        monkeypatch.setattr(c, "consumer_info", before_both)
        await publish(b, ch, "p2")  # evicts p0
        assert await b.observe_ack_floor(sub.id) == Known(seqs[1])  # was seqs[0]
    finally:
        await b.aclose()


@pytest.mark.parametrize("replicas", [1, 3])
async def test_an_observation_of_a_lagging_consumer_is_unknown(
    srv: ServerProcess, monkeypatch: pytest.MonkeyPatch, replicas: int
) -> None:
    """A consumer that has not counted a message this client saw stored (its num_pending
    one short) for ``request_timeout``: observe_subscription is Unknown, not the older count;
    the ack floor is still known (it is made from this client's own writes). A single server
    counts a publication into its consumers after the PubAck as well (3 in 2,000 reads right
    after one missed it, under load): it answered the stale count after 0.1 s."""
    b = backend(srv, request_timeout=0.3)
    try:
        ch = make_channel("f", "r", "l", "work", "limits")
        sub = make_subscription(ch.channel, "w")
        await b.ensure_channel(ch, "op-c")
        await b.ensure_subscription(sub, "op-s")
        await publish(b, ch, "p0")
        c = b._c
        st = c.subs[sub.id]
        st.chan.spec = msgspec.structs.replace(st.chan.spec, replicas=replicas)  # 3: a cluster
        real = c.consumer_info

        async def behind(stream: str, consumer: str) -> Any:
            info = await real(stream, consumer)
            assert info is not None
            return msgspec.structs.replace(info, num_pending=0)  # the publish not applied yet

        monkeypatch.setattr(c, "consumer_info", behind)
        seen = await b.observe_subscription(sub.id)
        assert isinstance(seen, Unknown), seen
        assert "not counted" in seen.reason
        assert isinstance(await b.observe_ack_floor(sub.id), Known)
        monkeypatch.setattr(c, "consumer_info", real)  # caught up
        seen = await b.observe_subscription(sub.id)
        assert isinstance(seen, Known) and seen.value.pending == 1, seen
    finally:
        await b.aclose()


async def test_a_stream_leader_behind_this_clients_publications_is_not_drained(
    srv: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MSG-801 in CI: the killed stream leader, restarted on its data, was elected again
    before it had applied what the others stored meanwhile. Its stream info ended at p0 and
    its consumer, which reads that replica, counted nothing pending past p0's settle: the
    subscription looked drained with p1 and p2 acknowledged. Both observations are Unknown
    while the leader trails this client's PubAcks, and Known once it has caught up."""
    b = backend(srv, request_timeout=0.3)
    try:
        ch = make_channel("f", "r", "b", "work", "limits")
        sub = make_subscription(ch.channel, "w", ack_wait_seconds=10.0)
        await b.ensure_channel(ch, "op-c")
        await b.ensure_subscription(sub, "op-s")
        (p0,) = await publish(b, ch, "p0")
        got = await b.receive(sub.id, 1, 1 << 20, dl())
        assert isinstance(await b.settle(got[0].token, Completed(), "s0"), SettleConfirmed)
        await publish(b, ch, "p1", "p2")
        c = b._c
        real_si, real_ci = c.stream_info, c.consumer_info

        async def stream_at_p0(stream: str, body: Any = None) -> Any:
            info = await real_si(stream, body)
            if info is None or stream != c.subs[sub.id].stream:
                return info
            state = msgspec.structs.replace(info.state, last_seq=p0, messages=1)
            return msgspec.structs.replace(info, state=state)

        async def consumer_at_p0(stream: str, consumer: str) -> Any:
            info = await real_ci(stream, consumer)
            assert info is not None
            return msgspec.structs.replace(info, num_pending=0)

        monkeypatch.setattr(c, "stream_info", stream_at_p0)
        monkeypatch.setattr(c, "consumer_info", consumer_at_p0)
        for seen in (await b.observe_subscription(sub.id), await b.observe_channel(ch.channel)):
            assert isinstance(seen, Unknown), seen
            assert "has not applied this client's publications" in seen.reason
        monkeypatch.setattr(c, "stream_info", real_si)
        monkeypatch.setattr(c, "consumer_info", real_ci)  # caught up
        obs = await b.observe_subscription(sub.id)
        assert isinstance(obs, Known) and obs.value.pending == 2, obs
        chan = await b.observe_channel(ch.channel)
        assert isinstance(chan, Known) and chan.value.last_sequence == p0 + 2, chan
    finally:
        await b.aclose()


async def test_a_stream_leader_that_catches_up_in_time_is_read_once_it_has(
    srv: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The leader trails this client's PubAcks for its first reads only: the observation
    waits for it (re-reads within ``request_timeout``) and answers the caught-up state."""
    b = backend(srv, request_timeout=2.0)
    try:
        ch = make_channel("f", "r", "c", "work", "limits")
        await b.ensure_channel(ch, "op-c")
        seqs = await publish(b, ch, "p0", "p1", "p2")
        c = b._c
        real_si = c.stream_info
        stale = {"reads": 3}

        async def behind_at_first(stream: str, body: Any = None) -> Any:
            info = await real_si(stream, body)
            if info is None or stream != c.names.stream(ch.channel) or stale["reads"] <= 0:
                return info
            stale["reads"] -= 1
            state = msgspec.structs.replace(info.state, last_seq=seqs[0], messages=1)
            return msgspec.structs.replace(info, state=state)

        monkeypatch.setattr(c, "stream_info", behind_at_first)
        chan = await b.observe_channel(ch.channel)
        assert stale["reads"] == 0
        assert isinstance(chan, Known) and chan.value.last_sequence == seqs[2], chan
    finally:
        await b.aclose()


async def test_a_puback_of_a_stream_since_created_again_is_not_taken_as_its_own(
    srv: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A publish in flight while another task saw the stream created again: its PubAck names
    a sequence of the old incarnation, which the new one may never reach. It is not recorded
    as this client's, so the new stream's observations are not held Unknown by it."""
    from videoflow_aio.adapters.nats import _channels, _publish

    b = backend(srv, request_timeout=0.3)
    try:
        ch = make_channel("f", "r", "i", "work", "limits")
        await b.ensure_channel(ch, "op-c")
        await publish(b, ch, "p0")
        c = b._c
        chs = c.chans[ch.channel]
        real_send = _publish.send

        async def seen_created_again_meanwhile(*args: Any) -> Any:
            out = await real_send(*args)
            info = await c.stream_info(chs.stream)
            assert info is not None
            _channels.seen(chs, msgspec.structs.replace(info, created="2026-12-03T00:00:00Z"))
            return msgspec.structs.replace(out, sequence=1000)  # the old stream's

        monkeypatch.setattr(_publish, "send", seen_created_again_meanwhile)
        await publish(b, ch, "p1")
        monkeypatch.setattr(_publish, "send", real_send)
        assert chs.acked_last == 0 and 1000 not in chs.index
        chan = await b.observe_channel(ch.channel)
        assert isinstance(chan, Known), chan
    finally:
        await b.aclose()


async def test_a_stream_created_again_is_read_as_it_is(
    srv: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The channel's stream deleted and created again (another incarnation, its sequences
    starting over below this client's old PubAcks) is no lagging leader: it is read as is."""
    b = backend(srv, request_timeout=0.3)
    try:
        ch = make_channel("f", "r", "n", "work", "limits")
        await b.ensure_channel(ch, "op-c")
        await publish(b, ch, "p0", "p1", "p2")
        c = b._c
        real_si = c.stream_info

        async def created_again(stream: str, body: Any = None) -> Any:
            info = await real_si(stream, body)
            if info is None or info.state.last_seq < 3:
                return info
            state = msgspec.structs.replace(info.state, first_seq=1, last_seq=1, messages=1)
            return msgspec.structs.replace(info, state=state, created="2026-12-03T00:00:00Z")

        monkeypatch.setattr(c, "stream_info", created_again)
        chan = await b.observe_channel(ch.channel)
        assert isinstance(chan, Known) and chan.value.last_sequence == 1, chan
    finally:
        await b.aclose()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # calls the reader directly
async def test_a_replica_behind_on_direct_gets_is_read_past_from_the_leader(
    srv: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A direct get answered by a follower that lacks the newest messages of a side stream
    (``__adv``, ``__idx``): the rest is read from the leader; the reader's cursor used to
    move past them unread (an advisory missed for good)."""
    b = backend(srv)
    try:
        ch = make_channel("f", "r", "d", "work", "limits")
        await b.ensure_channel(ch, "op-c")
        c = b._c
        nc = await c.conn()
        for i in range(4):  # four records in the index stream (a side stream: direct gets)
            await nc.request(b.names.index_subject(ch.channel), f"r{i}".encode(), timeout=2)
        stream = b.names.idx_stream(ch.channel)
        real = _observe._direct_batch

        async def follower(c: Any, nc: Any, stream: str, seq: int, n: int) -> Any:
            rows = await real(c, nc, stream, seq, n)
            if rows is None:
                return None
            return [m for m in rows if int(m.headers["Nats-Sequence"]) <= 2]  # behind

        monkeypatch.setattr(_observe, "_direct_batch", follower)
        rows, cursor = await _observe.read_new(c, stream, 1)
        assert [r[0] for r in rows] == [1, 2, 3, 4] and cursor == 5  # was [1, 2], 5
    finally:
        await b.aclose()


async def test_a_receive_pulls_again_for_a_message_its_consumer_had_not_applied(
    srv: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MSG-050 on a cluster: another client published three messages, this one's receive got
    two and "no messages" — the consumer's replica had not applied the third. The stream's
    leader has it past the consumer's delivered position: the receive pulls again. (Made
    here by storing the third just after the first pull was answered.)"""
    from videoflow_aio.adapters.nats import _pull

    b, other = backend(srv), None
    try:
        ch = make_channel("f", "r", "m", "work", "limits")
        sub = make_subscription(ch.channel, "w", ack_wait_seconds=10.0)
        await b.ensure_channel(ch, "op-c")
        await b.ensure_subscription(sub, "op-s")
        other = backend(srv, (b.names.stream_prefix, b.names.subject_prefix))
        await other.ensure_channel(ch, "op-c2")
        await publish(other, ch, "p0", "p1")
        c = b._c
        st = c.subs[sub.id]
        st.chan.spec = msgspec.structs.replace(st.chan.spec, replicas=3)  # as on a cluster
        real = _pull.pull
        calls = 0

        async def lagging(*args: Any) -> Any:
            nonlocal calls
            p = await real(*args)
            calls += 1
            if calls == 1:
                await publish(other, ch, "p2")  # stored; the pull above did not see it
            return p

        monkeypatch.setattr(_pull, "pull", lagging)
        got = await b.receive(sub.id, 3, 1 << 20, dl())
        assert [d.envelope.publication_id for d in got] == ["p0", "p1", "p2"]  # was p0, p1
    finally:
        await b.aclose()
        if other is not None:
            await other.aclose()
