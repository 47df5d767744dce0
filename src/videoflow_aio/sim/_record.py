"""What the simulator measures, as it runs, in memory that does not grow with the run.

A :class:`StageRecorder` is a stage worker's ``observe`` callback. For every message settled
``Completed`` it takes the stage latency (settle time minus the ``vf-sent-at`` of the
message, i.e. queueing + service + redeliveries at this stage) and, at sink stages, the
end-to-end latency (settle time minus the frame's ``event_ts``). Statistics count the
messages whose frame was captured inside the measurement window
``[warmup, duration)``, whenever they finished; the time series bins every frame of the run
by capture time.
"""

from __future__ import annotations

import math

from ..contracts.messaging import Delivery
from ..pipeline import SENT_AT_HEADER, LatencyHistogram

SERIES_PRECISION_BITS = 3
"""Per-bin histograms are coarse (6.25 % relative error): they only draw the p99 line."""


class Series:
    """Per time bin: count, mean, p99 (coarse) and max of a latency."""

    __slots__ = ("_hists", "bin_seconds", "counts", "maxs", "sums")

    def __init__(self, bin_seconds: float, nbins: int) -> None:
        self.bin_seconds = bin_seconds
        self.counts = [0] * nbins
        self.sums = [0.0] * nbins
        self.maxs = [0.0] * nbins
        self._hists: dict[int, LatencyHistogram] = {}

    def add(self, b: int, value: float) -> None:
        self.counts[b] += 1
        self.sums[b] += value
        if value > self.maxs[b]:
            self.maxs[b] = value
        h = self._hists.get(b)
        if h is None:
            h = self._hists[b] = LatencyHistogram(SERIES_PRECISION_BITS)
        h.add(value)

    def as_dict(self, scale: float = 1000.0) -> dict[str, list[float | None] | list[int]]:
        means: list[float | None] = []
        p99s: list[float | None] = []
        maxs: list[float | None] = []
        for b, n in enumerate(self.counts):
            if n:
                means.append(self.sums[b] / n * scale)
                p99s.append(self._hists[b].percentile(0.99) * scale)
                maxs.append(self.maxs[b] * scale)
            else:
                means.append(None)
                p99s.append(None)
                maxs.append(None)
        return {"count": list(self.counts), "mean": means, "p99": p99s, "max": maxs}


class StageRecorder:
    """The ``observe`` callback of one stage (see the module docstring)."""

    __slots__ = (
        "_start",
        "bin_seconds",
        "e2e",
        "e2e_series",
        "nbins",
        "series",
        "stage",
        "window",
    )

    def __init__(
        self,
        start: float,
        window: tuple[float, float],
        bin_seconds: float,
        nbins: int,
        *,
        end_to_end: bool,
    ) -> None:
        self._start = start
        self.window = window
        self.bin_seconds = bin_seconds
        self.nbins = nbins
        self.stage = LatencyHistogram()
        self.series = Series(bin_seconds, nbins)
        self.e2e: LatencyHistogram | None = LatencyHistogram() if end_to_end else None
        self.e2e_series: Series | None = Series(bin_seconds, nbins) if end_to_end else None

    def __call__(self, d: Delivery, now: float) -> None:
        env = d.envelope
        ts = env.event_ts
        if ts is None:
            return
        raw = env.headers.get(SENT_AT_HEADER)
        sent = float(raw) if raw is not None else ts
        latency = now - sent
        if latency < 0.0:  # a clock other than the one that stamped it: not a latency
            return
        rel = ts - self._start
        b = math.floor(rel / self.bin_seconds)
        in_bins = 0 <= b < self.nbins
        if in_bins:
            self.series.add(b, latency)
        lo, hi = self.window
        inside = lo <= rel < hi
        if inside:
            self.stage.add(latency)
        if self.e2e is not None:
            total = now - ts
            if inside:
                self.e2e.add(total)
            if in_bins:
                assert self.e2e_series is not None
                self.e2e_series.add(b, total)


__all__ = ["SERIES_PRECISION_BITS", "Series", "StageRecorder"]
