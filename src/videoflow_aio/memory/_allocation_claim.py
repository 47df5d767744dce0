"""A claim of the allocation model and how it reads: per-node geometry state and the phase.

Pure reads of the cluster: nothing here writes. A claim's geometry on a node is ``ready`` only
when the manager answered ``success`` *for the generation the claim wrote*; an answer to an
earlier write reads ``pending``, a later write (or a pointer that moved) ``superseded``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..contracts.allocation import (
    ClaimNode,
    ClaimObservation,
    ClaimPhase,
    FeasiblePlan,
    GeometryState,
    Placement,
    ReleaseObservation,
)
from ._allocation_cluster import Cluster
from ._allocation_fixture import NodeFixture


@dataclass
class Claim:
    """What one reserve operation holds; ``generation`` moves with every change."""

    claim_id: str
    operation_id: str
    plan: FeasiblePlan  # what the operation reserved: a retry must name the same plan
    generation: int
    placements: tuple[Placement, ...]
    nodes: tuple[str, ...]
    geometry: dict[str, int] = field(default_factory=dict)  # node -> write generation
    entries: dict[str, str] = field(default_factory=dict)  # node -> config entry name
    devices: dict[str, tuple[str, ...]] = field(default_factory=dict)  # workload -> devices
    released: bool = False
    workloads_ready: bool = False
    releases: dict[str, ReleaseObservation] = field(default_factory=dict)

    @property
    def gen(self) -> str:
        """The opaque generation string callers name (``claim-id@n``)."""
        return f"{self.claim_id}@{self.generation}"

    def layout_on(self, name: str) -> dict[str, int]:
        """The MIG layout (profile → count) the claim's placements need on node ``name``."""
        layout: dict[str, int] = {}
        for p in self.placements:
            if p.node == name and p.mig_profile is not None:
                layout[p.mig_profile] = layout.get(p.mig_profile, 0) + 1
        return layout


def geometry_state(c: Cluster, claim: Claim, name: str) -> GeometryState:
    """The claim's geometry on node ``name`` (see the module doc)."""
    if name not in claim.entries:
        return "none"
    gen = claim.geometry.get(name)
    if gen is None:
        return "pending"  # intended, the pointer not written yet
    node = c.nodes[name]
    job = c.jobs.get(name)
    if (
        node.mig_state_generation > gen
        or (job is not None and job.generation > gen)
        or node.mig_config != claim.entries.get(name)
    ):
        return "superseded"
    if node.mig_state_generation < gen:
        return "pending"
    if node.mig_state == "success":
        return "ready"
    if node.mig_state == "failed":
        return "failed"
    return "pending"


def _named(nodes: list[ClaimNode], what: str, pick: set[str]) -> str:
    return what + ", ".join(n.node for n in nodes if n.geometry in pick)


def _released_phase(c: Cluster, claim: Claim) -> ClaimPhase:
    """``retained`` while a workload of the claim still runs or a node still shows its
    geometry, else ``released``."""
    retained = any(p.workload_id in c.nodes[p.node].workloads for p in claim.placements)
    pinned = any(c.nodes[n].mig_config == e for n, e in claim.entries.items())
    return "retained" if retained or pinned else "released"


def _phase(c: Cluster, claim: Claim, nodes: list[ClaimNode]) -> tuple[ClaimPhase, str | None]:
    if claim.released:
        return _released_phase(c, claim), None
    states = {n.geometry for n in nodes}
    if "failed" in states:
        return "failed", _named(nodes, "geometry failed on ", {"failed"})
    lost = [n.node for n in nodes if not n.owned or n.geometry == "superseded"]
    if lost:
        return "lost", "no longer owns or configures " + ", ".join(lost)
    if "pending" in states:
        return "preparing", _named(nodes, "geometry pending on ", {"pending"})
    return ("ready" if claim.workloads_ready else "allocated"), None


def observation(c: Cluster, claim: Claim) -> ClaimObservation:
    """The claim as the cluster shows it now: per node ownership and geometry, and the phase
    (``released``/``retained``, else ``failed``, ``lost``, ``preparing``, ``allocated``/``ready``
    — the first that applies)."""
    nodes = [
        ClaimNode(
            node=name,
            owned=c.nodes[name].owner == claim.claim_id,
            geometry=geometry_state(c, claim, name),
            geometry_generation=claim.geometry.get(name),
            mig_config=c.nodes[name].mig_config,
        )
        for name in claim.nodes
    ]
    phase, reason = _phase(c, claim, nodes)
    return ClaimObservation(
        claim_id=claim.claim_id,
        generation=claim.gen,
        operation_id=claim.operation_id,
        phase=phase,
        nodes=tuple(nodes),
        placements=claim.placements,
        reason=reason,
    )


def device_names(
    nodes: Mapping[str, NodeFixture], plan: FeasiblePlan
) -> dict[str, tuple[str, ...]]:
    """Workload → the device names it will be bound to: whole GPUs after the ones in use,
    MIG devices numbered per node and profile."""
    out: dict[str, tuple[str, ...]] = {}
    next_free: dict[str, int] = {}
    counters: dict[tuple[str, str], int] = {}
    for p in plan.placements:
        if p.mig_profile is None:
            start = next_free.get(p.node, nodes[p.node].used_devices)
            out[p.workload_id] = tuple(f"{p.node}/gpu{i}" for i in range(start, start + p.devices))
            next_free[p.node] = start + p.devices
        else:
            key = (p.node, p.mig_profile)
            k = counters.get(key, 0)
            counters[key] = k + 1
            card = "" if p.card is None else f"gpu{p.card}/"
            out[p.workload_id] = (f"{p.node}/{card}mig-{p.mig_profile}-{k}",)
    return out


__all__ = ["Claim", "device_names", "geometry_state", "observation"]
