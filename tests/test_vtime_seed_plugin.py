"""The pytest plugin's seeds: ``vtime(seed=, jitter=)`` and ``--vtime-seeds N``."""

from __future__ import annotations

import sys
from pathlib import Path

from _plugin_helpers import NO_LOOPTIME, run_pytest, write

_PROJECT = {
    "conftest.py": """
        import pytest

        @pytest.fixture(params=["asyncio", "trio"])
        def anyio_backend(request):
            return request.param
    """,
    "test_seeds.py": """
        import anyio
        import pytest
        from videoflow_aio.vtime import current_clock

        ORDER = []

        @pytest.mark.vtime
        async def test_seeded(request):
            clock = current_clock()
            assert clock.seed == request.node.callspec.params.get("_vtime_seed")

        @pytest.mark.vtime(seed=None)
        async def test_needs_fifo():
            assert current_clock().seed is None

        @pytest.mark.vtime(seed=5, jitter=0.25)
        async def test_own_seed(vclock):
            assert (vclock.seed, vclock.jitter) == (5, 0.25)
            start = vclock.monotonic()
            await anyio.sleep(1)
            assert 1 <= vclock.monotonic() - start < 1.25

        @pytest.mark.vtime(seed="x")
        async def test_bad_seed():
            pass

        @pytest.mark.vtime(jitter=0.5)
        async def test_jitter_without_seed():
            pass

        @pytest.mark.vtime
        async def test_order_dependent():
            # a planted order assumption: fails under some seeds, never without one
            seen = []

            async def step(i):
                await anyio.sleep(1)
                seen.append(i)

            async with anyio.create_task_group() as tg:
                for i in range(3):
                    tg.start_soon(step, i)
            assert seen == [0, 1, 2]

        def test_sync():
            pass
    """,
}


def test_markers_take_a_seed_and_jitter_and_bad_values_fail_clearly(tmp_path: Path) -> None:
    write(tmp_path, _PROJECT)
    run = run_pytest(sys.executable, tmp_path, *NO_LOOPTIME)
    for backend in ("asyncio", "trio"):
        for name in ("test_seeded", "test_needs_fifo", "test_own_seed"):
            test_id = f"test_seeds.py::{name}[{backend}]"
            assert run.result(test_id) == "passed", run.message(test_id)
        for name, text in (
            ("test_bad_seed", "seed must be a non-negative int"),
            ("test_jitter_without_seed", "jitter needs a seed"),
        ):
            test_id = f"test_seeds.py::{name}[{backend}]"
            assert run.result(test_id) == "failed", run.message(test_id)
            assert text in run.message(test_id), run.message(test_id)
    assert run.result("test_seeds.py::test_order_dependent[asyncio]") == "passed"


def test_vtime_seeds_runs_each_virtual_time_test_under_n_seeds(tmp_path: Path) -> None:
    write(tmp_path, _PROJECT)
    run = run_pytest(sys.executable, tmp_path, *NO_LOOPTIME, "--vtime-seeds", "12")
    for backend in ("asyncio", "trio"):
        for seed in range(12):
            test_id = f"test_seeds.py::test_seeded[{backend}-seed{seed}]"
            assert run.result(test_id) == "passed", run.message(test_id)
        # a marker's own seed (None included) is kept: one item each
        assert run.result(f"test_seeds.py::test_needs_fifo[{backend}]") == "passed"
        assert run.result(f"test_seeds.py::test_own_seed[{backend}]") == "passed"
        results = [
            run.result(f"test_seeds.py::test_order_dependent[{backend}-seed{seed}]")
            for seed in range(12)
        ]
        assert "failed" in results and "passed" in results, results
    assert run.result("test_seeds.py::test_sync") == "passed"
    # the same seed fails the same way again: the failing item ids are the replay
    failing = sorted(t for t, o in run.outcomes.items() if o.result == "failed")
    again = run_pytest(sys.executable, tmp_path, *NO_LOOPTIME, "--vtime-seeds", "12")
    assert failing == sorted(t for t, o in again.outcomes.items() if o.result == "failed")


def test_vtime_seeds_must_be_a_positive_count(tmp_path: Path) -> None:
    write(tmp_path, _PROJECT)
    run = run_pytest(sys.executable, tmp_path, *NO_LOOPTIME, "--vtime-seeds", "0")
    assert run.returncode == 4 and "--vtime-seeds" in run.output, run.output
