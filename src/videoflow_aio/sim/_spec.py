"""The simulation spec: TOML → validated, frozen structs.

Every key is checked before anything runs; a bad spec raises :class:`SpecError` (a
:class:`~videoflow_aio.contracts.errors.ValidationError`) whose ``field`` is the key's path,
e.g. ``stage[1].service.mean_ms``. Unknown keys are errors too (a typo must not silently
fall back to a default).
"""

from __future__ import annotations

import math
import stat
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, cast

import msgspec

from .._finite import is_finite_number
from ..contracts.errors import ValidationError
from ..contracts.messaging import Overflow
from ..contracts.payload import Tier
from ..gpu import check_layout, family_for
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
_NAME_BAD = NAME_FORBIDDEN  # node names become channel and subscription names
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


class RunSpec(msgspec.Struct, frozen=True, kw_only=True):
    seed: int = 0
    duration_seconds: float = 60.0
    warmup_seconds: float = 0.0
    backend: Backend = "asyncio"
    drain_seconds: float = 300.0
    bin_seconds: float | None = None
    flow_id: str = "sim"
    run_id: str = "run"
    slo_ms: tuple[float, ...] = ()


class PayloadSpec(msgspec.Struct, frozen=True, kw_only=True):
    tier: Tier = "durable"
    max_bytes: int | None = None
    ttl_seconds: float = 3600.0
    obligation_seconds: float = 600.0


class ServiceSpec(msgspec.Struct, frozen=True, kw_only=True):
    dist: str
    mean_ms: float | None = None
    p99_ms: float | None = None
    value_ms: float | None = None
    file: str | None = None
    samples_ms: tuple[float, ...] = ()
    per_item_ms: float = 0.0


class BurstSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A source's on/off modulation: on and off periods alternate (starting off), each
    drawn from ``dist`` with its mean; while on, each stream sends at ``rate_hz``."""

    rate_hz: Annotated[float, msgspec.Meta(ge=0.0, le=1e9)]
    mean_on_seconds: Annotated[float, msgspec.Meta(gt=0.0, le=L.MAX_SECONDS)]
    mean_off_seconds: Annotated[float, msgspec.Meta(gt=0.0, le=L.MAX_SECONDS)]
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
    max_wait_ms: Annotated[float, msgspec.Meta(ge=0.0, le=L.MAX_MS)] = 0.0


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


class NodeSpec(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    product: str = "NVIDIA-H100-80GB-HBM3"
    gpus: int = 1
    memory_gib: float = 80.0
    mig: dict[str, int] = {}


class GpuSpec(msgspec.Struct, frozen=True, kw_only=True):
    authority: Authority = "device-plugin"
    mig_apply_seconds: float = 0.0


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

    mtbf_seconds: Annotated[float, msgspec.Meta(gt=0.0, le=L.MAX_SECONDS)]
    mttr_seconds: Annotated[float, msgspec.Meta(gt=0.0, le=L.MAX_SECONDS)]
    kind: Literal[
        "crash_replica", "kill_stage", "pause_acceptance", "pause_payload", "slow_stage"
    ] = "crash_replica"
    stage: str | None = None
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


# -- checking helpers ------------------------------------------------------------------------


def _fail(path: str, message: str, value: Any = None) -> SpecError:
    return SpecError(f"{path}: {message}", field=path, value=value)


def _table(value: Any, path: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail(path, "must be a table", value)
    return value


def _keys(table: Mapping[str, Any], path: str, allowed: tuple[str, ...], context: str = "") -> None:
    """Every key of ``table`` is in ``allowed`` (``context``: why only those, e.g. for a
    fault kind: a key that does not apply is refused, not ignored)."""
    for key in table:
        if key not in allowed:
            kind = f"does not apply {context}" if context else "unknown key"
            raise _fail(
                f"{path}.{key}" if path else key,
                f"{kind}; expected one of {', '.join(allowed)}",
                key,
            )


def _number(
    table: Mapping[str, Any],
    key: str,
    path: str,
    *,
    integer: bool,
    minimum: float,
    maximum: float,
    strict: bool = False,
    allow: tuple[int, ...] = (),
) -> float | int | None:
    """``table[key]`` checked as a finite number (an int with ``integer``) >= ``minimum``
    (> with ``strict``; or one of ``allow``) and <= ``maximum``; None when absent."""
    if key not in table:
        return None
    where = f"{path}.{key}"
    v = table[key]
    if integer:
        if isinstance(v, bool) or not isinstance(v, int):
            raise _fail(where, "must be an integer", v)
    elif not is_finite_number(v):
        raise _fail(where, "must be a finite number", v)
    if (v < minimum or (strict and v == minimum)) and v not in allow:
        extra = f" (or {', '.join(map(str, allow))})" if allow else ""
        raise _fail(where, f"must be {'>' if strict else '>='} {minimum:g}{extra}", v)
    if v > maximum:
        raise _fail(where, f"must be <= {maximum:g}", v if v < 1e300 else "a huge number")
    return int(v) if integer else float(v)


def _num(
    table: Mapping[str, Any],
    key: str,
    path: str,
    default: float | None = None,
    *,
    minimum: float = 0.0,
    maximum: float = L.MAX_SECONDS,
    strict: bool = False,
    required: bool = False,
) -> float | None:
    v = _number(table, key, path, integer=False, minimum=minimum, maximum=maximum, strict=strict)
    if v is None:
        if required:
            raise _fail(f"{path}.{key}", "is required")
        return default
    return float(v)


def _int(
    table: Mapping[str, Any],
    key: str,
    path: str,
    default: int,
    *,
    minimum: int = 0,
    maximum: int = L.MAX_COUNT,
    allow: tuple[int, ...] = (),
) -> int:
    v = _number(table, key, path, integer=True, minimum=minimum, maximum=maximum, allow=allow)
    return default if v is None else int(v)


def _str(
    table: Mapping[str, Any],
    key: str,
    path: str,
    default: str | None = None,
    *,
    choices: tuple[str, ...] = (),
    required: bool = False,
    name: bool = False,
) -> str | None:
    where = f"{path}.{key}"
    if key not in table:
        if required:
            raise _fail(where, "is required")
        return default
    v = table[key]
    if not isinstance(v, str) or not v:
        raise _fail(where, "must be a non-empty string", v)
    if choices and v not in choices:
        raise _fail(where, f"must be one of {', '.join(choices)}", v)
    if name and any(c in v for c in _NAME_BAD):
        raise _fail(where, f"must not contain any of {_NAME_BAD!r}", v)
    if name and not v.isprintable():
        raise _fail(where, "must not contain control characters (NUL, escape, ...)", v)
    if len(v) > L.MAX_NAME_CHARS:
        raise _fail(where, f"must be at most {L.MAX_NAME_CHARS} characters", v)
    return v


_AT = " - at `$"
_MISSING = "Object missing required field `"
_UNKNOWN = "Object contains unknown field `"


def _convert(value: Any, typ: type[Any], path: str) -> Any:
    """``value`` (a table) as the msgspec Struct ``typ`` (its Meta constraints checked);
    a SpecError naming the offending key otherwise (one line: msgspec's reason)."""
    try:
        return msgspec.convert(value, typ)
    except msgspec.ValidationError as exc:
        text = str(exc)
        reason, _, at = text.partition(_AT)
        key = at.rstrip("`").lstrip(".")
        for head in (_MISSING, _UNKNOWN):
            if reason.startswith(head):
                key = reason[len(head) :].rstrip("`")
                reason = "is required" if head == _MISSING else "unknown key"
        where = f"{path}.{key}" if key else path
        raise _fail(where, reason.replace("`", ""), value if not key else None) from None


# -- sections --------------------------------------------------------------------------------


def _run(raw: Any) -> RunSpec:
    t = _table(raw if raw is not None else {}, "run")
    _keys(
        t,
        "run",
        (
            "seed",
            "duration_seconds",
            "warmup_seconds",
            "backend",
            "drain_seconds",
            "bin_seconds",
            "flow_id",
            "run_id",
            "slo_ms",
        ),
    )
    duration = _num(t, "duration_seconds", "run", required=True, strict=True)
    warmup = _num(t, "warmup_seconds", "run", 0.0)
    assert duration is not None and warmup is not None
    if warmup >= duration:
        raise _fail("run.warmup_seconds", "must be < run.duration_seconds", warmup)
    bins = _num(t, "bin_seconds", "run", None, strict=True)
    if bins is not None and duration / bins > MAX_SERIES_BINS:
        raise _fail(
            "run.bin_seconds",
            f"gives more than {MAX_SERIES_BINS:,} bins over run.duration_seconds",
            bins,
        )
    return RunSpec(
        seed=_int(t, "seed", "run", 0, minimum=-(2**63), maximum=L.MAX_SEED),
        duration_seconds=duration,
        warmup_seconds=warmup,
        backend=cast(Backend, _str(t, "backend", "run", "asyncio", choices=BACKENDS)),
        drain_seconds=_num(t, "drain_seconds", "run", 300.0) or 0.0,
        bin_seconds=bins,
        flow_id=_str(t, "flow_id", "run", "sim", name=True) or "sim",
        run_id=_str(t, "run_id", "run", "run", name=True) or "run",
        slo_ms=_slo_targets(t.get("slo_ms", [])),
    )


def _slo_targets(raw: Any) -> tuple[float, ...]:
    """``run.slo_ms``: latency targets (ms) whose exceedance fractions the result reports."""
    if not isinstance(raw, list) or len(raw) > L.MAX_SLO_TARGETS:
        raise _fail("run.slo_ms", f"must be an array of at most {L.MAX_SLO_TARGETS} numbers")
    for k, v in enumerate(raw):
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= L.MAX_MS:
            raise _fail(f"run.slo_ms[{k}]", f"must be a number in [0, {L.MAX_MS:g}] ms", v)
    return tuple(sorted({float(v) for v in raw}))


def _service(raw: Any, path: str, base: Path | None) -> ServiceSpec:
    t = _table(raw, path)
    _keys(t, path, ("dist", "mean_ms", "p99_ms", "value_ms", "file", "samples_ms", "per_item_ms"))
    dist = _str(t, "dist", path, choices=DISTS, required=True) or ""
    _keys(t, path, ("dist", "per_item_ms", *_DIST_KEYS[dist]), f"for dist = {dist!r}")
    per_item = _num(t, "per_item_ms", path, 0.0, maximum=L.MAX_MS) or 0.0
    return msgspec.structs.replace(_service_dist(t, path, base, dist), per_item_ms=per_item)


def _service_dist(t: Mapping[str, Any], path: str, base: Path | None, dist: str) -> ServiceSpec:
    if dist == "constant" and "value_ms" in t and "mean_ms" in t:
        raise _fail(f"{path}.mean_ms", "give value_ms or mean_ms for a constant, not both")
    if dist in ("exponential", "lognormal"):
        mean = _num(t, "mean_ms", path, maximum=L.MAX_MS, required=True, strict=True)
        assert mean is not None
        p99 = _lognormal_p99(t, path, mean) if dist == "lognormal" else None
        return ServiceSpec(dist=dist, mean_ms=mean, p99_ms=p99)
    if dist == "constant":
        key = "value_ms" if "value_ms" in t else "mean_ms"
        value = _num(t, key, path, maximum=L.MAX_MS)
        if value is None:
            raise _fail(f"{path}.value_ms", "is required (or mean_ms) for a constant")
        return ServiceSpec(dist=dist, value_ms=value, mean_ms=value)
    # empirical: samples inline or from a file of numbers (ms), one per line
    samples = _inline_samples(t, path)
    file = _str(t, "file", path)
    if file is not None:
        from_file = _file_samples(file, path, base)
        if not from_file:
            raise _fail(f"{path}.file", f"no samples in {file}", file)
        if len(samples) + len(from_file) > L.MAX_SAMPLES:
            raise _fail(f"{path}.file", f"more than {L.MAX_SAMPLES:,} samples in all", file)
        samples += from_file
    if not samples:
        raise _fail(path, "an empirical distribution needs samples_ms or a file of samples")
    mean = math.fsum(samples) / len(samples)
    return ServiceSpec(dist=dist, mean_ms=mean, file=file, samples_ms=tuple(samples))


def _lognormal_p99(t: Mapping[str, Any], path: str, mean: float) -> float:
    p99 = _num(t, "p99_ms", path, maximum=L.MAX_MS, required=True, strict=True)
    assert p99 is not None
    if p99 <= mean:
        raise _fail(f"{path}.p99_ms", "must be > mean_ms for a lognormal", p99)
    # mean = exp(mu + s^2/2), p99 = exp(mu + z s): s solves s^2/2 - z s + d = 0
    if 2 * math.log(p99 / mean) > _Z99**2:
        raise _fail(
            f"{path}.p99_ms",
            f"p99_ms / mean_ms must be < {math.exp(_Z99**2 / 2):.1f} for a lognormal",
            p99,
        )
    return p99


def _inline_samples(t: Mapping[str, Any], path: str) -> list[float]:
    if "samples_ms" not in t:
        return []
    seq = t["samples_ms"]
    if not isinstance(seq, list):
        raise _fail(f"{path}.samples_ms", "must be an array of numbers", seq)
    if len(seq) > L.MAX_SAMPLES:
        raise _fail(f"{path}.samples_ms", f"more than {L.MAX_SAMPLES:,} samples", len(seq))
    for i, v in enumerate(seq):
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= L.MAX_MS:
            raise _fail(f"{path}.samples_ms[{i}]", f"must be a number in [0, {L.MAX_MS:g}]", v)
    return [float(v) for v in seq]


def _read_capped(where: Path, cap: int) -> bytes | str:
    """The bytes of the regular file ``where``, read in chunks and never past ``cap``; or
    why not (a one-line reason: unreadable, not a regular file, larger than ``cap``)."""
    try:
        info = where.stat()
    except OSError as exc:
        return f"cannot read {where}: {exc.strerror}"
    if not stat.S_ISREG(info.st_mode):  # /dev/zero, a FIFO, a directory: never read
        return f"{where} is not a regular file"
    if info.st_size > cap:
        return f"{where} is larger than {cap:,} bytes"
    chunks: list[bytes] = []
    size = 0
    try:
        with where.open("rb") as f:
            while chunk := f.read(1 << 20):
                size += len(chunk)
                if size > cap:  # it grew since the stat
                    return f"{where} is larger than {cap:,} bytes"
                chunks.append(chunk)
    except OSError as exc:
        return f"cannot read {where}: {exc.strerror}"
    return b"".join(chunks)


def _file_samples(file: str, path: str, base: Path | None) -> list[float]:
    """The samples of a file of numbers, one per line (``#`` comments). A bad line is named
    by the file and its line number, never quoted: the file may be anything."""
    where = Path(file) if base is None else base / file
    data = _read_capped(where, L.MAX_SAMPLE_FILE_BYTES)
    if isinstance(data, str):
        raise _fail(f"{path}.file", data, file)
    samples: list[float] = []
    for n, raw in enumerate(data.splitlines(), 1):
        try:
            line = raw.decode("utf-8").split("#", 1)[0].strip()
        except UnicodeDecodeError:
            raise _fail(f"{path}.file", f"{where}:{n}: not UTF-8 text", file) from None
        if not line:
            continue
        try:
            v = float(line)
        except ValueError:
            raise _fail(f"{path}.file", f"{where}:{n}: not a number", file) from None
        if not 0 <= v <= L.MAX_MS:
            raise _fail(f"{path}.file", f"{where}:{n}: must be a number in [0, {L.MAX_MS:g}]", file)
        if len(samples) >= L.MAX_SAMPLES:
            raise _fail(f"{path}.file", f"{where}: more than {L.MAX_SAMPLES:,} samples", file)
        samples.append(v)
    return samples


_Z99 = 2.3263478740408408  # the standard normal's 0.99 quantile
_DIST_KEYS = {
    "constant": ("value_ms", "mean_ms"),
    "exponential": ("mean_ms",),
    "lognormal": ("mean_ms", "p99_ms"),
    "empirical": ("file", "samples_ms"),
}


def _source(raw: Any, i: int, run: RunSpec, base: Path | None) -> SourceSpec:
    path = f"source[{i}]"
    t = _table(raw, path)
    _keys(
        t,
        path,
        (
            "name",
            "streams",
            "rate_hz",
            "arrival",
            "bytes",
            "rate_schedule",
            "burst",
            "trace",
            "trace_seconds",
            "jitter_ms",
        ),
    )
    name = _str(t, "name", path, required=True, name=True)
    assert name is not None
    arrival = _str(t, "arrival", path, "periodic", choices=ARRIVALS) or "periodic"
    streams = _int(t, "streams", path, 1, minimum=1, maximum=L.MAX_STREAMS)
    common = dict(name=name, streams=streams, arrival=arrival)
    common["bytes"] = _int(t, "bytes", path, 0, maximum=L.MAX_FRAME_BYTES)
    if arrival == "trace":
        allowed = ("name", "streams", "arrival", "bytes", "trace", "trace_seconds")
        _keys(t, path, allowed, 'to arrival = "trace"')
        if streams != 1:
            raise _fail(f"{path}.streams", 'must be 1 for arrival = "trace"', streams)
        if ("trace" in t) == ("trace_seconds" in t):
            raise _fail(f"{path}.trace", "give trace (a file of timestamps) or trace_seconds")
        file = _str(t, "trace", path)
        if file is not None:
            times = _trace_times(file, f"{path}.trace", base)
        else:
            times = _inline_trace(t["trace_seconds"], f"{path}.trace_seconds")
        rate = sum(1 for x in times if x < run.duration_seconds) / run.duration_seconds
        return SourceSpec(
            **common,  # type: ignore[arg-type]
            rate_hz=rate,
            mean_rate_hz=rate,
            trace_seconds=times,
        )
    for key in ("trace", "trace_seconds"):
        if key in t:
            raise _fail(f"{path}.{key}", 'applies only to arrival = "trace"')
    burst = _convert(t["burst"], BurstSpec, f"{path}.burst") if "burst" in t else None
    schedule = _schedule(t, path) if "rate_schedule" in t else ()
    if schedule and "rate_hz" in t:
        raise _fail(f"{path}.rate_hz", "give rate_hz or rate_schedule, not both")
    if schedule:
        rate = mean = _average_rate(schedule, run.duration_seconds)
    else:
        got = _num(t, "rate_hz", path, maximum=math.inf, required=True, strict=burst is None)
        assert got is not None
        rate = mean = got
    if burst is not None:
        switches = 2 * run.duration_seconds / min(burst.mean_on_seconds, burst.mean_off_seconds)
        if switches > L.MAX_BURST_SWITCHES:
            raise _fail(
                f"{path}.burst",
                f"about {switches:.3g} on/off switches over run.duration_seconds: at most"
                f" {L.MAX_BURST_SWITCHES:.0e}",
            )
        on = burst.mean_on_seconds / (burst.mean_on_seconds + burst.mean_off_seconds)
        mean = mean * (1.0 - on) + burst.rate_hz * on
    jitter = _num(t, "jitter_ms", path, 0.0, maximum=L.MAX_MS) or 0.0
    if jitter and arrival != "periodic":
        raise _fail(f"{path}.jitter_ms", 'applies only to arrival = "periodic"', jitter)
    return SourceSpec(
        **common,  # type: ignore[arg-type]
        rate_hz=rate,
        rate_schedule=schedule,
        burst=burst,
        jitter_ms=jitter,
        mean_rate_hz=mean,
    )


def _schedule(t: Mapping[str, Any], path: str) -> tuple[tuple[float, float], ...]:
    """``rate_schedule = [[t0, rate0], [t1, rate1], ...]``: seconds from the run's start
    (the first 0, strictly increasing) and each stream's rate (Hz, >= 0) from then on."""
    where = f"{path}.rate_schedule"
    raw = t["rate_schedule"]
    if not isinstance(raw, list) or not raw:
        raise _fail(where, "must be a non-empty array of [seconds, rate_hz] pairs")
    if len(raw) > L.MAX_SCHEDULE_STEPS:
        raise _fail(where, f"more than {L.MAX_SCHEDULE_STEPS:,} steps", len(raw))
    out: list[tuple[float, float]] = []
    for k, pair in enumerate(raw):
        bad = not isinstance(pair, list) or len(pair) != 2
        if not bad:
            at, rate = pair
            bad = not all(is_finite_number(v) for v in pair)
        if bad:
            raise _fail(f"{where}[{k}]", "must be a pair [seconds, rate_hz] of finite numbers")
        if not 0 <= at <= L.MAX_SECONDS or not 0 <= rate <= 1e9:
            raise _fail(f"{where}[{k}]", "seconds must be in [0, 1e9] and rate_hz in [0, 1e9]")
        if (k == 0 and at != 0) or (out and at <= out[-1][0]):
            raise _fail(
                f"{where}[{k}]", "the first step starts at 0 and each later one after the last"
            )
        out.append((float(at), float(rate)))
    if all(r == 0 for _, r in out):
        raise _fail(where, "every rate is 0: the source would send nothing")
    return tuple(out)


def _average_rate(schedule: tuple[tuple[float, float], ...], duration: float) -> float:
    """The schedule's mean rate over ``[0, duration)``."""
    total = 0.0
    for k, (at, rate) in enumerate(schedule):
        until = schedule[k + 1][0] if k + 1 < len(schedule) else duration
        total += rate * max(0.0, min(until, duration) - at)
    return total / duration


def _inline_trace(raw: Any, path: str) -> tuple[float, ...]:
    """``trace_seconds = [...]``: capture times inline (as a spec written back holds them)."""
    if not isinstance(raw, list) or not raw:
        raise _fail(path, "must be a non-empty array of seconds")
    if len(raw) > L.MAX_TRACE_FRAMES:
        raise _fail(path, f"more than {L.MAX_TRACE_FRAMES:,} timestamps", len(raw))
    for k, v in enumerate(raw):
        if isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= L.MAX_SECONDS:
            raise _fail(f"{path}[{k}]", f"must be a number of seconds in [0, {L.MAX_SECONDS:g}]")
    return tuple(sorted(float(v) for v in raw))


def _trace_times(file: str, path: str, base: Path | None) -> tuple[float, ...]:
    """A trace: capture times in seconds from the run's start, one per line (``#``
    comments), sorted. A bad line is named by its line number, never quoted."""
    where = Path(file) if base is None else base / file
    data = _read_capped(where, L.MAX_TRACE_FILE_BYTES)
    if isinstance(data, str):
        raise _fail(path, data, file)
    times: list[float] = []
    for n, raw in enumerate(data.splitlines(), 1):
        try:
            line = raw.decode("utf-8").split("#", 1)[0].strip()
            if not line:
                continue
            v = float(line)
        except (UnicodeDecodeError, ValueError):
            raise _fail(path, f"{where}:{n}: not a number of seconds", file) from None
        if not 0 <= v <= L.MAX_SECONDS:
            raise _fail(path, f"{where}:{n}: must be in [0, {L.MAX_SECONDS:g}] seconds", file)
        if len(times) >= L.MAX_TRACE_FRAMES:
            raise _fail(path, f"{where}: more than {L.MAX_TRACE_FRAMES:,} timestamps", file)
        times.append(v)
    if not times:
        raise _fail(path, f"{where}: no timestamps", file)
    times.sort()
    return tuple(times)


def _stage(raw: Any, i: int, base: Path | None) -> StageSpec:
    path = f"stage[{i}]"
    t = _table(raw, path)
    _keys(
        t,
        path,
        (
            "name",
            "inputs",
            "replicas",
            "batch",
            "service",
            "ack_wait_seconds",
            "max_deliver",
            "gpu",
            "output_bytes",
            "max_queue",
            "overflow",
            "retry_delay_seconds",
            "join",
            "join_timeout_ms",
            "per_item_ms",
        ),
    )
    name = _str(t, "name", path, required=True, name=True)
    assert name is not None
    inputs = t.get("inputs")
    if not isinstance(inputs, list) or not inputs or not all(isinstance(x, str) for x in inputs):
        raise _fail(f"{path}.inputs", "must be a non-empty array of node names", inputs)
    if "service" not in t:
        raise _fail(f"{path}.service", "is required")
    service = _service(t["service"], f"{path}.service", base)
    if "per_item_ms" in t:  # also accepted beside the service table
        if service.per_item_ms:
            raise _fail(f"{path}.per_item_ms", "given both here and in service: give it once")
        per_item = _num(t, "per_item_ms", path, 0.0, maximum=L.MAX_MS) or 0.0
        service = msgspec.structs.replace(service, per_item_ms=per_item)
    batch_service: BatchSpec | None = None
    if isinstance(t.get("batch"), Mapping):
        batch_service = _convert(t["batch"], BatchSpec, f"{path}.batch")
        batch = batch_service.max_items
    else:
        batch = _int(t, "batch", path, 1, minimum=1, maximum=L.MAX_BATCH)
    join = _str(t, "join", path, choices=JOINS)
    timeout = _num(t, "join_timeout_ms", path, None, maximum=L.MAX_MS, strict=True)
    if join is not None and len(inputs) < 2:
        raise _fail(f"{path}.join", "needs a stage with at least two inputs", join)
    if timeout is not None and join is None:
        raise _fail(f"{path}.join_timeout_ms", 'applies only with join = "all"', timeout)
    if join is not None and batch_service is not None:
        raise _fail(f"{path}.batch", "a join stage cannot batch its service (not supported)")
    return StageSpec(
        name=name,
        inputs=tuple(inputs),
        service=service,
        replicas=_int(t, "replicas", path, 1, minimum=1, maximum=L.MAX_REPLICAS),
        batch=batch,
        batch_service=batch_service,
        join=join,
        join_timeout_ms=timeout,
        ack_wait_seconds=_num(t, "ack_wait_seconds", path, 30.0, strict=True) or 30.0,
        max_deliver=_int(t, "max_deliver", path, 5, minimum=1, allow=(-1,)),
        gpu=_str(t, "gpu", path),
        output_bytes=_int(t, "output_bytes", path, 0, maximum=L.MAX_FRAME_BYTES),
        max_queue=_int(t, "max_queue", path, 10000, minimum=1),
        overflow=cast(Overflow, _str(t, "overflow", path, "evict_oldest", choices=OVERFLOWS)),
        retry_delay_seconds=_num(t, "retry_delay_seconds", path, 1.0) or 0.0,
    )


def _node(raw: Any, i: int) -> NodeSpec:
    path = f"node[{i}]"
    t = _table(raw, path)
    _keys(t, path, ("name", "product", "gpus", "memory_gib", "mig"))
    name = _str(t, "name", path, required=True, name=True)
    assert name is not None
    mig = t.get("mig", {})
    mig_t = _table(mig, f"{path}.mig")
    layout: dict[str, int] = {}
    for profile, count in mig_t.items():
        if isinstance(count, bool) or not isinstance(count, int) or not 0 <= count <= L.MAX_COUNT:
            raise _fail(
                f"{path}.mig.{profile}", f"must be an integer in [0, {L.MAX_COUNT:g}]", count
            )
        layout[profile] = count
    return NodeSpec(
        name=name,
        product=_str(t, "product", path, "NVIDIA-H100-80GB-HBM3") or "",
        gpus=_int(t, "gpus", path, 1, minimum=1),
        memory_gib=_num(t, "memory_gib", path, 80.0, maximum=L.MAX_MEMORY_GIB, strict=True) or 0.0,
        mig=layout,
    )


def _fault(raw: Any, i: int) -> FaultSpec:
    path = f"fault[{i}]"
    t = _table(raw, path)
    _keys(
        t,
        path,
        (
            "at_seconds",
            "kind",
            "stage",
            "channel",
            "replica",
            "duration_seconds",
            "restart_after_seconds",
            "count",
            "factor",
        ),
    )
    kind = _str(t, "kind", path, choices=FAULT_KINDS, required=True)
    assert kind is not None
    _keys(t, path, ("at_seconds", "kind", *_FAULT_KEYS[kind]), f"to kind = {kind!r}")
    at = _num(t, "at_seconds", path, required=True)
    assert at is not None
    duration = _num(t, "duration_seconds", path, None, strict=True)
    if kind in ("pause_acceptance", "pause_payload", "slow_stage") and duration is None:
        raise _fail(f"{path}.duration_seconds", f"is required for {kind}")
    restart = _num(t, "restart_after_seconds", path, 10.0 if kind == "crash_replica" else None)
    stage = _str(t, "stage", path)
    channel = _str(t, "channel", path)
    if kind in ("crash_replica", "kill_stage", "slow_stage") and stage is None:
        raise _fail(f"{path}.stage", f"is required for {kind}")
    if kind == "pause_acceptance" and (stage is None) == (channel is None):
        raise _fail(f"{path}.stage", "pause_acceptance needs stage (its inputs) or channel, one")
    factor = _num(t, "factor", path, 1.0, maximum=L.MAX_FACTOR, strict=True)
    return FaultSpec(
        at_seconds=at,
        kind=kind,
        stage=stage,
        channel=channel,
        replica=_int(t, "replica", path, 0),
        duration_seconds=duration,
        restart_after_seconds=restart,
        count=_int(t, "count", path, 1, minimum=1),
        factor=factor if factor is not None else 1.0,
    )


def _failure(raw: Any, i: int) -> FailureSpec:
    path = f"failure[{i}]"
    f: FailureSpec = _convert(_table(raw, path), FailureSpec, path)
    if f.kind == "pause_payload":
        if f.stage is not None:
            raise _fail(f"{path}.stage", "does not apply to kind = 'pause_payload'", f.stage)
    elif f.stage is None:
        raise _fail(f"{path}.stage", f"is required for {f.kind}")
    if f.factor != 1.0 and f.kind != "slow_stage":
        raise _fail(f"{path}.factor", "applies only to kind = 'slow_stage'", f.factor)
    if f.stage is not None:
        _str({"stage": f.stage}, "stage", path, name=True)
    return f


_FAULT_KEYS = {
    "crash_replica": ("stage", "replica", "restart_after_seconds"),
    "kill_stage": ("stage", "restart_after_seconds"),
    "pause_acceptance": ("stage", "channel", "duration_seconds"),
    "pause_payload": ("duration_seconds",),
    "fail_payload_reads": ("count",),
    "slow_stage": ("stage", "duration_seconds", "factor"),
}
"""The keys each fault kind takes besides ``at_seconds`` and ``kind``."""


def _payload(raw: Any) -> PayloadSpec:
    t = _table(raw if raw is not None else {}, "payload")
    _keys(t, "payload", ("tier", "max_bytes", "ttl_seconds", "obligation_seconds"))
    max_bytes = t.get("max_bytes")
    if max_bytes is not None and (
        isinstance(max_bytes, bool)
        or not isinstance(max_bytes, int)
        or not 1 <= max_bytes <= L.MAX_PAYLOAD_BYTES
    ):
        raise _fail(
            "payload.max_bytes", f"must be an integer in [1, {L.MAX_PAYLOAD_BYTES}]", max_bytes
        )
    return PayloadSpec(
        tier=cast(Tier, _str(t, "tier", "payload", "durable", choices=("durable", "evictable"))),
        max_bytes=max_bytes,
        ttl_seconds=_num(t, "ttl_seconds", "payload", 3600.0, strict=True) or 0.0,
        obligation_seconds=_num(t, "obligation_seconds", "payload", 600.0, strict=True) or 0.0,
    )


def _gpu(raw: Any) -> GpuSpec:
    t = _table(raw if raw is not None else {}, "gpu")
    _keys(t, "gpu", ("authority", "mig_apply_seconds"))
    return GpuSpec(
        authority=cast(
            Authority, _str(t, "authority", "gpu", "device-plugin", choices=AUTHORITIES)
        ),
        mig_apply_seconds=_num(t, "mig_apply_seconds", "gpu", 0.0) or 0.0,
    )


def _array(doc: Mapping[str, Any], key: str, most: int) -> list[Any]:
    value = doc.get(key, [])
    if not isinstance(value, list):
        raise _fail(key, f"must be an array of tables ([[{key}]])", value)
    if len(value) > most:
        raise _fail(key, f"{len(value):,} [[{key}]] tables: at most {most:,}", len(value))
    return value


def _check_depth(doc: Mapping[str, Any]) -> None:
    """Tables and arrays nest at most :data:`~._limits.MAX_TOML_DEPTH` deep (walked without
    recursion, so a hostile document cannot exhaust the stack)."""
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > L.MAX_TOML_DEPTH:
            raise _fail("toml", f"nested more than {L.MAX_TOML_DEPTH} levels deep")
        if isinstance(value, Mapping):
            stack.extend((v, depth + 1) for v in value.values() if isinstance(v, Mapping | list))
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value if isinstance(v, Mapping | list))


