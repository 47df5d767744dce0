"""A VirtualClock/FakeClock no loop drives: timers fire on advance(); binding and unbinding."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from _vtime_helpers import BACKENDS
from videoflow_aio import vtime
from videoflow_aio.memory.clock import FakeClock
from videoflow_aio.vtime import VirtualClock


def test_fake_clock_defaults_are_the_seeds() -> None:
    clock = FakeClock()
    assert clock.monotonic() == 1000.0
    assert clock.time() == clock.now() == 1_700_000_000.0
    assert clock.autojump is False
    assert isinstance(clock, VirtualClock)


def test_standalone_timers_fire_in_order_at_their_own_instant() -> None:
    clock = FakeClock(start=0.0, wall_start=100.0)
    seen: list[tuple[str, float, float]] = []
    for name, delay in (("c", 3.0), ("a", 1.0), ("b1", 2.0), ("b2", 2.0), ("late", 9.0)):
        clock.at(delay, lambda n=name: seen.append((n, clock.monotonic(), clock.time())))  # type: ignore[misc]
    clock.advance(5)  # the seed's plain call: no loop drives the clock, so it advances now
    assert seen == [("a", 1.0, 101.0), ("b1", 2.0, 102.0), ("b2", 2.0, 102.0), ("c", 3.0, 103.0)]
    assert clock.monotonic() == 5.0
    anyio.run(clock.advance, 4, backend="trio")
    assert seen[-1] == ("late", 9.0, 109.0)


def test_timer_set_by_a_timer_fires_within_the_same_advance() -> None:
    clock = FakeClock()
    seen: list[float] = []
    clock.at(1, lambda: clock.at(1, lambda: seen.append(clock.monotonic())))
    clock.advance(2)
    assert seen == [1002.0]


def test_a_failing_callback_does_not_stop_the_others(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    seen: list[int] = []
    clock.at(1, lambda: 1 / 0)  # type: ignore[arg-type,func-returns-value]
    clock.at(1, lambda: seen.append(1))
    clock.advance(1)
    assert seen == [1]
    assert "raised" in caplog.text


def test_bad_inputs() -> None:
    clock = FakeClock()
    with pytest.raises(ValueError):
        clock.advance(-0.5)
    with pytest.raises(ValueError):
        clock.at(float("nan"), lambda: None)
    fired: list[float] = []
    clock.at(-5, lambda: fired.append(clock.monotonic()))  # in the past: fires now
    clock.advance(0)
    assert fired == [1000.0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_timers_set_before_a_run_fire_inside_it_and_after_it(backend: vtime.Backend) -> None:
    clock = FakeClock()
    seen: list[tuple[str, float]] = []
    clock.at(5, lambda: seen.append(("before", clock.monotonic())))

    async def main() -> None:
        clock.at(1, lambda: seen.append(("inside", clock.monotonic())))
        await clock.advance(6)
        clock.at(10, lambda: seen.append(("left pending", clock.monotonic())))

    vtime.run(main, backend=backend, clock=clock)
    assert seen == [("inside", 1001.0), ("before", 1005.0)]
    # the loop is gone: the clock is standalone again and its timers fire on advance
    clock.at(1, lambda: seen.append(("after", clock.monotonic())))
    clock.advance(1)
    assert seen[-1] == ("after", 1007.0)


def test_a_standalone_advance_is_also_awaitable_anywhere() -> None:
    clock = FakeClock()
    seen: list[float] = []
    clock.at(2, lambda: seen.append(clock.monotonic()))
    pending = clock.advance(5)  # done by the call itself: awaiting it later is a no-op
    assert seen == [1002.0] and clock.monotonic() == 1005.0

    async def await_it() -> None:
        await pending

    asyncio.run(await_it())
    assert clock.monotonic() == 1005.0

    async def main() -> None:
        await clock.advance(5)  # awaited inside a loop that does not drive this clock

    anyio.run(main, backend="trio")
    assert clock.monotonic() == 1010.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_unawaited_advance_inside_the_loop_is_an_error(backend: vtime.Backend) -> None:
    async def forgets_await() -> None:
        vtime.current_clock().advance(10)  # the seed's spelling, inside the loop: lost
        await anyio.sleep(1)

    clock = VirtualClock()
    with (
        pytest.warns(RuntimeWarning, match="never awaited"),
        pytest.raises(RuntimeError, match=r"clock\.advance\(10\.0\) at .*test_vtime_standalone"),
    ):
        vtime.run(forgets_await, backend=backend, clock=clock)
    assert clock.monotonic() == 1001.0  # time did not move by 10

    with (
        pytest.warns(RuntimeWarning),
        pytest.raises(vtime.VirtualTimeDeadlock, match="was never awaited"),
    ):
        vtime.run(forgets_await, backend=backend, clock=FakeClock())  # manual: it deadlocks


def test_advance_on_a_clock_whose_loop_is_open_but_not_running_fails() -> None:
    clock = FakeClock()
    loop = vtime.new_event_loop(clock)
    try:
        with pytest.raises(RuntimeError, match="not running here"):
            clock.advance(1)
        assert clock.monotonic() == 1000.0
    finally:
        loop.close()
    clock.advance(1)  # the loop is closed: standalone again
    assert clock.monotonic() == 1001.0
