"""The pytest plugin: anyio tests run twice (asyncio, trio) on a fresh virtual clock."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from videoflow_aio.vtime import VirtualClock, current_clock


@pytest.mark.anyio
async def test_this_suite_gets_the_plugins_backend(
    request: pytest.FixtureRequest, anyio_backend: object, vclock: VirtualClock
) -> None:
    """In tests/ the plugin's anyio_backend wins over anyio's own fixture."""
    defs = request._fixturemanager.getfixturedefs("anyio_backend", request.node)
    assert defs is not None
    assert defs[-1].func.__module__ == "videoflow_aio.testing._fixtures"
    assert isinstance(anyio_backend, tuple) and anyio_backend[0] in ("asyncio", "trio")
    assert current_clock() is vclock
    await anyio.sleep(3600)
    assert vclock.monotonic() == 4600.0


_SAMPLE = textwrap.dedent(
    """
    import anyio
    import pytest
    from videoflow_aio.vtime import current_clock

    seen = []

    @pytest.fixture
    async def started(vclock):
        await anyio.sleep(10)  # an async fixture runs on the same virtual loop
        return vclock.monotonic()

    @pytest.mark.anyio
    async def test_one(vclock, started, anyio_backend_name):
        assert started == 1010.0
        assert current_clock() is vclock
        await anyio.sleep(86400)
        seen.append((anyio_backend_name, vclock.monotonic()))

    @pytest.mark.anyio
    async def test_two(vclock):
        assert vclock.monotonic() == 1000.0  # a fresh clock for each test
        await anyio.sleep(1)

    @pytest.mark.anyio
    async def test_deadlock():
        await anyio.Event().wait()

    @pytest.mark.anyio
    async def test_manual(vclock):
        vclock.autojump = False
        await anyio.sleep(1)

    @pytest.fixture
    async def stuck_teardown():
        yield 1
        await anyio.Event().wait()  # on trio an unguarded deadlock here hung the session

    @pytest.mark.anyio
    async def test_stuck_fixture(stuck_teardown):
        pass

    def test_last():
        assert sorted(seen) == [("asyncio", 87410.0), ("trio", 87410.0)]
    """
)


def test_plugin_in_a_fresh_pytest_run(tmp_path: Path) -> None:
    (tmp_path / "test_sample.py").write_text(_SAMPLE)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-rA",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:looptime_plugin",
            "-p",
            "no:looptime_chronometers",
            "-p",
            "no:looptime_timeproxies",
            str(tmp_path / "test_sample.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = proc.stdout
    for name in ("test_one", "test_two"):
        for backend in ("asyncio", "trio"):
            assert f"PASSED test_sample.py::{name}[{backend}]" in out, out
    for backend in ("asyncio", "trio"):
        assert f"FAILED test_sample.py::test_deadlock[{backend}] - " in out, out
        assert f"FAILED test_sample.py::test_manual[{backend}] - " in out, out
        assert f"ERROR test_sample.py::test_stuck_fixture[{backend}] - " in out, out
    assert "PASSED test_sample.py::test_last" in out, out
    assert out.count("VirtualTimeDeadlock") >= 6, out
    assert "4 failed, 7 passed, 2 errors" in out, out
