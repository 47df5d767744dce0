"""The mutation harness's mutants (``benchmarks/mutation/mutants.py``) still apply: each
snippet occurs exactly once in its source file, so a refactor cannot turn a mutant into a
silent no-op that "survives"."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _mutants() -> list[Any]:
    spec = importlib.util.spec_from_file_location(
        "_mutants", ROOT / "benchmarks" / "mutation" / "mutants.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    return list(module.MUTANTS)


MUTANTS = _mutants()


def test_mutant_ids_are_unique_and_areas_known() -> None:
    ids = [m.id for m in MUTANTS]
    assert len(ids) == len(set(ids))
    assert {m.area for m in MUTANTS} == {
        "messaging",
        "payload",
        "runtime_store",
        "allocation",
        "vtime",
    }


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.id for m in MUTANTS])
def test_the_mutant_applies_to_exactly_one_place(mutant: Any) -> None:
    text = (ROOT / "src" / "videoflow_aio" / mutant.path).read_text()
    assert text.count(mutant.original) == 1, f"{mutant.id}: its snippet moved; update it"
    assert mutant.replacement != mutant.original
