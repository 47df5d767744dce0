"""Analytic screening: each stage's offered load from the spec alone, before any run.

A stage's arrival rate comes from the graph: a source sends ``streams × rate_hz`` frames a
second; a stage forwards each frame it reads once (a fan-in stage deduplicates the copies of
a frame, so its output carries each frame once), and a stage reading several inputs gets one
message per input carrying the frame — with ``replicas`` workers *per input* (the toolkit
has no receive over several subscriptions), so each input is its own queue. The offered load
of an input is ``arrival rate × mean service ÷ replicas``; a stage's is the largest over its
inputs. ``batch`` hands items over one by one (no batch service time), so it changes no
load. Leases are renewed while a replica works, so a long service is not redelivered;
redeliveries come from faults (a crash redelivers the message the replica held: one extra
message per crash, counted) — and a fault that takes replicas away or slows the service
raises the load while it lasts (a ``transient_overload`` warning when that reaches 1).

The same figures give a closed-form estimate of a latency objective (each stage an M/M/c
queue with its mean service time, Erlang C; end to end the sum along the slowest path): an
approximation (exact for one exponential stage), used only to decide where a sweep starts,
never to judge a point.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._dist import mean_seconds
from ._slo import Slo
from ._spec_types import SimSpec
from ._theory import mmc_mean_response, mmc_response_quantile

_QUANTILE = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p999": 0.999}


@dataclass(frozen=True, slots=True)
class StageLoad:
    """A stage's offered load: ``arrival_hz`` messages a second over all inputs, the busiest
    input's ``input_hz``, ``servers`` replicas per input (a join's replicas serve joined
    frames: the busiest input's rate), ``service_mean_ms`` per message (a batched stage's at
    full batches, the least it can be), ``utilization`` = busiest input's rate × mean
    service ÷ servers."""

    stage: str
    arrival_hz: float
    input_hz: float
    servers: int
    service_mean_ms: float
    utilization: float


def _frame_rates(spec: SimSpec) -> dict[str, dict[str, float]]:
    """Per node, the frames a second it emits, by origin source (a set of frames: copies of
    one frame arriving through two paths count once)."""
    rates: dict[str, dict[str, float]] = {
        s.name: {s.name: s.streams * (s.mean_rate_hz or s.rate_hz)} for s in spec.sources
    }
    pending = list(spec.stages)
    while pending:  # the spec's graph is acyclic (checked by parse_spec)
        rest = []
        for st in pending:
            if all(i in rates for i in st.inputs):
                merged: dict[str, float] = {}
                for i in st.inputs:
                    merged.update(rates[i])
                rates[st.name] = merged
            else:
                rest.append(st)
        if len(rest) == len(pending):  # pragma: no cover - parse_spec refuses cycles
            break
        pending = rest
    return rates


def offered_loads(spec: SimSpec) -> list[StageLoad]:
    """Every stage's offered load, in spec order."""
    if not isinstance(spec, SimSpec):
        raise TypeError(f"spec must be a SimSpec (load_spec), not {spec!r:.80}")
    rates = _frame_rates(spec)
    crashes: dict[str, int] = {}
    for f in spec.faults:
        if f.kind == "crash_replica" and f.stage is not None:
            crashes[f.stage] = crashes.get(f.stage, 0) + 1
    out = []
    for st in spec.stages:
        per_input = [sum(rates[i].values()) for i in st.inputs]
        extra = crashes.get(st.name, 0) / spec.run.duration_seconds
        busiest = max(per_input) + extra
        mean = mean_seconds(st.service) + st.service.per_item_ms / 1000.0
        if st.batch_service is not None:  # full batches: the least service per message
            n = st.batch_service.max_items
            mean = (mean_seconds(st.service) + n * st.service.per_item_ms / 1000.0) / n
        out.append(
            StageLoad(
                stage=st.name,
                arrival_hz=sum(per_input) + extra,
                input_hz=busiest,
                servers=st.replicas,
                service_mean_ms=mean * 1000.0,
                utilization=busiest * mean / st.replicas,
            )
        )
    return out


