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
"""The node classifications placement may put a workload on."""
EXHAUSTIVE_HOSTS = 10  # inventories up to this many candidate hosts get the exhaustive oracle
OCCUPANCY_UNKNOWN = "occupancy unknown"
"""The ``Infeasible`` reason when a candidate node's occupancy cannot be read: never planned
as if it were free."""
EXHAUSTIVE_NOTE = " (confirmed by exhaustive search)"
HEURISTIC_NOTE = " (greedy search; an assignment may exist)"
CONFIG_UNKNOWN = "mig config unknown"
"""The refusal reason when the MIG config cannot be read: no geometry change is planned
then (existing instances and whole devices still are)."""


class _Node:
    """The planner's working state of one eligible node: what is still free (MIG instances,
    foreign workloads counted against every profile; or whole GPUs) and the geometry change
    planned on it, if any."""

    __slots__ = (
        "changeable",
        "free_mig",
        "free_whole",
        "geometry",
        "geometry_for",
        "idle",
        "plan",
        "taken_whole",
        "view",
    )

    def __init__(self, view: NodeView, can_change: bool) -> None:
        used = view.used_devices or 0
        self.view = view
        self.idle = not view.workloads
        if view.mig_layout:
            self.free_mig = {p: c - used for p, c in view.mig_layout.items() if c - used > 0}
            self.free_whole = 0
        else:
            self.free_mig = {}
            self.free_whole = max(view.gpu_count - used, 0)
        # new geometry only on an idle node of a known family, with the authority for it
        self.changeable = (
            self.idle and can_change and view.family is not None and view.gpu_count > 0
        )
        self.geometry: list[str] = []  # profiles placed by a geometry change
        self.geometry_for: list[str] = []  # their workload ids, in order
        self.plan: NodeMigPlan | None = None
        self.taken_whole = False  # whole devices placed here (no geometry change then)

    @property
    def name(self) -> str:
        return self.view.name

    def add_geometry(self, profile: str, workload_id: str, plan: NodeMigPlan) -> None:
        """One more MIG instance for ``workload_id`` by a geometry change; ``plan`` lays out
        them all."""
        self.geometry.append(profile)
        self.geometry_for.append(workload_id)
        self.plan = plan

    def geometry_placements(self) -> list[Placement]:
        """The placements of the instances this node's geometry change creates."""
        assert self.plan is not None
        return [
            Placement(
                workload_id=workload,
                node=self.name,
                mig_profile=self.geometry[i],
                card=self.plan.assignment[i],
            )
            for i, workload in enumerate(self.geometry_for)
        ]

    def node_plan(self) -> NodePlan:
        """What the plan does to this node: ownership, and the new geometry if any."""
        if not self.geometry or self.plan is None:
            return NodePlan(node=self.name, resource_version=self.view.resource_version)
        total: dict[str, int] = {}
        for layout in self.plan.layouts:
            for profile, count in layout.items():
                total[profile] = total.get(profile, 0) + count
        return NodePlan(
            node=self.name,
            resource_version=self.view.resource_version,
            geometry_change=True,
            mig_layout=total,
            card_layouts=tuple(dict(layout) for layout in self.plan.layouts),
        )


