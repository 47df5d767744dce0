"""Planning: place workload requests on the nodes of one inventory snapshot.

Pure: reads the snapshot only, returns a plan or an ``Infeasible`` with the true reason.

The node model (see docs/allocation.md): a node is eligible when it is unowned, classified
whole-GPU or MIG (not reconfiguring/invalid/unknown) and its occupancy is known. A node with
MIG geometry offers its instances; foreign and retained workloads are counted against every
profile (the model does not know which instance a foreign pod holds — conservative). A node
with no workloads at all may be given new geometry when the authority can change geometry;
its per-card layouts come from ``gpu.layout.plan_node``. Whole-device requests use best fit
(fewest free devices that suffice); when that greedy order fails on a small inventory, the
exhaustive ``pack_whole_devices`` decides, so a refusal is never due to the heuristic there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Literal

from ..contracts.allocation import (
    FeasiblePlan,
    Infeasible,
    InventorySnapshot,
    NodePlan,
    NodeView,
    Placement,
    WorkloadRequest,
)
from ..contracts.errors import ValidationError
from . import labels
from .layout import MigRefusal, NodeMigPlan, plan_node, profile_for_memory, profile_names
from .packing import pack_whole_devices

ELIGIBLE_CLASSES = frozenset({labels.WHOLE_GPU, labels.MIG_SINGLE, labels.MIG_MIXED})
EXHAUSTIVE_HOSTS = 10  # inventories up to this many candidate hosts get the exhaustive oracle
OCCUPANCY_UNKNOWN = "occupancy unknown"
EXHAUSTIVE_NOTE = " (confirmed by exhaustive search)"
HEURISTIC_NOTE = " (greedy search; an assignment may exist)"
CONFIG_UNKNOWN = "mig config unknown"


@dataclass
class _Node:
    view: NodeView
    free_whole: int
    free_mig: dict[str, int]
    idle: bool
    changeable: bool
    geometry: list[str] = field(default_factory=list)  # profiles placed by a geometry change
    geometry_for: list[str] = field(default_factory=list)  # their workload ids, in order
    plan: NodeMigPlan | None = None
    taken_whole: bool = False  # whole devices placed here (no geometry change then)

    @property
    def name(self) -> str:
        return self.view.name


def _matches(req: WorkloadRequest, view: NodeView) -> bool:
    if req.nodes is not None and view.name not in req.nodes:
        return False
    if req.product is not None and req.product.casefold() not in view.product.casefold():
        return False
    return all(view.labels.get(k) == v for k, v in req.node_selector.items())


class _Planner:
    def __init__(
        self,
        requests: Sequence[WorkloadRequest],
        snapshot: InventorySnapshot,
        can_change_geometry: bool,
    ) -> None:
        self.requests = requests
        self.snapshot = snapshot
        self.config_known = "config" not in snapshot.missing
        self.can_change = can_change_geometry
        self.profile_cache: dict[tuple[str, float], str | MigRefusal] = {}
        self.refusals: dict[str, str] = {}

    def nodes(self) -> list[_Node]:
        out: list[_Node] = []
        for view in self.snapshot.nodes:
            if view.owner is not None or view.classification not in ELIGIBLE_CLASSES:
                continue
            used = view.used_devices or 0
            idle = not view.workloads
            if view.mig_layout:
                free_mig = {p: c - used for p, c in view.mig_layout.items() if c - used > 0}
                free_whole = 0
            else:
                free_mig = {}
                free_whole = max(view.gpu_count - used, 0)
            changeable = idle and self.can_change and view.family is not None and view.gpu_count > 0
            out.append(_Node(view, free_whole, free_mig, idle, changeable))
        return out

    def profile(self, req: WorkloadRequest, product: str) -> str | MigRefusal:
        if req.mig_profile is not None:
            return req.mig_profile
        assert req.mig_memory_gib is not None
        key = (product, req.mig_memory_gib)
        got = self.profile_cache.get(key)
        if got is None:
            got = profile_for_memory(product, req.mig_memory_gib)
            self.profile_cache[key] = got
        return got

    def run(self, mig_first: bool) -> tuple[list[Placement], list[_Node]] | str:
        nodes = self.nodes()
        placements: dict[str, Placement] = {}
        whole = sorted(
            (r for r in self.requests if not r.is_mig), key=lambda r: (-r.devices, r.workload_id)
        )
        mig = [r for r in self.requests if r.is_mig]
        steps: list[Callable[[], str | None]] = [
            lambda: self._mig_existing(mig, nodes, placements),
            lambda: self._whole(whole, nodes, placements),
            lambda: self._mig_geometry(mig, nodes, placements),
        ]
        if mig_first:
            steps = [steps[0], steps[2], steps[1]]
        for step in steps:
            why = step()
            if why is not None:
                return why
        return [placements[r.workload_id] for r in self.requests], nodes

    # -- MIG on existing instances -----------------------------------------------------------
    def _mig_existing(
        self, mig: list[WorkloadRequest], nodes: list[_Node], out: dict[str, Placement]
    ) -> None:
        for req in mig:
            for node in nodes:
                if not node.free_mig or not _matches(req, node.view):
                    continue
                profile = self.profile(req, node.view.product)
                if isinstance(profile, MigRefusal) or node.free_mig.get(profile, 0) <= 0:
                    continue
                node.free_mig[profile] -= 1
                node.changeable = False
                out[req.workload_id] = Placement(
                    workload_id=req.workload_id, node=node.name, mig_profile=profile
                )
                break
        return None

    # -- whole devices -------------------------------------------------------------------------
    def _whole(
        self, whole: list[WorkloadRequest], nodes: list[_Node], out: dict[str, Placement]
    ) -> str | None:
        buckets: dict[int, list[_Node]] = {}
        for node in nodes:
            if node.free_whole > 0 and not node.geometry:
                buckets.setdefault(node.free_whole, []).append(node)
        sizes = sorted(buckets)
        for req in whole:
            chosen: _Node | None = None
            for size in sizes:
                if size < req.devices:
                    continue
                for node in buckets[size]:
                    if not node.geometry and _matches(req, node.view):
                        chosen = node
                        break
                if chosen is not None:
                    break
            if chosen is None:
                return self._whole_refusal(req, whole, nodes)
            buckets[chosen.free_whole].remove(chosen)
            chosen.free_whole -= req.devices
            chosen.changeable = False
            chosen.taken_whole = True
            if chosen.free_whole > 0:
                if chosen.free_whole not in buckets:
                    buckets[chosen.free_whole] = []
                    sizes = sorted(buckets)
                buckets[chosen.free_whole].append(chosen)
            out[req.workload_id] = Placement(
                workload_id=req.workload_id, node=chosen.name, devices=req.devices
            )
        return None

    def _whole_refusal(
        self, req: WorkloadRequest, whole: list[WorkloadRequest], nodes: list[_Node]
    ) -> str:
        fresh = [n for n in self.nodes() if not n.view.mig_layout]
        candidates = [n for n in fresh if n.free_whole > 0]
        if not any(_matches(req, n.view) and n.view.gpu_count >= req.devices for n in fresh):
            return (
                f"no eligible node for {req.workload_id!r}: none unowned, whole-GPU, readable "
                f"and matching its constraints has {req.devices} GPUs"
            )
        needed = sum(r.devices for r in whole)
        free = sum(n.free_whole for n in candidates)
        if needed > free:
            return (
                f"insufficient capacity: {needed} whole devices requested, {free} free on "
                "eligible nodes"
            )
        return (
            f"fragmented: {free} whole devices free in aggregate but no host has "
            f"{req.devices} free for {req.workload_id!r} after the larger requests"
        )

    # -- MIG with a geometry change -------------------------------------------------------------
    def _mig_geometry(
        self, mig: list[WorkloadRequest], nodes: list[_Node], out: dict[str, Placement]
    ) -> str | None:
        pending = [r for r in mig if r.workload_id not in out]
        if not pending:
            return None
        if not self.can_change:
            return (
                f"no existing MIG instance for {pending[0].workload_id!r} and this authority "
                "cannot change geometry"
            )
        if not self.config_known:
            return CONFIG_UNKNOWN
        opened: list[_Node] = []
        full: set[tuple[str, str]] = set()
        for req in pending:
            placed = False
            last = "no idle MIG-capable node matches its constraints"
            for node in opened:
                if not _matches(req, node.view):
                    continue
                profile = self.profile(req, node.view.product)
                if isinstance(profile, MigRefusal) or (node.name, profile) in full:
                    continue
                got = plan_node(node.view.product, node.view.gpu_count, [*node.geometry, profile])
                if isinstance(got, NodeMigPlan):
                    node.geometry.append(profile)
                    node.geometry_for.append(req.workload_id)
                    node.plan = got
                    placed = True
                    break
                full.add((node.name, profile))
            if not placed:
                for node in nodes:
                    if not node.changeable or node.geometry or not _matches(req, node.view):
                        continue
                    profile = self.profile(req, node.view.product)
                    if isinstance(profile, MigRefusal):
                        last = profile.reason
                        continue
                    got = plan_node(node.view.product, node.view.gpu_count, [profile])
                    if isinstance(got, MigRefusal):
                        last = got.reason
                        continue
                    node.geometry.append(profile)
                    node.geometry_for.append(req.workload_id)
                    node.plan = got
                    opened.append(node)
                    placed = True
                    break
            if not placed:
                return f"no node can host MIG request {req.workload_id!r}: {last}"
        for node in opened:
            assert node.plan is not None
            for i, workload in enumerate(node.geometry_for):
                out[workload] = Placement(
                    workload_id=workload,
                    node=node.name,
                    mig_profile=node.geometry[i],
                    card=node.plan.assignment[i],
                )
        return None


def validate_request(req: WorkloadRequest) -> str | None:
    """Why ``req`` is malformed, or None."""
    if not req.workload_id:
        return "workload_id must be non-empty"
    if isinstance(req.devices, bool) or not isinstance(req.devices, int) or req.devices < 0:
        return f"devices must be a non-negative integer, got {req.devices!r}"
    kinds = (req.devices > 0) + (req.mig_profile is not None) + (req.mig_memory_gib is not None)
    if kinds != 1:
        return "exactly one of devices (> 0), mig_profile, mig_memory_gib must be given"
    if req.mig_memory_gib is not None and not req.mig_memory_gib >= 0:
        return f"mig_memory_gib must be >= 0, got {req.mig_memory_gib!r}"
    if req.mig_profile is not None and not req.mig_profile:
        return "mig_profile must be non-empty"
    return None


def check_requests(requests: Sequence[WorkloadRequest]) -> None:
    """Raise ``ValidationError`` (``field='requests'``) for a request that is not a
    ``WorkloadRequest``, is malformed (:func:`validate_request`) or repeats a workload id."""
    seen: set[str] = set()
    for req in requests:
        if not isinstance(req, WorkloadRequest):
            raise ValidationError("requests must be WorkloadRequest", field="requests", value=req)
        why = validate_request(req)
        if why is not None:
            raise ValidationError(
                f"{req.workload_id!r}: {why}", field="requests", value=req.workload_id
            )
        if req.workload_id in seen:
            raise ValidationError(
                f"duplicate workload {req.workload_id!r}", field="requests", value=req.workload_id
            )
        seen.add(req.workload_id)


def plan_requests(
    requests: Sequence[WorkloadRequest],
    snapshot: InventorySnapshot,
    *,
    plan_id: str,
    can_change_geometry: bool,
    known_profiles: AbstractSet[str] | None = None,
) -> FeasiblePlan | Infeasible:
    """Place every request (already checked by :func:`check_requests`) on one node of
    ``snapshot`` each, or say truthfully why not. Pure: reads the snapshot only.

    ``can_change_geometry``: whether idle nodes may be given new MIG geometry (the backend's
    authority). ``known_profiles``: the MIG profile names a request may name (default: every
    profile of the shipped tables); another name is ``Infeasible``.
    """
    if known_profiles is None:
        known_profiles = profile_names()
    if requests and "pods" in snapshot.missing:
        return Infeasible(OCCUPANCY_UNKNOWN)
    for req in requests:
        if req.mig_profile is not None and req.mig_profile not in known_profiles:
            return Infeasible(f"unknown MIG profile {req.mig_profile!r} for {req.workload_id!r}")
    planner = _Planner(requests, snapshot, can_change_geometry)
    result = planner.run(mig_first=False)
    if isinstance(result, str):
        second = planner.run(mig_first=True)
        if isinstance(second, str):
            exhaustive = _exhaustive_whole(requests, snapshot, planner)
            if exhaustive is None or exhaustive is False:
                if result.startswith("fragmented"):
                    result += EXHAUSTIVE_NOTE if exhaustive is None else HEURISTIC_NOTE
                return Infeasible(result)
            second = exhaustive
        result = second
    placements, nodes = result
    node_plans: list[NodePlan] = []
    touched = {p.node for p in placements}
    for node in nodes:
        if node.name not in touched:
            continue
        if node.geometry and node.plan is not None:
            total: dict[str, int] = {}
            for layout in node.plan.layouts:
                for profile, count in layout.items():
                    total[profile] = total.get(profile, 0) + count
            node_plans.append(
                NodePlan(
                    node=node.name,
                    resource_version=node.view.resource_version,
                    geometry_change=True,
                    mig_layout=total,
                    card_layouts=tuple(dict(layout) for layout in node.plan.layouts),
                )
            )
        else:
            node_plans.append(NodePlan(node=node.name, resource_version=node.view.resource_version))
    return FeasiblePlan(
        plan_id=plan_id,
        snapshot_id=snapshot.snapshot_id,
        placements=tuple(placements),
        nodes=tuple(node_plans),
    )


def _exhaustive_whole(
    requests: Sequence[WorkloadRequest], snapshot: InventorySnapshot, planner: _Planner
) -> tuple[list[Placement], list[_Node]] | Literal[False] | None:
    """For whole-device-only requests on a small inventory: the exact answer (None: no
    assignment exists). False when the search does not apply (MIG requests, many hosts)."""
    if any(r.is_mig for r in requests) or not requests:
        return False
    nodes = [n for n in planner.nodes() if n.free_whole > 0]
    if len(nodes) > EXHAUSTIVE_HOSTS:
        return False
    free = {n.name: n.free_whole for n in nodes}
    eligible = {r.workload_id: {n.name for n in nodes if _matches(r, n.view)} for r in requests}
    got = pack_whole_devices([(r.workload_id, r.devices) for r in requests], free, eligible)
    if got is None:
        return None
    placements = [
        Placement(workload_id=r.workload_id, node=got[r.workload_id], devices=r.devices)
        for r in requests
    ]
    return placements, nodes


__all__ = [
    "CONFIG_UNKNOWN",
    "ELIGIBLE_CLASSES",
    "OCCUPANCY_UNKNOWN",
    "check_requests",
    "plan_requests",
    "validate_request",
]
