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
from dataclasses import dataclass, field
from typing import Any

from .. import faults
from ..contracts._base import Known, Unknown
from ..contracts.allocation import (
    AcceleratorAllocationBackend,
    AllocationCapabilities,
    ClaimNode,
    ClaimObservation,
    ClaimPhase,
    FeasiblePlan,
    GeometryState,
    Infeasible,
    InventorySnapshot,
    NodePlan,
    NodeView,
    OwnershipConflict,
    Placement,
    ReleaseObservation,
    WorkloadBindings,
    WorkloadRequest,
)
from ..contracts.errors import BackendUnavailable, NotFound, ValidationError, VideoflowError
from ..gpu import labels as gfd
from ..gpu.geometry import family_for
from ..gpu.packing import pack_whole_devices
from ..gpu.placement import check_requests, plan_requests
from ..observe import ObservationLog
from ._allocation_cluster import Cluster, Mutation
from ._allocation_fixture import NodeFixture
from ._allocation_timer import TimerClock

AUTHORITIES: dict[str, bool] = {"device-plugin": False, "mig-manager": True}
"""Authority → may it change MIG geometry. ``device-plugin`` stands for the NVIDIA device
plugin alone (whole devices and existing MIG devices); ``mig-manager`` for the GPU
operator's mig-manager, which applies mig-parted configs."""

READ_KINDS = ("nodes", "pods", "config")
RELEASE_DESIRED = ("held", "released")


@dataclass
class _Claim:
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
        return f"{self.claim_id}@{self.generation}"


_BACKEND_IDS = itertools.count(1)


