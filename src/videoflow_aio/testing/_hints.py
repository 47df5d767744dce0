"""What the plugin says when a test forgot an opt-in.

- **An anyio test that waited on real time** without having chosen (no ``vtime`` marker
  either way, no ``vtime = true``, no ``vclock``): its call phase is measured (wall-clock
  minus CPU time: the time it spent waiting), and when that reaches the ini option
  ``vtime_hint`` (seconds, default 1.0; 0 turns it off) the end of the run prints one
  summary saying how to put such tests on virtual time — or to mark them
  ``pytest.mark.vtime(False)``, which silences it. It is a summary, not a warning: a project
  that runs with ``-W error`` and means real time is not broken by it.
- **An async test nobody runs** under ``vtime = true`` (an ``async def`` test without
  ``@pytest.mark.anyio``, ``anyio_backend``, a ``vtime`` marker, ``vclock``, or another async
  plugin's marker): it fails at setup saying to add ``@pytest.mark.anyio``, instead of
  pytest's "install a suitable plugin" although anyio's plugin is installed.

Measuring the wait is wall-clock work by nature, marked where done.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Generator

import pytest

from ._optin import INI, MARKER, PREFIX, choice

HINT_INI = "vtime_hint"
"""The ini option: seconds of real waiting in one test that trigger the hint (0: never)."""
HINT_DEFAULT = 1.0
_PROPERTY = "videoflow_aio_real_wait"
#: markers of other async test runners: a test carrying one is theirs, not forgotten
_OTHER_RUNNERS = ("asyncio", "trio", "curio", "tornado", "gen_test", "twisted")


def add_ini(parser: pytest.Parser) -> None:
    parser.addini(
        HINT_INI,
        type="string",
        default=str(HINT_DEFAULT),
        help="videoflow_aio: seconds of real waiting in an anyio test that did not choose "
        "virtual or real time before the run's summary suggests virtual time (0: never)",
    )


def _threshold(config: pytest.Config) -> float:
    text = str(config.getini(HINT_INI)).strip()
    try:
        value = float(text)
    except ValueError:
        raise pytest.UsageError(
            f"{PREFIX}the ini option {HINT_INI} must be a number of seconds, not {text!r}"
        ) from None
    if not value >= 0:
        raise pytest.UsageError(f"{PREFIX}the ini option {HINT_INI} must be >= 0, not {text!r}")
    return value


PLUGIN_NAME = "videoflow_aio_hints"


def _undecided(item: pytest.Item) -> bool:
    """An anyio test on real time that chose nothing (a ``vtime`` marker either way
    counts as a choice)."""
    if "anyio_backend" not in getattr(item, "fixturenames", ()):
        return False
    if item.get_closest_marker(MARKER) is not None:
        return False
    return not choice(item).enabled


class HintPlugin:
    """Registered per run by the plugin's ``pytest_configure``: measures, keeps, reports."""

    def __init__(self, config: pytest.Config) -> None:
        self.threshold = _threshold(config)  # a bad value is a usage error at start-up
        self.slow: list[tuple[str, float]] = []

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Generator[None, object, object]:
        """Record the real waiting of an undecided anyio test's call."""
        if not self.threshold or not _undecided(item):
            return (yield)
        wall, cpu = time.perf_counter(), time.process_time()  # wall-clock: the hint's measure
        try:
            return (yield)
        finally:
            waited = (time.perf_counter() - wall) - (time.process_time() - cpu)  # wall-clock
            item.user_properties.append((_PROPERTY, round(max(0.0, waited), 3)))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keep the tests that waited at least the threshold (reports of xdist workers
        carry the measure in ``user_properties``)."""
        if report.when != "call" or not self.threshold:
            return
        for name, value in report.user_properties:
            if name == _PROPERTY and isinstance(value, float | int) and value >= self.threshold:
                self.slow.append((report.nodeid, float(value)))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        """The one hint of the run, when any test waited long on real time."""
        if not self.slow:
            return
        slow = sorted(self.slow, key=lambda entry: -entry[1])
        total = sum(seconds for _, seconds in slow)
        out = terminalreporter
        out.write_sep("=", "videoflow_aio: real time", yellow=True)
        out.write_line(
            f"{len(slow)} anyio test(s) waited {total:.1f} s of real time "
            f"(each >= {self.threshold:g} s; slowest: {slow[0][0]}, {slow[0][1]:.1f} s)."
        )
        out.write_line(
            "To run them on virtual time (no real waiting), add `vtime = true` to the ini "
            "file ([pytest] or [tool.pytest.ini_options]), mark them @pytest.mark.vtime, or "
            "request the vclock fixture. Tests meant for real time: mark them "
            f"@pytest.mark.vtime(False) and this note goes away (`{HINT_INI} = 0` turns it "
            "off)."
        )


def refuse_unrun_async_tests(
    config: pytest.Config, items: list[pytest.Item]
) -> list[tuple[pytest.Item, str]]:
    """Under ``vtime = true``: the async tests no plugin will run, with what to add."""
    if not config.getini(INI):
        return []
    out: list[tuple[pytest.Item, str]] = []
    for item in items:
        if type(item) is not pytest.Function:  # a subclass: another plugin's item
            continue
        func = getattr(getattr(item.obj, "hypothesis", None), "inner_test", item.obj)
        if not inspect.iscoroutinefunction(func):
            continue
        if "anyio_backend" in item.fixturenames or item.get_closest_marker("anyio"):
            continue
        if any(item.get_closest_marker(name) for name in _OTHER_RUNNERS):
            continue
        out.append(
            (
                item,
                "this async test is not an anyio test, so no plugin runs it (`vtime = true` "
                "puts anyio tests on virtual time). Mark it @pytest.mark.anyio (or the module: "
                "pytestmark = pytest.mark.anyio), or @pytest.mark.vtime, which makes it an "
                "anyio test on virtual time.",
            )
        )
    return out
