"""Run a simulation: the real memory models on virtual time, driven by the pipeline
toolkit's stage workers, with seeded load generators and scheduled faults.

One seeded RNG per random stream — ``random.Random(f"{seed}/source/{name}")`` for a
source's arrivals and phases, ``f"{seed}/stage/{name}"`` for a stage's service times — so
adding a stage or a source leaves every other stream's samples unchanged.
"""

from __future__ import annotations

import gc
import math
import random
import time
from typing import Any, cast

import anyio

from ..contracts.messaging import ChannelId, MessagingBackend
from ..memory.allocation import MemoryAllocationBackend
from ..memory.messaging import MemoryMessagingBackend
from ..memory.payload import MemoryPayloadStore
from ..pipeline import (
    ExceptionPolicy,
    Node,
    Output,
    Pipeline,
    Publisher,
    StageOptions,
    StageWorker,
    ensure_pipeline,
    loop_clock,
    stage_worker,
)
from ..vtime import VirtualClock
from ..vtime import run as vrun
from ._batching import StageBackend
from ._dist import sampler
from ._e2e import FrameLedger, LossLedger, owed_settles
from ._faults import (
    FailureTally,
    FaultContext,
    FaultOutcome,
    SlowDown,
    StallablePayloadStore,
    failure_report,
    fault_report,
    run_failure,
    run_fault,
)
from ._gpu import Reservation, node_fixture, reserve_gpus
from ._join import JoinBackend
from ._load import batch_handler, generate, stage_handler
from ._probe import Probe, ProgressCallback, run_probe
from ._record import StageRecorder
from ._result import RunTimes, build_result
from ._result_types import GpuGrant, SimResult
from ._spec_types import SimSpec, StageSpec

MAX_BINS = 600
POLL_SECONDS = 1.0
"""How long an idle stage worker's receive waits before looking again."""
GC_GEN0 = 20_000
"""The cyclic collector's youngest-generation threshold while a simulation runs."""


def bin_seconds_for(spec: SimSpec) -> float:
    """The time-series resolution: ``run.bin_seconds``, else the duration in at most
    :data:`MAX_BINS` bins of a whole number of seconds (or 1/10 s steps for short runs)."""
    if spec.run.bin_seconds is not None:
        return spec.run.bin_seconds
    raw = spec.run.duration_seconds / MAX_BINS
    if raw >= 1.0:
        return float(math.ceil(raw))
    return max(0.1, math.ceil(raw * 10) / 10)


def pipeline_nodes(spec: SimSpec) -> list[Node]:
    """The spec's sources and stages as pipeline nodes. A node's channel bound comes from
    the stages that read it (the smallest ``max_queue``, the first reader's ``overflow``);
    a stage's subscription allows 4 leases per replica and batch item (at least 64), so a
    crashed replica's unexpired leases do not starve the others; a join's allows its whole
    ``max_queue`` (it holds copies until their frame is complete: copies that arrive in
    different orders on two inputs must not exhaust its leases)."""
    readers: dict[str, list[StageSpec]] = {}
    for st in spec.stages:
        for inp in st.inputs:
            readers.setdefault(inp, []).append(st)

    def node(name: str, inputs: tuple[str, ...], st: StageSpec | None) -> Node:
        kw: dict[str, Any] = {}
        rs = readers.get(name, [])
        if rs:
            kw["max_msgs"] = min(r.max_queue for r in rs)
            kw["overflow"] = rs[0].overflow
        if st is not None:
            kw["ack_wait_seconds"] = st.ack_wait_seconds
            kw["max_deliver"] = st.max_deliver
            kw["item_credit"] = max(64, 4 * st.replicas * st.batch)
            if st.join is not None:  # the join leases whatever its inputs hold: never stuck
                kw["item_credit"] = max(kw["item_credit"], st.max_queue)  # on reordered copies
        return Node(name=name, inputs=inputs, **kw)

    return [node(s.name, (), None) for s in spec.sources] + [
        node(s.name, s.inputs, s) for s in spec.stages
    ]


class _Frames:
    """One zero-filled buffer per size: the payload model memoises the digest of the last
    buffer put, so reusing it keeps SHA-256 off the per-frame path."""

    def __init__(self) -> None:
        self._cache: dict[int, bytes] = {}

    def __call__(self, size: int) -> bytes | None:
        if not size:
            return None
        data = self._cache.get(size)
        if data is None:
            data = self._cache[size] = bytes(size)
        return data