def warnings_for(spec: SimSpec) -> list[dict[str, Any]]:
    """The ``warnings`` entries: ``overload`` for a stage at utilisation ≥ 1 (its queue grows
    without bound: latency keeps growing with the run's length), ``transient_overload`` for
    a fault that takes a stage to ≥ 1 while it lasts."""
    out: list[dict[str, Any]] = []
    loads = {ld.stage: ld for ld in offered_loads(spec)}
    for ld in loads.values():
        if ld.utilization >= 1.0:
            out.append(
                {
                    "kind": "overload",
                    "stage": ld.stage,
                    "utilization": ld.utilization,
                    "message": (
                        f"stage {ld.stage!r} is offered {ld.utilization:.2f} of its capacity"
                        f" ({ld.input_hz:g} msg/s × {ld.service_mean_ms:g} ms ÷ {ld.servers}"
                        " replicas): unstable, its latency grows with the run's length"
                    ),
                }
            )
    for f in spec.faults:
        if f.stage is None or f.stage not in loads or loads[f.stage].utilization >= 1.0:
            continue
        ld = loads[f.stage]
        if f.kind == "crash_replica" and ld.servers > 1:
            during = ld.utilization * ld.servers / (ld.servers - 1)
        elif f.kind == "slow_stage":
            during = ld.utilization * f.factor
        else:
            continue
        if during >= 1.0:
            out.append(
                {
                    "kind": "transient_overload",
                    "stage": f.stage,
                    "utilization": during,
                    "at_seconds": f.at_seconds,
                    "message": (
                        f"{f.kind} at {f.at_seconds:g} s takes stage {f.stage!r} to"
                        f" {during:.2f} of its capacity while it lasts: a queue builds"
                    ),
                }
            )
    return out


def unstable(spec: SimSpec) -> list[StageLoad]:
    """The stages offered ≥ 100 % of their capacity."""
    return [ld for ld in offered_loads(spec) if ld.utilization >= 1.0]


def _stage_estimate_ms(ld: StageLoad, figure: str) -> float:
    if ld.service_mean_ms == 0.0:
        return 0.0
    lam, mu = ld.input_hz, 1000.0 / ld.service_mean_ms
    if figure == "mean":
        return mmc_mean_response(lam, mu, ld.servers) * 1000.0
    return mmc_response_quantile(lam, mu, ld.servers, _QUANTILE[figure]) * 1000.0


def estimate_ms(spec: SimSpec, slo: Slo) -> float | None:
    """A closed-form estimate of a latency objective's figure (see the module docstring), or
    None (not a latency, an unstable stage, or nothing to estimate)."""
    if not slo.latency:
        return None
    loads = {ld.stage: ld for ld in offered_loads(spec)}
    if any(ld.utilization >= 1.0 for ld in loads.values()):
        return None
    per_stage = {name: _stage_estimate_ms(ld, slo.figure) for name, ld in loads.items()}
    if slo.where != "end_to_end":
        return per_stage.get(slo.where)
    path: dict[str, float] = {s.name: 0.0 for s in spec.sources}
    for st in _topological(spec):
        path[st.name] = max(path[i] for i in st.inputs) + per_stage[st.name]
    return max(path[st.name] for st in spec.stages)


def _topological(spec: SimSpec) -> list[Any]:
    done = {s.name for s in spec.sources}
    order: list[Any] = []
    pending = list(spec.stages)
    while pending:
        rest = [st for st in pending if not all(i in done for i in st.inputs)]
        for st in pending:
            if st not in rest:
                order.append(st)
                done.add(st.name)
        if len(rest) == len(pending):  # pragma: no cover - parse_spec refuses cycles
            break
        pending = rest
    return order


__all__ = ["StageLoad", "estimate_ms", "offered_loads", "unstable", "warnings_for"]
