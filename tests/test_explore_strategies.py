"""Hypothesis finds an order-dependent failure through the seed strategies and shrinks it:
to a small failing seed, or to the fewest reorderings."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings

import _planted
from _vtime_helpers import wake_order
from videoflow_aio import explore, vtime
from videoflow_aio.explore.strategies import schedules, seeds
from videoflow_aio.observe import ObservationLog
from videoflow_aio.vtime import Backend, VirtualClock


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_failing_seed_is_found_and_shrunk(backend: Backend) -> None:
    tried: list[tuple[int, bool]] = []

    @settings(max_examples=400, database=None, deadline=None, derandomize=True)
    @given(seed=seeds(max_value=500))
    def prop(seed: int) -> None:
        ctx = explore.Context(seed, explore.program_rng(seed), ObservationLog(), backend)
        try:
            vtime.run(_planted.toy_lease, ctx, backend=backend, seed=seed)
        except AssertionError:
            tried.append((seed, False))
            raise
        tried.append((seed, True))

    with pytest.raises(AssertionError, match="two leaders at once"):
        prop()
    shrunk = tried[-1]
    assert not shrunk[1]  # the last example run is the minimal failing one
    assert shrunk[0] <= min(seed for seed, ok in tried if not ok)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_failing_schedule_shrinks_to_one_swap(backend: Backend) -> None:
    seen: list[list[int]] = []

    @settings(
        max_examples=200,
        database=None,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(schedule=schedules())
    def prop(schedule: random.Random) -> None:
        order = vtime.run(wake_order, 3, backend=backend, clock=VirtualClock(seed=schedule))
        seen.append(order)
        assert order == [0, 1, 2]

    with pytest.raises(AssertionError):
        prop()
    minimal = seen[-1]
    assert sum(a != b for a, b in zip(minimal, [0, 1, 2], strict=True)) == 2, minimal
