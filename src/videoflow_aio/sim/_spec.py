"""The simulation spec: TOML → validated, frozen structs.

Every key is checked before anything runs; a bad spec raises :class:`SpecError` (a
:class:`~videoflow_aio.contracts.errors.ValidationError`) whose ``field`` is the key's path,
e.g. ``stage[1].service.mean_ms``. Unknown keys are errors too (a typo must not silently
fall back to a default). The document's shape and bounds are msgspec Structs
(:mod:`._spec_input`, :mod:`._spec_types`); what is left here are the rules between keys.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
from msgspec import UNSET

from . import _limits as L
from ._spec_checks import check_failures, check_faults, check_graph, check_load, check_nodes
from ._spec_errors import convert, fail
from ._spec_files import file_samples, read_capped, trace_times
from ._spec_input import (
    ConstantIn,
    DocumentIn,
    EmpiricalIn,
    FaultIn,
    LognormalIn,
    PauseAcceptanceIn,
    ServiceIn,
    SourceIn,
    StageIn,
)
from ._spec_types import (
    MAX_SERIES_BINS,
    NAME_BAD,
    BatchSpec,
    BurstSpec,
    FailureSpec,
    FaultSpec,
    NodeSpec,
    RunSpec,
    ServiceSpec,
    SimSpec,
    SourceSpec,
    SpecError,
    StageSpec,
)

Z99 = 2.3263478740408408  # the standard normal's 0.99 quantile


def _name(value: str, where: str) -> None:
    """A node name (it becomes part of channel and subscription names)."""
    if any(c in value for c in NAME_BAD):
        raise fail(where, f"must not contain any of {NAME_BAD!r}", value)
    if not value.isprintable():
        raise fail(where, "must not contain control characters (NUL, escape, ...)", value)


def _run(run: RunSpec) -> RunSpec:
    if run.warmup_seconds >= run.duration_seconds:
        raise fail("run.warmup_seconds", "must be < run.duration_seconds", run.warmup_seconds)
    bins = run.bin_seconds
    if bins is not None and run.duration_seconds / bins > MAX_SERIES_BINS:
        raise fail(
            "run.bin_seconds",
            f"gives more than {MAX_SERIES_BINS:,} bins over run.duration_seconds",
            bins,
        )
    _name(run.flow_id, "run.flow_id")
    _name(run.run_id, "run.run_id")
    return msgspec.structs.replace(run, slo_ms=tuple(sorted(set(run.slo_ms))))


def service_spec(raw: Any, path: str, base: Path | None) -> ServiceSpec:
    """A service table (``dist = "…"`` and its keys) validated; ``base`` resolves a
    relative sample file."""
    service: ServiceIn = convert(raw, ServiceIn, path)  # type: ignore[arg-type]  # a union
    return _service(service, path, base)


def _service(s: ServiceIn, path: str, base: Path | None) -> ServiceSpec:
    dist = str(type(s).__struct_config__.tag)
    per_item = s.per_item_ms
    if isinstance(s, ConstantIn):
        if s.value_ms is not None and s.mean_ms is not None:
            raise fail(f"{path}.mean_ms", "give value_ms or mean_ms for a constant, not both")
        value = s.value_ms if s.value_ms is not None else s.mean_ms
        if value is None:
            raise fail(f"{path}.value_ms", "is required (or mean_ms) for a constant")
        return ServiceSpec(dist=dist, value_ms=value, mean_ms=value, per_item_ms=per_item)
    if isinstance(s, EmpiricalIn):
        return _empirical(s, path, base)
    p99 = _lognormal_p99(s, path) if isinstance(s, LognormalIn) else None
    return ServiceSpec(dist=dist, mean_ms=s.mean_ms, p99_ms=p99, per_item_ms=per_item)


def _lognormal_p99(s: LognormalIn, path: str) -> float:
    if s.p99_ms <= s.mean_ms:
        raise fail(f"{path}.p99_ms", "must be > mean_ms for a lognormal", s.p99_ms)
    # mean = exp(mu + s^2/2), p99 = exp(mu + z s): s solves s^2/2 - z s + d = 0
    if 2 * math.log(s.p99_ms / s.mean_ms) > Z99**2:
        raise fail(
            f"{path}.p99_ms",
            f"p99_ms / mean_ms must be < {math.exp(Z99**2 / 2):.1f} for a lognormal",
            s.p99_ms,
        )
    return s.p99_ms


def _empirical(s: EmpiricalIn, path: str, base: Path | None) -> ServiceSpec:
    """Samples inline or from a file of numbers (ms), one per line."""
    samples = list(s.samples_ms)
    if s.file is not None:
        from_file = file_samples(s.file, path, base)
        if not from_file:
            raise fail(f"{path}.file", f"no samples in {s.file}", s.file)
        if len(samples) + len(from_file) > L.MAX_SAMPLES:
            raise fail(f"{path}.file", f"more than {L.MAX_SAMPLES:,} samples in all", s.file)
        samples += from_file
    if not samples:
        raise fail(path, "an empirical distribution needs samples_ms or a file of samples")
    mean = math.fsum(samples) / len(samples)
    return ServiceSpec(
        dist="empirical",
        mean_ms=mean,
        file=s.file,
        samples_ms=tuple(samples),
        per_item_ms=s.per_item_ms,
    )


def _source(s: SourceIn, path: str, run: RunSpec, base: Path | None) -> SourceSpec:
    _name(s.name, f"{path}.name")
    if s.arrival == "trace":
        return _trace_source(s, path, run, base)
    for key in ("trace", "trace_seconds"):
        if getattr(s, key) is not UNSET:
            raise fail(f"{path}.{key}", 'applies only to arrival = "trace"')
    burst = s.burst if isinstance(s.burst, BurstSpec) else None
    schedule = () if s.rate_schedule is UNSET else _schedule(s.rate_schedule, path)
    if schedule and s.rate_hz is not UNSET:
        raise fail(f"{path}.rate_hz", "give rate_hz or rate_schedule, not both")
    if schedule:
        rate = mean = _average_rate(schedule, run.duration_seconds)
    elif s.rate_hz is UNSET:
        raise fail(f"{path}.rate_hz", "is required")
    elif s.rate_hz < 0 or (s.rate_hz == 0 and burst is None):
        raise fail(f"{path}.rate_hz", "must be >= 0" if burst else "must be > 0", s.rate_hz)
    else:
        rate = mean = s.rate_hz
    if burst is not None:
        switches = 2 * run.duration_seconds / min(burst.mean_on_seconds, burst.mean_off_seconds)
        if switches > L.MAX_BURST_SWITCHES:
            raise fail(
                f"{path}.burst",
                f"about {switches:.3g} on/off switches over run.duration_seconds: at most"
                f" {L.MAX_BURST_SWITCHES:.0e}",
            )
        on = burst.mean_on_seconds / (burst.mean_on_seconds + burst.mean_off_seconds)
        mean = mean * (1.0 - on) + burst.rate_hz * on
    jitter = 0.0 if s.jitter_ms is UNSET else s.jitter_ms
    if jitter and s.arrival != "periodic":
        raise fail(f"{path}.jitter_ms", 'applies only to arrival = "periodic"', jitter)
    return SourceSpec(
        name=s.name,
        streams=s.streams,
        arrival=s.arrival,
        bytes=s.bytes,
        rate_hz=rate,
        rate_schedule=schedule,
        burst=burst,
        jitter_ms=jitter,
        mean_rate_hz=mean,
    )


def _trace_source(s: SourceIn, path: str, run: RunSpec, base: Path | None) -> SourceSpec:
    for key in ("rate_hz", "rate_schedule", "burst", "jitter_ms"):
        if getattr(s, key) is not UNSET:
            raise fail(f"{path}.{key}", 'does not apply to arrival = "trace"', key)
    if s.streams != 1:
        raise fail(f"{path}.streams", 'must be 1 for arrival = "trace"', s.streams)
    if (s.trace is UNSET) == (s.trace_seconds is UNSET):
        raise fail(f"{path}.trace", "give trace (a file of timestamps) or trace_seconds")
    if isinstance(s.trace, str):
        times = trace_times(s.trace, f"{path}.trace", base)
    else:
        times = tuple(sorted(s.trace_seconds or ()))
    rate = sum(1 for x in times if x < run.duration_seconds) / run.duration_seconds
    return SourceSpec(
        name=s.name,
        streams=1,
        arrival="trace",
        bytes=s.bytes,
        rate_hz=rate,
        mean_rate_hz=rate,
        trace_seconds=times,
    )


def _schedule(steps: tuple[tuple[float, float], ...], path: str) -> tuple[tuple[float, float], ...]:
    """``rate_schedule = [[t0, rate0], [t1, rate1], ...]``: seconds from the run's start
    (the first 0, strictly increasing) and each stream's rate (Hz) from then on."""
    where = f"{path}.rate_schedule"
    for k, (at, _) in enumerate(steps):
        if (k == 0 and at != 0) or (k and at <= steps[k - 1][0]):
            raise fail(
                f"{where}[{k}]", "the first step starts at 0 and each later one after the last"
            )
    if all(r == 0 for _, r in steps):
        raise fail(where, "every rate is 0: the source would send nothing")
    return steps


