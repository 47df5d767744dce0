"""Every ALC case passes on the memory provider under asyncio and trio."""

from __future__ import annotations

import pytest

import videoflow_aio.conformance.cases.alc  # noqa: F401 - registers the cases
from videoflow_aio.conformance import Case, get_provider, run_case
from videoflow_aio.conformance._case import REGISTRY

ALC_CASES = sorted((c for c in REGISTRY.values() if c.id.startswith("ALC-")), key=lambda c: c.id)


def test_at_least_fourteen_alc_cases() -> None:
    assert len(ALC_CASES) >= 14
    assert all(c.contract == "allocation" for c in ALC_CASES)
    assert any("geometry_changes" in c.needs for c in ALC_CASES)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("alc_case", ALC_CASES, ids=[c.id for c in ALC_CASES])
def test_alc_case_passes_on_memory(alc_case: Case, backend: str) -> None:
    result = run_case(alc_case, get_provider("memory"), backend)
    assert result.outcome == "pass", result.reason
