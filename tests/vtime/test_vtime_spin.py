"""Tasks that poll with ``sleep(0)`` never let the loop idle: past ``spin_threshold`` busy
iterations at one instant, time moves to the next deadline (asyncio and trio)."""

from __future__ import annotations

import time

import anyio
import anyio.lowlevel
import anyio.to_thread
import pytest

from _vtime_helpers import BACKENDS, unqueued_seconds
from videoflow_aio import vtime
from videoflow_aio.memory.clock import FakeClock
from videoflow_aio.vtime import VirtualClock
from videoflow_aio.vtime._clock import DEFAULT_SPIN_THRESHOLD

pytestmark = pytest.mark.anyio


async def test_a_timeout_around_a_polling_loop_fires(vclock: VirtualClock) -> None:
    wall0 = unqueued_seconds()  # the spin must end, and quickly
    polls = 0
    with anyio.move_on_after(5) as scope:
        while True:
            await anyio.sleep(0)  # noqa: ASYNC115 - the polling idiom under test
            polls += 1
    assert scope.cancelled_caught
    assert vclock.monotonic() == 1005.0  # exactly the deadline: no overshoot
    assert DEFAULT_SPIN_THRESHOLD - 5 <= polls <= 2 * DEFAULT_SPIN_THRESHOLD + 5
    assert unqueued_seconds() - wall0 < 5.0


async def test_polling_for_a_flag_a_sleeper_sets(vclock: VirtualClock) -> None:
    vclock.spin_threshold = 100
    flag = anyio.Event()
    woke: list[float] = []

    async def setter() -> None:
        for _ in range(3):
            await anyio.sleep(1)
            woke.append(vclock.monotonic())
        flag.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(setter)
        while not flag.is_set():
            await anyio.lowlevel.checkpoint()
    assert woke == [1001.0, 1002.0, 1003.0]  # each jump lands on a deadline, in order
    assert vclock.monotonic() == 1003.0


@pytest.mark.parametrize(
    ("threshold", "iterations"),
    [(5000, 1000), (None, 3 * DEFAULT_SPIN_THRESHOLD)],
    ids=["under-the-threshold", "threshold-none"],
)
async def test_busy_phases_that_do_not_move_time(
    vclock: VirtualClock, threshold: int | None, iterations: int
) -> None:
    """Under the threshold, computation takes no virtual time; with ``None``, spinning
    freezes time however long it lasts."""
    vclock.spin_threshold = threshold
    woke: list[float] = []

    async def sleeper() -> None:
        await anyio.sleep(1)
        woke.append(vclock.monotonic())

    async with anyio.create_task_group() as tg:
        tg.start_soon(sleeper)
        for _ in range(iterations):
            await anyio.lowlevel.checkpoint()
        assert vclock.monotonic() == 1000.0 and woke == []
    assert woke == [1001.0]


async def test_spinning_never_outruns_a_worker_thread(vclock: VirtualClock) -> None:
    vclock.spin_threshold = 50
    done = anyio.Event()

    def work() -> None:
        time.sleep(0.05)  # the deliberate real blocking call inside a worker thread

    async def worker() -> None:
        await anyio.to_thread.run_sync(work)
        done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(worker)
        with anyio.fail_after(1):  # would expire if spinning jumped over the thread
            while not done.is_set():
                await anyio.lowlevel.checkpoint()
    assert vclock.monotonic() == 1000.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_finished_threads_result_reaches_its_task_before_a_spin_jump(
    backend: vtime.Backend,
) -> None:
    """The race behind a 1-in-300 failure of the test above. asyncio: the thread ended and
    reported (anyio's worker is idle again) and the spin count hit its threshold in the round
    before the waiting task ran. trio: the waiting task resumed and set the event, and the
    count hit its threshold before the spinner's next step saw it (1 to 5 runs in 300).
    Either way the clock jumped to the spinner's deadline. A thread that ended since the
    spinning began now gives its result a whole threshold to arrive."""

    def work() -> None:
        time.sleep(0.002)  # the deliberate real blocking call inside a worker thread

    async def main(clock: VirtualClock) -> float:
        done = anyio.Event()

        async def worker() -> None:
            await anyio.to_thread.run_sync(work)
            done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(worker)
            with anyio.move_on_after(1):
                while not done.is_set():
                    await anyio.lowlevel.checkpoint()
        return clock.monotonic()

    for _ in range(300):
        clock = VirtualClock(spin_threshold=50)
        assert vtime.run(main, clock, backend=backend, clock=clock) == 1000.0


