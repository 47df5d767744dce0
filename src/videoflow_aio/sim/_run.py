"""Run a simulation: the real memory models on virtual time, driven by the pipeline
toolkit's stage workers, with seeded load generators and scheduled faults.

One seeded RNG per random stream — ``random.Random(f"{seed}/source/{name}")`` for a
source's arrivals and phases, ``f"{seed}/stage/{name}"`` for a stage's service times — so
adding a stage or a source leaves every other stream's samples unchanged.
"""

from __future__ import annotations

import heapq
import math
import random
import time
from collections.abc import Callable
from typing import Any

import anyio

from ..contracts import Known
from ..contracts.allocation import FeasiblePlan, WorkloadRequest
from ..contracts.errors import VideoflowError
from ..contracts.messaging import Accepted, ChannelId, Delivery, SubscriptionId
from ..memory.allocation import MemoryAllocationBackend, NodeFixture
from ..memory.messaging import MemoryMessagingBackend
from ..memory.payload import MemoryPayloadStore
from ..pipeline import (
    ExceptionPolicy,
    LatencyHistogram,
    Node,
    Output,
    Publisher,
    StageWorker,
    ensure_pipeline,
    loop_clock,
)
from ..pipeline._stats import DEFAULT_PRECISION_BITS
from ..vtime import VirtualClock
from ..vtime import run as vrun
from ._dist import mean_seconds, sampler
from ._faults import FaultContext, SlowDown, StallablePayloadStore, run_fault
from ._record import Series, StageRecorder
from ._spec import NodeSpec, SimSpec, SourceSpec, StageSpec

ProgressCallback = Callable[[float, float], None]
"""Called as virtual time passes with ``(virtual seconds elapsed, duration_seconds)``."""

MAX_BINS = 600
POLL_SECONDS = 1.0


class SimError(VideoflowError):
    """The simulation could not be set up as specified (e.g. GPU slices that do not fit);
    ``field`` names the spec key."""

    field: str

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message, field=field)


def bin_seconds_for(spec: SimSpec) -> float:
    """The time-series resolution: ``run.bin_seconds``, else the duration in at most
    :data:`MAX_BINS` bins of a whole number of seconds (or 1/10 s steps for short runs)."""
    if spec.run.bin_seconds is not None:
        return spec.run.bin_seconds
    raw = spec.run.duration_seconds / MAX_BINS
    if raw >= 1.0:
        return float(math.ceil(raw))
    return max(0.1, math.ceil(raw * 10) / 10)


# -- load generation ------------------------------------------------------------------------


async def generate(
    source: SourceSpec,
    publisher: Publisher,
    rng: random.Random,
    start: float,
    end: float,
    frame: bytes | None,
    counts: dict[str, int],
) -> None:
    """Publish ``source``'s frames from ``start`` until ``end`` (virtual), then ``eos``.

    Each stream is periodic (rate ``rate_hz`` from a random phase in its first period) or
    Poisson; frames are published in time order, each with ``event_ts`` = its capture time,
    id ``<source>-<stream>-<n>``. A publish that blocks (a paused channel, a stalled store)
    delays the frames behind it — they are published late, with their capture times.
    """
    now, sleep = loop_clock()
    rate = source.rate_hz
    period = 1.0 / rate
    poisson = source.arrival == "poisson"
    heap: list[tuple[float, int, int]] = []
    phases: list[float] = []
    for k in range(source.streams):
        phase = rng.random() * period
        phases.append(phase)
        first = start + (rng.expovariate(rate) if poisson else phase)
        heap.append((first, k, 0))
    heapq.heapify(heap)
    name = source.name
    send = publisher.send
    expo = rng.expovariate
    published = 0
    while heap:
        at, k, n = heap[0]
        if at >= end:
            break
        delay = at - now()
        if delay > 0:
            await sleep(delay)
        pid = f"{name}-{k}-{n}"
        outcome = await send(pid, b"", event_ts=at, data=frame)
        published += 1
        if type(outcome) is not Accepted:
            counts["rejected"] += 1
        nxt = at + expo(rate) if poisson else start + phases[k] + (n + 1) * period
        heapq.heapreplace(heap, (nxt, k, n + 1))
    counts["frames"] = published
    await publisher.send(f"eos@{name}", b"", kind="eos")


