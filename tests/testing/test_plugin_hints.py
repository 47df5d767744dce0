"""What the plugin says when a test forgot an opt-in (issue 26, item 16).

- An anyio test that chose neither virtual nor real time and waited on real time gets one
  summary at the end of the run saying what to add; a ``vtime(False)`` marker, virtual
  time, or ``vtime_hint = 0`` silences it; it is no warning (``-W error`` passes).
- Under ``vtime = true``, an ``async def`` test without ``@pytest.mark.anyio`` fails saying
  to add it, not pytest's "install a suitable plugin".

Each project runs in a subprocess; the sample tests wait 0.1 s of real time at most (with a
threshold of 0.05 s), which is what the hint is about.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from _plugin_helpers import NO_LOOPTIME, run_pytest, write

pytestmark = pytest.mark.vtime(False)

_WAITS = """
    import anyio
    import pytest

    @pytest.fixture
    def anyio_backend():
        return "asyncio"

    @pytest.mark.anyio
    async def test_waits_on_real_time():
        await anyio.sleep(0.1)

    @pytest.mark.anyio
    async def test_quick():
        await anyio.sleep(0)
"""

_CHOSE_REAL_TIME = """
    import anyio
    import pytest

    pytestmark = pytest.mark.vtime(False)

    @pytest.fixture
    def anyio_backend():
        return "asyncio"

    @pytest.mark.anyio
    async def test_real_on_purpose():
        await anyio.sleep(0.1)
"""

HINT = "videoflow_aio: real time"

_UNMARKED = """
    import anyio
    import pytest

    async def test_forgot_the_marker():
        await anyio.sleep(1)

    @pytest.mark.anyio
    async def test_marked():
        await anyio.sleep(1)
"""


def test_an_undecided_anyio_test_waiting_on_real_time_gets_one_hint(tmp_path: Path) -> None:
    """One run: the undecided test is named, the one that chose real time is not; no
    warning (``-W error``); without ``vtime = true`` an unmarked async test is left to
    pytest (no message of ours)."""
    write(
        tmp_path,
        {
            "pytest.ini": "[pytest]\nvtime_hint = 0.05\n",
            "test_sample.py": _WAITS,
            "test_real.py": _CHOSE_REAL_TIME,
            "test_u.py": _UNMARKED.split("@pytest")[0],
        },
    )
    run = run_pytest(sys.executable, tmp_path, *NO_LOOPTIME, "-W", "error")
    for test_id in (
        "test_sample.py::test_waits_on_real_time",
        "test_sample.py::test_quick",
        "test_real.py::test_real_on_purpose",
    ):
        assert run.result(test_id) == "passed", run.output
    assert run.output.count(HINT) == 1, run.output
    assert "1 anyio test(s) waited" in run.output
    assert "test_sample.py::test_waits_on_real_time" in run.output.split(HINT)[1]
    assert "test_real_on_purpose" not in run.output.split(HINT)[1]
    assert "vtime = true" in run.output and "@pytest.mark.vtime(False)" in run.output
    assert "videoflow_aio" not in run.message("test_u.py::test_forgot_the_marker")


def test_no_hint_when_turned_off(tmp_path: Path) -> None:
    write(tmp_path, {"pytest.ini": "[pytest]\nvtime_hint = 0\n", "test_sample.py": _WAITS})
    run = run_pytest(sys.executable, tmp_path, *NO_LOOPTIME)
    assert run.returncode == 0 and HINT not in run.output, run.output


def test_a_bad_hint_threshold_is_a_usage_error(tmp_path: Path) -> None:
    write(tmp_path, {"pytest.ini": "[pytest]\nvtime_hint = soon\n", "test_s.py": _WAITS})
    run = run_pytest(sys.executable, tmp_path, *NO_LOOPTIME)
    assert run.returncode == 4, run.output
    assert "vtime_hint must be a number of seconds" in run.output
    assert "Traceback" not in run.output


def test_under_vtime_an_unmarked_async_test_is_told_to_add_the_anyio_marker(
    tmp_path: Path,
) -> None:
    """Under ``vtime = true``: the unmarked async test errors saying what to add; the marked
    one runs on virtual time, so nothing waits and no hint is printed."""
    write(
        tmp_path,
        {
            "pytest.ini": "[pytest]\nvtime = true\nvtime_hint = 0.05\n",
            "test_u.py": _UNMARKED,
            "test_sample.py": _WAITS,
        },
    )
    run = run_pytest(sys.executable, tmp_path, *NO_LOOPTIME)
    assert run.result("test_u.py::test_forgot_the_marker") == "error", run.output  # at setup
    message = run.message("test_u.py::test_forgot_the_marker")
    assert "@pytest.mark.anyio" in message, message
    assert "install a suitable plugin" not in run.output
    marked = [k for k in run.outcomes if k.startswith("test_u.py::test_marked")]
    assert marked and all(run.result(k) == "passed" for k in marked), run.output
    assert run.result("test_sample.py::test_waits_on_real_time") == "passed", run.output
    assert HINT not in run.output