def _workers(
    spec: SimSpec,
    pipe: Pipeline,
    messaging: MemoryMessagingBackend,
    store: Any,
    start: float,
    bins: tuple[float, int],
    frames: _Frames,
    ledger: FrameLedger,
) -> tuple[
    dict[str, StageWorker],
    dict[str, StageRecorder],
    dict[str, SlowDown],
    dict[str, JoinBackend],
]:
    window = (spec.run.warmup_seconds, spec.run.duration_seconds)
    workers: dict[str, StageWorker] = {}
    recorders: dict[str, StageRecorder] = {}
    slowdowns: dict[str, SlowDown] = {}
    joins: dict[str, JoinBackend] = {}
    for st in spec.stages:
        sink = not pipe.readers[st.name]
        slow = slowdowns[st.name] = SlowDown()
        rng = random.Random(f"{spec.run.seed}/stage/{st.name}")
        data = frames(st.output_bytes)
        output: list[Output | bytes] | None = None
        if not sink:
            output = [Output(data=data)] if data is not None else [b""]
        sample = sampler(st.service, rng)
        per_item = st.service.per_item_ms / 1000.0
        rec = recorders[st.name] = StageRecorder(
            start, window, *bins, frames=ledger if sink else None
        )
        options = _options(spec, st, store, rec)
        if st.join is not None:
            jb = joins[st.name] = JoinBackend(
                messaging,
                st.name,
                tuple(pipe.subscriptions[st.name]),
                timeout=None if st.join_timeout_ms is None else st.join_timeout_ms / 1000.0,
                poll_seconds=POLL_SECONDS,
                lost=ledger.lost,
            )
            jb.received = rec.received
            worker = StageWorker(
                cast(MessagingBackend, jb),
                jb.subscription,
                stage_handler(sample, slow, output, per_item),
                name=st.name,
                output=pipe.output(st.name),
                readers=pipe.readers[st.name],
                eos=pipe.eos_subscriptions[st.name],
                **options,
            )
            jb.draining = lambda w=worker: w.draining  # type: ignore[misc]
        else:
            wait = None if st.batch_service is None else st.batch_service.max_wait_ms / 1000.0
            sb = StageBackend(messaging, max_wait=wait)
            sb.received = rec.received
            handler = (
                stage_handler(sample, slow, output, per_item)
                if st.batch_service is None
                else batch_handler(sample, per_item, slow, output, sb.batch_of)
            )
            worker = stage_worker(cast(MessagingBackend, sb), pipe, st.name, handler, **options)
        workers[st.name] = worker
    return workers, recorders, slowdowns, joins


def _options(spec: SimSpec, st: StageSpec, store: Any, rec: StageRecorder) -> StageOptions:
    """The stage worker's options for stage ``st``."""
    return StageOptions(
        replicas=st.replicas,
        batch=st.batch,
        payload=store,
        policy=ExceptionPolicy(retry_delay_seconds=st.retry_delay_seconds),
        poll_seconds=POLL_SECONDS,
        observe=rec,
        payload_ttl_seconds=spec.payload.ttl_seconds,
        obligation_seconds=spec.payload.obligation_seconds,
        handler_timeout_seconds=None,  # service times are the spec's, however long
        idle_limit_seconds=None,  # run.drain_seconds bounds the run instead
    )


async def _run_stage(worker: StageWorker, join: JoinBackend | None) -> None:
    """Run one stage's worker (and a join stage's pumps, until the worker returns)."""
    if join is None:
        await worker.run()
        return
    async with anyio.create_task_group() as tg:
        tg.start_soon(join.run)
        await worker.run()
        tg.cancel_scope.cancel()