def parse_spec(doc: Mapping[str, Any], base: Path | None = None) -> SimSpec:
    """Validate a decoded spec document; ``base`` resolves relative sample files."""
    if not isinstance(doc, Mapping):
        raise _fail("spec", "must be a table (a decoded TOML document)", type(doc).__name__)
    _check_depth(doc)
    _keys(doc, "", ("run", "source", "stage", "fault", "failure", "node", "gpu", "payload"))
    run = _run(doc.get("run"))
    sources = tuple(
        _source(s, i, run, base) for i, s in enumerate(_array(doc, "source", L.MAX_NODES))
    )
    stages = tuple(_stage(s, i, base) for i, s in enumerate(_array(doc, "stage", L.MAX_NODES)))
    nodes = tuple(_node(n, i) for i, n in enumerate(_array(doc, "node", L.MAX_NODES)))
    faults = tuple(_fault(f, i) for i, f in enumerate(_array(doc, "fault", L.MAX_FAULTS)))
    failures = tuple(_failure(f, i) for i, f in enumerate(_array(doc, "failure", L.MAX_FAULTS)))
    if len(sources) + len(stages) > L.MAX_NODES:
        raise _fail("stage", f"more than {L.MAX_NODES:,} sources and stages in all")
    if not sources:
        raise _fail("source", "at least one [[source]] is required")
    if not stages:
        raise _fail("stage", "at least one [[stage]] is required")
    names = _check_graph(sources, stages)
    _check_load(sources, run)
    _check_nodes(stages, nodes)
    _check_faults(faults, stages, names)
    _check_failures(failures, stages, run.duration_seconds)
    return SimSpec(
        run=run,
        sources=sources,
        stages=stages,
        faults=faults,
        failures=failures,
        nodes=nodes,
        gpu=_gpu(doc.get("gpu")),
        payload=_payload(doc.get("payload")),
    )


