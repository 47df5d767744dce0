"""The simulation spec's validated, frozen structs and its errors.

The tables a spec document holds as they are (``[run]``, ``[payload]``, ``[gpu]``,
``[[node]]``, ``[[failure]]``, a stage's ``batch`` table, a source's ``burst``) are decoded
straight into these structs, their ``Meta`` constraints checked by msgspec; the others are
built from the document's shape in :mod:`._spec_input`.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from ..contracts.errors import ValidationError
from ..contracts.messaging import Overflow
from ..contracts.payload import Tier
from ..pipeline import NAME_FORBIDDEN
from . import _limits as L

Backend = Literal["asyncio", "trio"]
Authority = Literal["device-plugin", "mig-manager"]
BACKENDS = ("asyncio", "trio")
ARRIVALS = ("periodic", "poisson", "trace")
JOINS = ("all",)
FAILURE_KINDS = ("crash_replica", "kill_stage", "pause_acceptance", "pause_payload", "slow_stage")
FAILURE_DISTS = ("exponential", "constant")
DISTS = ("constant", "exponential", "lognormal", "empirical")
FAULT_KINDS = (
    "crash_replica",
    "kill_stage",
    "pause_acceptance",
    "pause_payload",
    "fail_payload_reads",
    "slow_stage",
)
OVERFLOWS = ("evict_oldest", "reject")
AUTHORITIES = ("device-plugin", "mig-manager")
NAME_BAD = NAME_FORBIDDEN  # node names become channel and subscription names
MAX_SERIES_BINS = 100_000
"""The most time-series bins a run may ask for (``run.bin_seconds``): memory per stage."""
MAX_FRAMES = 10**9
"""The most frames a run may generate (all sources' ``streams × rate_hz ×
run.duration_seconds``, Poisson sources by their expected count): at the simulator's ~20k
messages per CPU second a billion frames is days of CPU, so more is a typo, not a question."""


class SpecError(ValidationError):
    """A malformed simulation spec; ``field`` is the path of the offending key."""


class SimError(SpecError):
    """A spec that passed the checks but cannot be run as specified (e.g. GPU slices that do
    not fit the nodes once placed); ``field`` names the spec key. A :class:`SpecError`:
    the spec is what has to change."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message, field=field, value=None)


Seconds = Annotated[float, msgspec.Meta(ge=0.0, le=L.MAX_SECONDS)]
PositiveSeconds = Annotated[float, msgspec.Meta(gt=0.0, le=L.MAX_SECONDS)]
Ms = Annotated[float, msgspec.Meta(ge=0.0, le=L.MAX_MS)]
PositiveMs = Annotated[float, msgspec.Meta(gt=0.0, le=L.MAX_MS)]
Count = Annotated[int, msgspec.Meta(ge=0, le=L.MAX_COUNT)]
PositiveCount = Annotated[int, msgspec.Meta(ge=1, le=L.MAX_COUNT)]
Text = Annotated[str, msgspec.Meta(min_length=1, max_length=L.MAX_NAME_CHARS)]
"""A non-empty string of at most :data:`~._limits.MAX_NAME_CHARS` characters; a node name
is also checked for :data:`NAME_FORBIDDEN` and control characters after decoding."""


class RunSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``[run]``; ``slo_ms`` sorted without repeats once validated."""

    seed: Annotated[int, msgspec.Meta(ge=-(2**63), le=L.MAX_SEED)] = 0
    duration_seconds: PositiveSeconds
    warmup_seconds: Seconds = 0.0
    backend: Backend = "asyncio"
    drain_seconds: Seconds = 300.0
    bin_seconds: PositiveSeconds | None = None
    flow_id: Text = "sim"
    run_id: Text = "run"
    slo_ms: Annotated[tuple[Ms, ...], msgspec.Meta(max_length=L.MAX_SLO_TARGETS)] = ()


class PayloadSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    tier: Tier = "durable"
    max_bytes: Annotated[int, msgspec.Meta(ge=1, le=L.MAX_PAYLOAD_BYTES)] | None = None
    ttl_seconds: PositiveSeconds = 3600.0
    obligation_seconds: PositiveSeconds = 600.0


class ServiceSpec(msgspec.Struct, frozen=True, kw_only=True):
    dist: str
    mean_ms: float | None = None
    p99_ms: float | None = None
    value_ms: float | None = None
    file: str | None = None
    samples_ms: tuple[float, ...] = ()
    per_item_ms: float = 0.0


class BurstSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A source's on/off modulation: on and off periods alternate (starting off), each
    drawn from ``dist`` with its mean; while on, each stream sends at ``rate_hz``."""

    rate_hz: Annotated[float, msgspec.Meta(ge=0.0, le=1e9)]
    mean_on_seconds: PositiveSeconds
    mean_off_seconds: PositiveSeconds
    dist: Literal["exponential", "constant"] = "exponential"