async def _simulate(
    spec: SimSpec,
    progress: ProgressCallback | None,
    clock: VirtualClock,
    track_losses: bool,
    wall_start: float,
) -> tuple[SimResult, bool]:
    """The result, and whether it is exact: False when messages were lost on a run that
    did not tell which frames they belonged to (``track_losses``: the second pass, so
    ``run.passes`` is 2; ``run.wall_seconds`` counts from ``wall_start``)."""
    now, _ = loop_clock()
    setup_start = now()
    run = spec.run
    bin_seconds = bin_seconds_for(spec)
    bins = (bin_seconds, max(1, math.ceil(run.duration_seconds / bin_seconds - 1e-9)))

    # the models read the run's virtual clock directly (the loop's own reading, without
    # looking up the running loop on every call)
    # following every copy of every frame through the model's observation log costs ~15 %
    # of the run: only when asked (track_losses)
    ledger_class = LossLedger if track_losses else FrameLedger
    window = (run.warmup_seconds, run.duration_seconds)
    ledger = ledger_class(owed_settles(spec), 0.0, window, *bins)
    messaging = MemoryMessagingBackend(clock=clock, log=ledger.log())
    model, stallable, store = _payload_models(spec, clock)
    pipe = await ensure_pipeline(messaging, run.flow_id, run.run_id, pipeline_nodes(spec))
    if isinstance(ledger, LossLedger):
        ledger.wire(pipe)

    alloc, gpu = await _reserve_gpus(spec)
    start = now()  # the load starts once the GPUs are ready (geometry may take a while)
    ledger.start_at(start)
    end = start + run.duration_seconds
    frames = _Frames()
    workers, recorders, slowdowns, joins = _workers(
        spec, pipe, messaging, store, start, bins, frames, ledger
    )
    publishers = {
        src.name: Publisher(
            messaging,
            pipe.channels[src.name],
            payload=store,
            readers=pipe.readers[src.name],
            ttl_seconds=spec.payload.ttl_seconds,
            obligation_seconds=spec.payload.obligation_seconds,
        )
        for src in spec.sources
    }
    counts = {src.name: {"frames": 0, "rejected": 0} for src in spec.sources}
    inputs: dict[str, tuple[ChannelId, ...]] = {
        st.name: tuple(sub.channel for sub in pipe.subscriptions[st.name]) for st in spec.stages
    }
    ctx = FaultContext(
        start=start,
        messaging=messaging,
        payload_model=model,
        stallable=stallable,
        workers=workers,
        inputs=inputs,
        channels=pipe.channels,
        slowdowns=slowdowns,
        now=now,
    )
    outcomes = [FaultOutcome() for _ in spec.faults]
    tallies = [FailureTally(f, _replicas(spec, f.stage)) for f in spec.failures]
    probe = Probe([s.name for s in spec.stages], bins[1])

    async with anyio.create_task_group() as tg:
        stages = anyio.create_task_group()
        async with stages:
            for name, w in workers.items():
                stages.start_soon(_run_stage, w, joins.get(name))
            tg.start_soon(
                run_probe,
                spec,
                start,
                *bins,
                messaging,
                pipe.subscriptions,
                workers,
                probe,
                progress,
            )
            for f, outcome in zip(spec.faults, outcomes, strict=True):
                tg.start_soon(run_fault, ctx, f, outcome, run.duration_seconds)
            for i, (fp, tally) in enumerate(zip(spec.failures, tallies, strict=True)):
                for k in range(len(tally.events)):
                    rng = random.Random(f"{run.seed}/failure/{i}/{k}")
                    tg.start_soon(run_failure, ctx, fp, k, tally, rng, run.duration_seconds)
            async with anyio.create_task_group() as sources:
                for src in spec.sources:
                    rng = random.Random(f"{run.seed}/source/{src.name}")
                    sources.start_soon(
                        generate,
                        src,
                        publishers[src.name],
                        rng,
                        start,
                        end,
                        frames(src.bytes),
                        counts[src.name],
                        ledger,
                    )
            # the sources sent eos: the stages drain and return, or run out of time
            stages.cancel_scope.deadline = max(now(), end) + run.drain_seconds
        tg.cancel_scope.cancel()
    finished = now()
    ledger.close()
    grants = await _release_gpus(alloc, gpu)

    result, losses = await build_result(
        spec,
        messaging=messaging,
        pipe=pipe,
        workers=workers,
        recorders=recorders,
        frames=ledger,
        publishers=publishers,
        source_counts=counts,
        probe=probe,
        joins=joins,
        gpu=grants,
        faults=[fault_report(f, o) for f, o in zip(spec.faults, outcomes, strict=True)],
        failures=[
            failure_report(f, t, run.duration_seconds)
            for f, t in zip(spec.failures, tallies, strict=True)
        ],
        bins=bins,
        times=RunTimes(
            virtual_seconds=finished - setup_start,
            gpu_ready_seconds=start - setup_start,
            passes=2 if track_losses else 1,
            wall_start=wall_start,
        ),
    )
    return result, track_losses or not losses


