"""``--plot`` (matplotlib, the ``plot`` extra): a figure that answers the question asked.

A single run (or replications of one spec), three panels:

1. the latency tail: the complementary CDF (fraction of frames slower than x) of end-to-end
   latency and of each stage, log–log, down to 1e-4; the end-to-end p99 marked (with its
   interval when there are replications) and each latency SLO a vertical line;
2. latency over time: end-to-end mean and p99 per time bin (each stage's p99 thinner), the
   warm-up shaded, each fault a vertical line (its duration shaded);
3. queue depth over time: messages waiting (not leased) at each stage, faults marked.

A sweep, two panels sharing the swept value: the SLO figures with their interval bars, each
target a dashed line, overloaded points marked on the top edge and the answer ringed; under
it, each stage's utilisation (measured, and the offered load from the spec dashed), with
the capacity line at 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._slo import Slo

PLOT_EXTRA = "plot"


class PlotUnavailable(RuntimeError):
    """matplotlib is not installed."""


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise PlotUnavailable(
            "--plot needs matplotlib: pip install 'videoflow-aio[plot]'"
        ) from None
    return plt


def unsupported_format(path: str | Path) -> str | None:
    """Why matplotlib cannot write ``path``'s format (its suffix), or None (no suffix: PNG)."""
    _pyplot()
    from matplotlib.backend_bases import FigureCanvasBase

    suffix = Path(path).suffix.lstrip(".").lower()
    formats = FigureCanvasBase.get_supported_filetypes()
    if suffix and suffix not in formats:
        return f"unsupported format {suffix!r}; one of {', '.join(sorted(formats))}"
    return None


def _mark_faults(ax: Any, result: dict[str, Any]) -> None:
    for f in result["faults"]:
        at = f.get("applied_at_seconds")
        if at is None:
            continue
        end = f.get("resumed_at_seconds") or f.get("ended_at_seconds")
        label = f["kind"] + (f" {f['stage']}" if f.get("stage") else "")
        ax.axvline(at, color="tab:red", linewidth=0.8, linestyle="--")
        if end is not None and end > at:
            ax.axvspan(at, end, color="tab:red", alpha=0.12)
        ax.annotate(
            label,
            (at, 1.0),
            xycoords=("data", "axes fraction"),
            rotation=90,
            fontsize=6,
            va="top",
            ha="right",
            color="tab:red",
        )


def plot(result: Any, path: str | Path, slos: Sequence[Slo] = ()) -> None:
    """Write the figure for ``result`` — a run's JSON-ready dict, a ``PointResult`` or a
    ``SweepResult`` — to ``path`` (format from its suffix, e.g. ``.png``, ``.svg``)."""
    from ._capacity import PointResult, SweepResult

    if isinstance(result, SweepResult):
        _plot_sweep(result, path)
        return
    if isinstance(result, PointResult):
        assert result.document is not None
        result = result.document
    _plot_run(result, path, slos)


