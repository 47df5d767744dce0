"""The spec document's shape, for the tables whose validated struct differs from what is
written (a service by its ``dist``, a fault by its ``kind``, a source, a stage, the
document itself): msgspec Structs that refuse unknown keys and check every bound on
decoding. Keys left out are ``UNSET`` where a rule depends on whether they were given."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from ..contracts.messaging import Overflow
from . import _limits as L
from ._spec_types import (
    BatchSpec,
    BurstSpec,
    Count,
    FailureSpec,
    GpuSpec,
    Ms,
    NodeSpec,
    PayloadSpec,
    PositiveCount,
    PositiveMs,
    PositiveSeconds,
    RunSpec,
    Seconds,
    Text,
)

_FLOAT_MAX = 1.7976931348623157e308  # finite: refuses inf (nan fails every bound)
Rate = Annotated[float, Meta(ge=0.0, le=1e9)]


class _Table(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    pass


class _Service(_Table, frozen=True, kw_only=True, tag_field="dist"):
    per_item_ms: Ms = 0.0


class ConstantIn(_Service, frozen=True, kw_only=True, tag="constant"):
    """A constant service time: ``value_ms`` or ``mean_ms`` (one of them, checked after)."""

    value_ms: Ms | None = None
    mean_ms: Ms | None = None


class ExponentialIn(_Service, frozen=True, kw_only=True, tag="exponential"):
    """Service times exponential with mean ``mean_ms``."""

    mean_ms: PositiveMs


class LognormalIn(_Service, frozen=True, kw_only=True, tag="lognormal"):
    """Lognormal by its mean and 99th percentile (``p99_ms`` > ``mean_ms``, checked after)."""

    mean_ms: PositiveMs
    p99_ms: PositiveMs


class EmpiricalIn(_Service, frozen=True, kw_only=True, tag="empirical"):
    """Samples inline, from a file of numbers, or both (at least one sample in all)."""

    file: Text | None = None
    samples_ms: Annotated[tuple[Ms, ...], Meta(max_length=L.MAX_SAMPLES)] = ()


ServiceIn = ConstantIn | ExponentialIn | LognormalIn | EmpiricalIn


class _Fault(_Table, frozen=True, kw_only=True, tag_field="kind"):
    at_seconds: Seconds


class CrashReplicaIn(_Fault, frozen=True, kw_only=True, tag="crash_replica"):
    stage: Text
    replica: Count = 0
    restart_after_seconds: Seconds = 10.0


class KillStageIn(_Fault, frozen=True, kw_only=True, tag="kill_stage"):
    stage: Text
    restart_after_seconds: Seconds | None = None


class PauseAcceptanceIn(_Fault, frozen=True, kw_only=True, tag="pause_acceptance"):
    stage: Text | None = None
    channel: Text | None = None
    duration_seconds: PositiveSeconds


class PausePayloadIn(_Fault, frozen=True, kw_only=True, tag="pause_payload"):
    duration_seconds: PositiveSeconds


class FailPayloadReadsIn(_Fault, frozen=True, kw_only=True, tag="fail_payload_reads"):
    count: PositiveCount = 1


class SlowStageIn(_Fault, frozen=True, kw_only=True, tag="slow_stage"):
    stage: Text
    duration_seconds: PositiveSeconds
    factor: Annotated[float, Meta(gt=0.0, le=L.MAX_FACTOR)] = 1.0


FAULTS = (
    CrashReplicaIn,
    KillStageIn,
    PauseAcceptanceIn,
    PausePayloadIn,
    FailPayloadReadsIn,
    SlowStageIn,
)
FaultIn = (
    CrashReplicaIn
    | KillStageIn
    | PauseAcceptanceIn
    | PausePayloadIn
    | FailPayloadReadsIn
    | SlowStageIn
)
FAULT_KEYS: dict[str, tuple[str, ...]] = {
    str(cls.__struct_config__.tag): tuple(f for f in cls.__struct_fields__ if f != "at_seconds")
    for cls in FAULTS
}
"""The keys each fault kind takes besides ``at_seconds`` and ``kind``."""


class SourceIn(_Table, frozen=True, kw_only=True):
    name: Text
    rate_hz: Annotated[float, Meta(ge=-_FLOAT_MAX, le=_FLOAT_MAX)] | UnsetType = UNSET
    """Finite; > 0 (>= 0 with a ``burst``) is checked after decoding."""
    streams: Annotated[int, Meta(ge=1, le=L.MAX_STREAMS)] = 1
    arrival: Literal["periodic", "poisson", "trace"] = "periodic"
    bytes: Annotated[int, Meta(ge=0, le=L.MAX_FRAME_BYTES)] = 0
    rate_schedule: (
        Annotated[
            tuple[tuple[Seconds, Rate], ...], Meta(min_length=1, max_length=L.MAX_SCHEDULE_STEPS)
        ]
        | UnsetType
    ) = UNSET
    burst: BurstSpec | UnsetType = UNSET
    trace: Text | UnsetType = UNSET
    trace_seconds: (
        Annotated[tuple[Seconds, ...], Meta(min_length=1, max_length=L.MAX_TRACE_FRAMES)]
        | UnsetType
    ) = UNSET
    jitter_ms: Ms | UnsetType = UNSET


class StageIn(_Table, frozen=True, kw_only=True):
    name: Text
    inputs: Annotated[tuple[str, ...], Meta(min_length=1)]
    service: ServiceIn
    replicas: Annotated[int, Meta(ge=1, le=L.MAX_REPLICAS)] = 1
    batch: Annotated[int, Meta(ge=1, le=L.MAX_BATCH)] | BatchSpec = 1
    ack_wait_seconds: PositiveSeconds = 30.0
    max_deliver: Annotated[int, Meta(ge=-1, le=L.MAX_COUNT)] = 5
    gpu: Text | None = None
    output_bytes: Annotated[int, Meta(ge=0, le=L.MAX_FRAME_BYTES)] = 0
    max_queue: PositiveCount = 10000
    overflow: Overflow = "evict_oldest"
    retry_delay_seconds: Seconds = 1.0
    join: Literal["all"] | None = None
    join_timeout_ms: PositiveMs | None = None
    per_item_ms: Ms | UnsetType = UNSET


class DocumentIn(_Table, frozen=True, kw_only=True):
    """A whole spec document; its arrays of tables bounded in length."""

    run: RunSpec
    source: Annotated[tuple[SourceIn, ...], Meta(max_length=L.MAX_NODES)] = ()
    stage: Annotated[tuple[StageIn, ...], Meta(max_length=L.MAX_NODES)] = ()
    fault: Annotated[tuple[FaultIn, ...], Meta(max_length=L.MAX_FAULTS)] = ()
    failure: Annotated[tuple[FailureSpec, ...], Meta(max_length=L.MAX_FAULTS)] = ()
    node: Annotated[tuple[NodeSpec, ...], Meta(max_length=L.MAX_NODES)] = ()
    gpu: GpuSpec = GpuSpec()
    payload: PayloadSpec = PayloadSpec()


__all__ = [
    "FAULTS",
    "FAULT_KEYS",
    "ConstantIn",
    "CrashReplicaIn",
    "DocumentIn",
    "EmpiricalIn",
    "ExponentialIn",
    "FailPayloadReadsIn",
    "FaultIn",
    "KillStageIn",
    "LognormalIn",
    "PauseAcceptanceIn",
    "PausePayloadIn",
    "ServiceIn",
    "SlowStageIn",
    "SourceIn",
    "StageIn",
]
