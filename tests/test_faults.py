"""Named barriers: pause, release, crash; free when unarmed; isolated registries."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import pytest

from videoflow_aio import faults


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    """Each test starts and ends with nothing armed in the process-wide registry: a barrier
    left armed parks the next test on this worker that reaches the same name."""
    faults.disarm()
    yield
    faults.disarm()


async def worker(name: str, trail: list[str]) -> None:
    trail.append(f"{name}:before")
    await faults.reach("point", who=name)
    trail.append(f"{name}:after")


@pytest.mark.anyio
async def test_unarmed_barrier_is_free_and_never_yields() -> None:
    trail: list[str] = []
    await worker("a", trail)
    assert trail == ["a:before", "a:after"]


@pytest.mark.anyio
async def test_pause_wait_release() -> None:
    trail: list[str] = []
    barrier = faults.arm("point")
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker, "a", trail)
        await barrier.wait_paused()
        assert trail == ["a:before"]
        assert barrier.paused == 1
        assert barrier.contexts == [{"who": "a"}]
        # time passes while the task is parked: it stays parked
        await anyio.sleep(3600)
        assert trail == ["a:before"]
        assert barrier.release() == 1
    assert trail == ["a:before", "a:after"]


@pytest.mark.anyio
async def test_only_the_armed_number_of_tasks_pause() -> None:
    trail: list[str] = []
    barrier = faults.arm("point", times=1)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker, "a", trail)
        await barrier.wait_paused()
        await worker("b", trail)  # the second task passes straight through
        assert trail == ["a:before", "b:before", "b:after"]
        barrier.release()
    assert barrier.hits == 1


@pytest.mark.anyio
async def test_two_tasks_parked_at_once() -> None:
    trail: list[str] = []
    barrier = faults.arm("point", times=2)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker, "a", trail)
        tg.start_soon(worker, "b", trail)
        await barrier.wait_paused(2)
        assert sorted(trail) == ["a:before", "b:before"]
        barrier.release()
    assert sorted(trail) == ["a:after", "a:before", "b:after", "b:before"]


@pytest.mark.anyio
async def test_crash_raises_simulated_crash_in_the_task() -> None:
    trail: list[str] = []
    barrier = faults.arm("point", crash=True)
    with pytest.raises(faults.SimulatedCrash) as info:
        await worker("a", trail)
    assert info.value.barrier == "point"
    assert trail == ["a:before"]
    assert barrier.hits == 1
    await worker("b", trail)  # disarmed after one hit
    assert trail[-1] == "b:after"


@pytest.mark.anyio
async def test_crash_is_not_swallowed_by_except_exception() -> None:
    faults.arm("point", crash=True)

    async def careless() -> str:
        try:
            await faults.reach("point")
        except Exception:  # code under test must not be able to swallow a crash
            return "swallowed"
        return "passed"

    with pytest.raises(faults.SimulatedCrash):
        await careless()


@pytest.mark.anyio
async def test_wait_reached_counts_crashes() -> None:
    barrier = faults.arm("point", crash=True)

    async def victim() -> None:
        with pytest.raises(faults.SimulatedCrash):
            await faults.reach("point")

    async with anyio.create_task_group() as tg:
        tg.start_soon(victim)
        await barrier.wait_reached()
    assert barrier.hits == 1


@pytest.mark.anyio
async def test_cancelled_parked_task_leaves_the_barrier() -> None:
    barrier = faults.arm("point")
    with anyio.move_on_after(5):
        await faults.reach("point")
    assert barrier.paused == 0


@pytest.mark.anyio
async def test_isolated_registry_does_not_leak() -> None:
    outer = faults.arm("point")
    with faults.isolated() as fresh:
        assert not fresh.armed("point")
        await faults.reach("point")  # not armed in the fresh registry: passes
    assert faults.barriers().armed("point")
    outer.release()


@pytest.mark.anyio
async def test_disarm_releases_parked_tasks() -> None:
    trail: list[str] = []
    barrier = faults.arm("point")
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker, "a", trail)
        await barrier.wait_paused()
        faults.disarm("point")
    assert trail == ["a:before", "a:after"]


def test_times_must_be_positive() -> None:
    with pytest.raises(ValueError):
        faults.arm("point", times=0)
