"""Seeded schedules: ``VirtualClock(seed=, jitter=)`` / ``vtime.run(seed=, jitter=)``.

The same seed and program give the same order of same-instant work on asyncio and on trio;
different seeds reach every order; jitter fires timers late, never early, within the bound;
a seed survives whatever memory addresses a run happens to get.
"""

from __future__ import annotations

import asyncio
import functools
import math
import random
from typing import Any

import anyio
import pytest

from _vtime_helpers import wake_order
from videoflow_aio import vtime
from videoflow_aio.contracts.errors import ValidationError
from videoflow_aio.vtime import Backend, VirtualClock

BACKENDS: tuple[Backend, ...] = ("asyncio", "trio")


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_same_seed_gives_the_same_order_and_seeds_reach_every_order(backend: Backend) -> None:
    seen = {tuple(vtime.run(wake_order, 3, backend=backend, seed=s)) for s in range(60)}
    assert seen == {(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)}
    for s in (0, 7, 4711):
        first = vtime.run(wake_order, 8, backend=backend, seed=s)
        assert all(vtime.run(wake_order, 8, backend=backend, seed=s) == first for _ in range(3))


def test_unseeded_asyncio_stays_fifo() -> None:
    assert all(vtime.run(wake_order, 8) == list(range(8)) for _ in range(3))


class _Zeros(random.Random):
    """A PRNG whose every draw is 0.0: the plain (canonical) order."""

    def random(self) -> float:
        return 0.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_draws_of_zero_give_the_canonical_order(backend: Backend) -> None:
    # what a Hypothesis-controlled random shrinks to: tasks in the order they were started
    assert vtime.run(wake_order, 8, backend=backend, clock=VirtualClock(seed=_Zeros())) == list(
        range(8)
    )


async def _cancelled_group() -> list[int]:
    """Cancelling a task group wakes its tasks by iterating a set: in memory-address order."""
    out: list[int] = []

    async def parked(i: int) -> None:
        try:
            await anyio.sleep_forever()
        finally:
            out.append(i)

    async with anyio.create_task_group() as tg:
        for i in range(12):
            tg.start_soon(parked, i)
        await anyio.sleep(0.5)
        tg.cancel_scope.cancel()
    return out


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_seed_does_not_depend_on_memory_addresses(backend: Backend) -> None:
    first = vtime.run(_cancelled_group, backend=backend, seed=7)
    ballast: list[list[object]] = []
    for k in range(6):  # shift where the next run's objects land
        ballast.append([object() for _ in range(37 * k + 1)])
        assert vtime.run(_cancelled_group, backend=backend, seed=7) == first


async def _equal_deadline_callbacks() -> list[int]:
    loop = asyncio.get_running_loop()
    fired: list[int] = []
    when = loop.time() + 1
    for i in range(6):
        loop.call_at(when, fired.append, i)
    for i in range(6, 9):
        loop.call_soon(fired.append, i)
    await asyncio.sleep(2)
    return fired


def test_asyncio_callbacks_and_equal_deadline_timers_are_permuted() -> None:
    assert vtime.run(_equal_deadline_callbacks) == [6, 7, 8, 0, 1, 2, 3, 4, 5]
    runs = {tuple(vtime.run(_equal_deadline_callbacks, seed=s)) for s in range(20)}
    assert len(runs) > 10
    for order in runs:
        # call_soon callbacks run before time moves; the timers among themselves
        assert sorted(order[:3]) == [6, 7, 8] and sorted(order[3:]) == list(range(6))


@pytest.mark.parametrize("backend", BACKENDS)
def test_clock_timers_with_equal_deadlines_are_permuted(backend: Backend) -> None:
    async def main() -> list[int]:
        fired: list[int] = []
        clock = vtime.current_clock()
        for i in range(5):
            clock.at(1.0, functools.partial(fired.append, i))
        await anyio.sleep(2)
        return fired

    assert vtime.run(main, backend=backend) == list(range(5))  # unseeded: in the order set
    runs = {tuple(vtime.run(main, backend=backend, seed=s)) for s in range(20)}
    assert len(runs) > 5
    assert runs == {tuple(vtime.run(main, backend=backend, seed=s)) for s in range(20)}


def test_standalone_clock_timers_with_equal_deadlines_follow_the_seed() -> None:
    def fire(seed: int | None) -> list[tuple[int, float]]:
        clock = VirtualClock(seed=seed, autojump=False)
        fired: list[tuple[int, float]] = []

        def record(i: int) -> None:
            fired.append((i, clock.monotonic()))

        for i in range(6):
            clock.at(1.0 + (i % 2), functools.partial(record, i))
        clock.advance(5)
        return fired

    assert [i for i, _ in fire(None)] == [0, 2, 4, 1, 3, 5]
    seeded = fire(3)
    assert seeded == fire(3)
    assert {i for i, t in seeded if t == 1001.0} == {0, 2, 4}  # each group at its own instant
    assert {i for i, t in seeded if t == 1002.0} == {1, 3, 5}


