"""The terminal's fault table says which faults happened and which the run ended before."""

from __future__ import annotations

from io import StringIO

from rich.console import Console

from videoflow_aio.sim._report import faults_table


def _render(result: dict[str, object]) -> str:
    table = faults_table(result)
    assert table is not None
    out = StringIO()
    Console(file=out, width=200, color_system=None).print(table)
    return out.getvalue()


def test_a_fault_past_the_end_of_the_run_is_shown_as_not_applied() -> None:
    text = _render(
        {
            "faults": [
                {
                    "kind": "crash_replica",
                    "at_seconds": 5.0,
                    "stage": "decode",
                    "replica": 0,
                    "applied_at_seconds": 5.0,
                    "died_at_seconds": 5.004,
                },
                {"kind": "crash_replica", "at_seconds": 600.0, "stage": "decode", "replica": 1},
            ]
        }
    )
    applied, later = (line for line in text.splitlines() if "crash_replica" in line)
    assert "decode[0]" in applied and "applied_at 5.000s" in applied
    assert "not applied" not in applied
    assert "decode[1]" in later and "not applied (the run ended first)" in later
    assert "at 600.000s" in later


def test_no_faults_no_table() -> None:
    assert faults_table({"faults": []}) is None