def stage_handler(
    sample: Callable[[], float],
    slow: SlowDown,
    output: list[Output | bytes] | None,
) -> Callable[[Delivery, bytes | None], Any]:
    """The simulated work: sleep one service time (times the slow-down factor), then hand
    the stage's output (if it has one) to the worker to forward."""
    sleep = loop_clock()[1]

    async def handle(d: Delivery, data: bytes | None) -> list[Output | bytes] | None:
        await sleep(sample() * slow.factor)
        return output

    return handle


# -- GPUs ------------------------------------------------------------------------------------


def node_fixture(spec: NodeSpec) -> NodeFixture:
    """A GPU node labelled as GPU Feature Discovery would label it: whole GPUs, or the MIG
    instances of ``spec.mig`` under the ``mixed`` strategy."""
    labels = {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": spec.product,
        "nvidia.com/gpu.count": str(spec.gpus),
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "mixed" if spec.mig else "single",
        "nvidia.com/mig.config": "custom" if spec.mig else "all-disabled",
        "nvidia.com/mig.config.state": "success",
    }
    for profile, count in spec.mig.items():
        label = profile.replace("+", ".")
        labels[f"nvidia.com/mig-{label}.count"] = str(count)
        labels[f"nvidia.com/mig-{label}.product"] = f"{spec.product}-MIG-{profile}"
    return NodeFixture(
        spec.name,
        spec.product,
        spec.gpus,
        spec.memory_gib,
        labels=labels,
        mig_layout=dict(spec.mig),
    )


async def reserve_gpus(
    alloc: MemoryAllocationBackend, stage: StageSpec, index: int
) -> dict[str, Any]:
    """Reserve one device (``gpu = "whole"``) or MIG instance per replica of ``stage`` in
    one claim, wait until it is allocated, bind the replicas' workloads; what was granted."""
    field = f"stage[{index}].gpu"
    assert stage.gpu is not None
    requests = [
        WorkloadRequest(workload_id=f"{stage.name}-{i}", devices=1)
        if stage.gpu == "whole"
        else WorkloadRequest(workload_id=f"{stage.name}-{i}", mig_profile=stage.gpu)
        for i in range(stage.replicas)
    ]
    snap = await alloc.inventory({})
    if not isinstance(snap, Known):
        raise SimError(f"{field}: inventory unreadable: {snap.reason}", field=field)
    try:
        plan = await alloc.plan(requests, snap.value)
    except VideoflowError as exc:
        raise SimError(f"{field}: {exc}", field=field) from None
    if not isinstance(plan, FeasiblePlan):
        raise SimError(
            f"{field}: {stage.replicas} × {stage.gpu} for stage {stage.name!r} do not fit: "
            f"{plan.reason}",
            field=field,
        )
    claim = await alloc.reserve(plan, f"sim-{stage.name}", None)
    while claim.phase == "preparing":  # a geometry change: the manager applies it on a timer
        await anyio.sleep(POLL_SECONDS)
        seen = await alloc.observe(claim.claim_id)
        if isinstance(seen, Known):
            claim = seen.value
    if claim.phase not in ("allocated", "ready"):
        raise SimError(
            f"{field}: claim for stage {stage.name!r} is {claim.phase}: {claim.reason}",
            field=field,
        )
    devices: dict[str, list[str]] = {}
    for p in claim.placements:
        alloc.bind_workload(p.node, p.workload_id, 1)
        bound = await alloc.bindings(claim.claim_id, p.workload_id)
        devices[p.workload_id] = list(bound.devices)
    alloc.mark_workload_ready(claim.claim_id)
    return {
        "profile": stage.gpu,
        "claim": claim.claim_id,
        "generation": claim.generation,
        "nodes": sorted({p.node for p in claim.placements}),
        "devices": devices,
    }


# -- the run ---------------------------------------------------------------------------------


class _Probe:
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