class SourceSpec(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    rate_hz: float
    streams: int = 1
    arrival: str = "periodic"
    bytes: int = 0
    rate_schedule: tuple[tuple[float, float], ...] = ()
    burst: BurstSpec | None = None
    trace: str | None = None
    trace_seconds: tuple[float, ...] = ()
    jitter_ms: float = 0.0
    mean_rate_hz: float = 0.0
    """Each stream's long-run mean rate (the schedule's average, the bursts' mix, the
    trace's count over the run): what load checks and screens use."""


class BatchSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Batched service (``batch = { max_items = 8, max_wait_ms = 5 }``): a replica takes up
    to ``max_items`` messages, waiting at most ``max_wait_ms`` after the first for a fuller
    batch, and serves them together."""

    max_items: Annotated[int, msgspec.Meta(ge=1, le=L.MAX_BATCH)]
    max_wait_ms: Ms = 0.0


class StageSpec(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    inputs: tuple[str, ...]
    service: ServiceSpec
    replicas: int = 1
    batch: int = 1
    ack_wait_seconds: float = 30.0
    max_deliver: int = 5
    gpu: str | None = None
    output_bytes: int = 0
    max_queue: int = 10000
    overflow: Overflow = "evict_oldest"
    retry_delay_seconds: float = 1.0
    batch_service: BatchSpec | None = None
    join: str | None = None
    join_timeout_ms: float | None = None


class NodeSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: Text
    product: Text = "NVIDIA-H100-80GB-HBM3"
    gpus: PositiveCount = 1
    memory_gib: Annotated[float, msgspec.Meta(gt=0.0, le=L.MAX_MEMORY_GIB)] = 80.0
    mig: dict[str, Count] = {}


class GpuSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    authority: Authority = "device-plugin"
    mig_apply_seconds: Seconds = 0.0


class FaultSpec(msgspec.Struct, frozen=True, kw_only=True):
    at_seconds: float
    kind: str
    stage: str | None = None
    channel: str | None = None
    replica: int = 0
    duration_seconds: float | None = None
    restart_after_seconds: float | None = None
    count: int = 1
    factor: float = 1.0


class FailureSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A failure process (``[[failure]]``): up times of mean ``mtbf_seconds`` and repair
    times of mean ``mttr_seconds`` alternate, drawn from ``dist``; ``crash_replica`` runs
    one process per replica of ``stage``, the other kinds one per table."""

    mtbf_seconds: PositiveSeconds
    mttr_seconds: PositiveSeconds
    kind: Literal[
        "crash_replica", "kill_stage", "pause_acceptance", "pause_payload", "slow_stage"
    ] = "crash_replica"
    stage: Text | None = None
    dist: Literal["exponential", "constant"] = "exponential"
    factor: Annotated[float, msgspec.Meta(gt=0.0, le=L.MAX_FACTOR)] = 1.0


class SimSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A validated simulation spec (``load_spec``/``parse_spec``): the TOML's tables as
    frozen structs — ``[run]``, ``[[source]]``, ``[[stage]]``, ``[[fault]]``, ``[[node]]``,
    ``[gpu]``, ``[payload]``."""

    run: RunSpec
    sources: tuple[SourceSpec, ...]
    stages: tuple[StageSpec, ...]
    faults: tuple[FaultSpec, ...] = ()
    failures: tuple[FailureSpec, ...] = ()
    nodes: tuple[NodeSpec, ...] = ()
    gpu: GpuSpec = GpuSpec()
    payload: PayloadSpec = PayloadSpec()

    def stage(self, name: str) -> StageSpec:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(name)


__all__ = [
    "ARRIVALS",
    "AUTHORITIES",
    "BACKENDS",
    "DISTS",
    "FAILURE_DISTS",
    "FAILURE_KINDS",
    "FAULT_KINDS",
    "JOINS",
    "MAX_FRAMES",
    "MAX_SERIES_BINS",
    "NAME_BAD",
    "OVERFLOWS",
    "Authority",
    "Backend",
    "BatchSpec",
    "BurstSpec",
    "Count",
    "FailureSpec",
    "FaultSpec",
    "GpuSpec",
    "Ms",
    "NodeSpec",
    "PayloadSpec",
    "PositiveCount",
    "PositiveMs",
    "PositiveSeconds",
    "RunSpec",
    "Seconds",
    "ServiceSpec",
    "SimError",
    "SimSpec",
    "SourceSpec",
    "SpecError",
    "StageSpec",
    "Text",
]