@pytest.mark.parametrize("backend", BACKENDS)
def test_tasks_woken_together_by_an_event_run_in_seeded_order(backend: Backend) -> None:
    async def main() -> list[int]:
        event = anyio.Event()
        order: list[int] = []

        async def waiter(i: int) -> None:
            await event.wait()
            order.append(i)

        async with anyio.create_task_group() as tg:
            for i in range(5):
                tg.start_soon(waiter, i)
            await anyio.sleep(1)
            event.set()
        return order

    runs = [tuple(vtime.run(main, backend=backend, seed=s)) for s in range(20)]
    assert len(set(runs)) > 5
    assert runs == [tuple(vtime.run(main, backend=backend, seed=s)) for s in range(20)]


# -- jitter --------------------------------------------------------------------------------
async def _sleepers(jitter: float) -> list[tuple[float, float]]:
    """(deadline, woke at) of many sleeps."""
    got: list[tuple[float, float]] = []

    async def sleeper(d: float) -> None:
        for _ in range(20):
            start = anyio.current_time()
            await anyio.sleep(d)
            got.append((start + d, anyio.current_time()))

    async with anyio.create_task_group() as tg:
        for d in (0.25, 1.0, 3.0):
            tg.start_soon(sleeper, d)
    return got


@pytest.mark.parametrize("backend", BACKENDS)
def test_jitter_fires_timers_late_never_early_and_within_the_bound(backend: Backend) -> None:
    got = vtime.run(_sleepers, 0.1, backend=backend, seed=5, jitter=0.1)
    assert got == vtime.run(_sleepers, 0.1, backend=backend, seed=5, jitter=0.1)
    lateness = [woke - deadline for deadline, woke in got]
    assert min(lateness) >= 0
    assert max(lateness) < 0.1
    assert sum(late > 0 for late in lateness) > len(got) // 2
    exact = vtime.run(_sleepers, 0.0, backend=backend, seed=5)
    assert all(deadline == woke for deadline, woke in exact)


@pytest.mark.parametrize("backend", BACKENDS)
def test_jitter_never_overshoots_what_advance_allows_in_manual_mode(backend: Backend) -> None:
    async def main() -> list[float]:
        clock = vtime.current_clock()
        readings = []
        for _ in range(20):
            await clock.advance(1.0)
            readings.append(clock.monotonic())
        return readings

    clock = VirtualClock(autojump=False, seed=1, jitter=0.5)
    assert vtime.run(main, backend=backend, clock=clock) == [1001.0 + i for i in range(20)]


# -- bad input -----------------------------------------------------------------------------
@pytest.mark.parametrize("seed", ["1", 1.0, True, -1, [1]])
def test_a_seed_that_is_not_a_non_negative_int_is_refused(seed: Any) -> None:
    with pytest.raises(ValidationError, match="seed") as err:
        VirtualClock(seed=seed)
    assert err.value.field == "seed"
    with pytest.raises(ValidationError):
        vtime.run(wake_order, 1, seed=seed)


@pytest.mark.parametrize("jitter", [-0.1, math.nan, math.inf, "0.1", True])
def test_a_jitter_that_is_not_finite_seconds_is_refused(jitter: Any) -> None:
    with pytest.raises(ValidationError, match="jitter") as err:
        VirtualClock(seed=1, jitter=jitter)
    assert err.value.field == "jitter"


def test_jitter_needs_a_seed_and_run_takes_a_seed_or_a_clock() -> None:
    with pytest.raises(ValidationError, match="needs a seed"):
        VirtualClock(jitter=0.1)
    with pytest.raises(ValidationError, match="both a clock and seed"):
        vtime.run(wake_order, 1, clock=VirtualClock(), seed=1)
    with pytest.raises(ValidationError, match="both a clock and jitter"):
        vtime.run(wake_order, 1, clock=VirtualClock(seed=1), jitter=0.1)


def test_the_clock_says_its_seed_and_jitter() -> None:
    clock = VirtualClock(seed=42, jitter=0.25)
    assert (clock.seed, clock.jitter) == (42, 0.25)
    assert "seed=42" in repr(clock) and "jitter=0.25" in repr(clock)
    assert (VirtualClock().seed, VirtualClock().jitter) == (None, 0.0)
