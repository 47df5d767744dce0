"""Fault injection for the simulator: each ``[[fault]]`` runs as a task that waits for its
instant and acts through a model control or a worker control.

* ``crash_replica``: replica ``replica`` dies mid-message — at once if it holds messages, else
  right after the receive that leases its next one — so its leases expire and redeliver;
  it restarts ``restart_after_seconds`` (default 10) after dying.
* ``kill_stage``: every replica of the stage dies at once (busy ones mid-message); restarted
  after ``restart_after_seconds`` when given, else never.
* ``pause_acceptance``: the messaging model holds every publication to the channel (the
  stage's inputs, or ``channel``) for ``duration_seconds`` (publishers see
  ``PublicationUnknown`` and retry), then stores them late.
* ``pause_payload``: the payload store stops answering for ``duration_seconds``: every call
  waits (a store stalled by a fork or a failover; the contract's calls carry no deadline).
* ``fail_payload_reads``: the payload model's ``fail_reads``: the next ``count`` reads return
  ``TransientFailure`` (the worker settles ``Retry``).
* ``slow_stage``: the stage's service times are multiplied by ``factor`` for
  ``duration_seconds``.

A failure process (``[[failure]]``, :func:`run_failure`) applies the same kinds again and
again: up for a draw of mean ``mtbf_seconds``, down (the fault in force) for a draw of mean
``mttr_seconds``; ``crash_replica`` runs one process per replica, each with its own seeded
RNG.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable, Sequence

import anyio

from ..contracts.messaging import ChannelId
from ..contracts.payload import (
    DurableReceipt,
    ImmutablePayloadRef,
    InventoryObservation,
    ObligationLedger,
    PayloadCapabilities,
    PayloadReadResult,
    PayloadStore,
    ReclamationObservation,
    ReleaseReceipt,
    RetentionContract,
)
from ..memory.messaging import MemoryMessagingBackend
from ..memory.payload import MemoryPayloadStore
from ..pipeline import StageWorker
from ._result_types import FailureReport, FaultReport
from ._spec_types import FailureSpec, FaultSpec


class StallablePayloadStore(PayloadStore):
    """A payload store that can stop answering: while stalled, every call waits until
    :meth:`resume`, then runs on the wrapped store."""

    def __init__(self, inner: PayloadStore) -> None:
        self.inner = inner
        self._resumed: anyio.Event | None = None

    def stall(self) -> None:
        if self._resumed is None:
            self._resumed = anyio.Event()

    def resume(self) -> None:
        ev, self._resumed = self._resumed, None
        if ev is not None:
            ev.set()

    async def _gate(self) -> None:
        ev = self._resumed
        if ev is not None:
            await ev.wait()

    async def put(
        self, data: bytes, content_id: str, contract: RetentionContract
    ) -> ImmutablePayloadRef:
        await self._gate()
        return await self.inner.put(data, content_id, contract)

    async def read(self, ref: ImmutablePayloadRef, reader: str | None = None) -> PayloadReadResult:
        await self._gate()
        return await self.inner.read(ref, reader)

    async def acquire_obligation(
        self, ref: ImmutablePayloadRef, obligation_id: str, deadline: float
    ) -> DurableReceipt:
        await self._gate()
        return await self.inner.acquire_obligation(ref, obligation_id, deadline)

    async def renew_obligation(
        self, ref: ImmutablePayloadRef, obligation_id: str, deadline: float
    ) -> DurableReceipt:
        await self._gate()
        return await self.inner.renew_obligation(ref, obligation_id, deadline)

    async def release_obligation(
        self, ref: ImmutablePayloadRef, obligation_id: str, completion_receipt: str
    ) -> ReleaseReceipt:
        await self._gate()
        return await self.inner.release_obligation(ref, obligation_id, completion_receipt)

    async def reconcile(
        self, ledger: ObligationLedger, operation_id: str
    ) -> ReclamationObservation:
        await self._gate()
        return await self.inner.reconcile(ledger, operation_id)

    async def inventory(self) -> InventoryObservation:
        await self._gate()
        return await self.inner.inventory()

    async def ref_for_key(self, key: str) -> ImmutablePayloadRef:
        await self._gate()
        return await self.inner.ref_for_key(key)

    async def capabilities(self) -> PayloadCapabilities:
        return await self.inner.capabilities()


class SlowDown:
    """A stage's service-time multiplier (``slow_stage``)."""

    __slots__ = ("factor",)

    def __init__(self) -> None:
        self.factor = 1.0


