"""The CI scripts under .ci/ cannot fail on a race of their own.

Under ``set -o pipefail`` a pipeline whose reader exits before its input ends (``head``,
``grep -q``, ``grep -m N``) fails when the writer's next write meets the closed pipe: the writer
dies of SIGPIPE, the pipeline exits 141, ``set -e`` ends CI. Whether it happens depends on how
the writer's output falls into writes and on scheduling: ``etcd --version | head -1`` failed 7
runs in 300 on an idle machine, and once on CI before anything else had run.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from _paths import ROOT

CI_DIR = ROOT / ".ci"

# a reader after a pipe that may stop reading before its input ends
EARLY_EXIT_READER = re.compile(
    r"\|\s*(?:head\b|grep\s+(?:-\w*[qm]\w*|--quiet|--max-count)\b|sed\s+(?:-n\s+)?['\"]?\d*q)"
)


def _scripts() -> list[Path]:
    return sorted(p for p in CI_DIR.iterdir() if p.is_file())


def _code_lines(script: Path) -> list[tuple[int, str]]:
    """The script's lines without comments (a ``#`` starting a word), numbered from 1."""
    lines = []
    for number, line in enumerate(script.read_text().splitlines(), start=1):
        code = re.split(r"(?:^|\s)#", line, maxsplit=1)[0]
        if code.strip():
            lines.append((number, code))
    return lines


def test_there_are_ci_scripts() -> None:
    names = {p.name for p in _scripts()}
    assert {"run", "oldest-deps"} <= names


@pytest.mark.parametrize("script", _scripts(), ids=lambda p: p.name)
def test_no_pipeline_ends_in_a_reader_that_exits_early(script: Path) -> None:
    lines = _code_lines(script)
    if not any("pipefail" in code for _, code in lines):
        return
    offending = [
        f"{script.name}:{n}: {code.strip()}" for n, code in lines if EARLY_EXIT_READER.search(code)
    ]
    assert not offending, (
        "under pipefail these pipelines fail (exit 141) when the reader exits before the "
        "writer is done; read the whole output instead (a command substitution, or sed -n 1p):\n"
        + "\n".join(offending)
    )


@pytest.mark.parametrize(
    "line",
    ["etcd --version | head -1", "x | grep -q y", "x | grep -m1 y", "x|head -n 2", "x | sed 1q"],
)
def test_the_check_sees_early_exit_readers(line: str) -> None:
    assert EARLY_EXIT_READER.search(line)


@pytest.mark.parametrize(
    "line", ["x | grep y", "x | sed -n 1p", "x | tail -1", "v=$(etcd --version)"]
)
def test_the_check_lets_whole_readers_pass(line: str) -> None:
    assert not EARLY_EXIT_READER.search(line)