async def _release_gpus(
    alloc: MemoryAllocationBackend | None, gpu: dict[str, Reservation]
) -> dict[str, GpuGrant]:
    """Give back every stage's GPU claim; each stage's grant with the phase it ended in."""
    grants: dict[str, GpuGrant] = {}
    if alloc is None:
        return grants
    for name, g in gpu.items():
        released = await alloc.release(g.claim, f"sim-release-{name}", g.generation)
        grants[name] = g.grant(released.phase)
    return grants


def _replicas(spec: SimSpec, stage: str | None) -> int:
    return spec.stage(stage).replicas if stage is not None else 1


def _payload_models(
    spec: SimSpec, clock: VirtualClock
) -> tuple[MemoryPayloadStore | None, StallablePayloadStore | None, Any]:
    """``(payload model, its stallable wrapper, the store the workers use)``: no store when
    nothing in the spec carries bytes or faults the payload store."""
    payload_faults = ("pause_payload", "fail_payload_reads")
    kinds = {f.kind for f in spec.faults} | {f.kind for f in spec.failures}
    if not (
        any(s.bytes for s in spec.sources)
        or any(s.output_bytes for s in spec.stages)
        or any(k in payload_faults for k in kinds)
    ):
        return None, None, None
    model = MemoryPayloadStore(clock, tier=spec.payload.tier, max_bytes=spec.payload.max_bytes)
    if "pause_payload" in kinds:
        stallable = StallablePayloadStore(model)
        return model, stallable, stallable
    return model, None, model


async def _reserve_gpus(
    spec: SimSpec,
) -> tuple[MemoryAllocationBackend | None, dict[str, Reservation]]:
    """The allocation model of the spec's ``[[node]]``s and each GPU stage's reservations."""
    gpu: dict[str, Reservation] = {}
    if not spec.nodes:
        return None, gpu
    alloc = MemoryAllocationBackend(
        [node_fixture(n) for n in spec.nodes],
        authority=spec.gpu.authority,
        mig_apply_seconds=spec.gpu.mig_apply_seconds,
    )
    for i, st in enumerate(spec.stages):
        if st.gpu:
            gpu[st.name] = await reserve_gpus(alloc, st, i)
    return alloc, gpu


def simulate(spec: SimSpec, *, progress: ProgressCallback | None = None) -> dict[str, Any]:
    """:func:`run_result` as the JSON-ready dict described in ``docs/simulate.md``."""
    return run_result(spec, progress=progress).to_dict()


def run_result(spec: SimSpec, *, progress: ProgressCallback | None = None) -> SimResult:
    """Run ``spec`` on a fresh virtual clock under ``spec.run.backend``; the typed result
    (``run.wall_seconds`` is the only value that depends on the machine). A run in which
    the messaging model lost messages runs twice (see ``_simulate``); ``run.passes`` says
    how often it ran."""
    wall0 = time.perf_counter()  # wall-clock: reported as run.wall_seconds, nothing else
    clock = VirtualClock()
    thresholds = gc.get_threshold()
    # a run allocates millions of short-lived objects (envelopes, deliveries, futures,
    # handles) and frees them by reference counting: the cyclic collector's youngest
    # generation is scanned every GC_GEN0 allocations instead of every 700 (cycles are still
    # collected, memory stays flat); the caller's thresholds come back afterwards
    gc.set_threshold(max(thresholds[0], GC_GEN0), *thresholds[1:])
    try:
        # the first pass does not follow the frames' copies; a run that lost messages is run
        # again, identically, following them (see _e2e)
        backend = spec.run.backend
        result, exact = vrun(
            _simulate, spec, progress, clock, False, wall0, backend=backend, clock=clock
        )
        if not exact:
            clock = VirtualClock()
            result, exact = vrun(
                _simulate, spec, progress, clock, True, wall0, backend=backend, clock=clock
            )
    finally:
        gc.set_threshold(*thresholds)
    return result


__all__ = ["MAX_BINS", "bin_seconds_for", "pipeline_nodes", "run_result", "simulate"]
