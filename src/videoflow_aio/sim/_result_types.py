"""The typed result of one simulation run (:func:`~videoflow_aio.sim.simulate_run`).

Each Struct is built once, from figures that are final, by the code that computes them.
``msgspec.to_builtins`` of a :class:`SimResult` is the JSON-ready dict ``simulate(spec)``
returns (``docs/simulate.md``): field order is key order, and a field that is None by
default is left out where that dict leaves the key out (a fault's keys that do not apply to
its kind; ``failures`` without ``[[failure]]``). A figure nothing was measured for is None,
never 0.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..contracts.allocation import ClaimPhase


class LatencySummary(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A latency distribution in ms: ``mean``, ``p50`` … ``p999`` (nearest rank, within
    ``run.histogram_relative_error``) and ``max``; each None when nothing was measured."""

    mean: float | None
    p50: float | None
    p90: float | None
    p99: float | None
    p999: float | None
    max: float | None


class SloFraction(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The fraction of measured latencies over ``target_ms`` (None: nothing measured)."""

    target_ms: float
    fraction_over: float | None


class BatchServiceEcho(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A stage's batched service as specified (``batch = { max_items, max_wait_ms }``)."""

    max_items: int
    max_wait_ms: float
    per_item_ms: float


class JoinCounts(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A join stage's frames dropped at its timeout (``timed_out``) or left incomplete at
    the end of the run (``incomplete``), and its ``join_timeout_ms``."""

    timed_out: int
    incomplete: int
    timeout_ms: float | None


class GpuGrant(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A GPU stage's claim: the profile asked for, the claim and its generation, the nodes
    it was placed on, the devices bound per replica's workload, and the phase the claim
    ended in once released."""

    profile: str
    claim: str
    generation: str
    nodes: list[str]
    devices: dict[str, list[str]]
    released: ClaimPhase


class StageResult(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One stage: its latency and waiting time, throughput, the messaging model's counts at
    its input, the workers' counts, and its configuration as run."""

    latency_ms: LatencySummary
    waiting_ms: LatencySummary
    slo: list[SloFraction]
    throughput_hz: float
    redeliveries: int
    dropped: int
    unresolved: int
    unfinished: int
    utilization: list[float]
    completed: int
    retried: int
    dead_lettered: int
    stale_settles: int
    crashes: int
    lease_renewals: int
    payload_failures: int
    replicas: int
    batch: int
    batch_service: BatchServiceEcho | None
    join: JoinCounts | None
    service_mean_ms: float
    gpu: GpuGrant | None


class EndToEndResult(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Frame by frame: the latency of completed frames, and every frame counted once as
    ``completed``, ``dropped``, ``unresolved`` or ``unfinished``; ``utilization`` is the
    busy fraction of all replicas together (None without replica time)."""

    latency_ms: LatencySummary
    slo: list[SloFraction]
    throughput_hz: float
    redeliveries: int
    dropped: int
    dropped_reasons: dict[str, int]
    unresolved: int
    unfinished: int
    utilization: float | None
    frames: int
    completed: int
    measured: int


class SourceResult(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One source: frames published and refused, publishes retried after an unknown
    outcome, and its offered rate, arrival process and frame size."""

    frames: int
    rejected: int
    ambiguous_publishes_retried: int
    rate_hz: float
    arrival: str
    bytes: int


class RunInfo(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The run: its seed, backend and window, the virtual and wall seconds it took, how
    many passes it needed (2 when the model lost messages), the events delivered, whether
    the pipeline drained, when the GPUs were ready, and the histograms' relative error."""

    seed: int
    backend: str
    duration_seconds: float
    warmup_seconds: float
    virtual_seconds: float
    wall_seconds: float
    passes: int
    events: int
    drained: bool
    gpu_ready_seconds: float
    histogram_relative_error: float


class FaultReport(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """A ``[[fault]]`` as specified (the keys that apply to its kind) and what happened:
    ``applied_at_seconds`` (absent when the fault was due after the load) and what followed
    it, each in virtual seconds from the start of the load."""

    kind: str
    at_seconds: float
    stage: str | None = None
    channel: str | None = None
    replica: int | None = None
    duration_seconds: float | None = None
    restart_after_seconds: float | None = None
    count: int | None = None
    factor: float | None = None
    applied_at_seconds: float | None = None
    died_at_seconds: float | None = None
    busy_replicas: int | None = None
    restarted_at_seconds: float | None = None
    accepted_late: int | None = None
    resumed_at_seconds: float | None = None
    ended_at_seconds: float | None = None


class FailureReport(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A ``[[failure]]`` process as specified and what it did: ``events``,
    ``down_seconds`` and the first failure instants per process (per replica for
    ``crash_replica``), the measured ``availability`` and the expected one."""

    kind: str
    stage: str | None
    mtbf_seconds: float
    mttr_seconds: float
    dist: str
    expected_availability: float
    events: list[int]
    down_seconds: list[float]
    failed_at_seconds: list[list[float]]
    availability: float


class LatencySeries(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Per time bin: the count, and the mean, p99 (within 6.25 %) and max latency in ms
    (None for an empty bin)."""

    count: list[int]
    mean: list[float | None]
    p99: list[float | None]
    max: list[float | None]


class EndToEndSeries(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """End to end: the latency per bin and the distribution at ``series.quantiles``
    (None when nothing was measured)."""

    latency: LatencySeries
    quantiles_ms: list[float] | None


class StageSeries(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One stage: as :class:`EndToEndSeries`, plus the messages ``queued`` and ``leased``
    at its input per bin (None for a bin the probe did not reach)."""

    latency: LatencySeries
    quantiles_ms: list[float] | None
    queued: list[int | None]
    leased: list[int | None]


class SeriesResult(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The time series: bins of ``bin_seconds`` starting at ``t_seconds``, and the
    quantiles each distribution is given at."""

    bin_seconds: float
    t_seconds: list[float]
    quantiles: list[float]
    end_to_end: EndToEndSeries
    stages: dict[str, StageSeries]


class SimResult(
    msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, omit_defaults=True
):
    """One run's result; ``msgspec.to_builtins`` of it is the dict ``simulate(spec)``
    returns. ``failures`` is None (and absent from the dict) without ``[[failure]]``."""

    run: RunInfo
    stages: dict[str, StageResult]
    end_to_end: EndToEndResult
    sources: dict[str, SourceResult]
    faults: list[FaultReport]
    failures: list[FailureReport] | None = None
    series: SeriesResult

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready dict of ``docs/simulate.md`` (a new one on every call)."""
        out: dict[str, Any] = msgspec.to_builtins(self)
        return out


def result_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one run's result, as ``simulate(spec)`` returns
    it and ``to_json`` writes it (``msgspec.json.schema(SimResult)``)."""
    return {"$schema": _DRAFT, **msgspec.json.schema(SimResult)}


_DRAFT = "https://json-schema.org/draft/2020-12/schema"


__all__ = [
    "BatchServiceEcho",
    "EndToEndResult",
    "EndToEndSeries",
    "FailureReport",
    "FaultReport",
    "GpuGrant",
    "JoinCounts",
    "LatencySeries",
    "LatencySummary",
    "RunInfo",
    "SeriesResult",
    "SimResult",
    "SloFraction",
    "SourceResult",
    "StageResult",
    "result_schema",
]
