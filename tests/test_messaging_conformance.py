"""Every MSG conformance case on the memory model, under asyncio and trio."""

from __future__ import annotations

import pytest

from videoflow_aio import conformance

MSG_CASES = conformance.cases("messaging")


def test_enough_cases_with_the_fixed_ids() -> None:
    ids = {c.id for c in MSG_CASES}
    assert len(ids) >= 30
    assert "durable_control" in conformance.REGISTRY["MSG-018"].needs
    assert "archive" in conformance.REGISTRY["MSG-024"].needs
    assert any("latest_per_key" in c.needs for c in MSG_CASES)


@pytest.mark.parametrize("backend", conformance.BACKENDS)
@pytest.mark.parametrize("case", MSG_CASES, ids=[c.id for c in MSG_CASES])
def test_case_passes_on_memory(case: conformance.Case, backend: str) -> None:
    result = conformance.run_case(case, conformance.get_provider("memory"), backend)
    assert result.outcome == "pass", f"{case.id} {case.title}: {result.reason}"
