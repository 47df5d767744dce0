"""What the simulator measures, as it runs, in memory that does not grow with the run.

A :class:`StageRecorder` is a stage worker's ``observe`` callback. For every message settled
``Completed`` it takes the stage latency (settle time minus the ``vf-sent-at`` of the
message, i.e. queueing + service + redeliveries at this stage), its waiting time (the
receive that served it minus the same ``vf-sent-at``: queueing, and a batch's collection)
and, at sink stages, hands
the frame to the :class:`~videoflow_aio.sim._e2e.FrameLedger`, which takes the end-to-end
latency once the frame's last owed settle is in. Statistics count the
messages whose frame was captured inside the measurement window
``[warmup, duration)``, whenever they finished; the time series bins every frame of the run
by capture time.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..contracts.messaging import Delivery
from ..pipeline import SENT_AT_HEADER, LatencyHistogram

if TYPE_CHECKING:
    from ._e2e import FrameLedger

SERIES_PRECISION_BITS = 3
"""Per-bin histograms are coarse (6.25 % relative error): they only draw the p99 line."""
_SHIFT = SERIES_PRECISION_BITS + 1
_SCALE = float(1 << _SHIFT)
_ZERO = -(1 << 62)  # the bucket of exact zeros, below every other
_frexp = math.frexp


class Series:
    """Per time bin: count, mean, p99 (coarse) and max of a latency.

    The per-bin distribution is a coarse log-linear histogram (8 buckets per octave: p99
    within 6.25 %), kept as one small dict per bin: this runs for every message.
    """

    __slots__ = ("_hists", "bin_seconds", "counts", "maxs", "sums")

    def __init__(self, bin_seconds: float, nbins: int) -> None:
        self.bin_seconds = bin_seconds
        self.counts = [0] * nbins
        self.sums = [0.0] * nbins
        self.maxs = [0.0] * nbins
        self._hists: list[dict[int, int] | None] = [None] * nbins

    def add(self, b: int, value: float) -> None:
        self.counts[b] += 1
        self.sums[b] += value
        if value > self.maxs[b]:
            self.maxs[b] = value
        h = self._hists[b]
        if h is None:
            h = self._hists[b] = {}
        if value > 0.0:
            m, e = _frexp(value)
            k = (e << _SHIFT) + int(m * _SCALE)
        else:
            k = _ZERO
        h[k] = h.get(k, 0) + 1

    def merge(self, other: Series) -> None:
        for b, n in enumerate(other.counts):
            if not n:
                continue
            self.counts[b] += n
            self.sums[b] += other.sums[b]
            self.maxs[b] = max(self.maxs[b], other.maxs[b])
            mine = self._hists[b]
            if mine is None:
                mine = self._hists[b] = {}
            for k, c in (other._hists[b] or {}).items():
                mine[k] = mine.get(k, 0) + c

    def p99(self, b: int) -> float:
        """The bin's 99th percentile (nearest rank, bucket midpoint, clamped to its max)."""
        h = self._hists[b] or {}
        rank = max(1, math.ceil(0.99 * self.counts[b]))
        seen = 0
        for k in sorted(h):
            seen += h[k]
            if seen >= rank:
                if k == _ZERO:
                    return 0.0
                e = k >> _SHIFT
                return min(math.ldexp((k - (e << _SHIFT) + 0.5) / _SCALE, e), self.maxs[b])
        return self.maxs[b]  # pragma: no cover - ranks never exceed the count

    def columns(
        self, scale: float = 1000.0
    ) -> tuple[list[int], list[float | None], list[float | None], list[float | None]]:
        """Per bin: the count, and the mean, p99 and max times ``scale`` (None when empty)."""
        means: list[float | None] = []
        p99s: list[float | None] = []
        maxs: list[float | None] = []
        for b, n in enumerate(self.counts):
            if n:
                means.append(self.sums[b] / n * scale)
                p99s.append(self.p99(b) * scale)
                maxs.append(self.maxs[b] * scale)
            else:
                means.append(None)
                p99s.append(None)
                maxs.append(None)
        return list(self.counts), means, p99s, maxs


class WindowedLatency:
    """One latency per message, keyed by its frame's capture time ``ts``: into ``histogram``
    when the capture falls in the measurement ``window`` (seconds from ``start``), and into
    the time ``series`` bin of its capture."""

    __slots__ = ("bin_seconds", "histogram", "nbins", "series", "start", "window")

    def __init__(
        self, start: float, window: tuple[float, float], bin_seconds: float, nbins: int
    ) -> None:
        self.start = start
        self.window = window
        self.bin_seconds = bin_seconds
        self.nbins = nbins
        self.histogram = LatencyHistogram()
        self.series = Series(bin_seconds, nbins)

    def add(self, ts: float, latency: float) -> None:
        rel = ts - self.start
        lo, hi = self.window
        if lo <= rel < hi:
            self.histogram.add(latency)
        b = int(rel // self.bin_seconds)
        if 0 <= b < self.nbins:
            self.series.add(b, latency)


class StageRecorder:
    """The ``observe`` callback of one stage (see the module docstring)."""

    __slots__ = ("_latency", "frames", "received", "series", "stage", "waiting")

    def __init__(
        self,
        start: float,
        window: tuple[float, float],
        bin_seconds: float,
        nbins: int,
        *,
        frames: FrameLedger | None,
        received: dict[int, float] | None = None,
    ) -> None:
        self._latency = WindowedLatency(start, window, bin_seconds, nbins)
        self.stage = self._latency.histogram
        self.series = self._latency.series
        self.frames = frames  # a sink's: the end-to-end ledger
        # id(delivery) -> when its receive returned (the stage's backend fills it)
        self.received = received if received is not None else {}
        self.waiting = LatencyHistogram()  # no time series: only the window's statistics

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
        lat = self._latency
        lat.add(ts, latency)
        got = self.received.pop(id(d), None)
        if got is not None and got >= sent:
            lo, hi = lat.window
            if lo <= ts - lat.start < hi:
                self.waiting.add(got - sent)
        frames = self.frames
        if frames is not None:
            frames.settled(env.event_id or env.publication_id, ts, now)


__all__ = ["SERIES_PRECISION_BITS", "Series", "StageRecorder", "WindowedLatency"]