class FaultContext:
    """What fault tasks act on."""

    def __init__(
        self,
        *,
        start: float,
        messaging: MemoryMessagingBackend,
        payload_model: MemoryPayloadStore | None,
        stallable: StallablePayloadStore | None,
        workers: dict[str, StageWorker],
        inputs: dict[str, tuple[ChannelId, ...]],
        channels: dict[str, ChannelId],
        slowdowns: dict[str, SlowDown],
        now: Callable[[], float],
    ) -> None:
        self.start = start
        self.messaging = messaging
        self.payload_model = payload_model
        self.stallable = stallable
        self.workers = workers
        self.inputs = inputs
        self.channels = channels
        self.slowdowns = slowdowns
        self.now = now


class FaultOutcome:
    """What one fault did, noted as it runs (virtual seconds from the start of the load);
    None for what did not happen. :func:`fault_report` makes its report once the run is
    over."""

    __slots__ = (
        "accepted_late",
        "applied_at_seconds",
        "busy_replicas",
        "died_at_seconds",
        "ended_at_seconds",
        "restarted_at_seconds",
        "resumed_at_seconds",
    )

    def __init__(self) -> None:
        self.applied_at_seconds: float | None = None
        self.died_at_seconds: float | None = None
        self.busy_replicas: int | None = None
        self.restarted_at_seconds: float | None = None
        self.accepted_late: int | None = None
        self.resumed_at_seconds: float | None = None
        self.ended_at_seconds: float | None = None


def fault_report(f: FaultSpec, done: FaultOutcome) -> FaultReport:
    """The fault as specified (the keys that apply to its kind) and what it did."""
    return FaultReport(
        kind=f.kind,
        at_seconds=f.at_seconds,
        stage=f.stage,
        channel=f.channel,
        replica=f.replica if f.kind == "crash_replica" else None,
        duration_seconds=f.duration_seconds,
        restart_after_seconds=f.restart_after_seconds,
        count=f.count if f.kind == "fail_payload_reads" else None,
        factor=f.factor if f.kind == "slow_stage" else None,
        applied_at_seconds=done.applied_at_seconds,
        died_at_seconds=done.died_at_seconds,
        busy_replicas=done.busy_replicas,
        restarted_at_seconds=done.restarted_at_seconds,
        accepted_late=done.accepted_late,
        resumed_at_seconds=done.resumed_at_seconds,
        ended_at_seconds=done.ended_at_seconds,
    )


async def _sleep_until(ctx: FaultContext, offset: float) -> None:
    delay = ctx.start + offset - ctx.now()
    if delay > 0:
        await anyio.sleep(delay)


async def run_fault(
    ctx: FaultContext, spec: FaultSpec, report: FaultOutcome, duration: float = float("inf")
) -> None:
    """Apply one fault at its instant; note in ``report`` what it did (virtual seconds
    from the start of the run). A fault due at or after the load's ``duration`` is not
    applied (``report.applied_at_seconds`` stays None)."""
    if spec.at_seconds >= duration:
        return
    await _sleep_until(ctx, spec.at_seconds)
    report.applied_at_seconds = ctx.now() - ctx.start
    await _KINDS[spec.kind](ctx, spec, report)


async def _crash_replica(ctx: FaultContext, spec: FaultSpec, report: FaultOutcome) -> None:
    assert spec.stage is not None
    worker = ctx.workers[spec.stage]
    worker.crash(spec.replica, mid_message=True)
    await worker.wait_dead(spec.replica)
    report.died_at_seconds = ctx.now() - ctx.start
    if spec.restart_after_seconds is not None:
        await anyio.sleep(spec.restart_after_seconds)
        worker.restart(spec.replica)
        report.restarted_at_seconds = ctx.now() - ctx.start


