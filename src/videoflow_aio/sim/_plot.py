"""``--plot``: three panels from a result (matplotlib, the ``plot`` extra).

1. latency distributions: the CDF of each stage's latency and of end-to-end latency;
2. latency over time: end-to-end mean and p99 per time bin (each stage's p99 thinner),
   the warm-up shaded, each fault a vertical line (its duration shaded);
3. queue depth over time: messages waiting (not leased) at each stage, faults marked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def plot(result: dict[str, Any], path: str | Path) -> None:
    """Write the figure to ``path`` (format from its suffix, e.g. ``.png``, ``.svg``)."""
    plt = _pyplot()
    series = result["series"]
    t = series["t_seconds"]
    width = series["bin_seconds"]
    mid = [x + width / 2 for x in t]
    warmup = result["run"]["warmup_seconds"]
    fig, axes = plt.subplots(3, 1, figsize=(11, 11), constrained_layout=True)
    dist, over_time, depth = axes

    qs = series["quantiles"]
    for name, s in series["stages"].items():
        if s["quantiles_ms"]:
            dist.plot(s["quantiles_ms"], qs, label=name)
    e2e_q = series["end_to_end"]["quantiles_ms"]
    if e2e_q:
        dist.plot(e2e_q, qs, label="end to end", color="black", linewidth=2)
    dist.set_xscale("log")
    dist.set_xlabel("latency (ms, log scale)")
    dist.set_ylabel("fraction of messages ≤ latency")
    dist.set_title("latency distributions (after warm-up)")
    dist.grid(True, which="both", alpha=0.3)
    dist.legend(loc="lower right", fontsize=8)

    e2e = series["end_to_end"]["latency"]
    over_time.plot(mid, e2e["mean"], label="end to end, mean", color="black")
    over_time.plot(mid, e2e["p99"], label="end to end, p99", color="black", linestyle=":")
    for name, s in series["stages"].items():
        over_time.plot(mid, s["latency"]["p99"], label=f"{name}, p99", linewidth=0.7)
    over_time.set_yscale("log")
    over_time.set_ylabel("latency (ms, log scale)")
    over_time.set_title(f"latency over time (by capture time, {width:g} s bins)")
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
    fig.suptitle(
        f"videoflow-aio simulate: {run['duration_seconds']:g} s virtual, seed {run['seed']}"
    )
    fig.savefig(path, dpi=110)
    plt.close(fig)


__all__ = ["PLOT_EXTRA", "PlotUnavailable", "plot", "unsupported_format"]
