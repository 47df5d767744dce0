"""The ALC case inventory (every case runs on the memory provider, under asyncio and trio, in
tests/conformance/test_conformance.py)."""

from __future__ import annotations

from videoflow_aio.conformance import select_cases

ALC_CASES = [c for c in select_cases("allocation") if c.id.startswith("ALC-")]


def test_at_least_fourteen_alc_cases() -> None:
    assert len(ALC_CASES) >= 14
    assert all(c.contract == "allocation" for c in ALC_CASES)
    assert any("geometry_changes" in c.needs for c in ALC_CASES)