def _average_rate(schedule: tuple[tuple[float, float], ...], duration: float) -> float:
    """The schedule's mean rate over ``[0, duration)``."""
    total = 0.0
    for k, (at, rate) in enumerate(schedule):
        until = schedule[k + 1][0] if k + 1 < len(schedule) else duration
        total += rate * max(0.0, min(until, duration) - at)
    return total / duration


def _stage(s: StageIn, path: str, base: Path | None) -> StageSpec:
    _name(s.name, f"{path}.name")
    service = _service(s.service, f"{path}.service", base)
    if s.per_item_ms is not UNSET:  # also accepted beside the service table
        if service.per_item_ms:
            raise fail(f"{path}.per_item_ms", "given both here and in service: give it once")
        service = msgspec.structs.replace(service, per_item_ms=s.per_item_ms)
    batch_service = s.batch if isinstance(s.batch, BatchSpec) else None
    if s.join is not None and len(s.inputs) < 2:
        raise fail(f"{path}.join", "needs a stage with at least two inputs", s.join)
    if s.join_timeout_ms is not None and s.join is None:
        raise fail(f"{path}.join_timeout_ms", 'applies only with join = "all"', s.join_timeout_ms)
    if s.join is not None and batch_service is not None:
        raise fail(f"{path}.batch", "a join stage cannot batch its service (not supported)")
    if s.max_deliver == 0:
        raise fail(f"{path}.max_deliver", "must be >= 1 (or -1)", 0)
    kept = {k: v for k, v in msgspec.structs.asdict(s).items() if k != "per_item_ms"}
    batch = batch_service.max_items if batch_service is not None else kept["batch"]
    return StageSpec(**{**kept, "service": service, "batch": batch}, batch_service=batch_service)


