"""Rules of the virtual-time loop that cosmic-ray's sampled mutants found unpinned
(``benchmarks/mutation/cosmic.py --area vtime``): a NaN deadline refused by the asyncio timer
API, a deadlock delivered into the main task of a loop run without a guard, a negative delay
due now in the order set, what a ``KeyboardInterrupt`` from a standalone timer leaves
pending, the real-time count restarting at each instant, and the count of cancelled timers
left in the heap."""

from __future__ import annotations

import asyncio
import math
from types import SimpleNamespace

import anyio
import pytest
import trio

from _vtime_helpers import BACKENDS
from videoflow_aio import vtime
from videoflow_aio.vtime import VirtualClock, VirtualTimeDeadlock, _clock, current_clock


def test_a_nan_deadline_is_refused_by_call_at_and_call_later() -> None:
    async def main() -> tuple[float, int]:
        loop = asyncio.get_running_loop()
        with pytest.raises(ValueError, match="NaN"):
            loop.call_at(math.nan, print)
        with pytest.raises(ValueError, match="NaN"):
            loop.call_later(math.nan, print)
        with pytest.raises(ValueError, match="NaN"):
            loop.call_later(math.inf - math.inf, print)
        await asyncio.sleep(1)  # nothing was scheduled: time moves as before
        return loop.time(), len(loop._vt_heap)  # type: ignore[attr-defined]

    assert vtime.run(main) == (1001.0, 0)


async def _waits_for_nothing() -> str:
    try:
        await anyio.Event().wait()
    except VirtualTimeDeadlock:
        return "caught at the await"
    return "woken"


def test_a_bare_asyncio_loop_delivers_a_deadlock_into_its_main_task() -> None:
    # no vtime.run or guard: the task run_until_complete runs gets it at its await, so
    # the program can handle it there (raised from run_until_complete it could not)
    loop = vtime.new_event_loop()
    try:
        assert loop.run_until_complete(_waits_for_nothing()) == "caught at the await"
        task = loop.create_task(_waits_for_nothing())
        assert loop.run_until_complete(task) == "caught at the await"
    finally:
        loop.close()
    with asyncio.Runner(loop_factory=vtime.new_event_loop) as runner:
        assert runner.run(_waits_for_nothing()) == "caught at the await"


def test_a_bare_trio_run_delivers_a_deadlock_into_its_main_task() -> None:
    clock = VirtualClock().trio_clock()
    assert trio.run(_waits_for_nothing, clock=clock) == "caught at the await"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_negative_delay_is_due_now_in_the_order_set(backend: vtime.Backend) -> None:
    # at() clamps a past deadline to now: equal to a zero delay's, so the order set holds
    async def main() -> list[tuple[str, float]]:
        clock = current_clock()
        fired: list[tuple[str, float]] = []
        clock.at(0, lambda: fired.append(("zero", clock.monotonic())))
        clock.at(-5, lambda: fired.append(("five ago", clock.monotonic())))
        clock.at(-0.5, lambda: fired.append(("half ago", clock.monotonic())))
        await anyio.sleep(1)
        return fired

    assert vtime.run(main, backend=backend) == [
        ("zero", 1000.0),
        ("five ago", 1000.0),
        ("half ago", 1000.0),
    ]


def test_a_negative_delay_on_a_standalone_clock_is_due_now_in_the_order_set() -> None:
    clock = VirtualClock()
    fired: list[str] = []
    clock.at(0, lambda: fired.append("zero"))
    clock.at(-5, lambda: fired.append("five ago"))
    clock.advance(0)
    assert fired == ["zero", "five ago"]


def test_a_keyboard_interrupt_from_a_standalone_timer_leaves_only_the_rest_pending() -> None:
    clock = VirtualClock()
    fired: list[tuple[str, float]] = []

    def interrupt() -> None:
        fired.append(("interrupt", clock.monotonic()))
        raise KeyboardInterrupt

    clock.at(1, lambda: fired.append(("before", clock.monotonic())))
    clock.at(2, interrupt)
    clock.at(2, lambda: fired.append(("same instant", clock.monotonic())))
    clock.at(3, lambda: fired.append(("later", clock.monotonic())))
    with pytest.raises(KeyboardInterrupt):
        clock.advance(5)
    assert fired == [("before", 1001.0), ("interrupt", 1002.0)]
    assert clock.monotonic() == 1002.0  # stopped at the instant that raised
    try:
        clock.advance(5)  # the interrupting timer is not fired again; the others are
    except KeyboardInterrupt:  # not out of the test: pytest would take it as Ctrl-C
        pytest.fail("the timer that raised KeyboardInterrupt fired again")
    assert fired[2:] == [("same instant", 1002.0), ("later", 1003.0)]
    assert clock.monotonic() == 1007.0


