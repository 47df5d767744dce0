"""The README's example runs as printed, and its two opening commands are the ones CI uses."""

from __future__ import annotations

import re
import subprocess
import sys

from _paths import ROOT

README = (ROOT / "README.md").read_text()


def test_readme_python_example_runs() -> None:
    block = re.search(
        r"```python\n(import anyio\nfrom videoflow_aio import vtime.*?)```", README, re.S
    )
    assert block is not None
    out = subprocess.run(
        [sys.executable, "-c", block.group(1)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "1 2 30.0"
    assert "SettleConfirmed" in lines[1]


def test_ci_runs_the_readme_test_command() -> None:
    commands = re.findall(r"```\n(python3 -m venv .*?)\n```", README)
    assert len(commands) == 2, "README opens with the main-job and the test commands"
    main_job, tests = commands
    assert main_job.endswith("videoflow-aio conformance")
    ci = (ROOT / ".ci" / "run").read_text()
    test_cmd = tests.split("&&")[-1].strip()
    assert test_cmd in ci
    assert ".[dev]" in tests
    ci_extras = {x for group in re.findall(r"-e '\.\[([^\]]*)\]'", ci) for x in group.split(",")}
    assert "dev" in ci_extras, "CI installs the extra the README's test command installs"