async def _kill_stage(ctx: FaultContext, spec: FaultSpec, report: FaultOutcome) -> None:
    assert spec.stage is not None
    worker = ctx.workers[spec.stage]
    report.busy_replicas = sum(worker.busy())
    for i in range(len(worker.alive())):
        worker.crash(i, mid_message=False)
    if spec.restart_after_seconds is not None:
        await anyio.sleep(spec.restart_after_seconds)
        for i in range(len(worker.alive())):
            worker.restart(i)
        report.restarted_at_seconds = ctx.now() - ctx.start


async def _pause_acceptance(ctx: FaultContext, spec: FaultSpec, report: FaultOutcome) -> None:
    channels: Sequence[ChannelId]
    if spec.channel is not None:
        channels = (ctx.channels[spec.channel],)
    else:
        assert spec.stage is not None
        channels = ctx.inputs[spec.stage]
    for ch in channels:
        ctx.messaging.pause_acceptance(ch)
    assert spec.duration_seconds is not None
    await anyio.sleep(spec.duration_seconds)
    late = 0
    for ch in channels:
        late += len(ctx.messaging.resume_acceptance(ch))
    report.accepted_late = late
    report.resumed_at_seconds = ctx.now() - ctx.start


async def _pause_payload(ctx: FaultContext, spec: FaultSpec, report: FaultOutcome) -> None:
    assert ctx.stallable is not None and spec.duration_seconds is not None
    ctx.stallable.stall()
    await anyio.sleep(spec.duration_seconds)
    ctx.stallable.resume()
    report.resumed_at_seconds = ctx.now() - ctx.start


async def _fail_payload_reads(ctx: FaultContext, spec: FaultSpec, report: FaultOutcome) -> None:
    assert ctx.payload_model is not None
    ctx.payload_model.fail_reads(["injected read failure"] * spec.count)


async def _slow_stage(ctx: FaultContext, spec: FaultSpec, report: FaultOutcome) -> None:
    assert spec.stage is not None and spec.duration_seconds is not None
    slow = ctx.slowdowns[spec.stage]
    slow.factor = spec.factor
    await anyio.sleep(spec.duration_seconds)
    slow.factor = 1.0
    report.ended_at_seconds = ctx.now() - ctx.start


_KINDS: dict[str, Callable[[FaultContext, FaultSpec, FaultOutcome], Awaitable[None]]] = {
    "crash_replica": _crash_replica,
    "kill_stage": _kill_stage,
    "pause_acceptance": _pause_acceptance,
    "pause_payload": _pause_payload,
    "fail_payload_reads": _fail_payload_reads,
    "slow_stage": _slow_stage,
}


FIRST_TIMES = 100
"""How many failure instants each replica's process lists in the result."""


class FailureTally:
    """What one failure process did, counted as it runs: per process (per replica for
    ``crash_replica``, else one) its ``events``, ``down_seconds`` and the first
    :data:`FIRST_TIMES` failure instants."""

    __slots__ = ("down_seconds", "events", "failed_at_seconds")

    def __init__(self, f: FailureSpec, replicas: int) -> None:
        n = replicas if f.kind == "crash_replica" else 1
        self.events = [0] * n
        self.down_seconds = [0.0] * n
        self.failed_at_seconds: list[list[float]] = [[] for _ in range(n)]


def failure_report(f: FailureSpec, tally: FailureTally, duration: float) -> FailureReport:
    """The process as specified and what it did; ``availability`` is the fraction of
    ``duration`` × processes not down."""
    down = list(tally.down_seconds)
    up, repair = f.mtbf_seconds, f.mttr_seconds
    return FailureReport(
        kind=f.kind,
        stage=f.stage,
        mtbf_seconds=up,
        mttr_seconds=repair,
        dist=f.dist,
        expected_availability=up / (up + repair),
        events=list(tally.events),
        down_seconds=down,
        failed_at_seconds=[list(t) for t in tally.failed_at_seconds],
        availability=1.0 - sum(down) / (duration * len(down)),
    )