class MemoryAllocationBackend(AcceleratorAllocationBackend):
    """The reference model of :class:`AcceleratorAllocationBackend` (see the module doc).

    * ``nodes``: the cluster (the fixtures are used live, not copied).
    * ``authority``: which real adapter this instance stands in for; decides the
      capabilities advertised and whether geometry can be changed (:data:`AUTHORITIES`).
    * ``mig_apply_seconds``: delay before a geometry write reaches ``state=success``
      (0 = immediately on the next call).
    * ``log``: an ObservationLog that receives every mutation too.
    """

    def __init__(
        self,
        nodes: Sequence[NodeFixture],
        clock: TimerClock | None = None,
        authority: str = "device-plugin",
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
        by_name: dict[str, NodeFixture] = {}
        for node in nodes:
            if not isinstance(node, NodeFixture):
                raise ValidationError(
                    "nodes must be NodeFixture objects", field="nodes", value=node
                )
            if node.name in by_name:
                raise ValidationError(
                    f"duplicate node {node.name!r}", field="nodes", value=node.name
                )
            by_name[node.name] = node
        self._nodes = by_name
        self._c = Cluster(by_name, clock, float(mig_apply_seconds), log)
        self.authority = authority
        self.mig_apply_seconds = float(mig_apply_seconds)
        self._id = next(_BACKEND_IDS)
        self._seq = itertools.count(1)
        self._failing_reads: dict[str, str] = {}
        self._snapshots: set[str] = set()
        self._plans: dict[str, FeasiblePlan] = {}
        self._claims: dict[str, _Claim] = {}
        self._claims_by_op: dict[str, str] = {}

    # ==========================================================================================
    # time and the manager

    def apply_pending_geometry(self) -> None:
        """Advance every geometry write whose delay has elapsed (for manual clocks)."""
        self._c.settle()

    # ==========================================================================================
    # audit

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

    # ==========================================================================================
    # model controls

    def node(self, name: str) -> NodeFixture:
        """The live fixture of ``name``."""
        self._c.settle()
        try:
            return self._nodes[name]
        except KeyError:
            raise NotFound(f"no node {name!r}", kind="node", name=name) from None

    def pointer(self) -> str:
        """The mig-parted config the manager reads (ClusterPolicy ``migManager.config.name``)."""
        return self._c.pointer

    def shared_config(self) -> tuple[dict[str, dict[str, int]], int, bool]:
        """The shared MIG config: ``(entries, resource_version, tombstoned)``."""
        return (
            {k: dict(v) for k, v in self._c.config.items()},
            self._c.config_version,
            (self._c.config_tombstoned),
        )

    def fail_reads(self, kind: str, reason: str | None = "timeout") -> None:
        """Make ``nodes`` / ``pods`` / ``config`` reads fail (``reason=None`` restores them)."""
        if kind not in READ_KINDS:
            raise ValidationError(f"kind must be one of {READ_KINDS}", field="kind", value=kind)
        if reason is None:
            self._failing_reads.pop(kind, None)
        else:
            self._failing_reads[kind] = reason

    def fail_geometry(self, node_name: str) -> None:
        """Make the manager report ``state=failed`` for every geometry write on ``node_name``
        (a permanent preparation failure)."""
        self.node(node_name)
        self._c.failing_geometry.add(node_name)

    def clear_geometry_failure(self, node_name: str) -> None:
        """Undo :meth:`fail_geometry` for later writes (a repaired node)."""
        self.node(node_name)
        self._c.failing_geometry.discard(node_name)

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

    def unbind_workload(self, node: str, workload_id: str) -> None:
        """The workload no longer holds devices on ``node``."""
        fixture = self.node(node)
        if workload_id not in fixture.workloads:
            raise NotFound(
                f"{workload_id!r} holds nothing on {node}", kind="workload", name=workload_id
            )
        del fixture.workloads[workload_id]
        self._c.mutate("workload.unbind", node, "control", workload_id)

    def mark_workload_ready(self, claim_id: str) -> None:
        """The claim's workloads are running (pods ready)."""
        claim = self._claim(claim_id)
        if not claim.workloads_ready:
            claim.workloads_ready = True
            self._c.mutate("workload.ready", claim_id, "control", claim.gen)

    # ==========================================================================================
    # reads

    def _read(self, kind: str) -> str | None:
        return self._failing_reads.get(kind)

    def _require_reads(self, *kinds: str) -> None:
        for kind in kinds:
            why = self._read(kind)
            if why is not None:
                raise BackendUnavailable(f"{kind} read failed: {why}", backend="memory")

    def _view(self, node: NodeFixture, pods: bool) -> NodeView:
        fam = family_for(node.product)
        return NodeView(
            name=node.name,
            product=node.product,
            family=None if fam is None else fam.key,
            gpu_count=node.gpu_count,
            memory_gib=float(node.memory_gib),
            labels=node.effective_labels(),
            classification=node.classification(),
            owner=node.owner,
            resource_version=node.resource_version,
            mig_config=node.mig_config,
            mig_state=node.mig_state,
            mig_state_generation=node.mig_state_generation,
            mig_layout=dict(node.mig_layout),
            workloads=dict(node.workloads) if pods else None,
            used_devices=node.used_devices if pods else None,
        )

    def _scoped(self, scope: Mapping[str, Any]) -> list[NodeFixture]:
        if not isinstance(scope, Mapping):
            raise ValidationError("scope must be a mapping", field="scope", value=scope)
        unknown = set(scope) - {"nodes", "labels"}
        if unknown:
            raise ValidationError(
                f"unknown scope keys {sorted(unknown)}", field="scope", value=sorted(unknown)
            )
        names = scope.get("nodes")
        labels: Mapping[str, str] = scope.get("labels") or {}
        chosen = []
        for node in self._nodes.values():
            if names is not None and node.name not in names:
                continue
            if any(node.labels.get(k) != v for k, v in labels.items()):
                continue
            chosen.append(node)
        return chosen

    async def inventory(self, scope: Mapping[str, Any]) -> Known[InventorySnapshot] | Unknown:
        self._c.settle()
        nodes = self._scoped(scope)
        why = self._read("nodes")
        if why is not None:
            return Unknown(f"nodes read failed: {why}")
        missing = tuple(k for k in ("pods", "config") if self._read(k) is not None)
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
                nodes=tuple(self._view(n, pods) for n in nodes),
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

    def _claim(self, claim_id: str) -> _Claim:
        try:
            return self._claims[claim_id]
        except KeyError:
            raise NotFound(f"no claim {claim_id!r}", kind="claim", name=claim_id) from None

    def _still_fits(self, nplan: NodePlan, placements: Sequence[Placement]) -> str | None:
        """Why the node can no longer take the plan's placements (occupancy moved), or None."""
        node = self._nodes[nplan.node]
        mine = [p for p in placements if p.node == nplan.node]
        used = node.used_devices
        if nplan.geometry_change:
            return None if not node.workloads else f"workloads appeared on {node.name}"
        whole = sum(p.devices for p in mine if p.mig_profile is None)
        if whole and (node.mig_layout or node.gpu_count - used < whole):
            return f"{node.name} no longer has {whole} whole devices free"
        for p in mine:
            if p.mig_profile is None:
                continue
            want = sum(1 for q in mine if q.mig_profile == p.mig_profile)
            if node.mig_layout.get(p.mig_profile, 0) - used < want:
                return f"{node.name} no longer has {want} free {p.mig_profile} instances"
        return None

    async def _take(
        self, nplan: NodePlan, placements: Sequence[Placement], claim_id: str, operation_id: str
    ) -> None:
        """Read the node, then take ownership with a CAS naming the version read."""
        self._require_reads("nodes")
        node = self._nodes.get(nplan.node)
        if node is None:
            raise NotFound(f"no node {nplan.node!r}", kind="node", name=nplan.node)
        # the read: version, owner and (pods) occupancy as they are now; the checks below
        # judge what was read, and the write names the version read (like kubectl get/update)
        read = node.resource_version
        owner_read = node.owner
        if owner_read == claim_id and node.owner_epoch == operation_id:
            return  # taken by an earlier attempt of this operation that died: already ours
        self._require_reads("pods")
        moved = self._still_fits(nplan, placements)
        await faults.reach(
            "owner.read.after", node=node.name, operation_id=operation_id, resource_version=read
        )
        if read != nplan.resource_version:
            raise OwnershipConflict(
                f"node {node.name} changed since the plan's snapshot (resource_version "
                f"{nplan.resource_version} -> {read})",
                resource=f"node/{node.name}",
                expected=nplan.resource_version,
                actual=read,
            )
        if owner_read is not None:
            raise OwnershipConflict(
                f"node {node.name} is owned by {owner_read}",
                resource=f"node/{node.name}",
                expected=None,
                actual=owner_read,
            )
        if moved is not None:
            raise OwnershipConflict(
                f"occupancy changed since the plan's snapshot: {moved}",
                resource=f"node/{node.name}",
                expected=nplan.resource_version,
                actual=read,
            )
        await faults.reach(
            "owner.update.before", node=node.name, operation_id=operation_id, resource_version=read
        )

        def own(n: NodeFixture) -> None:
            n.owner = claim_id
            n.owner_epoch = operation_id

        self._c.cas_node(node, read, operation_id, "node.owner", f"owner={claim_id}", own)

    def _drop(self, name: str, claim_id: str, by: str) -> bool:
        if self._nodes[name].owner != claim_id:
            return False
        self._c.set_owner(name, None, None, by)
        return True

    def _device_names(self, plan: FeasiblePlan) -> dict[str, tuple[str, ...]]:
        out: dict[str, tuple[str, ...]] = {}
        next_free: dict[str, int] = {}
        counters: dict[tuple[str, str], int] = {}
        for p in plan.placements:
            if p.mig_profile is None:
                start = next_free.get(p.node, self._nodes[p.node].used_devices)
                out[p.workload_id] = tuple(
                    f"{p.node}/gpu{i}" for i in range(start, start + p.devices)
                )
                next_free[p.node] = start + p.devices
            else:
                key = (p.node, p.mig_profile)
                k = counters.get(key, 0)
                counters[key] = k + 1
                card = "" if p.card is None else f"gpu{p.card}/"
                out[p.workload_id] = (f"{p.node}/{card}mig-{p.mig_profile}-{k}",)
        return out

    async def reserve(
        self, plan: FeasiblePlan, operation_id: str, expected_generation: str | None
    ) -> ClaimObservation:
        self._c.settle()
        if not operation_id:
            raise ValidationError("operation_id must be non-empty", field="operation_id")
        existing = self._claims_by_op.get(operation_id)
        if existing is not None:
            claim = self._claims[existing]
            if plan != claim.plan:
                raise ValidationError(
                    f"operation_id {operation_id!r} already reserved {existing} from plan "
                    f"{claim.plan.plan_id!r}; a retry must pass that same plan",
                    field="plan",
                    value=getattr(plan, "plan_id", None),
                    operation_id=operation_id,
                    claim_id=existing,
                )
            if expected_generation not in (None, claim.gen):
                raise OwnershipConflict(
                    f"claim {existing} is at {claim.gen}",
                    resource=f"claim/{existing}",
                    expected=expected_generation,
                    actual=claim.gen,
                )
            return self._observation(claim)
        if expected_generation is not None:
            raise OwnershipConflict(
                "no claim exists for this operation; expected_generation must be None",
                resource=f"operation/{operation_id}",
                expected=expected_generation,
                actual=None,
            )
        if not isinstance(plan, FeasiblePlan) or self._plans.get(plan.plan_id) != plan:
            raise ValidationError(
                "plan was not issued by this backend (or was altered)",
                field="plan",
                value=getattr(plan, "plan_id", None),
            )
        geometry = [n for n in plan.nodes if n.geometry_change]
        self._require_reads("nodes", "pods", *(("config",) if geometry else ()))
        if geometry and not AUTHORITIES[self.authority]:  # pragma: no cover - plan forbids it
            raise ValidationError("this authority cannot change geometry", field="plan")
        # derived from the operation: a retry after a crash mid-reserve finds its own nodes
        claim_id = f"claim-{operation_id}"
        taken: list[str] = []
        try:
            for nplan in plan.nodes:
                await self._take(nplan, plan.placements, claim_id, operation_id)
                taken.append(nplan.node)
        except VideoflowError:
            for name in taken:
                self._drop(name, claim_id, operation_id)
            raise
        claim = _Claim(
            claim_id=claim_id,
            operation_id=operation_id,
            plan=plan,
            generation=1,
            placements=plan.placements,
            nodes=tuple(n.node for n in plan.nodes),
            devices=self._device_names(plan),
        )
        self._claims[claim_id] = claim
        self._claims_by_op[operation_id] = claim_id
        self._c.mutate("claim.create", claim_id, operation_id, claim.gen)
        if geometry:
            # the claim records its intent first: if this task dies before the pointers are
            # written, the claim reads "preparing" and reconcile('held') finishes the writes
            for n in geometry:
                claim.entries[n.node] = f"vf-{claim_id}-{n.node}"
            await self._c.write_config(
                operation_id, {claim.entries[n.node]: dict(n.mig_layout) for n in geometry}
            )
            for n in geometry:
                claim.geometry[n.node] = self._c.point(
                    n.node, claim.entries[n.node], dict(n.mig_layout), operation_id
                )
        return self._observation(claim)

    # -- observation --------------------------------------------------------------------------
    def _geometry_state(self, claim: _Claim, name: str) -> GeometryState:
        if name not in claim.entries:
            return "none"
        gen = claim.geometry.get(name)
        if gen is None:
            return "pending"  # intended, the pointer not written yet
        node = self._nodes[name]
        job = self._c.jobs.get(name)
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

    def _observation(self, claim: _Claim) -> ClaimObservation:
        nodes: list[ClaimNode] = []
        states: list[GeometryState] = []
        owned_all = True
        for name in claim.nodes:
            node = self._nodes[name]
            owned = node.owner == claim.claim_id
            owned_all = owned_all and owned
            state = self._geometry_state(claim, name)
            states.append(state)
            nodes.append(
                ClaimNode(
                    node=name,
                    owned=owned,
                    geometry=state,
                    geometry_generation=claim.geometry.get(name),
                    mig_config=node.mig_config,
                )
            )
        phase: ClaimPhase
        reason: str | None = None
        if claim.released:
            retained = any(
                w in self._nodes[p.node].workloads
                for p in claim.placements
                for w in (p.workload_id,)
            )
            pinned = any(self._nodes[n].mig_config == e for n, e in claim.entries.items())
            phase = "retained" if retained or pinned else "released"
        elif "failed" in states:
            phase = "failed"
            reason = "geometry failed on " + ", ".join(
                n.node for n in nodes if n.geometry == "failed"
            )
        elif not owned_all or "superseded" in states:
            phase = "lost"
            reason = "no longer owns or configures " + ", ".join(
                n.node for n in nodes if not n.owned or n.geometry == "superseded"
            )
        elif "pending" in states:
            phase = "preparing"
            reason = "geometry pending on " + ", ".join(
                n.node for n in nodes if n.geometry == "pending"
            )
        else:
            phase = "ready" if claim.workloads_ready else "allocated"
        return ClaimObservation(
            claim_id=claim.claim_id,
            generation=claim.gen,
            operation_id=claim.operation_id,
            phase=phase,
            nodes=tuple(nodes),
            placements=claim.placements,
            reason=reason,
        )

    async def observe(self, claim_id: str) -> Known[ClaimObservation] | Unknown:
        self._c.settle()
        claim = self._claim(claim_id)
        why = self._read("nodes")
        if why is not None:
            return Unknown(f"nodes read failed: {why}")
        return Known(self._observation(claim))

    # -- reconcile and release -----------------------------------------------------------------
    def _check_generation(self, claim: _Claim, expected: str) -> None:
        if expected != claim.gen:
            raise OwnershipConflict(
                f"claim {claim.claim_id} is at {claim.gen}, not {expected}",
                resource=f"claim/{claim.claim_id}",
                expected=expected,
                actual=claim.gen,
            )

    async def reconcile(
        self, claim_id: str, desired: str, expected_generation: str
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
            return self._observation(claim)
        if claim.released:
            raise ValidationError(
                "a released claim cannot be held again", field="desired", value=desired
            )
        self._require_reads("nodes", "pods", *(("config",) if claim.entries else ()))
        by = f"reconcile:{claim.gen}"
        changed = False
        for name in claim.nodes:
            node = self._nodes[name]
            if node.owner is None:
                self._c.set_owner(name, claim_id, by, by)
                changed = True
            if node.owner != claim_id:
                continue
            entry = claim.entries.get(name)
            if entry is None:
                continue
            state = self._geometry_state(claim, name)
            if state in ("failed", "superseded") or node.mig_config != entry:
                if entry not in self._c.config:
                    layout: dict[str, int] = {}
                    for p in claim.placements:
                        if p.node == name and p.mig_profile is not None:
                            layout[p.mig_profile] = layout.get(p.mig_profile, 0) + 1
                    await self._c.write_config(by, {entry: layout})
                claim.geometry[name] = self._c.point(name, entry, dict(self._c.config[entry]), by)
                changed = True
        if changed:
            claim.generation += 1
            self._c.mutate("claim.update", claim_id, by, claim.gen)
        return self._observation(claim)

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
        self._require_reads("nodes", "pods", *(("config",) if claim.entries else ()))
        ours = {p.workload_id: p.node for p in claim.placements}
        before = len(self._c.mutations)
        if not keep_workloads:
            for workload, name in ours.items():
                if workload in self._nodes[name].workloads:
                    del self._nodes[name].workloads[workload]
                    self._c.mutate("workload.unbind", name, operation_id, workload)
        retained = tuple(sorted(w for w, n in ours.items() if w in self._nodes[n].workloads))
        released: list[str] = []
        pinned: list[str] = []
        restored: list[str] = []
        drop_entries: list[str] = []
        for name in claim.nodes:
            node = self._nodes[name]
            entry = claim.entries.get(name)
            if entry is not None and node.mig_config == entry:
                if node.workloads or node.owner not in (None, claim_id):
                    pinned.append(name)
                else:
                    drop_entries.append(entry)
            elif entry is not None and entry in self._c.config:
                drop_entries.append(entry)  # the node moved on; the entry is ours to drop
        # pointers first (sync), then the config entries they referenced, then ownership:
        # no node ever points at a dropped entry
        for name in claim.nodes:
            entry = claim.entries.get(name)
            if (
                entry is not None
                and entry in drop_entries
                and self._nodes[name].mig_config == entry
            ):
                self._c.restore(name, operation_id)
                restored.append(name)
        tombstoned = self._c.config_tombstoned
        if drop_entries:
            tombstoned = await self._c.write_config(operation_id, {}, drop_entries)
        for name in claim.nodes:
            if self._drop(name, claim_id, operation_id):
                released.append(name)
        claim.released = True
        if len(self._c.mutations) != before:
            claim.generation += 1
            self._c.mutate("claim.update", claim_id, operation_id, claim.gen)
        obs = ReleaseObservation(
            claim_id=claim_id,
            operation_id=operation_id,
            generation=claim.gen,
            phase="retained" if retained or pinned else "released",
            released_nodes=tuple(released),
            retained_workloads=retained,
            geometry_pinned=tuple(pinned),
            restored=tuple(restored),
            config_tombstoned=tombstoned,
        )
        claim.releases[operation_id] = obs
        return obs

    async def bindings(self, claim_id: str, workload_id: str) -> WorkloadBindings:
        self._c.settle()
        claim = self._claim(claim_id)
        for p in claim.placements:
            if p.workload_id != workload_id:
                continue
            node = self._nodes[p.node]
            resource = (
                "nvidia.com/gpu"
                if p.mig_profile is None
                else f"nvidia.com/mig-{gfd.profile_label(p.mig_profile)}"
            )
            ready = (
                not claim.released
                and node.owner == claim_id
                and self._geometry_state(claim, p.node) in ("none", "ready")
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
        raise NotFound(
            f"claim {claim_id} places no workload {workload_id!r}",
            kind="workload",
            name=workload_id,
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


__all__ = ["AUTHORITIES", "MemoryAllocationBackend", "NodeFixture", "pack_whole_devices"]