class _FreeWhole:
    """Nodes with free whole devices, bucketed by how many are free (for best fit)."""

    def __init__(self, nodes: Sequence[_Node]) -> None:
        self.buckets: dict[int, list[_Node]] = {}
        for node in nodes:
            if node.free_whole > 0 and not node.geometry:
                self.buckets.setdefault(node.free_whole, []).append(node)
        self.sizes = sorted(self.buckets)

    def best_fit(self, req: WorkloadRequest) -> _Node | None:
        """The first matching node among those with the fewest free devices that suffice."""
        for size in self.sizes:
            if size < req.devices:
                continue
            for node in self.buckets[size]:
                if not node.geometry and _matches(req, node.view):
                    return node
        return None

    def take(self, node: _Node, devices: int) -> None:
        """``devices`` of ``node`` are placed: it moves to the bucket of what is left."""
        self.buckets[node.free_whole].remove(node)
        node.free_whole -= devices
        if node.free_whole > 0:
            if node.free_whole not in self.buckets:
                self.buckets[node.free_whole] = []
                self.sizes = sorted(self.buckets)
            self.buckets[node.free_whole].append(node)


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
        """Fresh working state of every eligible node: unowned and classified whole/MIG."""
        return [
            _Node(view, self.can_change)
            for view in self.snapshot.nodes
            if view.owner is None and view.classification in ELIGIBLE_CLASSES
        ]

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
        free = _FreeWhole(nodes)
        for req in whole:
            chosen = free.best_fit(req)
            if chosen is None:
                return self._whole_refusal(req, whole)
            free.take(chosen, req.devices)
            chosen.changeable = False
            chosen.taken_whole = True
            out[req.workload_id] = Placement(
                workload_id=req.workload_id, node=chosen.name, devices=req.devices
            )
        return None

    def _whole_refusal(self, req: WorkloadRequest, whole: list[WorkloadRequest]) -> str:
        """Why ``req`` found no host: no node could ever take it, too few devices in all, or
        (the rest) fragmentation."""
        fresh = [n for n in self.nodes() if not n.view.mig_layout]
        if not any(_matches(req, n.view) and n.view.gpu_count >= req.devices for n in fresh):
            return (
                f"no eligible node for {req.workload_id!r}: none unowned, whole-GPU, readable "
                f"and matching its constraints has {req.devices} GPUs"
            )
        needed = sum(r.devices for r in whole)
        free = sum(n.free_whole for n in fresh)  # never negative
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
        why = self._geometry_refusal(pending[0])
        if why is not None:
            return why
        opened: list[_Node] = []
        full: set[tuple[str, str]] = set()
        for req in pending:
            if self._join_opened(req, opened, full):
                continue
            why = self._open(req, nodes, opened)
            if why is not None:
                return f"no node can host MIG request {req.workload_id!r}: {why}"
        for node in opened:
            for placement in node.geometry_placements():
                out[placement.workload_id] = placement
        return None

    def _geometry_refusal(self, req: WorkloadRequest) -> str | None:
        """Why no geometry change may be planned at all (authority, unreadable config)."""
        if not self.can_change:
            return (
                f"no existing MIG instance for {req.workload_id!r} and this authority "
                "cannot change geometry"
            )
        return None if self.config_known else CONFIG_UNKNOWN

    def _join_opened(
        self, req: WorkloadRequest, opened: list[_Node], full: set[tuple[str, str]]
    ) -> bool:
        """Add ``req`` to a node already getting new geometry, if one still takes it
        (``full`` remembers node/profile pairs that did not)."""
        for node in opened:
            if not _matches(req, node.view):
                continue
            profile = self.profile(req, node.view.product)
            if isinstance(profile, MigRefusal) or (node.name, profile) in full:
                continue
            got = plan_node(node.view.product, node.view.gpu_count, [*node.geometry, profile])
            if isinstance(got, NodeMigPlan):
                node.add_geometry(profile, req.workload_id, got)
                return True
            full.add((node.name, profile))
        return False

    def _open(self, req: WorkloadRequest, nodes: list[_Node], opened: list[_Node]) -> str | None:
        """Give an idle, changeable node new geometry for ``req``; None when done, else why
        the last candidate refused."""
        last = "no idle MIG-capable node matches its constraints"
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
            node.add_geometry(profile, req.workload_id, got)
            opened.append(node)
            return None
        return last


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
    early = _refuse_early(requests, snapshot, known_profiles)
    if early is not None:
        return early
    placed = _place(requests, snapshot, can_change_geometry)
    if isinstance(placed, Infeasible):
        return placed
    placements, nodes = placed
    touched = {p.node for p in placements}
    return FeasiblePlan(
        plan_id=plan_id,
        snapshot_id=snapshot.snapshot_id,
        placements=tuple(placements),
        nodes=tuple(node.node_plan() for node in nodes if node.name in touched),
    )


def _refuse_early(
    requests: Sequence[WorkloadRequest],
    snapshot: InventorySnapshot,
    known_profiles: AbstractSet[str] | None,
) -> Infeasible | None:
    """Refusals that need no search: unknown occupancy, an unknown MIG profile name."""
    if requests and "pods" in snapshot.missing:
        return Infeasible(OCCUPANCY_UNKNOWN)
    known = profile_names() if known_profiles is None else known_profiles
    for req in requests:
        if req.mig_profile is not None and req.mig_profile not in known:
            return Infeasible(f"unknown MIG profile {req.mig_profile!r} for {req.workload_id!r}")
    return None


def _place(
    requests: Sequence[WorkloadRequest], snapshot: InventorySnapshot, can_change_geometry: bool
) -> tuple[list[Placement], list[_Node]] | Infeasible:
    """The greedy planner in both orders, then (whole devices only, small inventories) the
    exhaustive packing; the first refusal's reason, marked exact or heuristic when it says
    ``fragmented``."""
    planner = _Planner(requests, snapshot, can_change_geometry)
    first = planner.run(mig_first=False)
    if not isinstance(first, str):
        return first
    second = planner.run(mig_first=True)
    if not isinstance(second, str):
        return second
    exhaustive = _exhaustive_whole(requests, snapshot, planner)
    if exhaustive is not None and exhaustive is not False:
        return exhaustive
    if first.startswith("fragmented"):
        first += EXHAUSTIVE_NOTE if exhaustive is None else HEURISTIC_NOTE
    return Infeasible(first)


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
    placements = _packed(requests, nodes)
    return None if placements is None else (placements, nodes)


def _packed(requests: Sequence[WorkloadRequest], nodes: Sequence[_Node]) -> list[Placement] | None:
    """``pack_whole_devices`` over ``nodes``' free devices, each request on a matching host."""
    got = pack_whole_devices(
        [(r.workload_id, r.devices) for r in requests],
        {n.name: n.free_whole for n in nodes},
        {r.workload_id: {n.name for n in nodes if _matches(r, n.view)} for r in requests},
    )
    if got is None:
        return None
    return [
        Placement(workload_id=r.workload_id, node=got[r.workload_id], devices=r.devices)
        for r in requests
    ]


__all__ = [
    "CONFIG_UNKNOWN",
    "ELIGIBLE_CLASSES",
    "OCCUPANCY_UNKNOWN",
    "check_requests",
    "plan_requests",
    "validate_request",
]
