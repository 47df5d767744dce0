"""The simulator's outputs: the JSON document and the terminal table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
from rich.table import Table

from ._result_types import SimResult

_encoder = msgspec.json.Encoder()


def to_json(result: Mapping[str, Any] | SimResult) -> bytes:
    """The result (a document, or a :class:`SimResult`: the same bytes as its dict) as
    indented JSON (key order as built; the same run gives the same bytes,
    ``run.wall_seconds`` aside)."""
    return msgspec.json.format(_encoder.encode(result), indent=2) + b"\n"


def _ms(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.3f}" if v < 10 else f"{v:.1f}"


def _ms_ci(v: float | None, pair: list[float] | None) -> str:
    """``38.5 ± 1.2`` (the interval's half-width), or the bare figure without one."""
    if pair is None or v is None:
        return _ms(v)
    hw = (pair[1] - pair[0]) / 2
    return f"{_ms(v)} ± {hw:.2g}" if hw < 100 else f"{_ms(v)} ± {hw:.0f}"


def _title(run: dict[str, Any]) -> str:
    title = (
        f"simulated {run['duration_seconds']:g} s (statistics after {run['warmup_seconds']:g}"
        f" s warm-up), seed {run['seed']}, {run['backend']}"
    )
    n = run.get("replications", 1)
    if n > 1:
        title += f"; mean of {n} replications ± half-width of the {run['confidence']:.0%} interval"
    return title


def results_table(result: dict[str, Any]) -> Table:
    """Per stage and end to end: latency percentiles (ms), throughput, redeliveries,
    drops, unresolved, unfinished, utilisation."""
    run = result["run"]
    table = Table(title=_title(run), title_justify="left")
    for col in ("stage", "mean", "p50", "p90", "p99", "p99.9", "max"):
        table.add_column(col, justify="left" if col == "stage" else "right", no_wrap=True)
    for col in ("msg/s", "redelivered", "dropped", "unresolved", "unfinished", "util"):
        table.add_column(col, justify="right", no_wrap=True)

    def row(name: str, d: dict[str, Any], util: str, style: str | None = None) -> None:
        lat = d["latency_ms"]
        ci = d.get("latency_ms_ci") or {}
        table.add_row(
            name,
            *(_ms_ci(lat[k], ci.get(k)) for k in ("mean", "p50", "p90", "p99", "p999")),
            _ms(lat["max"]),
            f"{d['throughput_hz']:.1f}",
            str(d["redeliveries"]),
            str(d["dropped"]),
            str(d["unresolved"]),
            str(d["unfinished"]),
            util,
            style=style,
        )

    for name, d in result["stages"].items():
        u = d["utilization"]
        util = f"{sum(u) / len(u):.0%}" if u else "-"
        row(name, d, util)
    e2e = result["end_to_end"]
    u = e2e["utilization"]
    row("end to end", e2e, f"{u:.0%}" if u is not None else "-", style="bold")
    table.caption = (
        f"latency in ms; end to end: of the {e2e['measured']:,} frames completed inside the"
        f" window ({e2e['completed']:,} of {e2e['frames']:,} frames completed in all);"
        " unfinished = neither completed nor lost when the run ended;"
        " util = mean busy fraction of the replicas"
    )
    table.caption_justify = "left"
    return table


def faults_table(result: dict[str, Any]) -> Table | None:
    """The faults as applied (virtual seconds from the start), or None without faults."""
    faults = result["faults"]
    if not faults:
        return None
    table = Table(title="faults", title_justify="left")
    table.add_column("kind", no_wrap=True)
    table.add_column("target", no_wrap=True)
    table.add_column("what happened", overflow="fold")
    for f in faults:
        target = f.get("stage") or f.get("channel") or "payload"
        if f["kind"] == "crash_replica":
            target = f"{target}[{f.get('replica', 0)}]"
        detail = ", ".join(
            f"{k.removesuffix('_seconds')} {v:.3f}s" if k.endswith("_seconds") else f"{k} {v}"
            for k, v in f.items()
            if k not in ("kind", "stage", "channel", "replica")
        )
        if "applied_at_seconds" not in f:  # its instant came after the load ended
            detail = f"not applied (the run ended first): {detail}"
        table.add_row(f["kind"], target, detail)
    return table


__all__ = ["faults_table", "results_table", "to_json"]
