"""What stops a jump: worker threads in flight, real I/O pending (asyncio and trio)."""

from __future__ import annotations

import asyncio
import subprocess
import time

import anyio
import anyio.from_thread
import pytest

from _vtime_helpers import DelayedEchoServer, unqueued_seconds
from videoflow_aio.vtime import VirtualClock

pytestmark = pytest.mark.anyio


def _block(seconds: float) -> str:
    time.sleep(seconds)  # the deliberate real blocking call inside a worker thread
    return "done"


async def test_no_jump_while_a_worker_thread_runs(vclock: VirtualClock) -> None:
    t0 = vclock.monotonic()
    with anyio.fail_after(1):
        assert await anyio.to_thread.run_sync(_block, 0.2) == "done"
    assert vclock.monotonic() == t0  # virtual time stood still while the thread ran


async def test_sleepers_wait_for_the_thread_before_time_jumps(vclock: VirtualClock) -> None:
    events: list[str] = []

    async def sleeper() -> None:
        await anyio.sleep(0.5)
        events.append(f"sleeper woke at {vclock.monotonic()}")

    async def worker() -> None:
        await anyio.to_thread.run_sync(_block, 0.1)
        events.append("thread done")

    async with anyio.create_task_group() as tg:
        tg.start_soon(worker)
        tg.start_soon(sleeper)
    assert events == ["thread done", "sleeper woke at 1000.5"]


async def test_a_thread_waiting_for_a_virtual_sleep_does_not_hold_the_clock(
    vclock: VirtualClock,
) -> None:
    def work() -> str:
        anyio.from_thread.run(anyio.sleep, 1)  # the thread waits for the loop: time may move
        return _block(0.05)  # working again: the clock holds (else fail_after(5) expires)

    with anyio.fail_after(5):
        assert await anyio.to_thread.run_sync(work) == "done"
    assert vclock.monotonic() == 1001.0


async def test_run_in_executor_holds_the_clock(
    anyio_backend_name: str, vclock: VirtualClock
) -> None:
    if anyio_backend_name != "asyncio":
        pytest.skip("asyncio executor API")
    loop = asyncio.get_running_loop()
    with anyio.fail_after(1):
        assert await loop.run_in_executor(None, _block, 0.2) == "done"
        assert await asyncio.to_thread(_block, 0.05) == "done"
    assert vclock.monotonic() == 1000.0


async def test_loopback_round_trip_does_not_time_out_spuriously(vclock: VirtualClock) -> None:
    """A real peer answering after 0.15 real s, inside a 1 s timeout, with a busy timer."""
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await anyio.sleep(0.01)
            ticks += 1

    with DelayedEchoServer(delay=0.15) as server:
        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker)
            with anyio.fail_after(1):
                async with await anyio.connect_tcp("127.0.0.1", server.port) as stream:
                    await stream.send(b"ping")
                    assert await stream.receive() == b"ping"
            tg.cancel_scope.cancel()
    assert vclock.monotonic() - 1000.0 < 1.0


async def test_silent_peer_still_times_out(vclock: VirtualClock) -> None:
    # the loop counts real silence from the first moment it sat idle at this virtual
    # instant (the connect may be that moment), so the wall clock starts before it
    wall0 = time.perf_counter()  # wall-clock: the jump waits for real silence
    with DelayedEchoServer(delay=0.0, reply=False) as server:
        async with await anyio.connect_tcp("127.0.0.1", server.port) as stream:
            await stream.send(b"ping")
            with pytest.raises(TimeoutError):
                with anyio.fail_after(0.1):
                    await stream.receive()
            waited = time.perf_counter() - wall0  # wall-clock: as above
    assert vclock.monotonic() == 1000.1
    assert waited >= 0.09


async def test_a_deadline_set_after_real_io_at_one_instant_gets_its_own_real_seconds(
    vclock: VirtualClock,
) -> None:
    """At one virtual instant the loop first waits 1.2 real s for a slow peer (under a far
    deadline); a 1-s timeout set after that still gets 1 real s for a peer answering in
    0.05 s. (Counted from the first idle moment at the instant, the real wait already
    covered it: the timeout fired at once — an etcd TLS probe after gRPC's own failed
    connection attempts timed out without a byte sent.)"""
    with DelayedEchoServer(delay=1.2) as slow, DelayedEchoServer(delay=0.05) as quick:
        with anyio.fail_after(600):  # the head while the slow round trip waits
            t0 = vclock.monotonic()
            async with await anyio.connect_tcp("127.0.0.1", slow.port) as stream:
                await stream.send(b"a")
                assert await stream.receive() == b"a"
            assert vclock.monotonic() == t0  # 1.2 real s at one virtual instant
            async with await anyio.connect_tcp("127.0.0.1", quick.port) as stream:
                await stream.send(b"b")
                with anyio.fail_after(1):
                    assert await stream.receive() == b"b"
    assert vclock.monotonic() == t0


async def test_in_loop_server_round_trips_and_jumps_resume_after_close(
    vclock: VirtualClock,
) -> None:
    async def handle(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            await stream.send(await stream.receive())

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle)
        for _ in range(5):
            with anyio.fail_after(5):  # 5 real s at most: a loaded machine may be slow
                async with await anyio.connect_tcp("127.0.0.1", port) as client:
                    await client.send(b"x")
                    assert await client.receive() == b"x"
        tg.cancel_scope.cancel()
    wall0 = unqueued_seconds()  # with no socket left, jumps are instant
    await anyio.sleep(3600)
    assert unqueued_seconds() - wall0 < 0.5
    assert vclock.monotonic() == 4600.0


async def test_a_running_child_process_holds_the_clock(vclock: VirtualClock) -> None:
    # no pipes: on asyncio only the loop's child tracking (the exit arrives from a watcher
    # thread) keeps the clock from jumping; on trio, the wait on the process's pidfd
    with anyio.fail_after(1):
        process = await anyio.open_process(
            ["sleep", "0.2"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        assert await process.wait() == 0
    assert vclock.monotonic() - 1000.0 < 1.0