def test_a_trio_spin_jump_is_held_a_threshold_after_a_thread_returns() -> None:
    """The rule behind the fix, without the race: a ``to_thread.run_sync`` call that returned
    since the spinning began holds the jump; with none, the same spin jumps."""
    import trio

    from videoflow_aio.vtime._trio import TrioVirtualClock

    async def main(clock: VirtualClock) -> list[float]:
        trio_clock = trio.lowlevel.current_clock()
        assert isinstance(trio_clock, TrioVirtualClock)
        seen = []
        with trio.move_on_after(1):
            for _ in range(2):  # the run's first thread, then one after trio has counted one
                trio_clock._spin_begins()  # what the run loop notes at its first busy read
                await trio.to_thread.run_sync(lambda: None)
                seen.append(trio_clock._spin_jump())  # held: the call returned meanwhile
            trio_clock._spin_begins()
            seen.append(trio_clock._spin_jump())  # jumps to the deadline
        return seen

    clock = VirtualClock()
    assert vtime.run(main, clock, backend="trio", clock=clock) == [1000.0, 1000.0, 1001.0]


async def test_manual_mode_spinning_stops_at_the_advance_horizon(vclock: VirtualClock) -> None:
    vclock.autojump = False
    vclock.spin_threshold = 100
    seen: list[float] = []
    vclock.at(2, lambda: seen.append(vclock.monotonic()))
    vclock.at(5, lambda: seen.append(vclock.monotonic()))

    async def advance() -> None:
        await vclock.advance(3)

    async with anyio.create_task_group() as tg:
        tg.start_soon(advance)
        for _ in range(2000):  # spinning while advance(3) waits: time moves, up to 3 only
            await anyio.lowlevel.checkpoint()
    assert seen == [1002.0]
    assert vclock.monotonic() == 1003.0


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "10"])
def test_spin_threshold_must_be_a_positive_int_or_none(bad: object) -> None:
    with pytest.raises(ValueError, match="spin_threshold"):
        VirtualClock(spin_threshold=bad)  # type: ignore[arg-type]
    clock = FakeClock()
    with pytest.raises(ValueError, match="spin_threshold"):
        clock.spin_threshold = bad  # type: ignore[assignment]
    assert clock.spin_threshold == DEFAULT_SPIN_THRESHOLD


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_lone_spinner_with_no_deadline_is_left_alone(backend: vtime.Backend) -> None:
    """Nothing to jump to: the loop keeps running it, as a real clock would."""

    async def main() -> float:
        current = vtime.current_clock()
        current.spin_threshold = 10
        for _ in range(500):
            await anyio.lowlevel.checkpoint()
        return current.monotonic()

    assert vtime.run(main, backend=backend) == 1000.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_bounded_loop_of_fresh_timeouts_never_jumps_to_them(backend: vtime.Backend) -> None:
    """Issue 26 item 12: each pass sets a timeout it drops a moment later; on a real clock the
    loop ends long before any of them, so time must not jump to one (before: 2×10⁷ s on
    asyncio, and timeouts fired on trio). Only a deadline that has stayed the next one for a
    whole ``spin_threshold`` of busy iterations is jumped to."""

    async def main() -> tuple[float, int]:
        clock = vtime.current_clock()
        clock.spin_threshold = 100  # 50 thresholds' worth of iterations, quickly
        fired = 0
        for _ in range(5000):
            with anyio.move_on_after(1e6) as scope:
                await anyio.sleep(0)  # noqa: ASYNC115 - the pattern under test
            fired += scope.cancelled_caught
        return clock.monotonic(), fired

    assert vtime.run(main, backend=backend) == (1000.0, 0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_deadline_set_before_a_bounded_loop_still_fires(backend: vtime.Backend) -> None:
    """The outer timeout stays the next deadline throughout: the spin rule still reaches it,
    while the inner, per-pass ones never fire."""

    async def main() -> tuple[float, int, bool]:
        clock = vtime.current_clock()
        clock.spin_threshold = 100
        fired = 0
        with anyio.move_on_after(5) as outer:
            while True:
                with anyio.move_on_after(1e6) as scope:
                    await anyio.sleep(0)  # noqa: ASYNC115 - the pattern under test
                fired += scope.cancelled_caught
        return clock.monotonic(), fired, outer.cancelled_caught

    assert vtime.run(main, backend=backend) == (1005.0, 0, True)
