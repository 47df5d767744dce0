"""Virtual time: autojump, manual mode, exactness, FIFO, deadlocks — on asyncio and trio."""

from __future__ import annotations

import asyncio
import functools
import math
import operator

import anyio
import anyio.lowlevel
import pytest
import trio

from _vtime_helpers import BACKENDS, blocked_seconds, unqueued_seconds
from videoflow_aio import vtime
from videoflow_aio.memory.clock import FakeClock
from videoflow_aio.vtime import VirtualClock, VirtualTimeDeadlock, current_clock

pytestmark = pytest.mark.anyio


async def test_the_test_runs_on_its_fresh_virtual_clock(vclock: VirtualClock) -> None:
    assert current_clock() is vclock
    assert anyio.current_time() == vclock.monotonic() == 1000.0
    assert vclock.time() == vclock.now() == 1_700_000_000.0


async def test_autojump_a_virtual_day_takes_no_wall_time(vclock: VirtualClock) -> None:
    blocked0 = blocked_seconds()
    for _ in range(24 * 60):
        await anyio.sleep(60)
    assert vclock.monotonic() == 1000.0 + 86400.0
    assert vclock.time() == 1_700_000_000.0 + 86400.0
    # no real wait: wall time minus CPU time and run-queue time (the wall-clock bound alone
    # failed at 2.06 s on a saturated 2-core machine)
    assert blocked_seconds() - blocked0 < 2.0


async def test_sleep_wakes_exactly_at_now_plus_delay() -> None:
    """No rounding, no early firing: each wake reads exactly the float ``t + d``."""
    start = anyio.current_time()
    expected = start
    for _ in range(1000):
        before = anyio.current_time()
        await anyio.sleep(0.0005)
        assert anyio.current_time() == before + 0.0005
        expected += 0.0005
    end = anyio.current_time()
    assert end == expected == functools.reduce(operator.add, [0.0005] * 1000, start)
    # the only difference from 0.5 is the program's own float additions (at t≈1000 one
    # ulp is 1.1e-13 s); the clock adds nothing — the stub drifted a further ulp per jump
    assert abs((end - start) - 0.5) < 1e-10


async def test_binary_delays_accumulate_exactly() -> None:
    start = anyio.current_time()
    for _ in range(1000):
        await anyio.sleep(2.0**-11)  # 0.48828125 ms, exactly representable
    assert anyio.current_time() - start == 1000 * 2.0**-11


async def test_timeouts_fire_exactly_at_their_deadline() -> None:
    t0 = anyio.current_time()
    with anyio.move_on_after(1.25) as scope:
        await anyio.sleep(10)
    assert scope.cancelled_caught
    assert anyio.current_time() == t0 + 1.25
    with anyio.fail_after(5):
        await anyio.sleep(4.999999)  # just inside: must not expire
    assert anyio.current_time() == t0 + 1.25 + 4.999999


#: unseeded order on purpose (kept so under pytest --vtime-seeds)
FIFO = pytest.mark.vtime(seed=None)


@FIFO
async def test_timer_callbacks_with_equal_deadlines_fire_in_order(vclock: VirtualClock) -> None:
    fired: list[tuple[int, float]] = []
    for i in range(50):
        vclock.at(2.0 if i % 2 else 1.0, lambda i=i: fired.append((i, vclock.monotonic())))  # type: ignore[misc]
    await anyio.sleep(3)
    ones = [i for i, t in fired if t == 1001.0]
    twos = [i for i, t in fired if t == 1002.0]
    assert ones == list(range(0, 50, 2)) and twos == list(range(1, 50, 2))
    assert [t for _, t in fired] == sorted(t for _, t in fired)


@FIFO
async def test_asyncio_call_later_equal_deadlines_fifo(anyio_backend_name: str) -> None:
    if anyio_backend_name != "asyncio":
        pytest.skip("asyncio loop API")
    loop = asyncio.get_running_loop()
    order: list[int] = []
    now = loop.time()
    for i in range(100):
        if i % 3 == 0:
            loop.call_at(now + 0.5, order.append, i)
        else:
            loop.call_later(0.5, order.append, i)
    await anyio.sleep(1)
    assert order == list(range(100))


async def test_cancelled_timers_are_purged_without_losing_or_repeating_any(
    anyio_backend_name: str,
) -> None:
    if anyio_backend_name != "asyncio":
        pytest.skip("asyncio loop API")
    loop = asyncio.get_running_loop()
    fired: list[int] = []
    handles = [loop.call_later(1 + i * 0.001, fired.append, i) for i in range(300)]
    for handle in handles[50:]:
        handle.cancel()  # most of the heap, behind live timers, is cancelled: purged when idle
    await anyio.sleep(2)
    assert fired == list(range(50))


@FIFO
async def test_sleepers_wake_in_deadline_order_then_fifo(anyio_backend_name: str) -> None:
    woke: list[tuple[float, int]] = []

    async def sleeper(i: int, delay: float) -> None:
        await anyio.sleep(delay)
        woke.append((anyio.current_time(), i))

    async with anyio.create_task_group() as tg:
        for i in range(40):
            tg.start_soon(sleeper, i, (i * 7 % 5) * 0.25 + 0.25)
    times = [t for t, _ in woke]
    assert times == sorted(times)
    if anyio_backend_name == "asyncio":  # trio itself randomizes tasks woken together
        assert woke == sorted(woke)


