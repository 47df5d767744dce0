"""The simulator's result: what the recorders, the workers' counters, the probe and the
messaging model's own ledger say once the run is over, as a ``SimResult`` built once (its
``to_builtins`` is the JSON-ready dict documented in ``docs/simulate.md``)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import NamedTuple

from ..contracts import Known
from ..memory.messaging import MemoryMessagingBackend
from ..pipeline import DEFAULT_PRECISION_BITS, LatencyHistogram, Pipeline, Publisher, StageWorker
from . import _result_types as rt
from ._dist import mean_seconds
from ._e2e import FrameLedger
from ._join import JoinBackend
from ._probe import Probe
from ._record import Series, StageRecorder
from ._slo import slo_fractions
from ._spec_types import SimSpec

QUANTILES = (*(round(q / 100, 2) for q in range(1, 100)), 0.995, 0.999, 0.9995, 0.9999)
"""The quantiles each distribution is published at (for plots)."""

_LEDGER = ("pending", "leased", "unresolved", "dropped", "redelivered")


async def _ledger(messaging: MemoryMessagingBackend, pipe: Pipeline, stage: str) -> dict[str, int]:
    """The model's counts for the stage's subscriptions (summed over its inputs)."""
    out = dict.fromkeys(_LEDGER, 0)
    for sub in pipe.subscriptions[stage]:
        seen = await messaging.observe_subscription(sub)
        if isinstance(seen, Known):
            v = seen.value
            for key in _LEDGER:
                out[key] += getattr(v, key)
    return out


def _quantiles_ms(h: LatencyHistogram) -> list[float] | None:
    if not h.count:
        return None
    return [v * 1000.0 for v in h.percentiles(QUANTILES)]


def _latency(h: LatencyHistogram) -> rt.LatencySummary:
    return rt.LatencySummary(**h.summary(1000.0))


def _series(s: Series) -> rt.LatencySeries:
    count, mean, p99, top = s.columns()
    return rt.LatencySeries(count=count, mean=mean, p99=p99, max=top)


class RunTimes(NamedTuple):
    """When the run's phases ended, and how it ran: ``virtual_seconds`` (set-up, load and
    drain), ``gpu_ready_seconds``, ``passes``, and the ``perf_counter`` reading the wall
    time is counted from."""

    virtual_seconds: float
    gpu_ready_seconds: float
    passes: int
    wall_start: float


async def build_result(
    spec: SimSpec,
    *,
    messaging: MemoryMessagingBackend,
    pipe: Pipeline,
    workers: dict[str, StageWorker],
    recorders: dict[str, StageRecorder],
    frames: FrameLedger,
    publishers: dict[str, Publisher],
    source_counts: dict[str, dict[str, int]],
    probe: Probe,
    joins: Mapping[str, JoinBackend],
    gpu: Mapping[str, rt.GpuGrant],
    faults: list[rt.FaultReport],
    failures: list[rt.FailureReport],
    bins: tuple[float, int],
    times: RunTimes,
) -> tuple[rt.SimResult, int]:
    """The result (``bins``: ``(bin_seconds, nbins)``), and the messages the model lost
    (dropped or unresolved, summed over the stages' subscriptions). ``run.wall_seconds``
    is read last, as the result is made."""
    run = spec.run
    window = run.duration_seconds - run.warmup_seconds
    stages: dict[str, rt.StageResult] = {}
    events = 0
    busy_total = replica_seconds = 0.0
    redeliveries = losses = 0
    for st in spec.stages:
        c = workers[st.name].counters
        events += c.received
        ledger = await _ledger(messaging, pipe, st.name)
        warm = probe.busy_at_warmup.get(st.name, [0.0] * len(c.busy_seconds))
        last = probe.busy_at_end.get(st.name, list(c.busy_seconds))
        busy = [b - a for a, b in zip(warm, last, strict=True)]
        busy_total += sum(busy)
        replica_seconds += window * len(busy)
        rec = recorders[st.name]
        redeliveries += ledger["redelivered"]
        losses += ledger["dropped"] + ledger["unresolved"]
        join = joins.get(st.name)
        stages[st.name] = rt.StageResult(
            latency_ms=_latency(rec.stage),
            waiting_ms=_latency(rec.waiting),
            slo=slo_fractions(rec.stage, run.slo_ms),
            throughput_hz=rec.stage.count / window,
            redeliveries=ledger["redelivered"],
            dropped=ledger["dropped"],
            unresolved=ledger["unresolved"],
            unfinished=ledger["pending"] + ledger["leased"],
            utilization=[b / window for b in busy],
            completed=c.completed,
            retried=c.retried,
            dead_lettered=c.terminal,
            stale_settles=c.stale,
            crashes=c.crashes,
            lease_renewals=c.renewals,
            payload_failures=c.payload_failures,
            replicas=st.replicas,
            batch=st.batch,
            batch_service=None
            if st.batch_service is None
            else rt.BatchServiceEcho(
                max_items=st.batch_service.max_items,
                max_wait_ms=st.batch_service.max_wait_ms,
                per_item_ms=st.service.per_item_ms,
            ),
            join=None
            if join is None
            else rt.JoinCounts(
                timed_out=join.timed_out,
                incomplete=join.incomplete,
                timeout_ms=st.join_timeout_ms,
            ),
            service_mean_ms=mean_seconds(st.service) * 1000.0,
            gpu=gpu.get(st.name),
        )
    e2e = frames.histogram
    end_to_end = rt.EndToEndResult(
        latency_ms=_latency(e2e),
        slo=slo_fractions(e2e, run.slo_ms),
        throughput_hz=e2e.count / window,
        redeliveries=redeliveries,
        dropped=frames.dropped,
        dropped_reasons=dict(frames.reasons),
        unresolved=frames.unresolved,
        unfinished=frames.unfinished,
        utilization=busy_total / replica_seconds if replica_seconds else None,
        frames=sum(c["frames"] for c in source_counts.values()),
        completed=frames.completed,
        measured=e2e.count,
    )
    info = rt.RunInfo(
        seed=run.seed,
        backend=run.backend,
        duration_seconds=run.duration_seconds,
        warmup_seconds=run.warmup_seconds,
        virtual_seconds=times.virtual_seconds,
        wall_seconds=time.perf_counter() - times.wall_start,  # wall-clock: reported only
        passes=times.passes,
        events=events,
        drained=all(w.finished for w in workers.values()),
        gpu_ready_seconds=times.gpu_ready_seconds,
        histogram_relative_error=2.0 ** -(DEFAULT_PRECISION_BITS + 1),
    )
    result = rt.SimResult(
        run=info,
        stages=stages,
        end_to_end=end_to_end,
        sources=_sources(spec, source_counts, publishers),
        faults=faults,
        failures=failures or None,  # only with failure processes: the shape is otherwise the same
        series=_series_result(bins, frames, recorders, probe),
    )
    return result, losses


def _sources(
    spec: SimSpec, counts: dict[str, dict[str, int]], publishers: dict[str, Publisher]
) -> dict[str, rt.SourceResult]:
    return {
        src.name: rt.SourceResult(
            frames=counts[src.name]["frames"],
            rejected=counts[src.name]["rejected"],
            ambiguous_publishes_retried=publishers[src.name].counters.retried,
            rate_hz=(src.mean_rate_hz or src.rate_hz) * src.streams,
            arrival=src.arrival,
            bytes=src.bytes,
        )
        for src in spec.sources
    }


def _series_result(
    bins: tuple[float, int],
    frames: FrameLedger,
    recorders: dict[str, StageRecorder],
    probe: Probe,
) -> rt.SeriesResult:
    bin_seconds, nbins = bins
    return rt.SeriesResult(
        bin_seconds=bin_seconds,
        t_seconds=[b * bin_seconds for b in range(nbins)],
        quantiles=list(QUANTILES),
        end_to_end=rt.EndToEndSeries(
            latency=_series(frames.series), quantiles_ms=_quantiles_ms(frames.histogram)
        ),
        stages={
            name: rt.StageSeries(
                latency=_series(rec.series),
                quantiles_ms=_quantiles_ms(rec.stage),
                queued=probe.queued[name],
                leased=probe.leased[name],
            )
            for name, rec in recorders.items()
        },
    )


__all__ = ["QUANTILES", "RunTimes", "build_result"]