def _check_graph(sources: tuple[SourceSpec, ...], stages: tuple[StageSpec, ...]) -> set[str]:
    """Unique node names, inputs that exist and no cycle; the node names."""
    names: set[str] = set()
    labelled = [("source", i, s.name) for i, s in enumerate(sources)]
    labelled += [("stage", i, s.name) for i, s in enumerate(stages)]
    for kind, i, name in labelled:
        if name in names:
            raise _fail(f"{kind}[{i}].name", f"duplicate node name {name!r}", name)
        names.add(name)
    for i, s in enumerate(stages):
        if len(set(s.inputs)) != len(s.inputs):
            raise _fail(f"stage[{i}].inputs", "lists a node twice", list(s.inputs))
        for inp in s.inputs:
            if inp not in names:
                raise _fail(f"stage[{i}].inputs", f"unknown node {inp!r}", inp)
            if inp == s.name:
                raise _fail(f"stage[{i}].inputs", "a stage cannot read itself", inp)
    _check_acyclic(stages)
    return names


def _check_load(sources: tuple[SourceSpec, ...], run: RunSpec) -> None:
    """At most :data:`MAX_FRAMES` frames in all: a larger load would run for days."""
    frames = [s.streams * max(s.rate_hz, s.mean_rate_hz) * run.duration_seconds for s in sources]
    worst = max(range(len(sources)), key=frames.__getitem__)
    if frames[worst] > MAX_FRAMES:
        raise _fail(
            f"source[{worst}].rate_hz",
            f"streams × rate_hz × run.duration_seconds = {sources[worst].streams} × "
            f"{sources[worst].rate_hz:g} × {run.duration_seconds:g} = {_count(frames[worst])} "
            f"frames: at most {MAX_FRAMES:.0e} frames a run",
            sources[worst].rate_hz,
        )
    total = sum(frames)
    if total > MAX_FRAMES:
        parts = ", ".join(f"{s.name} {_count(n)}" for s, n in zip(sources, frames, strict=True))
        raise _fail(
            "source",
            f"the sources' streams × rate_hz × run.duration_seconds add up to {_count(total)} "
            f"frames ({parts}): at most {MAX_FRAMES:.0e} frames a run",
        )