async def _probe(
    spec: SimSpec,
    start: float,
    bin_seconds: float,
    nbins: int,
    messaging: MemoryMessagingBackend,
    subs: dict[str, tuple[SubscriptionId, ...]],
    workers: dict[str, StageWorker],
    probe: _Probe,
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


async def _simulate(spec: SimSpec, progress: ProgressCallback | None) -> dict[str, Any]:
    now, _ = loop_clock()
    start = now()
    run = spec.run
    duration = run.duration_seconds
    window = (run.warmup_seconds, duration)
    window_len = window[1] - window[0]
    bin_seconds = bin_seconds_for(spec)
    nbins = max(1, math.ceil(duration / bin_seconds - 1e-9))

    messaging = MemoryMessagingBackend()
    wants_payload = (
        any(s.bytes for s in spec.sources)
        or any(s.output_bytes for s in spec.stages)
        or any(f.kind in ("pause_payload", "fail_payload_reads") for f in spec.faults)
    )
    model: MemoryPayloadStore | None = None
    stallable: StallablePayloadStore | None = None
    store: Any = None
    if wants_payload:
        model = MemoryPayloadStore(tier=spec.payload.tier, max_bytes=spec.payload.max_bytes)
        store = model
        if any(f.kind == "pause_payload" for f in spec.faults):
            stallable = StallablePayloadStore(model)
            store = stallable

    # channel limits of a node come from the stages that read it
    readers: dict[str, list[StageSpec]] = {}
    for st in spec.stages:
        for inp in st.inputs:
            readers.setdefault(inp, []).append(st)

    def node_for(name: str, inputs: tuple[str, ...], st: StageSpec | None) -> Node:
        rs = readers.get(name, [])
        kw: dict[str, Any] = {}
        if rs:
            kw["max_msgs"] = min(r.max_queue for r in rs)
            kw["overflow"] = rs[0].overflow
        if st is not None:
            kw["ack_wait_seconds"] = st.ack_wait_seconds
            kw["max_deliver"] = st.max_deliver
            kw["item_credit"] = max(64, 4 * st.replicas * st.batch)
        return Node(name=name, inputs=inputs, **kw)

    nodes = [node_for(s.name, (), None) for s in spec.sources]
    nodes += [node_for(s.name, s.inputs, s) for s in spec.stages]
    pipe = await ensure_pipeline(messaging, run.flow_id, run.run_id, nodes)

    gpu: dict[str, dict[str, Any]] = {}
    alloc: MemoryAllocationBackend | None = None
    if spec.nodes:
        alloc = MemoryAllocationBackend(
            [node_fixture(n) for n in spec.nodes],
            authority=spec.gpu.authority,
            mig_apply_seconds=spec.gpu.mig_apply_seconds,
        )
        for i, st in enumerate(spec.stages):
            if st.gpu:
                gpu[st.name] = await reserve_gpus(alloc, st, i)
    ready_at = now() - start  # GPU preparation (geometry changes) happens before the load

    sinks = {s.name for s in spec.stages if not pipe.readers[s.name]}
    recorders: dict[str, StageRecorder] = {}
    workers: dict[str, StageWorker] = {}
    slowdowns: dict[str, SlowDown] = {}
    t0 = now()
    frame_cache: dict[int, bytes] = {}

    def frame(size: int) -> bytes | None:
        if not size:
            return None
        data = frame_cache.get(size)
        if data is None:
            data = frame_cache[size] = bytes(size)  # one buffer per size: digests are memoised
        return data

    for st in spec.stages:
        rec = StageRecorder(t0, window, bin_seconds, nbins, end_to_end=st.name in sinks)
        recorders[st.name] = rec
        slow = slowdowns[st.name] = SlowDown()
        rng = random.Random(f"{run.seed}/stage/{st.name}")
        out_data = frame(st.output_bytes)
        output: list[Output | bytes] | None = None
        if pipe.output(st.name) is not None:
            output = [Output(data=out_data)] if out_data is not None else [b""]
        workers[st.name] = StageWorker(
            messaging,
            pipe.subscriptions[st.name],
            stage_handler(sampler(st.service, rng), slow, output),
            replicas=st.replicas,
            batch=st.batch,
            name=st.name,
            output=pipe.output(st.name),
            readers=pipe.readers[st.name],
            eos=pipe.eos_subscriptions[st.name],
            payload=store,
            policy=ExceptionPolicy(retry_delay_seconds=st.retry_delay_seconds),
            poll_seconds=POLL_SECONDS,
            observe=rec,
            payload_ttl_seconds=spec.payload.ttl_seconds,
            obligation_seconds=spec.payload.obligation_seconds,
        )

    publishers: dict[str, Publisher] = {}
    source_counts: dict[str, dict[str, int]] = {}
    for src in spec.sources:
        publishers[src.name] = Publisher(
            messaging,
            pipe.channels[src.name],
            payload=store,
            readers=pipe.readers[src.name],
            ttl_seconds=spec.payload.ttl_seconds,
            obligation_seconds=spec.payload.obligation_seconds,
        )
        source_counts[src.name] = {"frames": 0, "rejected": 0}

    inputs: dict[str, tuple[ChannelId, ...]] = {
        st.name: tuple(sub.channel for sub in pipe.subscriptions[st.name]) for st in spec.stages
    }
    ctx = FaultContext(
        start=t0,
        messaging=messaging,
        payload_model=model,
        stallable=stallable,
        workers=workers,
        inputs=inputs,
        channels=pipe.channels,
        slowdowns=slowdowns,
        now=now,
    )
    fault_reports: list[dict[str, Any]] = [
        {k: v for k, v in _fault_dict(f).items() if v is not None} for f in spec.faults
    ]
    probe = _Probe([s.name for s in spec.stages], nbins)
    finished: dict[str, anyio.Event] = {s.name: anyio.Event() for s in spec.stages}

    async def run_worker(name: str) -> None:
        await workers[name].run()
        finished[name].set()

    drained = True
    async with anyio.create_task_group() as tg:
        for st in spec.stages:
            tg.start_soon(run_worker, st.name)
        tg.start_soon(
            _probe,
            spec,
            t0,
            bin_seconds,
            nbins,
            messaging,
            pipe.subscriptions,
            workers,
            probe,
            progress,
        )
        for f, report in zip(spec.faults, fault_reports, strict=True):
            tg.start_soon(run_fault, ctx, f, report)
        async with anyio.create_task_group() as sources:
            for src in spec.sources:
                sources.start_soon(
                    generate,
                    src,
                    publishers[src.name],
                    random.Random(f"{run.seed}/source/{src.name}"),
                    t0,
                    t0 + duration,
                    frame(src.bytes),
                    source_counts[src.name],
                )
        with anyio.move_on_at(max(now(), t0 + duration) + run.drain_seconds):
            for ev in finished.values():
                await ev.wait()
        drained = all(ev.is_set() for ev in finished.values())
        tg.cancel_scope.cancel()
    end = now()

    # -- final observations --------------------------------------------------------------
    stages_out: dict[str, Any] = {}
    events = 0
    busy_total = 0.0
    replica_seconds = 0.0
    e2e = LatencyHistogram()
    e2e_series: list[Series] = []
    totals = {"redeliveries": 0, "dropped": 0, "unresolved": 0}
    for st in spec.stages:
        w = workers[st.name]
        c = w.counters
        events += c.received
        obs = {"pending": 0, "leased": 0, "unresolved": 0, "dropped": 0, "redelivered": 0}
        for sub in pipe.subscriptions[st.name]:
            seen = await messaging.observe_subscription(sub)
            if isinstance(seen, Known):
                v = seen.value
                obs["pending"] += v.pending
                obs["leased"] += v.leased
                obs["unresolved"] += v.unresolved
                obs["dropped"] += v.dropped
                obs["redelivered"] += v.redelivered
        warm = probe.busy_at_warmup.get(st.name, [0.0] * len(c.busy_seconds))
        last = probe.busy_at_end.get(st.name, list(c.busy_seconds))
        utilization = [(b - a) / window_len for a, b in zip(warm, last, strict=True)]
        busy_total += sum(b - a for a, b in zip(warm, last, strict=True))
        replica_seconds += window_len * len(utilization)
        rec = recorders[st.name]
        if rec.e2e is not None:
            e2e.merge(rec.e2e)
            assert rec.e2e_series is not None
            e2e_series.append(rec.e2e_series)
        totals["redeliveries"] += obs["redelivered"]
        totals["dropped"] += obs["dropped"]
        totals["unresolved"] += obs["unresolved"]
        stages_out[st.name] = {
            "latency_ms": rec.stage.summary(1000.0),
            "throughput_hz": rec.stage.count / window_len,
            "redeliveries": obs["redelivered"],
            "dropped": obs["dropped"],
            "unresolved": obs["unresolved"],
            "utilization": utilization,
            "completed": c.completed,
            "retried": c.retried,
            "dead_lettered": c.terminal,
            "stale_settles": c.stale,
            "crashes": c.crashes,
            "lease_renewals": c.renewals,
            "payload_failures": c.payload_failures,
            "pending_at_end": obs["pending"] + obs["leased"],
            "replicas": st.replicas,
            "batch": st.batch,
            "service_mean_ms": mean_seconds(st.service) * 1000.0,
            "gpu": gpu.get(st.name),
        }
    rejected = sum(c["rejected"] for c in source_counts.values())
    frames = sum(c["frames"] for c in source_counts.values())
    end_to_end = {
        "latency_ms": e2e.summary(1000.0),
        "throughput_hz": e2e.count / window_len,
        "redeliveries": totals["redeliveries"],
        "dropped": totals["dropped"] + rejected,
        "unresolved": totals["unresolved"],
        "utilization": busy_total / replica_seconds if replica_seconds else None,
        "frames": frames,
        "completed": e2e.count,
    }
    sources_out = {
        src.name: {
            "frames": source_counts[src.name]["frames"],
            "rejected": source_counts[src.name]["rejected"],
            "ambiguous_publishes_retried": publishers[src.name].counters.retried,
            "rate_hz": src.rate_hz * src.streams,
            "arrival": src.arrival,
            "bytes": src.bytes,
        }
        for src in spec.sources
    }
    merged = _merge_series(e2e_series, bin_seconds, nbins)
    series = {
        "bin_seconds": bin_seconds,
        "t_seconds": [b * bin_seconds for b in range(nbins)],
        "quantiles": list(QUANTILES),
        "end_to_end": {"latency": merged.as_dict(), "quantiles_ms": _quantiles_ms(e2e)},
        "stages": {
            name: {
                "latency": recorders[name].series.as_dict(),
                "quantiles_ms": _quantiles_ms(recorders[name].stage),
                "queued": probe.queued[name],
                "leased": probe.leased[name],
            }
            for name in recorders
        },
    }
    if alloc is not None:
        for name, g in gpu.items():
            rel = await alloc.release(g["claim"], f"sim-release-{name}", g["generation"])
            g["released"] = rel.phase
    return {
        "run": {
            "seed": run.seed,
            "backend": run.backend,
            "duration_seconds": duration,
            "warmup_seconds": run.warmup_seconds,
            "virtual_seconds": end - start,
            "wall_seconds": 0.0,
            "events": events,
            "drained": drained,
            "gpu_ready_seconds": ready_at,
            "histogram_relative_error": 2.0 ** -(DEFAULT_PRECISION_BITS + 1),
        },
        "stages": stages_out,
        "end_to_end": end_to_end,
        "sources": sources_out,
        "faults": fault_reports,
        "series": series,
    }


QUANTILES = (*(round(q / 100, 2) for q in range(1, 100)), 0.995, 0.999)
"""The quantiles each distribution is published at (for plots)."""


def _quantiles_ms(h: LatencyHistogram) -> list[float] | None:
    if not h.count:
        return None
    return [v * 1000.0 for v in h.percentiles(QUANTILES)]


def _fault_dict(f: Any) -> dict[str, Any]:
    return {
        "kind": f.kind,
        "at_seconds": f.at_seconds,
        "stage": f.stage,
        "channel": f.channel,
        "replica": f.replica if f.kind == "crash_replica" else None,
        "duration_seconds": f.duration_seconds,
        "restart_after_seconds": f.restart_after_seconds,
        "count": f.count if f.kind == "fail_payload_reads" else None,
        "factor": f.factor if f.kind == "slow_stage" else None,
    }


def _merge_series(parts: list[Series], bin_seconds: float, nbins: int) -> Series:
    if len(parts) == 1:
        return parts[0]
    merged = Series(bin_seconds, nbins)
    for part in parts:
        merged.merge(part)
    return merged


def simulate(spec: SimSpec, *, progress: ProgressCallback | None = None) -> dict[str, Any]:
    """Run ``spec`` on a fresh virtual clock under ``spec.run.backend``; the result as the
    JSON-ready dict described in ``docs/simulate.md`` (``run.wall_seconds`` is the only
    value that depends on the machine)."""
    wall0 = time.perf_counter()  # wall-clock: reported as run.wall_seconds, nothing else
    result = vrun(_simulate, spec, progress, backend=spec.run.backend, clock=VirtualClock())
    result["run"]["wall_seconds"] = time.perf_counter() - wall0  # wall-clock: as above
    return result


__all__ = ["ProgressCallback", "SimError", "bin_seconds_for", "generate", "simulate"]