def _tail(ax: Any, result: dict[str, Any], slos: Sequence[Slo]) -> None:
    series = result["series"]
    qs = series["quantiles"]
    tail = [1.0 - q for q in qs]
    for name, s in series["stages"].items():
        if s["quantiles_ms"]:
            ax.plot(s["quantiles_ms"], tail, label=name, linewidth=1)
    e2e_q = series["end_to_end"]["quantiles_ms"]
    if e2e_q:
        ax.plot(e2e_q, tail, label="end to end", color="black", linewidth=2)
    e2e = result["end_to_end"]
    p99 = e2e["latency_ms"]["p99"]
    if p99 is not None:
        pair = (e2e.get("latency_ms_ci") or {}).get("p99")
        xerr = None if pair is None else [[p99 - pair[0]], [pair[1] - p99]]
        ax.errorbar([p99], [0.01], xerr=xerr, fmt="o", color="black", capsize=4, zorder=5)
        text = f"p99 {p99:.3g} ms" + ("" if pair is None else f" ± {(pair[1] - pair[0]) / 2:.2g}")
        ax.annotate(
            text, (p99, 0.01), textcoords="offset points", xytext=(-10, 8), fontsize=8, ha="right"
        )
    for s in slos:
        if s.latency:
            ax.axvline(s.target, color="tab:red", linestyle="--", linewidth=1.2)
            ax.annotate(
                f"SLO {s.label()}",
                (s.target, 0.98),
                xycoords=("data", "axes fraction"),
                rotation=90,
                fontsize=7,
                va="top",
                ha="left",
                color="tab:red",
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(5e-5, 1.05)
    ax.set_xlabel("latency (ms, log scale)")
    ax.set_ylabel("fraction of frames slower (log scale)")
    reps = result["run"].get("replications", 1)
    ax.set_title(
        "latency tail: P(latency > x) after warm-up"
        + (f" (curves: replication 0; p99: mean of {reps} replications)" if reps > 1 else "")
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower left", fontsize=8)


def _plot_run(result: dict[str, Any], path: str | Path, slos: Sequence[Slo]) -> None:
    plt = _pyplot()
    series = result["series"]
    t = series["t_seconds"]
    width = series["bin_seconds"]
    mid = [x + width / 2 for x in t]
    warmup = result["run"]["warmup_seconds"]
    fig, axes = plt.subplots(
        3, 1, figsize=(11, 12), constrained_layout=True, height_ratios=(1.4, 1, 1)
    )
    dist, over_time, depth = axes
    _tail(dist, result, slos)

    e2e = series["end_to_end"]["latency"]
    over_time.plot(mid, e2e["mean"], label="end to end, mean", color="black")
    over_time.plot(mid, e2e["p99"], label="end to end, p99", color="black", linestyle=":")
    for name, s in series["stages"].items():
        over_time.plot(mid, s["latency"]["p99"], label=f"{name}, p99", linewidth=0.7)
    over_time.set_yscale("log")
    over_time.set_ylabel("latency (ms, log scale)")
    title = f"latency over time (by capture time, {width:g} s bins)"
    if result["run"].get("replications", 1) > 1:
        title += ", replication 0"
    over_time.set_title(title)
    if warmup:
        over_time.axvspan(0, warmup, color="grey", alpha=0.15)
    _mark_faults(over_time, result)
    over_time.grid(True, alpha=0.3)
    over_time.legend(loc="upper right", fontsize=7)

    for name, s in series["stages"].items():
        depth.step([x + width for x in t], s["queued"], where="pre", label=name)
    depth.set_ylabel("messages waiting")
    depth.set_xlabel("virtual seconds since start")
    depth.set_title("queue depth over time (sampled at each bin's end)")
    if warmup:
        depth.axvspan(0, warmup, color="grey", alpha=0.15)
    _mark_faults(depth, result)
    depth.grid(True, alpha=0.3)
    depth.legend(loc="upper right", fontsize=8)

    run = result["run"]
    reps = run.get("replications", 1)
    fig.suptitle(
        f"videoflow-aio simulate: {run['duration_seconds']:g} s virtual, seed {run['seed']}"
        + (f", {reps} replications" if reps > 1 else "")
    )
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_sweep(result: Any, path: str | Path) -> None:
    plt = _pyplot()
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(10, 9), sharex=True, constrained_layout=True, height_ratios=(2, 1)
    )
    values = [p.value for p in result.points]
    latency = [s for s in result.slos if s.latency] or []
    shown = latency or [s for s in result.slos if s.figure == "throughput_hz"]
    targets = bool(shown)
    if not shown:  # no objective: end-to-end p99, without a target line
        shown = [Slo("end_to_end", "p99", "<=", 0.0, "end_to_end.p99")]
    highest = 0.0
    for k, slo in enumerate(shown):
        xs, ys, lo, hi = [], [], [], []
        for p in result.points:
            iv = p.interval(slo.figure, slo.where)
            if iv is None:
                continue
            xs.append(p.value)
            ys.append(iv.estimate)
            lo.append(iv.estimate - (iv.low if iv.low is not None else iv.estimate))
            hi.append((iv.high if iv.high is not None else iv.estimate) - iv.estimate)
        color = f"C{k}"
        label = slo.label() if targets else "end_to_end.p99"
        top.errorbar(xs, ys, yerr=[lo, hi], fmt="o-", capsize=5, color=color, label=label)
        highest = max([highest, *(y + h for y, h in zip(ys, hi, strict=True))])
        if not targets:
            continue
        top.axhline(slo.target, color=color, linestyle="--", linewidth=1.2)
        top.annotate(
            f"target {slo.target:g}",
            (1.0, slo.target),
            xycoords=("axes fraction", "data"),
            fontsize=8,
            ha="right",
            va="bottom",
            color=color,
        )
        highest = max(highest, slo.target)
    for p in result.points:
        if p.document is None and p.pruned:
            over = p.pruned.startswith("overload")
            top.annotate(
                "overloaded\n(not run)" if over else "not run",
                (p.value, 0.97),
                xycoords=("data", "axes fraction"),
                ha="center",
                va="top",
                fontsize=8,
                color="tab:red" if over else "grey",
            )
            if over:
                top.axvspan(p.value - 0.4, p.value + 0.4, color="tab:red", alpha=0.08)
    if result.answer is not None:
        iv = result.answer.interval(shown[0].figure, shown[0].where)
        if iv is not None:
            top.plot(
                [result.answer.value],
                [iv.estimate],
                marker="o",
                markersize=18,
                markerfacecolor="none",
                markeredgecolor="green",
                markeredgewidth=2,
                label=f"answer: {result.answer.value}",
            )
    unit = "ms" if shown[0].latency else "Hz"
    top.set_ylabel(f"{', '.join(s.figure for s in shown)} ({unit})")
    top.set_ylim(0, highest * 1.25 if highest else 1)
    conf = f"{result.plan.confidence:.0%}"
    if targets:
        top.set_title(
            f"{result.key}: SLO figures with {conf} intervals"
            + (f" — answer {result.answer.value}" if result.answer is not None else " — no answer")
        )
    else:
        top.set_title(f"{result.key}: end-to-end p99 with {conf} intervals (no --slo)")
    top.grid(True, alpha=0.3)
    top.legend(loc="center right", fontsize=8)

    stages = list(result.points[0].offered) if result.points else []
    for k, name in enumerate(stages):
        color = f"C{k}"
        bottom.plot(
            values,
            [p.offered.get(name) for p in result.points],
            linestyle="--",
            color=color,
            linewidth=1,
        )
        xs, ys = [], []
        for p in result.points:
            if p.document is not None:
                u = p.document["stages"][name]["utilization"]
                xs.append(p.value)
                ys.append(sum(u) / len(u) if u else 0.0)
        bottom.plot(
            xs,
            ys,
            marker="sodv^<>"[k % 7],
            markersize=max(4, 11 - 2 * k),
            markerfacecolor="none",
            markeredgewidth=1.6,
            linestyle="none",
            color=color,
            label=name,
        )
    bottom.axhline(1.0, color="tab:red", linewidth=1)
    bottom.set_ylabel("utilisation per replica")
    bottom.set_xlabel(result.key)
    bottom.set_title("utilisation: measured (markers), offered by the spec (dashed); 1 = capacity")
    bottom.set_ylim(0, max(1.1, *(max(p.offered.values(), default=0) for p in result.points)))
    bottom.grid(True, alpha=0.3)
    bottom.legend(loc="upper right", fontsize=8)
    if all(isinstance(v, int) for v in values):
        bottom.set_xticks(values)
    fig.savefig(path, dpi=110)
    plt.close(fig)


__all__ = ["PLOT_EXTRA", "PlotUnavailable", "plot", "unsupported_format"]