def _count(n: float) -> str:
    return f"{n:.3g}" if math.isfinite(n) else "more than 1e+308"


def _check_nodes(stages: tuple[StageSpec, ...], nodes: tuple[NodeSpec, ...]) -> None:
    """GPU stages have nodes to run on and ask for ``whole`` or a MIG profile those nodes'
    GPUs have; node names are unique; a node's MIG geometry fits its GPUs."""
    if any(s.gpu for s in stages) and not nodes:
        raise _fail("node", "a stage asks for a gpu but the spec declares no [[node]]")
    node_names = [n.name for n in nodes]
    if len(set(node_names)) != len(node_names):
        raise _fail("node", "duplicate node names", node_names)
    for i, n in enumerate(nodes):
        _check_geometry(n, f"node[{i}]")
    known = {p for n in nodes if (fam := family_for(n.product)) for p in fam.profiles}
    for i, s in enumerate(stages):
        if s.gpu is not None and s.gpu != "whole" and s.gpu not in known:
            raise _fail(
                f"stage[{i}].gpu",
                f"unknown MIG profile {s.gpu!r} for the GPUs of the declared nodes"
                f' (known: {", ".join(sorted(known)) or "none"}; or "whole")',
                s.gpu,
            )


def _check_geometry(node: NodeSpec, path: str) -> None:
    """``node.mig`` (instances over all its GPUs) names profiles of its GPU's family and fits
    on ``node.gpus`` cards (exactly for one card; by slice and instance totals for more)."""
    if not node.mig:
        return
    fam = family_for(node.product)
    if fam is None:
        raise _fail(f"{path}.product", f"no MIG geometry is known for {node.product!r}")
    for profile, count in node.mig.items():
        p = fam.profiles.get(profile)
        if p is None:
            raise _fail(f"{path}.mig.{profile}", f"unknown MIG profile for {fam.key}", profile)
        if count > p.max_instances * node.gpus:
            raise _fail(
                f"{path}.mig.{profile}",
                f"{count} instances on {node.gpus} {fam.key}: at most"
                f" {p.max_instances * node.gpus}",
                count,
            )
    if node.gpus == 1:
        problems = check_layout(node.product, node.mig)
    else:
        memory = sum(fam.profiles[p].memory_slices * c for p, c in node.mig.items())
        compute = sum(fam.profiles[p].compute_slices * c for p, c in node.mig.items())
        over = memory > fam.memory_slices * node.gpus or compute > fam.compute_slices * node.gpus
        problems = [f"more slices than {node.gpus} {fam.key} have"] if over else []
    if problems:
        raise _fail(f"{path}.mig", f"does not fit: {'; '.join(problems)}", dict(node.mig))


