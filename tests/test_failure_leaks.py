"""tests/_failure_leaks.py: a failed test's leaked socket is reported on it, not on the next."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

LEAKING = """
import gc
import socket


def test_fails_with_a_socket_in_its_frames():
    held = socket.socket()
    assert held is None


def test_next_collects():
    gc.collect()
"""


def _run(pytester: pytest.Pytester, *plugins: str) -> pytest.RunResult:
    pytester.makepyfile(test_leak=LEAKING)
    pytester.makeini("[pytest]\npythonpath = " + str(Path(__file__).parent))
    args = [a for p in plugins for a in ("-p", p)]
    return pytester.runpytest_subprocess(*args, "-p", "no:cacheprovider", "-W", "error")


def test_the_failed_test_is_blamed_for_its_leak(pytester: pytest.Pytester) -> None:
    result = _run(pytester, "_failure_leaks")
    result.assert_outcomes(failed=1, passed=1, errors=1)
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_fails_with_a_socket_in_its_frames*"])


def test_without_it_the_next_test_is_blamed(pytester: pytest.Pytester) -> None:
    """The hazard the plugin removes, shown on the same two tests."""
    result = _run(pytester)
    result.assert_outcomes(failed=2)
