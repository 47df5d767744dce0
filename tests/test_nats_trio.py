"""The NATS adapters used from trio, across ``adapters._trio_bridge`` (real server, real time).

Each test drives ``trio.run`` itself (the virtual-time plugin does not apply to a real
server). The MSG conformance cases run on the ``nats`` provider under both backends in
tests/test_conformance.py; these tests pin what the bridge itself must guarantee: the
nats-py connection and its background tasks live on the run's trio-asyncio loop, concurrent
trio tasks share it, cancellation from trio leaves the backend usable, failures map as under
asyncio, and a backend first used from asyncio is refused under trio with a reason.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
import trio

from _nats_helpers import backend
from _servers_fixtures import need_binary
from videoflow_aio.adapters._trio_bridge import _SHARED
from videoflow_aio.adapters.nats import CoreNatsMessagingBackend, JetStreamMessagingBackend
from videoflow_aio.adapters.nats._bridge import BRIDGED, _on_client_loop
from videoflow_aio.contracts import Known
from videoflow_aio.contracts.errors import BackendUnavailable, Unsupported
from videoflow_aio.contracts.messaging import (
    Accepted,
    Completed,
    SettleConfirmed,
    make_channel,
    make_envelope,
    make_subscription,
)
from videoflow_aio.testing.servers import ServerProcess, start_nats

pytestmark = pytest.mark.server


@pytest.fixture(scope="module")
def srv() -> Iterator[ServerProcess]:
    need_binary("nats-server")
    server = start_nats()
    yield server
    server.stop()


def _run(fn: Callable[[], Awaitable[Any]]) -> Any:
    return trio.run(fn)  # real clock: the server does not follow a virtual one


def _dl(s: float = 1.0) -> float:
    return trio.current_time() + s  # the bridge's asyncio loop reads the same clock


async def _chan_sub(b: Any) -> Any:
    ch = make_channel("f", "r", "n", "work", "limits")
    await b.ensure_channel(ch, "op-1")
    sub = make_subscription(ch.channel, "w", ack_wait_seconds=2.0)
    await b.ensure_subscription(sub, "op-1")
    return ch, sub


async def _noop(self: Any) -> None:
    pass


def test_every_contract_method_is_bridged() -> None:
    for cls in (JetStreamMessagingBackend, CoreNatsMessagingBackend):
        for name in BRIDGED:
            assert getattr(cls, name).__code__ is _on_client_loop(_noop).__code__, name
    assert {"publish", "receive", "settle", "aclose", "observe_subscription"} <= set(BRIDGED)


def test_jetstream_round_trip_from_trio_on_the_bridge_loop(srv: ServerProcess) -> None:
    async def main() -> None:
        b = backend(srv)
        ch, sub = await _chan_sub(b)
        env = make_envelope(ch.channel, "p1", b"frame")
        assert isinstance(await b.publish(env, _dl()), Accepted)
        got = await b.receive(sub.id, 8, 1 << 20, _dl())
        assert [d.envelope.body for d in got] == [b"frame"]
        assert isinstance(await b.settle(got[0].token, Completed(), "s1"), SettleConfirmed)
        o = await b.observe_subscription(sub.id)
        assert isinstance(o, Known) and o.value.ack_floor == 1 and o.value.leased == 0
        # the connection's reader/flusher tasks and the inbox subscription live on the
        # run's trio-asyncio loop (not on some other loop that never runs)
        loop = _SHARED.get().loop
        nc = b._nc
        for task in (nc._reading_task, nc._flusher_task):
            assert isinstance(task, asyncio.Task) and task.get_loop() is loop
        assert b._side.bridged and not b._side.direct
        await b.aclose()

    _run(main)


def test_concurrent_trio_tasks_share_the_connection(srv: ServerProcess) -> None:
    """A receive waiting in one trio task is woken by a publish from another: the pull reply
    arrives through the inbox subscription's callback on the bridge loop."""

    async def main() -> None:
        b = backend(srv)
        ch, sub = await _chan_sub(b)
        got: list[Any] = []

        async def consumer() -> None:
            got.extend(await b.receive(sub.id, 8, 1 << 20, _dl(3.0)))

        async with trio.open_nursery() as n:
            n.start_soon(consumer)
            await trio.sleep(0.2)
            assert not got
            assert isinstance(await b.publish(make_envelope(ch.channel, "p1"), _dl()), Accepted)
        assert [d.envelope.publication_id for d in got] == ["p1"]
        await b.aclose()

    _run(main)


def test_cancelled_receive_from_trio_leaves_the_backend_usable(srv: ServerProcess) -> None:
    async def main() -> None:
        b = backend(srv)
        ch, sub = await _chan_sub(b)
        with trio.move_on_after(0.2) as scope:
            await b.receive(sub.id, 8, 1 << 20, _dl(30.0))
        assert scope.cancelled_caught
        assert isinstance(await b.publish(make_envelope(ch.channel, "p1"), _dl()), Accepted)
        got = await b.receive(sub.id, 8, 1 << 20, _dl())  # the receive lock was released
        assert [d.envelope.publication_id for d in got] == ["p1"]
        await b.aclose()

    _run(main)


def test_core_nats_from_trio(srv: ServerProcess) -> None:
    """Core NATS: the subscription's callback fills the client queue on the bridge loop."""

    async def main() -> None:
        b = CoreNatsMessagingBackend(srv.url, subject_prefix="ctrio", client_queue_limit=2)
        ch, sub = await _chan_sub(b)
        for i in range(3):
            assert isinstance(await b.publish(make_envelope(ch.channel, f"p{i}"), _dl()), Accepted)
        got = await b.receive(sub.id, 8, 1 << 20, _dl())
        assert [d.envelope.publication_id for d in got] == ["p0", "p1"]
        o = await b.observe_subscription(sub.id)
        assert isinstance(o, Known) and o.value.dropped == 1
        await b.aclose()

    _run(main)


def test_unreachable_server_from_trio_is_backend_unavailable() -> None:
    async def main() -> None:
        b = JetStreamMessagingBackend("nats://127.0.0.1:1", request_timeout=0.2)
        with pytest.raises(BackendUnavailable):
            await b.channel_ids()
        c = CoreNatsMessagingBackend("nats://127.0.0.1:1", request_timeout=0.2)
        with pytest.raises(BackendUnavailable):
            await c.ensure_channel(make_channel("f", "r", "n", "work", "limits"), "op")

    _run(main)


def test_a_backend_first_used_from_asyncio_is_refused_under_trio() -> None:
    b = JetStreamMessagingBackend("nats://127.0.0.1:1", request_timeout=0.2)

    async def first() -> None:
        with pytest.raises(BackendUnavailable):
            await b.channel_ids()

    asyncio.run(first())

    async def then() -> None:
        with pytest.raises(Unsupported, match="first used from asyncio"):
            await b.channel_ids()

    _run(then)


def test_the_asyncio_path_does_not_load_the_bridge(srv: ServerProcess) -> None:
    code = f"""
        import asyncio, sys
        from videoflow_aio.adapters.nats import JetStreamMessagingBackend

        async def main():
            b = JetStreamMessagingBackend({srv.url!r}, stream_prefix="PL", subject_prefix="pl")
            await b.channel_ids()
            await b.aclose()
            return b._side.direct

        print(asyncio.run(main()), "trio_asyncio" in sys.modules)
        """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True False"
