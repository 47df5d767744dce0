"""The trio internals seeded schedules rely on, pinned: a trio that changes them fails here
(and seeded trio runs refuse to start), never silently unseeded."""

from __future__ import annotations

import inspect

import anyio
import pytest
import trio
from trio._core import _run as trio_run

from _vtime_helpers import wake_order
from videoflow_aio import vtime
from videoflow_aio.vtime import _trio_schedule


def test_trio_still_shuffles_each_batch_with_its_module_prng_under_the_flag() -> None:
    assert isinstance(trio_run._ALLOW_DETERMINISTIC_SCHEDULING, bool)
    assert callable(trio_run._r.shuffle)
    source = inspect.getsource(trio_run.unrolled_run)
    for line in (
        "batch = list(runner.runq)",
        "if _ALLOW_DETERMINISTIC_SCHEDULING:",
        "batch.sort(key=lambda t: t._counter)",
        "_r.shuffle(batch)",
        "task = batch.pop()",
    ):
        assert line in source, f"trio's run loop changed: no {line!r}"
    assert "deadline_to_sleep_time" in source  # the clock hook virtual time relies on


def test_a_seeded_run_hands_trio_its_own_prng_back_even_when_it_fails() -> None:
    original, flag = trio_run._r, trio_run._ALLOW_DETERMINISTIC_SCHEDULING

    async def boom() -> None:
        await trio.sleep(1)
        raise KeyError("boom")

    vtime.run(wake_order, 6, backend="trio", seed=1)
    assert trio_run._r is original and trio_run._ALLOW_DETERMINISTIC_SCHEDULING is flag
    with pytest.raises(KeyError):
        vtime.run(boom, backend="trio", seed=1)
    assert trio_run._r is original and trio_run._ALLOW_DETERMINISTIC_SCHEDULING is flag


def test_another_trio_run_meanwhile_keeps_trio_s_own_order() -> None:
    """A plain trio run in another thread during a seeded run is not drawn into its seed
    (and does not disturb it)."""

    def plain_runs() -> set[tuple[int, ...]]:
        clock = trio.testing.MockClock(autojump_threshold=0)
        return {tuple(trio.run(wake_order, 6, clock=clock)) for _ in range(30)}

    async def seeded() -> tuple[list[int], set[tuple[int, ...]]]:
        first = await wake_order(6)
        others = await anyio.to_thread.run_sync(plain_runs)
        return first + await wake_order(6), others

    alone = vtime.run(seeded, backend="trio", seed=3)
    again = vtime.run(seeded, backend="trio", seed=3)
    assert alone[0] == again[0]
    assert len(alone[1]) > 1  # trio's own random order, not one seeded order


def test_a_trio_without_the_hooks_is_refused_loudly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(trio_run, "_ALLOW_DETERMINISTIC_SCHEDULING")
    with pytest.raises(RuntimeError, match="seeded schedules on trio need"):
        _trio_schedule.check_trio()
    with pytest.raises(RuntimeError, match="seeded schedules on trio need"):
        vtime.run(wake_order, 6, backend="trio", seed=1)
