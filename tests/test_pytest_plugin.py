"""The pytest plugin: virtual time is opt-in (marker, ini option, ``vclock``), keeps anyio's
choice of backend, and turns deadlocks into exceptions a test can catch or fail with.

Sample projects run in a subprocess on this repo's environment; the same traps in a fresh
downstream project (its own venv, pytest-asyncio in auto mode) are in
``test_plugin_downstream.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from _plugin_helpers import NO_LOOPTIME, run_pytest, write
from videoflow_aio.vtime import VirtualClock, current_clock


@pytest.mark.anyio
async def test_this_suite_opts_in_with_the_ini_option(
    request: pytest.FixtureRequest, anyio_backend: object, vclock: VirtualClock
) -> None:
    """pyproject.toml says ``vtime = true``; tests/conftest.py picks both backends."""
    assert request.config.getini("vtime") is True
    assert anyio_backend in ("asyncio", "trio")  # the conftest's plain value, untouched
    assert current_clock() is vclock
    await anyio.sleep(3600)
    assert vclock.monotonic() == 4600.0


_NOT_OPTED_IN = """
    import time

    import anyio
    import pytest
    from videoflow_aio.vtime import current_clock

    @pytest.mark.anyio
    async def test_plain(request, anyio_backend_name):
        assert "vclock" not in request.fixturenames
        with pytest.raises(RuntimeError):
            current_clock()
        t0 = time.monotonic()
        await anyio.sleep(0.02)
        assert time.monotonic() - t0 >= 0.02  # real time
"""

_OPT_IN = """
    import anyio
    import pytest
    import sniffio
    import trio.testing
    from videoflow_aio.vtime import VirtualTimeDeadlock, current_clock

    @pytest.mark.vtime
    async def test_marker(vclock, anyio_backend_name):
        assert sniffio.current_async_library() == anyio_backend_name
        assert current_clock() is vclock
        await anyio.sleep(3600)
        assert vclock.monotonic() == 4600.0

    @pytest.mark.anyio
    async def test_requesting_vclock(vclock):
        await anyio.sleep(5)
        assert vclock.monotonic() == 1005.0

    @pytest.mark.vtime
    @pytest.mark.parametrize("anyio_backend", ["trio"])
    async def test_direct_parametrize(anyio_backend, vclock):
        assert anyio_backend == "trio" and sniffio.current_async_library() == "trio"
        await anyio.sleep(10)
        assert vclock.monotonic() == 1010.0

    @pytest.mark.vtime
    @pytest.mark.parametrize("anyio_backend", ["asyncio"], indirect=True)
    async def test_indirect_parametrize(vclock):
        assert sniffio.current_async_library() == "asyncio"
        await anyio.sleep(10)
        assert vclock.monotonic() == 1010.0

    @pytest.mark.vtime
    @pytest.mark.parametrize("anyio_backend", [("asyncio", {"debug": True})])
    async def test_backend_options_are_kept(vclock):
        import asyncio
        assert asyncio.get_running_loop().get_debug()
        await anyio.sleep(10)
        assert vclock.monotonic() == 1010.0

    @pytest.mark.vtime
    @pytest.mark.parametrize("anyio_backend", [("trio", {"clock": trio.testing.MockClock()})])
    async def test_a_clock_in_the_options_is_refused():
        pass

    @pytest.mark.vtime(start=0.0, autojump=False)
    async def test_marker_options(vclock):
        assert vclock.monotonic() == 0.0 and not vclock.autojump
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.sleep, 5)
            await vclock.advance(5)
        assert vclock.monotonic() == 5.0

    @pytest.mark.vtime(speed=1)
    async def test_unknown_marker_option():
        pass

    @pytest.mark.vtime
    async def test_catching_a_deadlock():
        with pytest.raises(VirtualTimeDeadlock, match="every task is blocked"):
            await anyio.Event().wait()

    @pytest.mark.vtime
    async def test_a_deadlock_fails_the_test():
        await anyio.Event().wait()

    @pytest.mark.vtime
    async def test_manual_mode_without_advance(vclock):
        vclock.autojump = False
        await anyio.sleep(1)

    @pytest.mark.vtime
    async def test_advance_without_await(vclock):
        vclock.advance(10)  # the seed's plain call, inside a running loop: an error

    @pytest.fixture
    async def started(vclock):
        await anyio.sleep(10)  # an async fixture runs on the test's clock
        yield vclock.monotonic()
        await anyio.sleep(1)

    @pytest.mark.vtime
    async def test_async_fixture(started, vclock):
        assert started == 1010.0 and current_clock() is vclock

    @pytest.fixture
    async def stuck_teardown():
        yield 1
        await anyio.Event().wait()

    @pytest.mark.vtime
    async def test_stuck_fixture_teardown(stuck_teardown):
        pass

    @pytest.fixture(scope="module")
    async def module_wide():
        yield 1

    @pytest.mark.vtime
    async def test_module_scoped_async_generator_fixture(module_wide):
        pass

    @pytest.mark.vtime(False)
    @pytest.mark.anyio
    async def test_opted_out_but_requests_vclock(vclock):
        pass

    @pytest.mark.vtime
    @pytest.mark.asyncio
    async def test_also_claimed_by_pytest_asyncio():
        pass