async def run_failure(
    ctx: FaultContext,
    spec: FailureSpec,
    index: int,
    report: FailureTally,
    rng: random.Random,
    duration: float,
) -> None:
    """Run one failure process for the load's ``duration`` (seconds from ``ctx.start``):
    up times of mean ``mtbf_seconds`` and repairs of mean ``mttr_seconds`` alternate, from
    the start of the run; a failure due at or after ``duration`` is not applied. Down time
    is counted inside ``[0, duration)``; ``crash_replica`` kills a replica at once (busy or
    not: its leases expire and redeliver) and restarts it after the repair."""
    draw = _draw(spec.dist, rng)
    t = 0.0  # the instant this process came (back) up, seconds from the start
    events = report.events
    down = report.down_seconds
    times = report.failed_at_seconds
    while True:
        t += draw(spec.mtbf_seconds)
        if t >= duration:
            return
        await _sleep_until(ctx, t)
        repair = draw(spec.mttr_seconds)
        failed = ctx.now() - ctx.start
        events[index] += 1
        if len(times[index]) < FIRST_TIMES:
            times[index].append(failed)
        try:
            await _FAILURES[spec.kind](ctx, spec, index, repair)
        finally:  # also when the run ends mid-repair
            t = ctx.now() - ctx.start
            down[index] += max(0.0, min(t, duration) - min(failed, duration))


def _draw(dist: str, rng: random.Random) -> Callable[[float], float]:
    if dist == "constant":
        return lambda mean: mean
    expo = rng.expovariate
    return lambda mean: expo(1.0 / mean)


async def _fail_replica(ctx: FaultContext, spec: FailureSpec, replica: int, repair: float) -> None:
    assert spec.stage is not None
    worker = ctx.workers[spec.stage]
    if not worker.alive()[replica]:
        return  # down already (another fault): this failure finds nothing to kill
    worker.crash(replica, mid_message=False)
    await worker.wait_dead(replica)
    await anyio.sleep(repair)
    worker.restart(replica)


async def _fail_stage(ctx: FaultContext, spec: FailureSpec, _: int, repair: float) -> None:
    assert spec.stage is not None
    worker = ctx.workers[spec.stage]
    n = len(worker.alive())
    for i in range(n):
        worker.crash(i, mid_message=False)
    await anyio.sleep(repair)
    for i in range(n):
        worker.restart(i)


async def _fail_acceptance(ctx: FaultContext, spec: FailureSpec, _: int, repair: float) -> None:
    assert spec.stage is not None
    channels = ctx.inputs[spec.stage]
    for ch in channels:
        ctx.messaging.pause_acceptance(ch)
    await anyio.sleep(repair)
    for ch in channels:
        ctx.messaging.resume_acceptance(ch)


async def _fail_payload(ctx: FaultContext, spec: FailureSpec, _: int, repair: float) -> None:
    assert ctx.stallable is not None
    ctx.stallable.stall()
    await anyio.sleep(repair)
    ctx.stallable.resume()


async def _fail_slow(ctx: FaultContext, spec: FailureSpec, _: int, repair: float) -> None:
    assert spec.stage is not None
    slow = ctx.slowdowns[spec.stage]
    slow.factor = spec.factor
    await anyio.sleep(repair)
    slow.factor = 1.0


_FAILURES: dict[str, Callable[[FaultContext, FailureSpec, int, float], Awaitable[None]]] = {
    "crash_replica": _fail_replica,
    "kill_stage": _fail_stage,
    "pause_acceptance": _fail_acceptance,
    "pause_payload": _fail_payload,
    "slow_stage": _fail_slow,
}


__all__ = [
    "FIRST_TIMES",
    "FailureTally",
    "FaultContext",
    "FaultOutcome",
    "SlowDown",
    "StallablePayloadStore",
    "failure_report",
    "fault_report",
    "run_failure",
    "run_fault",
]
