"""The simulator's periodic look at the models: queue depth per time bin, busy time at the
edges of the measurement window, progress."""

from __future__ import annotations

from collections.abc import Callable

from ..contracts import Known
from ..contracts.messaging import SubscriptionId
from ..memory.messaging import MemoryMessagingBackend
from ..pipeline import StageWorker, loop_clock
from ._spec_types import SimSpec

ProgressCallback = Callable[[float, float], None]
"""Called as virtual time passes with ``(virtual seconds elapsed, duration_seconds)``."""


class Probe:
    """Samples queue depth per bin and busy time at the window's edges."""

    def __init__(self, stages: list[str], nbins: int) -> None:
        self.queued: dict[str, list[int | None]] = {s: [None] * nbins for s in stages}
        self.leased: dict[str, list[int | None]] = {s: [None] * nbins for s in stages}
        self.busy_at_warmup: dict[str, list[float]] = {}
        self.busy_at_end: dict[str, list[float]] = {}


async def _observe_depth(
    messaging: MemoryMessagingBackend, subs: tuple[SubscriptionId, ...]
) -> tuple[int | None, int | None]:
    queued = leased = 0
    for sub in subs:
        obs = await messaging.observe_subscription(sub)
        if not isinstance(obs, Known):
            return None, None
        queued += obs.value.pending
        leased += obs.value.leased
    return queued, leased


async def run_probe(
    spec: SimSpec,
    start: float,
    bin_seconds: float,
    nbins: int,
    messaging: MemoryMessagingBackend,
    subs: dict[str, tuple[SubscriptionId, ...]],
    workers: dict[str, StageWorker],
    probe: Probe,
    progress: ProgressCallback | None,
) -> None:
    now, sleep = loop_clock()
    marks = [(start + (b + 1) * bin_seconds, 0, b) for b in range(nbins)]
    marks.append((start + spec.run.warmup_seconds, 1, 0))
    marks.append((start + spec.run.duration_seconds, 2, 0))
    marks.sort()
    duration = spec.run.duration_seconds
    for at, what, b in marks:
        delay = at - now()
        if delay > 0:
            await sleep(delay)
        if what == 0:
            for name, stage_subs in subs.items():
                q, lz = await _observe_depth(messaging, stage_subs)
                probe.queued[name][b] = q
                probe.leased[name][b] = lz
            if progress is not None:
                progress(min(duration, (b + 1) * bin_seconds), duration)
        else:
            target = probe.busy_at_warmup if what == 1 else probe.busy_at_end
            for name, w in workers.items():
                target[name] = list(w.counters.busy_seconds)


__all__ = ["Probe", "ProgressCallback", "run_probe"]
