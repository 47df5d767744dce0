"""The AcceleratorAllocationBackend contract: GPU inventory, plans, reservations under CAS.

Shaped so a Kubernetes adapter can implement it:

* every node carries a ``resource_version``; ownership writes are updates naming the version
  they read, and lose with :class:`OwnershipConflict` when a concurrent writer moved it —
  exactly a ``kubectl update`` answered ``409 Conflict``;
* reads can fail: a failed node listing is ``Unknown``, a failed pod listing makes the
  snapshot ``completeness='partial'`` with no occupancy (never "idle");
* MIG geometry is requested by pointing a node at an entry of a shared mig-parted
  configuration (``nvidia.com/mig.config``) and is ready only when the manager reports
  ``success`` *for that write's generation*.

Claims carry an opaque ``generation`` string; ``reconcile`` and ``release`` name the
generation they read (CAS on the claim record) and ``release`` is idempotent by
``operation_id``.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypedDict

import msgspec

from ._base import Known, Unknown
from ._boundary import Boundary
from ._specs import NonEmptyStr, NonNegInt, PositiveFloat
from .errors import ConflictError

Completeness = Literal["complete", "partial"]
"""``partial``: some listing failed; ``InventorySnapshot.missing`` names which."""

ClaimPhase = Literal["preparing", "allocated", "ready", "failed", "lost", "retained", "released"]
"""Claim life cycle.

``preparing``: owned, some geometry write not yet ``success`` for its generation;
``allocated``: owned, geometry ready, workloads not yet ready; ``ready``: workloads ready;
``failed``: a geometry write answered ``failed``; ``lost``: a node is no longer owned by the
claim; ``retained``: released with ``keep_workloads=True`` (workloads still hold devices);
``released``: nothing held any more.
"""

GeometryState = Literal["none", "pending", "ready", "failed", "superseded"]
"""Per node: ``none`` (no geometry written by the claim), ``pending`` (manager has not
answered this generation), ``ready`` (``success`` for this generation), ``failed``,
``superseded`` (a later write replaced it)."""


class OwnershipConflict(ConflictError):
    """A write named a ``resource_version`` (or claim generation) that is no longer current."""


class InventoryScope(TypedDict, total=False):
    """What ``inventory`` reads: ``{}`` every node; ``nodes`` only these hosts; ``labels``
    only nodes carrying every one of these labels."""

    nodes: Sequence[str]
    labels: Mapping[str, str]


DESIRED: tuple[str, ...] = ("held", "released")
"""What ``reconcile`` can drive a claim to."""


class WorkloadRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One workload to place on one host.

    Exactly one of: ``devices`` (> 0 whole GPUs), ``mig_profile`` (one MIG instance of that
    profile, e.g. ``"1g.10gb"``) or ``mig_memory_gib`` (one instance of the smallest profile
    with at least that much memory on the chosen node's family).

    Hard constraints: ``node_selector`` (labels that must be equal), ``nodes`` (hosts allowed;
    None = any), ``product`` (substring of the node's product).
    """

    workload_id: NonEmptyStr
    devices: NonNegInt = 0
    mig_profile: NonEmptyStr | None = None
    mig_memory_gib: PositiveFloat | None = None
    node_selector: dict[str, str] = {}
    nodes: tuple[str, ...] | None = None
    product: str | None = None

    @property
    def is_mig(self) -> bool:
        return self.mig_profile is not None or self.mig_memory_gib is not None


class NodeView(msgspec.Struct, frozen=True, kw_only=True):
    """One node as read. ``workloads``/``used_devices`` are None when occupancy is unknown."""

    name: str
    product: str
    family: str | None
    gpu_count: int
    memory_gib: float
    labels: dict[str, str]
    classification: str
    owner: str | None
    resource_version: int
    mig_config: str
    mig_state: str
    mig_state_generation: int
    mig_layout: dict[str, int]
    workloads: dict[str, int] | None
    used_devices: int | None


class InventorySnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """What ``inventory`` read, at ``taken_at`` (loop time). Plans name ``snapshot_id``."""

    snapshot_id: str
    taken_at: float
    completeness: Completeness
    missing: tuple[str, ...]
    nodes: tuple[NodeView, ...]
    config_version: int | None


class Placement(msgspec.Struct, frozen=True, kw_only=True):
    """Where one request goes: whole ``devices`` or one MIG instance of ``mig_profile``.

    ``card`` is the GPU index on the node for a MIG instance placed by a geometry change
    (None when an existing instance is used).
    """

    workload_id: str
    node: str
    devices: int = 0
    mig_profile: str | None = None
    card: int | None = None


class NodePlan(msgspec.Struct, frozen=True, kw_only=True):
    """What a plan does to one node: take ownership at ``resource_version``; when
    ``geometry_change``, write ``mig_layout`` (node total per profile; ``card_layouts`` per GPU)."""

    node: str
    resource_version: int
    geometry_change: bool = False
    mig_layout: dict[str, int] = {}
    card_layouts: tuple[dict[str, int], ...] = ()


class FeasiblePlan(msgspec.Struct, frozen=True, tag=True, kw_only=True):
    """A plan issued by one backend from one snapshot; ``reserve`` accepts only its own plans."""

    plan_id: str
    snapshot_id: str
    placements: tuple[Placement, ...]
    nodes: tuple[NodePlan, ...]


class Infeasible(msgspec.Struct, frozen=True, tag=True):
    """No plan: ``reason`` says why (``'occupancy unknown'``, capacity, fragmentation, …)."""

    reason: str


