"""Seeded fault injection at barriers: ``barriers().inject(rate, seed=...)``."""

from __future__ import annotations

import math
import random
from typing import Any

import anyio
import pytest

from videoflow_aio import faults
from videoflow_aio.contracts.errors import ValidationError

pytestmark = pytest.mark.vtime


async def _reach_many(n: int, name: str = "point") -> list[str]:
    """n tasks each reaching ``name`` once; what happened to each."""
    got: list[str] = []

    async def one(i: int) -> None:
        start = anyio.current_time()
        try:
            await faults.reach(name, i=i)
        except faults.SimulatedCrash:
            got.append(f"{i}:crash")
            return
        waited = anyio.current_time() - start
        got.append(f"{i}:pause" if waited else f"{i}:ok")

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)
    return got


async def test_the_same_seed_injects_the_same_faults() -> None:
    def plan(seed: int) -> list[tuple[str, str, float]]:
        return [(f.barrier, f.kind, f.pause) for f in injector.injected]

    with faults.isolated() as registry:
        injector = registry.inject(0.5, seed=11)
        first = await _reach_many(40)
        a = plan(11)
    with faults.isolated() as registry:
        injector = registry.inject(0.5, seed=11)
        assert await _reach_many(40) == first
        assert plan(11) == a
    kinds = {outcome.split(":")[1] for outcome in first}
    assert kinds == {"ok", "pause", "crash"}
    assert 0 < len(a) < 40


async def test_rate_zero_never_and_rate_one_always() -> None:
    with faults.isolated() as registry:
        registry.inject(0.0, seed=1)
        assert all(o.endswith(":ok") for o in await _reach_many(20))
    with faults.isolated() as registry:
        registry.inject(1.0, seed=1, crash=1.0)
        assert all(o.endswith(":crash") for o in await _reach_many(20))
    with faults.isolated() as registry:
        injector = registry.inject(1.0, seed=1, crash=0.0, max_pause=2.0)
        assert not any(o.endswith(":crash") for o in await _reach_many(20))
        assert all(f.kind == "pause" and 0 <= f.pause < 2.0 for f in injector.injected)
        assert len(injector.injected) == 20


async def test_only_the_named_barriers_and_an_armed_barrier_wins() -> None:
    with faults.isolated() as registry:
        registry.inject(1.0, seed=1, crash=1.0, barriers=["other"])
        assert registry.armed("other") and not registry.armed("point")
        assert all(o.endswith(":ok") for o in await _reach_many(5))
        barrier = registry.arm("other", crash=False)
        async with anyio.create_task_group() as tg:
            tg.start_soon(faults.reach, "other")
            await barrier.wait_paused()
            barrier.release()  # the armed barrier paused it; the injector did not crash it
    assert faults.barriers()._injector is None


async def test_isolated_drops_the_injector_and_uninject_stops_it() -> None:
    with faults.isolated() as registry:
        registry.inject(1.0, seed=1, crash=1.0)
        registry.uninject()
        assert all(o.endswith(":ok") for o in await _reach_many(5))
        registry.inject(1.0, seed=1, crash=1.0)
    assert all(o.endswith(":ok") for o in await _reach_many(5))


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"rate": -0.1}, "rate"),
        ({"rate": 1.5}, "rate"),
        ({"rate": math.nan}, "rate"),
        ({"rate": "0.1"}, "rate"),
        ({"crash": 2}, "crash"),
        ({"max_pause": -1}, "max_pause"),
        ({"max_pause": math.inf}, "max_pause"),
        ({"seed": -1}, "seed"),
        ({"seed": None}, "seed"),
        ({"seed": 1.5}, "seed"),
    ],
)
def test_bad_injection_settings_are_refused_and_change_nothing(
    kwargs: dict[str, Any], field: str
) -> None:
    registry = faults.Barriers()
    settings: dict[str, Any] = {"rate": 0.1, "seed": 1, **kwargs}
    with pytest.raises(ValidationError) as err:
        registry.inject(**settings)
    assert err.value.field == field
    assert registry._injector is None


def test_a_random_instance_is_a_seed() -> None:
    injector = faults.FaultInjector(0.5, seed=random.Random(3))
    assert injector.rate == 0.5 and injector.injected == []