async def test_manual_mode_moves_only_on_advance(vclock: VirtualClock) -> None:
    vclock.autojump = False
    woke: list[float] = []

    async def sleeper(delay: float) -> None:
        await anyio.sleep(delay)
        woke.append(anyio.current_time())

    async with anyio.create_task_group() as tg:
        for d in (5.0, 1.0, 3.0):
            tg.start_soon(sleeper, d)
        await anyio.lowlevel.checkpoint()
        await vclock.advance(2.5)
        assert vclock.monotonic() == 1002.5 and woke == [1001.0]
        await vclock.advance(2.5)
        assert vclock.monotonic() == 1005.0
        await vclock.advance(0)
    assert woke == [1001.0, 1003.0, 1005.0]


async def test_switching_to_manual_later_still_fires_due_timers(vclock: VirtualClock) -> None:
    await anyio.sleep(10)
    vclock.autojump = False
    event = anyio.Event()
    vclock.at(0, event.set)  # due now, though advance() never reached 1010
    with anyio.fail_after(1):
        await event.wait()
    assert vclock.monotonic() == 1010.0


async def test_advance_in_autojump_mode_moves_exactly(vclock: VirtualClock) -> None:
    await vclock.advance(12.5)
    assert vclock.monotonic() == 1012.5


async def test_advance_rejects_negative(vclock: VirtualClock) -> None:
    with pytest.raises(ValueError):
        await vclock.advance(-1)
    with pytest.raises(ValueError):
        await vclock.advance(math.nan)


# -- deadlocks (sync tests driving vtime.run, so the error is observable) ----------------


async def _wait_forever(flags: list[str]) -> None:
    try:
        await anyio.Event().wait()
    finally:
        flags.append("cleaned up")


@pytest.mark.parametrize("backend", BACKENDS)
def test_autojump_deadlock_raises_promptly_and_cleans_up(backend: vtime.Backend) -> None:
    flags: list[str] = []
    wall0 = unqueued_seconds()  # a deadlock must not hang or spin
    with pytest.raises(VirtualTimeDeadlock, match="no timer is set"):
        vtime.run(_wait_forever, flags, backend=backend)
    assert unqueued_seconds() - wall0 < 1.0
    assert flags == ["cleaned up"]


async def _sleep_without_advance() -> None:
    await anyio.sleep(1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_manual_mode_timer_nobody_advances_to_is_a_deadlock(backend: vtime.Backend) -> None:
    with pytest.raises(VirtualTimeDeadlock, match="manual mode"):
        vtime.run(_sleep_without_advance, backend=backend, clock=FakeClock())


@pytest.mark.parametrize("backend", BACKENDS)
def test_deadlock_after_advance_names_the_gap(backend: vtime.Backend) -> None:
    clock = FakeClock()

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.sleep, 10)
            await anyio.lowlevel.checkpoint()
            await clock.advance(4)

    with pytest.raises(VirtualTimeDeadlock, match=r"1010\.0.*1004\.0"):
        vtime.run(main, backend=backend, clock=clock)
    assert clock.monotonic() == 1004.0


# -- entry points ---------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_run_returns_the_result_and_passes_args(backend: vtime.Backend) -> None:
    async def main(a: int, b: int) -> tuple[int, float]:
        await anyio.sleep(30)
        return a + b, current_clock().monotonic()

    clock = VirtualClock(start=0.0)
    assert vtime.run(main, 2, 3, backend=backend, clock=clock) == (5, 30.0)
    assert clock.monotonic() == 30.0  # the clock keeps its time after the run


def test_run_rejects_unknown_backend() -> None:
    async def main() -> None:
        return None

    with pytest.raises(ValueError, match="unknown backend"):
        vtime.run(main, backend="curio")  # type: ignore[arg-type]  # the runtime check


def test_new_event_loop_as_runner_loop_factory() -> None:
    async def main() -> float:
        await asyncio.sleep(3600)
        return asyncio.get_running_loop().time()

    with asyncio.Runner(loop_factory=vtime.new_event_loop) as runner:
        assert runner.run(main()) == 4600.0


def test_loop_time_future_and_debug_stay_what_asyncio_says() -> None:
    """time(), create_future() and get_debug() are per-instance C-level callables: the same
    answers as the methods they replace, also after a jump and after set_debug()."""
    clock = VirtualClock(start=7.0)
    loop = vtime.new_event_loop(clock)
    try:
        assert loop.time() == 7.0
        fut = loop.create_future()
        assert isinstance(fut, asyncio.Future) and fut.get_loop() is loop
        assert loop.get_debug() is False
        loop.set_debug(True)
        assert loop.get_debug() is True
        loop.set_debug(False)
        assert loop.get_debug() is False

        async def main() -> float:
            await asyncio.sleep(3)
            return loop.time()

        assert loop.run_until_complete(main()) == 10.0 == clock.monotonic()
    finally:
        loop.close()


def test_trio_clock_used_directly_by_trio_run() -> None:
    clock = VirtualClock(start=5.0)

    async def main() -> float:
        assert current_clock() is clock
        await trio.sleep(100)
        with trio.move_on_after(2):
            await trio.sleep_forever()
        return trio.current_time()

    assert trio.run(main, clock=clock.trio_clock()) == 107.0


def test_current_clock_outside_a_virtual_loop_raises() -> None:
    with pytest.raises(RuntimeError):
        current_clock()

    async def main() -> None:
        current_clock()

    for backend in BACKENDS:
        with pytest.raises(RuntimeError, match="not on virtual time"):
            anyio.run(main, backend=backend)