PlanOutcome = FeasiblePlan | Infeasible
"""What ``plan`` answers: a feasible plan, or why there is none."""


class ClaimNode(msgspec.Struct, frozen=True, kw_only=True):
    """A claim's view of one node it holds (or held)."""

    node: str
    owned: bool
    geometry: GeometryState
    geometry_generation: int | None
    mig_config: str


class ClaimObservation(msgspec.Struct, frozen=True, kw_only=True):
    """A claim as observed now. ``reason`` explains ``failed``/``lost``/``preparing``."""

    claim_id: str
    generation: str
    operation_id: str
    phase: ClaimPhase
    nodes: tuple[ClaimNode, ...]
    placements: tuple[Placement, ...]
    reason: str | None = None


class ReleaseObservation(msgspec.Struct, frozen=True, kw_only=True):
    """What a release did. ``geometry_pinned``: nodes whose geometry stays because workloads
    (foreign or retained) still use them; ``restored``: nodes pointed back at their original
    config; ``config_tombstoned``: the shared config is now an entry-less tombstone."""

    claim_id: str
    operation_id: str
    generation: str
    phase: ClaimPhase
    released_nodes: tuple[str, ...]
    retained_workloads: tuple[str, ...]
    geometry_pinned: tuple[str, ...]
    restored: tuple[str, ...]
    config_tombstoned: bool


class WorkloadBindings(msgspec.Struct, frozen=True, kw_only=True):
    """The devices a workload of a claim is bound to: ``resource`` is the extended resource
    (``nvidia.com/gpu`` or ``nvidia.com/mig-<profile>``), ``devices`` their names.
    ``ready``: geometry is ready for the claim and the devices can be used."""

    claim_id: str
    workload_id: str
    node: str
    resource: str
    devices: tuple[str, ...]
    bound: bool
    ready: bool


class AllocationCapabilities(msgspec.Struct, frozen=True, kw_only=True):
    """What an allocation backend can do in an environment."""

    authority: str
    whole_devices: bool
    mig_existing: bool
    geometry_changes: bool
    shared_config: bool
    ownership_cas: bool
    partial_reads: bool


class AcceleratorAllocationBackend(Boundary, abc.ABC):
    """GPU nodes, whole devices and MIG slices, reservation under compare-and-swap."""

    @abc.abstractmethod
    async def inventory(self, scope: InventoryScope) -> Known[InventorySnapshot] | Unknown:
        """Read the nodes in ``scope`` (``{}`` all; ``{'nodes': [...]}``, ``{'labels': {...}}``).

        Unknown when nodes cannot be listed; ``completeness='partial'`` when pods or the MIG
        config cannot be read (occupancy / config then absent, never zero). No mutation.
        """

    @abc.abstractmethod
    async def plan(
        self, requests: Sequence[WorkloadRequest], snapshot: InventorySnapshot
    ) -> FeasiblePlan | Infeasible:
        """Place every request on one host each, from ``snapshot`` only. No mutation."""

    @abc.abstractmethod
    async def reserve(
        self, plan: FeasiblePlan, operation_id: NonEmptyStr, expected_generation: str | None
    ) -> ClaimObservation:
        """Take ownership of the plan's nodes (CAS on each ``resource_version``) and write its
        geometry. ``expected_generation`` None creates the claim; retrying with the same
        ``operation_id`` and the same plan returns the same claim, while a different plan under
        a used ``operation_id`` is a ``ValidationError`` (``field='plan'``, nothing changes).
        Raises :class:`OwnershipConflict` when a node moved (nothing is left held)."""

    @abc.abstractmethod
    async def observe(self, claim_id: NonEmptyStr) -> Known[ClaimObservation] | Unknown:
        """The claim now; Unknown when the cluster cannot be read. No mutation."""

    @abc.abstractmethod
    async def reconcile(
        self,
        claim_id: NonEmptyStr,
        desired: Literal["held", "released"],
        expected_generation: str,
    ) -> ClaimObservation:
        """Drive the claim to ``desired`` (``'held'``: re-assert ownership and rewrite
        failed/drifted geometry; ``'released'``: release)."""

    @abc.abstractmethod
    async def release(
        self,
        claim_id: NonEmptyStr,
        operation_id: NonEmptyStr,
        expected_generation: str,
        keep_workloads: bool = False,
    ) -> ReleaseObservation:
        """Give the claim's nodes back; idempotent by ``operation_id``. Geometry is never
        destroyed while any workload uses a node; the shared config is never deleted."""

    @abc.abstractmethod
    async def bindings(self, claim_id: NonEmptyStr, workload_id: NonEmptyStr) -> WorkloadBindings:
        """The devices ``workload_id`` of ``claim_id`` is bound to."""

    @abc.abstractmethod
    async def capabilities(self, environment: Mapping[str, Any]) -> AllocationCapabilities:
        """What this backend can do in ``environment``."""


__all__ = [
    "DESIRED",
    "AcceleratorAllocationBackend",
    "AllocationCapabilities",
    "ClaimNode",
    "ClaimObservation",
    "ClaimPhase",
    "Completeness",
    "FeasiblePlan",
    "GeometryState",
    "Infeasible",
    "InventoryScope",
    "InventorySnapshot",
    "NodePlan",
    "NodeView",
    "OwnershipConflict",
    "Placement",
    "PlanOutcome",
    "ReleaseObservation",
    "WorkloadBindings",
    "WorkloadRequest",
]
