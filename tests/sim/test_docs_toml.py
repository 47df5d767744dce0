"""Every complete spec (a TOML block with ``[run]``) in docs/simulate.md is valid, and the
issue-27 examples run (shortened)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import msgspec

from videoflow_aio.sim import parse_spec
from videoflow_aio.sim._run import simulate

DOC = Path(__file__).resolve().parents[2] / "docs" / "simulate.md"


def _specs() -> list[str]:
    blocks = re.findall(r"```toml\n(.*?)```", DOC.read_text(), flags=re.S)
    return [b for b in blocks if "[run]" in b]


def test_every_spec_in_the_docs_is_valid() -> None:
    specs = _specs()
    assert len(specs) >= 5
    for text in specs:
        parse_spec(tomllib.loads(text), base=DOC.parent)


def test_the_new_examples_run() -> None:
    for text in _specs():
        if not any(k in text for k in ("join", "max_items", "[[failure]]", "rate_schedule")):
            continue
        spec = parse_spec(tomllib.loads(text), base=DOC.parent)
        run = msgspec.structs.replace(spec.run, duration_seconds=20.0)
        result = simulate(msgspec.structs.replace(spec, run=run))
        assert result["end_to_end"]["frames"] > 0 and result["run"]["drained"]
