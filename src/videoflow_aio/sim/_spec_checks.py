"""The spec's cross-field rules, checked after every table has been decoded: node names
unique, inputs that exist and no cycle, a bounded load, GPU stages with nodes that have
their profiles, faults and failure processes that name what exists."""

from __future__ import annotations

import math

from ..gpu import check_layout, family_for
from . import _limits as L
from ._spec_errors import fail as _fail
from ._spec_types import (
    MAX_FRAMES,
    FailureSpec,
    FaultSpec,
    NodeSpec,
    RunSpec,
    SourceSpec,
    StageSpec,
)


def check_graph(sources: tuple[SourceSpec, ...], stages: tuple[StageSpec, ...]) -> set[str]:
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


def check_load(sources: tuple[SourceSpec, ...], run: RunSpec) -> None:
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


def check_nodes(stages: tuple[StageSpec, ...], nodes: tuple[NodeSpec, ...]) -> None:
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


def check_faults(
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


def check_failures(
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


__all__ = [
    "check_failures",
    "check_faults",
    "check_graph",
    "check_load",
    "check_nodes",
]