def _check_faults(
    faults: tuple[FaultSpec, ...], stages: tuple[StageSpec, ...], names: set[str]
) -> None:
    """Every fault names a stage or channel that exists, and a replica the stage has."""
    replicas = {s.name: s.replicas for s in stages}
    read = {inp for s in stages for inp in s.inputs}
    for i, f in enumerate(faults):
        if f.stage is not None and f.stage not in replicas:
            raise _fail(f"fault[{i}].stage", f"unknown stage {f.stage!r}", f.stage)
        if f.channel is not None and f.channel not in names:
            raise _fail(f"fault[{i}].channel", f"unknown node {f.channel!r}", f.channel)
        if f.channel is not None and f.channel not in read:
            raise _fail(
                f"fault[{i}].channel", f"no stage reads {f.channel!r}: it has no channel", f.channel
            )
        if f.kind == "crash_replica" and f.stage is not None and f.replica >= replicas[f.stage]:
            raise _fail(
                f"fault[{i}].replica",
                f"stage {f.stage!r} has {replicas[f.stage]} replicas",
                f.replica,
            )


def _check_failures(
    failures: tuple[FailureSpec, ...], stages: tuple[StageSpec, ...], duration: float
) -> None:
    """Every failure process names a stage that exists."""
    replicas = {s.name: s.replicas for s in stages}
    for i, f in enumerate(failures):
        if f.stage is not None and f.stage not in replicas:
            raise _fail(f"failure[{i}].stage", f"unknown stage {f.stage!r}", f.stage)
        n = replicas[f.stage] if f.kind == "crash_replica" and f.stage is not None else 1
        events = n * duration / min(f.mtbf_seconds, f.mttr_seconds)
        if events > L.MAX_FAILURE_EVENTS:
            raise _fail(
                f"failure[{i}].mtbf_seconds",
                f"about {events:.3g} failures and repairs over the run: at most"
                f" {L.MAX_FAILURE_EVENTS:.0e}",
                f.mtbf_seconds,
            )


