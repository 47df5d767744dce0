"""The pytest plugin as users write their tests (issue 13): idioms beyond the ones the issue
names — class-based tests, fixtures of every scope, backend tuples with options, requesting
``vclock`` alone, ``-p no:anyio``, hypothesis, the ini option beside other async plugins.

Sample projects run in a subprocess on this repo's environment (``_plugin_helpers``); the
same with pytest-asyncio installed is in ``test_plugin_downstream.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from _plugin_helpers import NO_LOOPTIME, Run, run_pytest, write

_CONFTEST = """
    import pytest

    @pytest.fixture(
        params=[
            ("asyncio", {"debug": True}),
            ("trio", {"restrict_keyboard_interrupt_to_checkpoints": True}),
        ],
        ids=["asyncio", "trio"],
    )
    def anyio_backend(request):
        return request.param  # both backends, each with an option of its own
"""

_IDIOMS = """
    import asyncio

    import anyio
    import pytest
    import sniffio
    from hypothesis import given, settings, strategies as st
    from videoflow_aio.vtime import VirtualTimeDeadlock, current_clock

    @pytest.mark.vtime
    class TestClassBased:
        async def test_method(self, vclock):
            await anyio.sleep(10)
            assert vclock.monotonic() == 1010.0

        async def test_method_catches_a_deadlock(self):
            with pytest.raises(VirtualTimeDeadlock):
                await anyio.Event().wait()

        @pytest.mark.vtime(False)
        @pytest.mark.anyio
        async def test_method_opted_out(self):
            with pytest.raises(RuntimeError):
                current_clock()

        def test_a_sync_method_is_left_alone(self):
            pass

    class TestPytestmarkInAClass:
        pytestmark = pytest.mark.vtime(start=0.0)

        async def test_clock_options_from_the_class(self, vclock):
            assert vclock.monotonic() == 0.0 and current_clock() is vclock

    @pytest.fixture
    async def slept(vclock):
        await anyio.sleep(5)
        return vclock.monotonic()

    @pytest.fixture
    async def around(vclock):
        await anyio.sleep(1)
        yield "value"
        await anyio.sleep(1)

    @pytest.fixture(scope="module")
    def module_value():
        return "m"

    @pytest.fixture(scope="session")
    def session_value():
        return "s"

    @pytest.mark.vtime
    async def test_fixtures_of_every_scope(slept, around, module_value, session_value, vclock):
        assert (slept, around, module_value, session_value) == (1005.0, "value", "m", "s")
        assert vclock.monotonic() == 1006.0

    @pytest.mark.vtime
    async def test_backend_options_are_kept(anyio_backend_name):
        assert sniffio.current_async_library() == anyio_backend_name
        if anyio_backend_name == "asyncio":
            assert asyncio.get_running_loop().get_debug()
        await anyio.sleep(100)
        assert current_clock().monotonic() == 1100.0

    @pytest.mark.anyio
    async def test_the_anyio_marker_alone_is_real_time():
        with pytest.raises(RuntimeError):
            current_clock()

    def test_a_sync_test_may_use_the_clock_standalone(vclock):
        vclock.advance(5)  # no loop drives it: the seed's plain call
        assert vclock.monotonic() == 1005.0

    async def test_requesting_vclock_alone(vclock):
        await anyio.sleep(2)
        assert current_clock() is vclock and vclock.monotonic() == 1002.0

    @pytest.mark.usefixtures("vclock")
    async def test_usefixtures_vclock():
        await anyio.sleep(7)
        assert current_clock().monotonic() == 1007.0

    @pytest.mark.vtime
    @pytest.mark.parametrize("seconds", [1, 2])
    async def test_other_parameters(seconds, vclock):
        await anyio.sleep(seconds)
        assert vclock.monotonic() == 1000.0 + seconds

    @pytest.mark.vtime
    @given(st.integers(min_value=0, max_value=10**6))
    @settings(max_examples=5, deadline=None)
    async def test_hypothesis(seconds):
        t0 = anyio.current_time()
        await anyio.sleep(seconds)
        assert anyio.current_time() == t0 + seconds

    @pytest.mark.vtime
    @given(st.integers())
    @settings(max_examples=3, deadline=None)
    async def test_hypothesis_catches_a_deadlock(n):
        with pytest.raises(VirtualTimeDeadlock):
            await anyio.Event().wait()

    @pytest.mark.vtime
    @pytest.mark.xfail(raises=VirtualTimeDeadlock, strict=True)
    async def test_xfail_on_a_deadlock():
        await anyio.Event().wait()

    @pytest.mark.vtime
    async def test_a_polling_loop_ends(vclock):
        with anyio.move_on_after(3):
            while True:
                await anyio.sleep(0)
        assert vclock.monotonic() == 1003.0
