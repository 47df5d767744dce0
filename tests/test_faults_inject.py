"""Seeded fault injection at barriers: ``barriers().inject(FaultInjector(rate, seed=...))``."""

from __future__ import annotations

import math
import random
from typing import Any

import anyio
import pytest

from videoflow_aio import faults, vtime
from videoflow_aio.contracts.errors import ValidationError
from videoflow_aio.vtime import Backend

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


async def _injected(seed: int) -> tuple[list[str], list[tuple[str, str, float]]]:
    with faults.isolated() as registry:
        injector = registry.inject(faults.FaultInjector(0.5, seed=seed))
        got = await _reach_many(40)
    return got, [(f.barrier, f.kind, f.pause) for f in injector.injected]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_same_seed_injects_the_same_faults(backend: Backend) -> None:
    # the same faults need the same order of arrival too: a seeded clock (trio shuffles)
    first, plan = vtime.run(_injected, 11, backend=backend, seed=3)
    assert vtime.run(_injected, 11, backend=backend, seed=3) == (first, plan)
    assert {outcome.split(":")[1] for outcome in first} == {"ok", "pause", "crash"}
    assert 0 < len(plan) < 40
    assert vtime.run(_injected, 12, backend=backend, seed=3)[1] != plan


async def test_rate_zero_never_and_rate_one_always() -> None:
    with faults.isolated() as registry:
        registry.inject(faults.FaultInjector(0.0, seed=1))
        assert all(o.endswith(":ok") for o in await _reach_many(20))
    with faults.isolated() as registry:
        registry.inject(faults.FaultInjector(1.0, seed=1, crash=1.0))
        assert all(o.endswith(":crash") for o in await _reach_many(20))
    with faults.isolated() as registry:
        injector = registry.inject(faults.FaultInjector(1.0, seed=1, crash=0.0, max_pause=2.0))
        assert not any(o.endswith(":crash") for o in await _reach_many(20))
        assert all(f.kind == "pause" and 0 <= f.pause < 2.0 for f in injector.injected)
        assert len(injector.injected) == 20


async def test_only_the_named_barriers_and_an_armed_barrier_wins() -> None:
    with faults.isolated() as registry:
        registry.inject(faults.FaultInjector(1.0, seed=1, crash=1.0, barriers=["other"]))
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
        registry.inject(faults.FaultInjector(1.0, seed=1, crash=1.0))
        registry.uninject()
        assert all(o.endswith(":ok") for o in await _reach_many(5))
        registry.inject(faults.FaultInjector(1.0, seed=1, crash=1.0))
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
    settings: dict[str, Any] = {"rate": 0.1, "seed": 1, **kwargs}
    with pytest.raises(ValidationError) as err:
        faults.FaultInjector(**settings)
    assert err.value.field == field
    registry = faults.Barriers()
    with pytest.raises(ValidationError):
        registry.inject(settings)  # type: ignore[arg-type]
    assert registry._injector is None


def test_a_random_instance_is_a_seed() -> None:
    injector = faults.FaultInjector(0.5, seed=random.Random(3))
    assert injector.rate == 0.5 and injector.injected == []
