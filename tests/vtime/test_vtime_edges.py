"""Edges of the virtual-time loop that mutation testing found unpinned (``benchmarks/mutation``):
a timer set in the past never moves time back, a timer due now runs in the next round even
while tasks keep the loop busy, and the spin counter's exact count and its reset."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from videoflow_aio import vtime
from videoflow_aio.vtime import VirtualClock


@pytest.mark.parametrize("seed", [None, 7])
def test_a_timer_set_in_the_past_fires_now_and_never_moves_time_back(seed: int | None) -> None:
    async def main() -> tuple[float, float, float]:
        loop = asyncio.get_running_loop()
        start = loop.time()
        fired: asyncio.Future[float] = loop.create_future()
        loop.call_later(-5.0, lambda: fired.set_result(loop.time()))
        at = await fired  # nothing else is ready: the loop jumps to the timer
        await asyncio.sleep(1.0)
        return start, at, loop.time()

    start, at, later = vtime.run(main, seed=seed)
    assert at == start
    assert later == start + 1.0


def test_a_timer_due_now_runs_in_the_next_round_while_tasks_keep_the_loop_busy() -> None:
    async def main() -> int:
        loop = asyncio.get_running_loop()
        seen: list[int] = []
        polls = 0
        loop.call_later(0.0, lambda: seen.append(polls))
        for polls in range(1, 20):  # noqa: B007 - the lambda reads the current value
            await asyncio.sleep(0)
        return seen[0]

    assert vtime.run(main) <= 2


def _polls_per_jump(backend: vtime.Backend) -> list[int]:
    """Polls a lone sleep(0) spinner makes at each instant before time moves (threshold 10),
    across three jumps to the deadlines of a sleeper."""
    clock = VirtualClock(spin_threshold=10)

    async def main() -> list[int]:
        counts: list[int] = []

        async def sleeper() -> None:
            for _ in range(3):
                await anyio.sleep(1.0)

        async with anyio.create_task_group() as tg:
            tg.start_soon(sleeper)
            await anyio.sleep(0)  # noqa: ASYNC115 - one poll like the ones counted
            now, polls = anyio.current_time(), 0
            while len(counts) < 3:
                await anyio.sleep(0)  # noqa: ASYNC115 - the polling idiom under test
                polls += 1
                if anyio.current_time() != now:
                    counts.append(polls)
                    now, polls = anyio.current_time(), 0
        return counts

    return vtime.run(main, backend=backend, clock=clock)


@pytest.mark.parametrize(("backend", "polls"), [("asyncio", 10), ("trio", 13)])
def test_the_spin_counter_moves_time_after_the_same_count_at_every_instant(
    backend: vtime.Backend, polls: int
) -> None:
    # the first instant's count depends on where the spinner joined the round; after a jump
    # the count restarts: threshold 10 busy rounds (trio counts its clock reads)
    assert _polls_per_jump(backend)[1:] == [polls, polls]


def test_standalone_advance_fires_a_timer_due_exactly_at_its_target() -> None:
    clock = VirtualClock()
    fired: list[float] = []
    clock.at(2.0, lambda: fired.append(clock.monotonic()))
    clock.advance(1.0)
    assert fired == []
    clock.advance(1.0)  # exactly the timer's instant
    assert fired == [clock.monotonic()]