def test_real_wait_restarts_its_count_at_each_instant_and_each_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # with real I/O pending a jump of d virtual seconds waits d real seconds counted from
    # when the loop went idle at *this* instant with *this* deadline next (trio's jump()
    # moves the instant under an unchanged deadline)
    real = [50.0]
    monkeypatch.setattr(_clock, "time", SimpleNamespace(perf_counter=lambda: real[0]))
    wait = _clock.RealWait()
    assert wait.waited(1000.0, 1005.0) == 0.0
    real[0] = 52.0
    assert wait.waited(1000.0, 1005.0) == 2.0
    real[0] = 53.0
    assert wait.waited(1001.0, 1005.0) == 0.0  # time moved on: a new count
    real[0] = 54.0
    assert wait.waited(1001.0, 1004.0) == 0.0  # a new deadline: its own count
    real[0] = 56.0
    assert wait.waited(1001.0, 1004.0) == 2.0


@pytest.mark.parametrize("seed", [None, 7])
def test_the_count_of_cancelled_timers_in_the_heap_is_exact(seed: int | None) -> None:
    # the loop counts the cancelled timers still in its heap and compacts the heap when
    # they are over half of it: a fired timer is out of the heap, so its late cancel (as
    # asyncio.wait_for and advance() make in their cleanup) must not count, and a
    # compaction leaves none
    async def main() -> tuple[list[int], int, int]:
        loop = asyncio.get_running_loop()
        fired: list[int] = []
        handles = [loop.call_later(1.0, fired.append, i) for i in range(3)]
        handles.append(loop.call_at(loop.time(), fired.append, 3))
        await asyncio.sleep(2)
        for handle in handles:
            handle.cancel()
        await current_clock().advance(1)
        after_fired = loop._vt_cancelled  # type: ignore[attr-defined]
        for delay in [60.0] * 100 + [0.5]:
            loop.call_later(delay, print).cancel()
        await asyncio.sleep(1)  # idle: the head dropped, then 100 cancelled of 101: compacted
        return sorted(fired), after_fired, loop._vt_cancelled  # type: ignore[attr-defined]

    assert vtime.run(main, seed=seed) == ([0, 1, 2, 3], 0, 0)


@pytest.mark.parametrize(("start", "wall_start"), [(math.inf, 0.0), (0.0, math.nan)])
def test_a_clock_starts_at_finite_readings_only(start: float, wall_start: float) -> None:
    with pytest.raises(ValueError, match="finite"):
        VirtualClock(start=start, wall_start=wall_start)


async def _deadlock_message(drop_an_advance: bool) -> str:
    if drop_an_advance:
        current_clock().advance(10)  # dropped unawaited: time does not move
    try:
        await anyio.Event().wait()
    except VirtualTimeDeadlock as exc:
        return str(exc)
    return "woken"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_deadlock_report_names_a_dropped_advance_and_nothing_else(
    backend: vtime.Backend,
) -> None:
    # without a guard (vtime.run's) the report itself is the only place the mistake shows
    def run(drop: bool) -> str:
        if backend == "trio":
            clock = VirtualClock().trio_clock()
            return trio.run(_deadlock_message, drop, clock=clock)
        with asyncio.Runner(loop_factory=vtime.new_event_loop) as runner:
            return runner.run(_deadlock_message(drop))

    plain = run(False)
    assert plain.startswith("virtual-time deadlock") and "Note" not in plain
    with pytest.warns(RuntimeWarning, match="never awaited"):
        dropped = run(True)
    assert dropped.startswith("virtual-time deadlock")
    assert "Note: clock.advance(10.0) at" in dropped and "was never awaited" in dropped


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_cap_on_deadlock_reports_counts_at_one_instant_only(backend: vtime.Backend) -> None:
    # a program that swallows the report and blocks again at the same instant is stopped
    # after 1000 reports; one that swallows it and moves on gets every later one
    async def main() -> int:
        caught = 0
        for _ in range(1005):
            try:
                await anyio.Event().wait()
            except VirtualTimeDeadlock:
                caught += 1
            await anyio.sleep(1)
        return caught

    assert vtime.run(main, backend=backend) == 1005


def test_time_moves_again_after_the_default_executor_is_shut_down() -> None:
    async def main() -> tuple[int, float]:
        loop = asyncio.get_running_loop()
        assert await loop.run_in_executor(None, int, "7") == 7
        await loop.shutdown_default_executor()
        threads = loop._vt_threads  # type: ignore[attr-defined]
        if threads:
            return threads, loop.time()  # a thread still counted: the sleep would never end
        await asyncio.sleep(5)
        return threads, loop.time()

    assert vtime.run(main) == (0, 1005.0)


@pytest.mark.parametrize("seed", [None, 7])
def test_asyncio_sleep_returns_its_result(seed: int | None) -> None:
    # the unseeded loop wakes asyncio.sleep on an inlined path of its own
    async def main() -> tuple[object, object, float]:
        loop = asyncio.get_running_loop()
        given = await asyncio.sleep(1, result="given")
        plain: object = await asyncio.sleep(1, result=None)  # the default result
        return given, plain, loop.time()

    assert vtime.run(main, seed=seed) == ("given", None, 1002.0)