def _fault(f: FaultIn, path: str) -> FaultSpec:
    if isinstance(f, PauseAcceptanceIn) and (f.stage is None) == (f.channel is None):
        raise fail(f"{path}.stage", "pause_acceptance needs stage (its inputs) or channel, one")
    kind = str(type(f).__struct_config__.tag)
    return FaultSpec(kind=kind, **msgspec.structs.asdict(f))


def _failure(f: FailureSpec, path: str) -> FailureSpec:
    if f.kind == "pause_payload":
        if f.stage is not None:
            raise fail(f"{path}.stage", "does not apply to kind = 'pause_payload'", f.stage)
    elif f.stage is None:
        raise fail(f"{path}.stage", f"is required for {f.kind}")
    if f.factor != 1.0 and f.kind != "slow_stage":
        raise fail(f"{path}.factor", "applies only to kind = 'slow_stage'", f.factor)
    if f.stage is not None:
        _name(f.stage, f"{path}.stage")
    return f


def _node(n: NodeSpec, path: str) -> NodeSpec:
    _name(n.name, f"{path}.name")
    return n


def _check_depth(doc: Mapping[str, Any]) -> None:
    """Tables and arrays nest at most :data:`~._limits.MAX_TOML_DEPTH` deep (walked without
    recursion, so a hostile document cannot exhaust the stack)."""
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > L.MAX_TOML_DEPTH:
            raise fail("toml", f"nested more than {L.MAX_TOML_DEPTH} levels deep")
        if isinstance(value, Mapping):
            stack.extend((v, depth + 1) for v in value.values() if isinstance(v, Mapping | list))
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value if isinstance(v, Mapping | list))


def parse_spec(doc: Mapping[str, Any], base: Path | None = None) -> SimSpec:
    """Validate a decoded spec document; ``base`` resolves relative sample files."""
    if not isinstance(doc, Mapping):
        raise fail("spec", "must be a table (a decoded TOML document)", type(doc).__name__)
    _check_depth(doc)
    d = convert(doc if "run" in doc else {"run": {}, **doc}, DocumentIn, "")
    run = _run(d.run)
    sources = tuple(_source(s, f"source[{i}]", run, base) for i, s in enumerate(d.source))
    stages = tuple(_stage(s, f"stage[{i}]", base) for i, s in enumerate(d.stage))
    nodes = tuple(_node(n, f"node[{i}]") for i, n in enumerate(d.node))
    faults = tuple(_fault(f, f"fault[{i}]") for i, f in enumerate(d.fault))
    failures = tuple(_failure(f, f"failure[{i}]") for i, f in enumerate(d.failure))
    if len(sources) + len(stages) > L.MAX_NODES:
        raise fail("stage", f"more than {L.MAX_NODES:,} sources and stages in all")
    if not sources:
        raise fail("source", "at least one [[source]] is required")
    if not stages:
        raise fail("stage", "at least one [[stage]] is required")
    names = check_graph(sources, stages)
    check_load(sources, run)
    check_nodes(stages, nodes)
    check_faults(faults, stages, names)
    check_failures(failures, stages, run.duration_seconds)
    return SimSpec(
        run=run,
        sources=sources,
        stages=stages,
        faults=faults,
        failures=failures,
        nodes=nodes,
        gpu=d.gpu,
        payload=d.payload,
    )


def load_spec(path: str | Path, run_overrides: Mapping[str, Any] | None = None) -> SimSpec:
    """Read and validate a TOML spec; SpecError for a malformed file (field ``toml`` for a
    TOML syntax error). ``run_overrides`` replace keys of ``[run]`` before validation."""
    p = Path(path)
    text = read_capped(p, L.MAX_SPEC_FILE_BYTES)
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


__all__ = ["Z99", "load_spec", "parse_spec", "service_spec"]
