"""The in-memory AcceleratorAllocationBackend: a cluster of GPU nodes as data, with the
concurrency protocol the real adapters must honour.

Modelled deliberately:

* Reads can fail. ``fail_reads('pods')`` makes the pod listing unavailable: the inventory
  then reports ``completeness='partial'`` with no occupancy, and a plan that needs occupancy
  is ``Infeasible('occupancy unknown')`` — never "idle". ``fail_reads('nodes')`` makes
  ``inventory()`` itself ``Unknown``.
* Ownership is a server-side compare-and-swap. Every node carries a ``resource_version``; a
  write names the version it read, and loses when a concurrent writer bumped it. Two
  reservers paused between their read and their write (``owner.read.after`` /
  ``owner.update.before`` barriers) race exactly as two kubectl clients would.
* Readiness is correlated with the operation. A node's ``mig.config.state`` carries the
  generation of the write it answers; a stale success for an earlier geometry does not
  complete a new one.
* Foreign workloads and retained workloads hold devices. Geometry is never destroyed while
  any workload the model knows about still uses the node.
* Shared configuration is never deleted. The last owner out restores the pointer and leaves
  a tombstoned entry-less map, under CAS.
* Every mutation is audited, so a zero-mutation assertion is a list check.

Time: read from ``clock`` when given, else from the running loop. A geometry write reaches
``success`` (or ``failed``) ``mig_apply_seconds`` later through a timer that fires as time
passes; every call also settles due writes, and ``apply_pending_geometry()`` does so by hand.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ..contracts import Known, Unknown, checked_control
from ..contracts.allocation import (
    AcceleratorAllocationBackend,
    AllocationCapabilities,
    ClaimObservation,
    FeasiblePlan,
    Infeasible,
    InventorySnapshot,
    OwnershipConflict,
    ReleaseObservation,
    WorkloadBindings,
    WorkloadRequest,
)
from ..contracts.errors import NotFound, ValidationError
from ..gpu import labels as gfd
from ..gpu.packing import pack_whole_devices
from ..gpu.placement import check_requests, plan_requests
from ..observe import ObservationLog
from . import _allocation_lifecycle as lifecycle
from ._allocation_claim import Claim, device_names, geometry_state, observation
from ._allocation_cluster import Cluster, Mutation
from ._allocation_fixture import NodeFixture
from ._allocation_ownership import take_all
from ._allocation_reads import READ_KINDS, Reads, node_view, scoped
from ._allocation_timer import TimerClock

AUTHORITIES: dict[str, bool] = {"device-plugin": False, "mig-manager": True}
"""Authority → may it change MIG geometry. ``device-plugin`` stands for the NVIDIA device
plugin alone (whole devices and existing MIG devices); ``mig-manager`` for the GPU
operator's mig-manager, which applies mig-parted configs."""

RELEASE_DESIRED = ("held", "released")

_BACKEND_IDS = itertools.count(1)


def _nodes_by_name(nodes: Sequence[NodeFixture]) -> dict[str, NodeFixture]:
    by_name: dict[str, NodeFixture] = {}
    for node in nodes:
        if not isinstance(node, NodeFixture):
            raise ValidationError("nodes must be NodeFixture objects", field="nodes", value=node)
        if node.name in by_name:
            raise ValidationError(f"duplicate node {node.name!r}", field="nodes", value=node.name)
        by_name[node.name] = node
    return by_name


def _required(claim: Claim) -> tuple[str, ...]:
    """The listings a write to ``claim`` must be able to read."""
    return ("nodes", "pods", *(("config",) if claim.entries else ()))