"""

_MODULE_OPT_IN = """
    import anyio
    import pytest

    pytestmark = pytest.mark.vtime

    @pytest.fixture
    def anyio_backend():
        return "trio"  # anyio's way to pick one backend for a module

    async def test_module_marker_and_fixture(vclock, anyio_backend_name):
        assert anyio_backend_name == "trio"
        await anyio.sleep(86400)
        assert vclock.monotonic() == 87400.0

    @pytest.mark.vtime(False)
    @pytest.mark.anyio
    async def test_opted_out():
        import time
        t0 = time.monotonic()
        await anyio.sleep(0.02)
        assert time.monotonic() - t0 >= 0.02
"""


def _ids(name: str, backends: tuple[str, ...] = ("asyncio", "trio")) -> list[str]:
    return [f"{name}[{b}]" for b in backends]


def test_a_test_that_does_not_opt_in_is_unchanged(tmp_path: Path) -> None:
    write(tmp_path, {"test_plain.py": _NOT_OPTED_IN})
    with_plugin = run_pytest(sys.executable, tmp_path, *NO_LOOPTIME)
    without = run_pytest(sys.executable, tmp_path, *NO_LOOPTIME, "-p", "no:videoflow_aio")
    assert with_plugin.outcomes == without.outcomes, with_plugin.output
    assert with_plugin.outcomes and all(
        o.result == "passed" for o in with_plugin.outcomes.values()
    ), with_plugin.output


def test_opting_in_and_choosing_backends(tmp_path: Path) -> None:
    write(tmp_path, {"test_opt_in.py": _OPT_IN, "test_module.py": _MODULE_OPT_IN})
    run = run_pytest(sys.executable, tmp_path, *NO_LOOPTIME)
    passed = [
        *_ids("test_opt_in.py::test_marker"),
        *_ids("test_opt_in.py::test_requesting_vclock"),
        "test_opt_in.py::test_direct_parametrize[trio]",
        "test_opt_in.py::test_indirect_parametrize[asyncio]",
        "test_opt_in.py::test_backend_options_are_kept[anyio_backend0]",
        *_ids("test_opt_in.py::test_marker_options"),
        *_ids("test_opt_in.py::test_catching_a_deadlock"),
        *_ids("test_opt_in.py::test_async_fixture"),
        "test_module.py::test_module_marker_and_fixture",
        "test_module.py::test_opted_out",
    ]
    for test_id in passed:
        assert run.result(test_id) == "passed", f"{test_id}: {run.message(test_id)}"
    for test_id in _ids("test_opt_in.py::test_a_deadlock_fails_the_test") + _ids(
        "test_opt_in.py::test_manual_mode_without_advance"
    ):
        assert run.result(test_id) == "failed"
        assert "VirtualTimeDeadlock" in run.message(test_id)
    for test_id in _ids("test_opt_in.py::test_advance_without_await"):
        assert run.result(test_id) == "failed"
        assert "clock.advance(10.0) at" in run.message(test_id)
        assert "was never awaited" in run.message(test_id)
    refused = {  # usage errors: at setup ("error"), or at call once anyio_backend is known
        "test_a_clock_in_the_options_is_refused[anyio_backend0]": ("failed", "options set clock"),
        "test_unknown_marker_option": ("error", "unknown option(s) speed; it accepts start"),
        "test_module_scoped_async_generator_fixture": ("error", "'module_wide' has scope"),
        "test_opted_out_but_requests_vclock": ("error", "requests vclock but is marked"),
        "test_also_claimed_by_pytest_asyncio": ("error", "pytest-asyncio also claims"),
    }
    for name, (result, text) in refused.items():
        test_ids = [f"test_opt_in.py::{name}"] if "[" in name else _ids(f"test_opt_in.py::{name}")
        for test_id in test_ids:
            assert run.result(test_id) == result, f"{test_id}: {run.outcomes.get(test_id)}"
            assert text in run.message(test_id), run.message(test_id)
    for test_id in _ids("test_opt_in.py::test_stuck_fixture_teardown"):
        assert run.result(test_id) == "error"
        assert "failed on teardown with" in run.message(test_id)
        assert "VirtualTimeDeadlock" in run.message(test_id)


def test_the_ini_option_opts_in_every_anyio_test(tmp_path: Path) -> None:
    write(
        tmp_path,
        {
            "pytest.ini": "[pytest]\nvtime = true\n",
            "test_ini.py": """
                import anyio
                import pytest
                from videoflow_aio.vtime import current_clock

                @pytest.mark.anyio
                async def test_on_virtual_time(anyio_backend_name):
                    await anyio.sleep(3600)
                    assert current_clock().monotonic() == 4600.0
            """,
            "test_real.py": _NOT_OPTED_IN.replace(
                "import pytest\n", "import pytest\n\n    pytestmark = pytest.mark.vtime(False)\n"
            ),
        },
    )
    run = run_pytest(sys.executable, tmp_path, *NO_LOOPTIME)
    assert run.outcomes, run.output
    assert all(o.result == "passed" for o in run.outcomes.values()), run.output
    assert "test_ini.py::test_on_virtual_time[trio]" in run.outcomes
    assert "test_real.py::test_plain[trio]" in run.outcomes