def _check_acyclic(stages: tuple[StageSpec, ...]) -> None:
    inputs = {s.name: s.inputs for s in stages}
    state: dict[str, int] = {}

    def visit(name: str, i: int) -> None:
        if state.get(name) == 2 or name not in inputs:
            return
        if state.get(name) == 1:
            raise _fail(f"stage[{i}].inputs", f"cycle through stage {name!r}", name)
        state[name] = 1
        for inp in inputs[name]:
            visit(inp, i)
        state[name] = 2

    for i, s in enumerate(stages):
        visit(s.name, i)


def load_spec(path: str | Path, run_overrides: Mapping[str, Any] | None = None) -> SimSpec:
    """Read and validate a TOML spec; SpecError for a malformed file (field ``toml`` for a
    TOML syntax error). ``run_overrides`` replace keys of ``[run]`` before validation."""
    p = Path(path)
    text = _read_capped(p, L.MAX_SPEC_FILE_BYTES)
    if isinstance(text, str):
        raise SpecError(text, field="path", value=str(p))
    try:
        doc = tomllib.loads(text.decode("utf-8"))
    except UnicodeDecodeError:
        raise SpecError(f"{p}: not UTF-8 text", field="toml", value=str(p)) from None
    except tomllib.TOMLDecodeError as exc:  # its message names a line and column, no content
        raise SpecError(f"{p}: not valid TOML: {exc}", field="toml", value=str(p)) from None
    except RecursionError:
        raise SpecError(
            f"{p}: not valid TOML: nested too deeply", field="toml", value=str(p)
        ) from None
    if run_overrides:
        run = doc.get("run", {})
        doc["run"] = {**(run if isinstance(run, dict) else {}), **run_overrides}
    return parse_spec(doc, base=p.parent)


__all__ = [
    "MAX_FRAMES",
    "BatchSpec",
    "BurstSpec",
    "FailureSpec",
    "FaultSpec",
    "GpuSpec",
    "NodeSpec",
    "PayloadSpec",
    "RunSpec",
    "ServiceSpec",
    "SimError",
    "SimSpec",
    "SourceSpec",
    "SpecError",
    "StageSpec",
    "load_spec",
    "parse_spec",
]