"""


def _ids(name: str) -> list[str]:
    return [f"{name}[asyncio]", f"{name}[trio]"]


def _assert_all(run: Run, test_ids: list[str], result: str = "passed") -> None:
    for test_id in test_ids:
        assert run.result(test_id) == result, f"{test_id}: {run.message(test_id)}\n{run.output}"


def test_the_idioms_users_write(tmp_path: Path) -> None:
    write(tmp_path, {"conftest.py": _CONFTEST, "test_idioms.py": _IDIOMS})
    run = run_pytest(sys.executable, tmp_path, *NO_LOOPTIME)
    prefix = "test_idioms.py::"
    _assert_all(
        run,
        [
            *_ids("test_idioms/TestClassBased.py::" + "test_method"),
            *_ids("test_idioms/TestClassBased.py::" + "test_method_catches_a_deadlock"),
            *_ids("test_idioms/TestClassBased.py::" + "test_method_opted_out"),
            "test_idioms/TestClassBased.py::" + "test_a_sync_method_is_left_alone",
            *_ids("test_idioms/TestPytestmarkInAClass.py::" + "test_clock_options_from_the_class"),
            *_ids(prefix + "test_fixtures_of_every_scope"),
            *_ids(prefix + "test_backend_options_are_kept"),
            *_ids(prefix + "test_the_anyio_marker_alone_is_real_time"),
            prefix + "test_a_sync_test_may_use_the_clock_standalone",
            *_ids(prefix + "test_requesting_vclock_alone"),
            *_ids(prefix + "test_usefixtures_vclock"),
            *[
                f"{prefix}test_other_parameters[{b}-{s}]"
                for b in ("asyncio", "trio")
                for s in (1, 2)
            ],
            *_ids(prefix + "test_hypothesis"),
            *_ids(prefix + "test_hypothesis_catches_a_deadlock"),
            *_ids(prefix + "test_a_polling_loop_ends"),
        ],
    )
    _assert_all(run, _ids(prefix + "test_xfail_on_a_deadlock"), "skipped")  # JUnit: xfail
    assert len(run.outcomes) == 32, run.output


_WIDE_ASYNC_FIXTURES = """
    import anyio
    import pytest

    pytestmark = pytest.mark.vtime

    @pytest.fixture(scope="module")
    async def shared():
        return "started once"

    async def test_first(shared):
        await anyio.sleep(1)

    async def test_second(shared):
        await anyio.sleep(1)
"""


def test_a_wider_scoped_async_fixture_is_refused_with_the_reason(tmp_path: Path) -> None:
    """anyio keeps its event loop open for as long as an async fixture lives — a plain
    coroutine fixture as much as an async generator — so the next test would run on the
    first test's clock. Refused, naming the fixture (it used to blame an "async generator
    fixture" the project does not have, and only from the second test on)."""
    write(tmp_path, {"test_wide.py": _WIDE_ASYNC_FIXTURES})
    run = run_pytest(sys.executable, tmp_path, *NO_LOOPTIME)
    assert len(run.outcomes) == 4, run.output  # anyio's default: every installed backend
    for test_id, outcome in run.outcomes.items():
        assert outcome.result == "error", f"{test_id}: {outcome}"
        assert "async fixture 'shared' has scope 'module'" in outcome.message, outcome.message


_WITHOUT_ANYIO = """
    import anyio
    import pytest

    @pytest.mark.vtime
    async def test_marked():
        await anyio.sleep(1)

    async def test_requests_vclock(vclock):
        await anyio.sleep(1)

    def test_sync_vclock(vclock):
        vclock.advance(1)
        assert vclock.monotonic() == 1001.0
"""


def test_without_anyios_plugin_the_error_says_so(tmp_path: Path) -> None:
    write(tmp_path, {"test_no_anyio.py": _WITHOUT_ANYIO})
    run = run_pytest(sys.executable, tmp_path, *NO_LOOPTIME, "--strict-markers", "-p", "no:anyio")
    for name in ("test_marked", "test_requests_vclock"):
        test_id = f"test_no_anyio.py::{name}"
        assert run.result(test_id) == "error", f"{test_id}: {run.outcomes.get(test_id)}"
        assert "anyio's pytest plugin" in run.message(test_id), run.message(test_id)
    assert run.result("test_no_anyio.py::test_sync_vclock") == "passed"


_INI_AND_OTHER_MARKERS = {
    "pytest.ini": "[pytest]\nvtime = true\nmarkers =\n    asyncio: another async plugin's\n",
    "test_ini.py": """
        import anyio
        import pytest
        from videoflow_aio.vtime import current_clock

        @pytest.mark.anyio
        async def test_anyio_on_virtual_time():
            await anyio.sleep(100)
            assert current_clock().monotonic() == 1100.0

        @pytest.mark.asyncio
        def test_marked_for_another_plugin():
            pass  # not an anyio test: the ini option does not reach it

        def test_plain():
            pass
    """,
}


def test_the_ini_option_reaches_only_anyio_tests(tmp_path: Path) -> None:
    """``vtime = true`` means "every anyio test"; a test another async plugin runs (here
    marked ``asyncio``, as pytest-asyncio's strict mode wants) is not refused as if it had
    asked for virtual time."""
    write(tmp_path, _INI_AND_OTHER_MARKERS)
    run = run_pytest(sys.executable, tmp_path, *NO_LOOPTIME)
    assert all(o.result == "passed" for o in run.outcomes.values()), run.output
    assert len(run.outcomes) == 4, run.output
