"""Run pytest on a sample project in a subprocess and read each test's outcome."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

#: looptime's plugin (installed with this repo's bench extra) breaks fixture setup
NO_LOOPTIME = (
    "-p",
    "no:looptime_plugin",
    "-p",
    "no:looptime_chronometers",
    "-p",
    "no:looptime_timeproxies",
)


#: what a sample project's run never needs: the cache, and hypothesis' plugin (its import is
#: about a second of each subprocess run's ~3 s of start-up; no sample project uses it)
LEAN = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest")


@dataclass(frozen=True)
class Outcome:
    """One test's result: passed, failed, error or skipped, and the message if any (an
    error at teardown of a test that passed is an error whose message says so)."""

    result: str
    message: str


@dataclass(frozen=True)
class Run:
    """A pytest run: outcomes by test id (``file::name[params]``) and the raw output."""

    outcomes: dict[str, Outcome]
    output: str
    returncode: int

    def result(self, test_id: str) -> str:
        assert test_id in self.outcomes, f"{test_id} not run:\n{self.output}"
        return self.outcomes[test_id].result

    def message(self, test_id: str) -> str:
        return self.outcomes[test_id].message


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())


def environ_for(python: str | Path) -> dict[str, str]:
    """This environment, without ``PYTHONPATH``/``PYTHONHOME`` when ``python`` is another
    interpreter (a downstream project's venv imports what it installed, not this checkout)."""
    if Path(python) == Path(sys.executable):
        return dict(os.environ)
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


def run_pytest(
    python: str | Path,
    root: Path,
    *args: str,
    timeout: float = 180.0,
    env: dict[str, str] | None = None,
) -> Run:
    """``python -m pytest`` in ``root``; outcomes from a JUnit XML report."""
    report = root / f"report-{os.getpid()}-{len(list(root.glob('report-*')))}.xml"
    proc = subprocess.run(
        [str(python), "-m", "pytest", *LEAN, f"--junitxml={report}", *args],
        cwd=root,
        env={**environ_for(python), "PYTHONDONTWRITEBYTECODE": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    output = proc.stdout + proc.stderr
    outcomes: dict[str, Outcome] = {}
    if report.exists():
        for case in ET.parse(report).getroot().iter("testcase"):
            module = case.get("classname", "").replace(".", "/")
            test_id = f"{module}.py::{case.get('name')}"
            result, message = "passed", ""
            for child in case:
                if child.tag in ("failure", "error", "skipped"):
                    result = {"failure": "failed"}.get(child.tag, child.tag)
                    message = (child.get("message") or "") + "\n" + (child.text or "")
                    break
            outcomes[test_id] = Outcome(result, message)
    return Run(outcomes, output, proc.returncode)
