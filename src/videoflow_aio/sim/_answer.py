"""The terminal's account of capacity runs: the answer line, warnings, SLO checks and the
sweep table."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from ._capacity import PointResult, SweepResult
from ._slo import SloCheck

_SYMBOL = {"<=": "≤", "<": "<", ">=": "≥", ">": ">"}


def _num(v: float) -> str:
    return f"{v:.3f}" if abs(v) < 10 else f"{v:.1f}"


def _hw(low: float, high: float) -> str:
    """A half-width to two significant figures (``1.9``, ``12``, ``0.041``)."""
    hw = (high - low) / 2
    return f"{hw:.2g}" if hw < 100 else f"{hw:.0f}"


def check_text(c: SloCheck) -> str:
    """``p99 38.5 ms ± 1.2 ≤ 200 ms`` (the estimate, its half-width, the target)."""
    s = c.slo
    unit = " ms" if s.latency else (" Hz" if s.figure == "throughput_hz" else "")
    name = s.figure if s.where == "end_to_end" else f"{s.where}.{s.figure}"
    if c.estimate is None:
        return f"{name} {c.reason or 'not measured'}"
    est = _num(c.estimate) + unit
    if c.low is not None and c.high is not None:
        est += f" ± {_hw(c.low, c.high)}"
    return f"{name} {est} {_SYMBOL[s.op]} {s.target:g}{unit}"


def answer_line(result: SweepResult) -> str:
    """``answer: KEY = V (p99 38.5 ms ± 1.2 ≤ 200 ms, 95 %)``, or why there is none."""
    conf = f"{result.plan.confidence * 100:g} %"
    if result.answer is None:
        return f"answer: none — {result.reason}"
    checks = "; ".join(check_text(c) for c in result.answer.checks)
    return f"answer: {result.key} = {result.answer.value} ({checks}, {conf})"


def warning_lines(
    warnings: list[dict[str, Any]] | tuple[dict[str, Any], ...], prefix: str = ""
) -> list[str]:
    """One line per warning (the terminal prints them red)."""
    return [f"warning: {prefix}{w['message']}" for w in warnings]


def verdict(met: bool | None) -> str:
    """``met``, ``not met`` or ``uncertain``."""
    return {True: "met", False: "not met", None: "uncertain"}[met]


def slo_lines(point: PointResult) -> list[str]:
    """One line per SLO of a single point: its verdict and figure."""
    return [f"slo {c.slo.text}: {verdict(c.met)} ({check_text(c)})" for c in point.checks]


def sweep_table(result: SweepResult) -> Table:
    """Per point: the verdict, each SLO figure ± half-width, the busiest stage's utilisation,
    the replications run, and what was pruned and why."""
    table = Table(title=f"sweep of {result.key}", title_justify="left")
    table.add_column("value", justify="right", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    for s in result.slos:
        table.add_column(s.text, justify="right", no_wrap=True)
    table.add_column("busiest util", justify="right", no_wrap=True)
    table.add_column("runs", justify="right", no_wrap=True)
    table.add_column("note", overflow="fold")
    for p in result.points:
        doc = p.document
        cells = []
        for c in p.checks:
            if c.estimate is None:
                cells.append("-")
            elif c.low is not None and c.high is not None:
                cells.append(f"{_num(c.estimate)} ± {_hw(c.low, c.high)}")
            else:
                cells.append(_num(c.estimate))
        if not p.checks:
            cells = ["-"] * len(result.slos)
        util = "-"
        runs = "-"
        if doc is not None:
            us = [
                sum(d["utilization"]) / len(d["utilization"])
                for d in doc["stages"].values()
                if d["utilization"]
            ]
            util = f"{max(us):.0%}" if us else "-"
            runs = str(doc["run"]["replications"])
            if doc["run"]["precision"]["stopped"] == "budget":
                runs += " (budget)"
        elif p.warnings:
            util = f"{max(w['utilization'] for w in p.warnings):.0%}"
        status = "not simulated" if p.pruned and p.met is None else verdict(p.met)
        style = "green" if p is result.answer else None
        table.add_row(str(p.value), status, *cells, util, runs, p.pruned or "", style=style)
    return table


__all__ = ["answer_line", "check_text", "slo_lines", "sweep_table", "verdict", "warning_lines"]