class MemoryAllocationBackend(AcceleratorAllocationBackend):
    """The reference model of :class:`AcceleratorAllocationBackend` (see the module doc).

    * ``nodes``: the cluster (the fixtures are used live, not copied).
    * ``authority``: which real adapter this instance stands in for; decides the
      capabilities advertised and whether geometry can be changed (:data:`AUTHORITIES`).
    * ``mig_apply_seconds``: delay before a geometry write reaches ``state=success``
      (0 = immediately on the next call).
    * ``log``: an ObservationLog that receives every mutation too.

    The jobs live in small private modules: the cluster's state, the manager's timers, the
    shared config and the audit (``_allocation_cluster``), failing reads and node views
    (``_allocation_reads``), ownership CAS (``_allocation_ownership``), the claim record and
    its phase (``_allocation_claim``), geometry/re-hold/release writes
    (``_allocation_lifecycle``); planning is :mod:`videoflow_aio.gpu`'s.
    """

    def __init__(
        self,
        nodes: Sequence[NodeFixture],
        clock: TimerClock | None = None,
        authority: Literal["device-plugin", "mig-manager"] = "device-plugin",
        mig_apply_seconds: float = 0.0,
        log: ObservationLog | None = None,
    ) -> None:
        if authority not in AUTHORITIES:
            raise ValidationError(
                f"unknown authority {authority!r}; expected one of {sorted(AUTHORITIES)}",
                field="authority",
                value=authority,
            )
        if isinstance(mig_apply_seconds, bool) or not mig_apply_seconds >= 0:
            raise ValidationError(
                "mig_apply_seconds must be >= 0", field="mig_apply_seconds", value=mig_apply_seconds
            )
        self._nodes = _nodes_by_name(nodes)
        self._c = Cluster(self._nodes, clock, float(mig_apply_seconds), log)
        self._reads = Reads()
        self.authority = authority
        self.mig_apply_seconds = float(mig_apply_seconds)
        self._id = next(_BACKEND_IDS)
        self._seq = itertools.count(1)
        self._snapshots: set[str] = set()
        self._plans: dict[str, FeasiblePlan] = {}
        self._claims: dict[str, Claim] = {}
        self._claims_by_op: dict[str, str] = {}

    # ==========================================================================================
    # time, audit and the shared config (model controls)

    def apply_pending_geometry(self) -> None:
        """Advance every geometry write whose delay has elapsed (for manual clocks)."""
        self._c.settle()

    @checked_control
    def mutations(self, kinds: Sequence[str] | None = None) -> list[Mutation]:
        """Every state change so far as ``(kind, subject, by, detail)``, oldest first.

        ``by`` is the operation id, ``mig-manager`` or ``control``. Kinds: ``node.owner``,
        ``node.mig-config``, ``node.mig-state``, ``config.update``, ``config.pointer``,
        ``workload.bind``, ``workload.unbind``, ``workload.ready``, ``claim.create``,
        ``claim.update``. A lost CAS changes nothing and is not listed.
        """
        if kinds is None:
            return list(self._c.mutations)
        wanted = set(kinds)
        return [m for m in self._c.mutations if m[0] in wanted]

    def pointer(self) -> str:
        """The mig-parted config the manager reads (ClusterPolicy ``migManager.config.name``)."""
        return self._c.pointer

    def shared_config(self) -> tuple[dict[str, dict[str, int]], int, bool]:
        """The shared MIG config: ``(entries, resource_version, tombstoned)``."""
        return (
            {k: dict(v) for k, v in self._c.config.items()},
            self._c.config_version,
            self._c.config_tombstoned,
        )

    # ==========================================================================================
    # model controls: nodes, reads, the manager, workloads

    @checked_control
    def node(self, name: str) -> NodeFixture:
        """The live fixture of ``name``."""
        self._c.settle()
        try:
            return self._nodes[name]
        except KeyError:
            raise NotFound(f"no node {name!r}", kind="node", name=name) from None

    @checked_control
    def fail_reads(self, kind: str, reason: str | None = "timeout") -> None:
        """Make ``nodes`` / ``pods`` / ``config`` reads fail (``reason=None`` restores them)."""
        self._reads.fail(kind, reason)

    @checked_control
    def fail_geometry(self, node_name: str) -> None:
        """Make the manager report ``state=failed`` for every geometry write on ``node_name``
        (a permanent preparation failure)."""
        self.node(node_name)
        self._c.failing_geometry.add(node_name)

    @checked_control
    def clear_geometry_failure(self, node_name: str) -> None:
        """Undo :meth:`fail_geometry` for later writes (a repaired node)."""
        self.node(node_name)
        self._c.failing_geometry.discard(node_name)

    @checked_control
    def bind_workload(self, node: str, workload_id: str, units: int) -> None:
        """A workload (ours or foreign) now holds ``units`` devices on ``node``."""
        fixture = self.node(node)
        if not workload_id:
            raise ValidationError("workload_id must be non-empty", field="workload_id")
        if isinstance(units, bool) or not isinstance(units, int) or units < 1:
            raise ValidationError("units must be a positive integer", field="units", value=units)
        others = fixture.used_devices - fixture.workloads.get(workload_id, 0)
        if others + units > fixture.capacity:
            raise ValidationError(
                f"{node} has {fixture.capacity - others} devices free, {units} asked",
                field="units",
                value=units,
            )
        fixture.workloads[workload_id] = units
        self._c.mutate("workload.bind", node, "control", f"{workload_id}={units}")

    @checked_control
    def unbind_workload(self, node: str, workload_id: str) -> None:
        """The workload no longer holds devices on ``node``."""
        fixture = self.node(node)
        if workload_id not in fixture.workloads:
            raise NotFound(
                f"{workload_id!r} holds nothing on {node}", kind="workload", name=workload_id
            )
        del fixture.workloads[workload_id]
        self._c.mutate("workload.unbind", node, "control", workload_id)

    @checked_control
    def mark_workload_ready(self, claim_id: str) -> None:
        """The claim's workloads are running (pods ready)."""
        claim = self._claim(claim_id)
        if not claim.workloads_ready:
            claim.workloads_ready = True
            self._c.mutate("workload.ready", claim_id, "control", claim.gen)

    # ==========================================================================================
    # reads and plans

    async def inventory(self, scope: Mapping[str, Any]) -> Known[InventorySnapshot] | Unknown:
        self._c.settle()
        nodes = scoped(self._nodes.values(), scope)
        why = self._reads.why("nodes")
        if why is not None:
            return Unknown(f"nodes read failed: {why}")
        missing = tuple(k for k in ("pods", "config") if self._reads.why(k) is not None)
        pods = "pods" not in missing
        snapshot_id = f"inv{self._id}-{next(self._seq)}"
        self._snapshots.add(snapshot_id)
        now = self._c.now()
        return Known(
            InventorySnapshot(
                snapshot_id=snapshot_id,
                taken_at=0.0 if now is None else now,
                completeness="partial" if missing else "complete",
                missing=missing,
                nodes=tuple(node_view(n, pods) for n in nodes),
                config_version=None if "config" in missing else self._c.config_version,
            )
        )

    async def plan(
        self, requests: Sequence[WorkloadRequest], snapshot: InventorySnapshot
    ) -> FeasiblePlan | Infeasible:
        self._c.settle()
        check_requests(requests)
        if (
            not isinstance(snapshot, InventorySnapshot)
            or snapshot.snapshot_id not in self._snapshots
        ):
            return Infeasible("snapshot was not taken by this backend")
        plan_id = f"plan{self._id}-{next(self._seq)}"
        result = plan_requests(
            requests,
            snapshot,
            plan_id=plan_id,
            can_change_geometry=AUTHORITIES[self.authority],
        )
        if isinstance(result, FeasiblePlan):
            self._plans[plan_id] = result
        return result

    # ==========================================================================================
    # claims

    def _claim(self, claim_id: str) -> Claim:
        try:
            return self._claims[claim_id]
        except KeyError:
            raise NotFound(f"no claim {claim_id!r}", kind="claim", name=claim_id) from None

    def _retry(self, claim: Claim, plan: FeasiblePlan, expected: str | None) -> ClaimObservation:
        """``reserve`` again under a used operation id: the same claim for the same plan."""
        if plan != claim.plan:
            raise ValidationError(
                f"operation_id {claim.operation_id!r} already reserved {claim.claim_id} from "
                f"plan {claim.plan.plan_id!r}; a retry must pass that same plan",
                field="plan",
                value=getattr(plan, "plan_id", None),
                operation_id=claim.operation_id,
                claim_id=claim.claim_id,
            )
        if expected not in (None, claim.gen):
            raise OwnershipConflict(
                f"claim {claim.claim_id} is at {claim.gen}",
                resource=f"claim/{claim.claim_id}",
                expected=expected,
                actual=claim.gen,
            )
        return observation(self._c, claim)

    def _check_new(self, plan: FeasiblePlan, operation_id: str, expected: str | None) -> None:
        if expected is not None:
            raise OwnershipConflict(
                "no claim exists for this operation; expected_generation must be None",
                resource=f"operation/{operation_id}",
                expected=expected,
                actual=None,
            )
        if not isinstance(plan, FeasiblePlan) or self._plans.get(plan.plan_id) != plan:
            raise ValidationError(
                "plan was not issued by this backend (or was altered)",
                field="plan",
                value=getattr(plan, "plan_id", None),
            )

    async def reserve(
        self, plan: FeasiblePlan, operation_id: str, expected_generation: str | None
    ) -> ClaimObservation:
        self._c.settle()
        if not operation_id:
            raise ValidationError("operation_id must be non-empty", field="operation_id")
        existing = self._claims_by_op.get(operation_id)
        if existing is not None:
            return self._retry(self._claims[existing], plan, expected_generation)
        self._check_new(plan, operation_id, expected_generation)
        geometry = [n for n in plan.nodes if n.geometry_change]
        self._reads.require("nodes", "pods", *(("config",) if geometry else ()))
        if geometry and not AUTHORITIES[self.authority]:  # pragma: no cover - plan forbids it
            raise ValidationError("this authority cannot change geometry", field="plan")
        # derived from the operation: a retry after a crash mid-reserve finds its own nodes
        claim_id = f"claim-{operation_id}"
        await take_all(self._c, self._reads, plan.nodes, plan.placements, claim_id, operation_id)
        claim = Claim(
            claim_id=claim_id,
            operation_id=operation_id,
            plan=plan,
            generation=1,
            placements=plan.placements,
            nodes=tuple(n.node for n in plan.nodes),
            devices=device_names(self._nodes, plan),
        )
        self._claims[claim_id] = claim
        self._claims_by_op[operation_id] = claim_id
        self._c.mutate("claim.create", claim_id, operation_id, claim.gen)
        if geometry:
            await lifecycle.write_geometry(self._c, claim, geometry, operation_id)
        return observation(self._c, claim)

    async def observe(self, claim_id: str) -> Known[ClaimObservation] | Unknown:
        self._c.settle()
        claim = self._claim(claim_id)
        why = self._reads.why("nodes")
        if why is not None:
            return Unknown(f"nodes read failed: {why}")
        return Known(observation(self._c, claim))

    def _check_generation(self, claim: Claim, expected: str) -> None:
        if expected != claim.gen:
            raise OwnershipConflict(
                f"claim {claim.claim_id} is at {claim.gen}, not {expected}",
                resource=f"claim/{claim.claim_id}",
                expected=expected,
                actual=claim.gen,
            )

    async def reconcile(
        self, claim_id: str, desired: Literal["held", "released"], expected_generation: str
    ) -> ClaimObservation:
        self._c.settle()
        claim = self._claim(claim_id)
        if desired not in RELEASE_DESIRED:
            raise ValidationError(
                f"desired must be one of {RELEASE_DESIRED}", field="desired", value=desired
            )
        self._check_generation(claim, expected_generation)
        if desired == "released":
            await self.release(claim_id, f"reconcile:{claim.gen}", expected_generation)
            return observation(self._c, claim)
        if claim.released:
            raise ValidationError(
                "a released claim cannot be held again", field="desired", value=desired
            )
        self._reads.require(*_required(claim))
        await lifecycle.hold(self._c, claim)
        return observation(self._c, claim)

    async def release(
        self,
        claim_id: str,
        operation_id: str,
        expected_generation: str,
        keep_workloads: bool = False,
    ) -> ReleaseObservation:
        self._c.settle()
        claim = self._claim(claim_id)
        if not operation_id:
            raise ValidationError("operation_id must be non-empty", field="operation_id")
        done = claim.releases.get(operation_id)
        if done is not None:
            return done
        self._check_generation(claim, expected_generation)
        self._reads.require(*_required(claim))
        obs = await lifecycle.release(self._c, claim, operation_id, keep_workloads)
        claim.releases[operation_id] = obs
        return obs

    async def bindings(self, claim_id: str, workload_id: str) -> WorkloadBindings:
        self._c.settle()
        claim = self._claim(claim_id)
        p = next((p for p in claim.placements if p.workload_id == workload_id), None)
        if p is None:
            raise NotFound(
                f"claim {claim_id} places no workload {workload_id!r}",
                kind="workload",
                name=workload_id,
            )
        node = self._nodes[p.node]
        resource = (
            "nvidia.com/gpu"
            if p.mig_profile is None
            else f"nvidia.com/mig-{gfd.profile_label(p.mig_profile)}"
        )
        ready = (
            not claim.released
            and node.owner == claim_id
            and geometry_state(self._c, claim, p.node) in ("none", "ready")
        )
        return WorkloadBindings(
            claim_id=claim_id,
            workload_id=workload_id,
            node=p.node,
            resource=resource,
            devices=claim.devices[workload_id],
            bound=workload_id in node.workloads,
            ready=ready,
        )

    async def capabilities(self, environment: Mapping[str, Any]) -> AllocationCapabilities:
        if not isinstance(environment, Mapping):
            raise ValidationError(
                "environment must be a mapping", field="environment", value=environment
            )
        geometry = AUTHORITIES[self.authority] and environment.get("mig_manager", True) is not False
        return AllocationCapabilities(
            authority=self.authority,
            whole_devices=True,
            mig_existing=True,
            geometry_changes=geometry,
            shared_config=geometry,
            ownership_cas=True,
            partial_reads=True,
        )


__all__ = [
    "AUTHORITIES",
    "READ_KINDS",
    "MemoryAllocationBackend",
    "NodeFixture",
    "pack_whole_devices",
]
