"""The MSG case inventory (every case runs on the memory model, under asyncio and trio, in
tests/conformance/test_conformance.py)."""

from __future__ import annotations

from videoflow_aio import conformance

MSG_CASES = conformance.select_cases("messaging")


def test_enough_cases_with_the_fixed_ids() -> None:
    ids = {c.id for c in MSG_CASES}
    assert len(ids) >= 30
    assert "durable_control" in conformance.REGISTRY["MSG-018"].needs
    assert "archive" in conformance.REGISTRY["MSG-024"].needs
    assert any("latest_per_key" in c.needs for c in MSG_CASES)
