"""Allocation conformance cases (ALC-…): the AcceleratorAllocationBackend contract.

Every case opens its cluster with ``await h.open(nodes=[NodeFixture...], authority=...,
mig_apply_seconds=...)``; ``NodeFixture`` is the data a provider turns into nodes (the model
uses it as is; a Kubernetes harness would create nodes with those labels). Model controls go
through ``h.controls(backend)`` and are declared in ``controls=``. Cases that change MIG
geometry need the ``geometry_changes`` profile and open with ``authority='mig-manager'``.
"""

from __future__ import annotations

from typing import Any, Final

import anyio

from ... import faults
from ...contracts import Known, Unknown
from ...contracts.allocation import (
    AcceleratorAllocationBackend,
    ClaimObservation,
    FeasiblePlan,
    Infeasible,
    InventoryScope,
    InventorySnapshot,
    OwnershipConflict,
    WorkloadRequest,
)
from ...contracts.errors import NotFound, ValidationError
from ...gpu.labels import classify_gfd_labels
from ...memory.allocation import NodeFixture
from .._capabilities import Capability
from .._case import case
from .._harness import AllocationHarness as Harness  # every case here is an allocation case

ALC: Final = "allocation"
GEOMETRY: tuple[Capability, ...] = ("geometry_changes",)
H100 = "NVIDIA-H100-80GB-HBM3"


def _labels(count: int, product: str = H100, **extra: str) -> dict[str, str]:
    labels = {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.count": str(count),
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/mig.config": "all-disabled",
        "nvidia.com/mig.config.state": "success",
    }
    labels.update(extra)
    return labels


def _whole(name: str, count: int, product: str = H100) -> NodeFixture:
    return NodeFixture(name, product, count, 80.0, labels=_labels(count, product))


def _mixed(name: str) -> NodeFixture:
    geometry = {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    labels = _labels(1, **{"nvidia.com/mig.config": "all-balanced"})
    for profile, count in geometry.items():
        labels[f"nvidia.com/mig-{profile}.count"] = str(count)
    return NodeFixture(name, H100, 1, 80.0, labels=labels)


def _dev(workload: str, devices: int, **kw: Any) -> WorkloadRequest:
    return WorkloadRequest(workload_id=workload, devices=devices, **kw)


def _mig(workload: str, profile: str, **kw: Any) -> WorkloadRequest:
    return WorkloadRequest(workload_id=workload, mig_profile=profile, **kw)


async def _snapshot(h: Harness, backend: AcceleratorAllocationBackend) -> InventorySnapshot:
    got = await backend.inventory({})
    h.check(isinstance(got, Known), f"inventory is Known: {got!r}")
    assert isinstance(got, Known)
    snap: InventorySnapshot = got.value
    return snap


async def _plan(
    h: Harness, backend: AcceleratorAllocationBackend, *requests: WorkloadRequest
) -> FeasiblePlan:
    plan = await backend.plan(list(requests), await _snapshot(h, backend))
    h.check(isinstance(plan, FeasiblePlan), f"plan is feasible: {plan!r}")
    assert isinstance(plan, FeasiblePlan)
    result: FeasiblePlan = plan
    return result


async def _observe(
    h: Harness, backend: AcceleratorAllocationBackend, claim_id: str
) -> ClaimObservation:
    got = await backend.observe(claim_id)
    h.check(isinstance(got, Known), f"observe is Known: {got!r}")
    assert isinstance(got, Known)
    obs: ClaimObservation = got.value
    return obs


def _version(snap: InventorySnapshot, node: str) -> int:
    return next(n.resource_version for n in snap.nodes if n.name == node)


@case(
    "ALC-001",
    "inventory judges nodes by their GFD labels and changes nothing",
    contract=ALC,
    controls=("mutations",),
)
async def inventory_classifies(h: Harness) -> None:
    b = await h.open(nodes=[_whole("w", 2), _mixed("m")])
    ctl = h.controls(b)
    snap = await _snapshot(h, b)
    h.equal(snap.completeness, "complete", "completeness")
    views = {n.name: n for n in snap.nodes}
    h.equal(views["w"].classification, "whole-gpu", "whole node")
    h.equal(views["m"].classification, "mig-mixed", "mixed node")
    for view in snap.nodes:
        h.equal(view.classification, classify_gfd_labels(view.labels), f"{view.name} by labels")
    h.equal(views["m"].mig_layout, {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}, "mixed geometry")
    h.equal(await ctl.mutations(), [], "mutations after inventory")


@case(
    "ALC-002",
    "failed pod listing: partial inventory, plan says occupancy unknown",
    contract=ALC,
    controls=("fail_reads", "mutations"),
)
async def pods_unreadable(h: Harness) -> None:
    b = await h.open(nodes=[_whole("n1", 4)])
    ctl = h.controls(b)
    await ctl.fail_reads("pods")
    snap = await _snapshot(h, b)
    h.equal(snap.completeness, "partial", "completeness")
    h.check("pods" in snap.missing, f"pods named missing: {snap.missing}")
    h.equal(snap.nodes[0].used_devices, None, "occupancy (unknown, not zero)")
    h.equal(await b.plan([_dev("w", 1)], snap), Infeasible("occupancy unknown"), "plan")
    h.equal(await ctl.mutations(), [], "mutations")


@case(
    "ALC-003",
    "failed node listing: inventory and observe are Unknown",
    contract=ALC,
    controls=("fail_reads",),
)
async def nodes_unreadable(h: Harness) -> None:
    b = await h.open(nodes=[_whole("n1", 1)])
    claim = await b.reserve(await _plan(h, b, _dev("w", 1)), "op", None)
    await h.controls(b).fail_reads("nodes", "apiserver timeout")
    got = h.expect_type(await b.inventory({}), Unknown, "inventory")
    h.check("apiserver timeout" in got.reason, f"reason kept: {got.reason}")
    h.check(isinstance(await b.observe(claim.claim_id), Unknown), "observe Unknown")


async def _race(h: Harness, barrier: str) -> None:
    b = await h.open(nodes=[_whole("n1", 2)])
    snap = await _snapshot(h, b)
    plans = [h.expect_type(await b.plan([_dev(w, 2)], snap), FeasiblePlan) for w in "ab"]
    outcomes: dict[str, object] = {}

    async def reserve(plan: FeasiblePlan, op: str) -> None:
        try:
            outcomes[op] = await b.reserve(plan, op, None)
        except OwnershipConflict as exc:
            outcomes[op] = exc

    gate = faults.arm(barrier, times=2)
    async with anyio.create_task_group() as tg:
        for i, plan in enumerate(plans):
            tg.start_soon(reserve, plan, f"op{i}")
        await gate.wait_paused(2)
        h.equal(_version(await _snapshot(h, b), "n1"), 1, "version while both are paused")
        gate.release()
    conflicts = [o for o in outcomes.values() if isinstance(o, OwnershipConflict)]
    h.equal(len(conflicts), 1, "reservers that saw the conflict")
    h.equal(len(outcomes) - len(conflicts), 1, "reservers that won")
    h.equal(_version(await _snapshot(h, b), "n1"), 2, "version moved exactly once")


@case("ALC-004", "two reservers paused after their read: one wins, one sees 409", contract=ALC)
async def race_after_read(h: Harness) -> None:
    await _race(h, "owner.read.after")


@case("ALC-005", "two reservers paused before their update: one wins, one sees 409", contract=ALC)
async def race_before_update(h: Harness) -> None:
    await _race(h, "owner.update.before")


@case(
    "ALC-006",
    "a plan from a moved snapshot conflicts and holds nothing",
    contract=ALC,
    controls=("bind_workload",),
)
async def stale_plan(h: Harness) -> None:
    b = await h.open(nodes=[_whole("n1", 2), _whole("n2", 2)])
    plan = await _plan(h, b, _dev("a", 2), _dev("b", 2))
    await h.controls(b).bind_workload("n2", "foreign", 1)
    with h.raises(OwnershipConflict, "reserve of a stale plan"):
        await b.reserve(plan, "op", None)
    owners = [n.owner for n in (await _snapshot(h, b)).nodes]
    h.equal(owners, [None, None], "owners after the failed reserve")


@case(
    "ALC-007",
    "geometry: pointer written, pending, then success after the apply delay",
    contract=ALC,
    needs=GEOMETRY,
    controls=("shared_config", "pointer"),
)
async def geometry_life_cycle(h: Harness) -> None:
    b = await h.open(
        nodes=[_whole("n1", 1)], authority="mig-manager", mig_apply_seconds=h.seconds(5)
    )
    ctl = h.controls(b)
    claim = await b.reserve(await _plan(h, b, _mig("w", "3g.40gb")), "op", None)
    entry = claim.nodes[0].mig_config
    h.equal(claim.phase, "preparing", "phase right after reserve")
    entries, _, tombstoned = await ctl.shared_config()
    h.equal(entries, {entry: {"3g.40gb": 1}}, "shared config entry")
    h.check(not tombstoned, "config live")
    h.check(await ctl.pointer() != "default-mig-parted-config", "manager pointed at our config")
    view = (await _snapshot(h, b)).nodes[0]
    h.equal(view.labels.get("nvidia.com/mig.config"), entry, "node pointer label")
    h.equal(view.mig_state, "pending", "state while applying")
    h.equal(view.classification, "reconfiguring", "classification while applying")
    await h.sleep(4)
    h.equal((await _observe(h, b, claim.claim_id)).phase, "preparing", "phase before the delay")
    await h.sleep(1.5)
    obs = await _observe(h, b, claim.claim_id)
    h.equal(obs.phase, "allocated", "phase after the delay")
    view = (await _snapshot(h, b)).nodes[0]
    h.equal(
        (view.mig_state, view.mig_state_generation),
        ("success", obs.nodes[0].geometry_generation),
        "state answers our generation",
    )
    h.equal(view.classification, "mig-mixed", "classification with applied geometry")


@case(
    "ALC-008",
    "a stale success never completes a new geometry write",
    contract=ALC,
    needs=GEOMETRY,
    controls=("node",),
)
async def stale_success(h: Harness) -> None:
    b = await h.open(
        nodes=[_whole("n1", 1)], authority="mig-manager", mig_apply_seconds=h.seconds(10)
    )
    claim = await b.reserve(await _plan(h, b, _mig("w", "1g.10gb")), "op", None)
    gen = h.expect_type(claim.nodes[0].geometry_generation, int, "geometry generation")
    h.check(gen > 0, f"the write has a generation: {gen}")
    node = await h.controls(b).node("n1")
    node.mig_state, node.mig_state_generation = "success", gen - 1  # an earlier write's answer
    obs = await _observe(h, b, claim.claim_id)
    h.equal(obs.phase, "preparing", "phase with a stale success")
    h.equal(obs.nodes[0].geometry, "pending", "geometry with a stale success")
    node.mig_state, node.mig_state_generation = "pending", gen
    await h.sleep(10.5)
    h.equal((await _observe(h, b, claim.claim_id)).phase, "allocated", "phase after our answer")


@case(
    "ALC-009",
    "a failed geometry write is reported on the claim",
    contract=ALC,
    needs=GEOMETRY,
    controls=("fail_geometry",),
)
async def geometry_failed(h: Harness) -> None:
    b = await h.open(
        nodes=[_whole("n1", 1)], authority="mig-manager", mig_apply_seconds=h.seconds(2)
    )
    await h.controls(b).fail_geometry("n1")
    claim = await b.reserve(await _plan(h, b, _mig("w", "1g.10gb")), "op", None)
    await h.sleep(2.5)
    obs = await _observe(h, b, claim.claim_id)
    h.equal(obs.phase, "failed", "phase")
    h.check(obs.reason is not None and "n1" in obs.reason, f"reason names n1: {obs.reason}")
    h.check(not (await b.bindings(claim.claim_id, "w")).ready, "binding not ready")
    h.equal((await _snapshot(h, b)).nodes[0].classification, "invalid", "node classification")


@case(
    "ALC-010",
    "foreign workloads pin geometry until they leave",
    contract=ALC,
    needs=GEOMETRY,
    controls=("bind_workload", "unbind_workload", "shared_config"),
)
async def foreign_pins(h: Harness) -> None:
    b = await h.open(
        nodes=[_whole("n1", 1)], authority="mig-manager", mig_apply_seconds=h.seconds(1)
    )
    ctl = h.controls(b)
    plan = await _plan(h, b, _mig("w", "1g.10gb"), _mig("v", "1g.10gb"))
    claim = await b.reserve(plan, "op", None)
    await h.sleep(1.5)
    await ctl.bind_workload("n1", "w", 1)
    await ctl.bind_workload("n1", "foreign", 1)
    rel = await b.release(claim.claim_id, "rel1", claim.generation)
    h.equal(rel.geometry_pinned, ("n1",), "pinned nodes")
    h.equal(rel.restored, (), "restored nodes")
    await h.sleep(5)
    view = (await _snapshot(h, b)).nodes[0]
    h.equal(view.mig_layout, {"1g.10gb": 2}, "geometry under the foreign workload")
    h.equal(view.workloads, {"foreign": 1}, "our workload gone, the foreign one kept")
    h.check(not (await ctl.shared_config())[2], "config not tombstoned while pinned")
    await ctl.unbind_workload("n1", "foreign")
    rel2 = await b.release(claim.claim_id, "rel2", rel.generation)
    h.equal(rel2.restored, ("n1",), "restored once free")
    await h.sleep(1.5)
    view = (await _snapshot(h, b)).nodes[0]
    h.equal((view.mig_config, view.mig_layout), ("all-disabled", {}), "pointer and geometry")


@case(
    "ALC-011",
    "keep_workloads=True retains workloads, and they pin geometry",
    contract=ALC,
    needs=GEOMETRY,
    controls=("bind_workload",),
)
async def retained_pin(h: Harness) -> None:
    b = await h.open(nodes=[_whole("n1", 1)], authority="mig-manager", mig_apply_seconds=0.0)
    claim = await b.reserve(await _plan(h, b, _mig("w", "1g.10gb")), "op", None)
    await h.controls(b).bind_workload("n1", "w", 1)
    rel = await b.release(claim.claim_id, "rel", claim.generation, keep_workloads=True)
    h.equal(rel.retained_workloads, ("w",), "retained workloads")
    h.equal(rel.geometry_pinned, ("n1",), "pinned nodes")
    h.equal(rel.phase, "retained", "release phase")
    view = (await _snapshot(h, b)).nodes[0]
    h.equal((view.owner, view.workloads), (None, {"w": 1}), "owner and workloads")
    h.equal(view.mig_layout, {"1g.10gb": 1}, "geometry kept")


@case(
    "ALC-012",
    "the last owner out restores the pointer and tombstones the shared config",
    contract=ALC,
    needs=GEOMETRY,
    controls=("shared_config", "pointer"),
)
async def last_owner_out(h: Harness) -> None:
    b = await h.open(
        nodes=[_whole("n1", 1), _whole("n2", 1)], authority="mig-manager", mig_apply_seconds=0.0
    )
    ctl = h.controls(b)
    original = await ctl.pointer()
    snap = await _snapshot(h, b)
    claims = []
    for i, node in enumerate(("n1", "n2")):
        plan = h.expect_type(
            await b.plan([_mig(f"w{i}", "1g.10gb", nodes=(node,))], snap), FeasiblePlan
        )
        claims.append(await b.reserve(plan, f"op{i}", None))
    h.equal(len((await ctl.shared_config())[0]), 2, "entries while both hold")
    r1 = await b.release(claims[0].claim_id, "r0", claims[0].generation)
    h.check(not r1.config_tombstoned, "first owner out leaves the config live")
    h.check(await ctl.pointer() != original, "pointer still ours")
    _, version, _ = await ctl.shared_config()
    r2 = await b.release(claims[1].claim_id, "r1", claims[1].generation)
    h.check(r2.config_tombstoned, "last owner out tombstones")
    h.equal(await ctl.shared_config(), ({}, version + 1, True), "entry-less tombstone (CAS +1)")
    h.equal(await ctl.pointer(), original, "pointer restored")


@case(
    "ALC-013",
    "every mutation is audited; reads are zero-mutation",
    contract=ALC,
    needs=GEOMETRY,
    controls=("mutations",),
)
async def audited(h: Harness) -> None:
    b = await h.open(nodes=[_whole("n1", 1)], authority="mig-manager", mig_apply_seconds=0.0)
    ctl = h.controls(b)
    plan = await _plan(h, b, _mig("w", "1g.10gb"))
    await b.capabilities({})
    h.equal(await ctl.mutations(), [], "mutations after inventory, plan, capabilities")
    claim = await b.reserve(plan, "op", None)
    await b.observe(claim.claim_id)
    count = len(await ctl.mutations())
    await b.observe(claim.claim_id)
    await b.inventory({})
    await b.bindings(claim.claim_id, "w")
    h.equal(len(await ctl.mutations()), count, "mutations after observe/inventory/bindings")
    kinds = {m[0] for m in await ctl.mutations()}
    for kind in ("node.owner", "config.update", "node.mig-config", "node.mig-state"):
        h.check(kind in kinds, f"{kind} audited")


@case("ALC-014", "capabilities follow the authority", contract=ALC)
async def capabilities(h: Harness) -> None:
    plugin = await (await h.open(nodes=[], authority="device-plugin")).capabilities({})
    h.check(plugin.whole_devices and not plugin.geometry_changes, f"device-plugin: {plugin}")
    manager = await (await h.open(nodes=[], authority="mig-manager")).capabilities({})
    h.check(manager.geometry_changes and manager.shared_config, f"mig-manager: {manager}")
    h.check(manager.ownership_cas and plugin.ownership_cas, "ownership by CAS")


@case(
    "ALC-015",
    "release is idempotent by operation_id and CAS on the claim generation",
    contract=ALC,
    controls=("mutations",),
)
async def release_idempotent(h: Harness) -> None:
    b = await h.open(nodes=[_whole("n1", 2)])
    ctl = h.controls(b)
    claim = await b.reserve(await _plan(h, b, _dev("a", 2)), "op", None)
    with h.raises(OwnershipConflict, "release naming a stale generation"):
        await b.release(claim.claim_id, "rel", "stale")
    first = await b.release(claim.claim_id, "rel", claim.generation)
    count = len(await ctl.mutations())
    h.equal(await b.release(claim.claim_id, "rel", claim.generation), first, "retried release")
    h.equal(len(await ctl.mutations()), count, "mutations after the retry")
    h.equal((await _snapshot(h, b)).nodes[0].owner, None, "owner after release")


@case(
    "ALC-016",
    "bindings name the devices each workload is bound to",
    contract=ALC,
    controls=("bind_workload",),
)
async def bindings(h: Harness) -> None:
    b = await h.open(nodes=[_whole("n1", 4)])
    claim = await b.reserve(await _plan(h, b, _dev("a", 2), _dev("b", 1)), "op", None)
    ba = await b.bindings(claim.claim_id, "a")
    bb = await b.bindings(claim.claim_id, "b")
    h.equal((ba.node, ba.resource, len(ba.devices)), ("n1", "nvidia.com/gpu", 2), "a's devices")
    h.check(not set(ba.devices) & set(bb.devices), f"disjoint: {ba.devices} {bb.devices}")
    h.check(not ba.bound, "not bound before the pod is")
    await h.controls(b).bind_workload("n1", "a", 2)
    h.check((await b.bindings(claim.claim_id, "a")).bound, "bound after the pod is")
    with h.raises(NotFound, "bindings of an unknown workload"):
        await b.bindings(claim.claim_id, "nope")


@case(
    "ALC-017",
    "reconcile drives a claim to the desired state",
    contract=ALC,
    controls=("node", "mark_workload_ready"),
)
async def reconcile(h: Harness) -> None:
    b = await h.open(nodes=[_whole("n1", 1)])
    ctl = h.controls(b)
    claim = await b.reserve(await _plan(h, b, _dev("a", 1)), "op", None)
    (await ctl.node("n1")).owner = None  # an operator cleared the ownership
    h.equal((await _observe(h, b, claim.claim_id)).phase, "lost", "phase without ownership")
    held = await b.reconcile(claim.claim_id, "held", claim.generation)
    h.equal(held.phase, "allocated", "phase after reconcile held")
    await ctl.mark_workload_ready(claim.claim_id)
    h.equal((await _observe(h, b, claim.claim_id)).phase, "ready", "phase with ready workloads")
    gone = await b.reconcile(claim.claim_id, "released", held.generation)
    h.equal(gone.phase, "released", "phase after reconcile released")


@case(
    "ALC-018",
    "bad input: typed error or Infeasible, and no mutation",
    contract=ALC,
    controls=("mutations",),
)
async def bad_input(h: Harness) -> None:
    b = await h.open(nodes=[_whole("n1", 1)])
    other = await h.open(nodes=[_whole("n1", 1)])
    ctl = h.controls(b)
    snap = await _snapshot(h, b)
    with h.raises(ValidationError, "negative device count"):
        await b.plan([_dev("w", -1)], snap)
    got = await b.plan([_mig("w", "9g.999gb")], snap)
    h.check(isinstance(got, Infeasible) and "profile" in got.reason, f"unknown profile: {got}")
    got = await b.plan([_dev("w", 1, product="NVIDIA-Z9000")], snap)
    h.check(isinstance(got, Infeasible), f"unknown product: {got}")
    got = await b.plan([_dev("w", 1)], await _snapshot(h, other))
    h.check(isinstance(got, Infeasible) and "snapshot" in got.reason, f"foreign snapshot: {got}")
    with h.raises(ValidationError, "reserve of another backend's plan"):
        await b.reserve(await _plan(h, other, _dev("w", 1)), "op", None)
    with h.raises(NotFound, "observe of an unknown claim"):
        await b.observe("ghost")
    with h.raises(NotFound, "release of an unknown claim"):
        await b.release("ghost", "op", "g")
    h.equal(await ctl.mutations(), [], "mutations")


@case("ALC-019", "aggregate capacity does not hide per-node fragmentation", contract=ALC)
async def fragmentation(h: Harness) -> None:
    two = [_dev(f"w{i}", 2) for i in range(3)]
    fits = await h.open(nodes=[_whole(f"h{i}", 2) for i in range(3)])
    plan = await _plan(h, fits, *two)
    h.equal(sorted(p.node for p in plan.placements), ["h0", "h1", "h2"], "three hosts of two")
    tight = await h.open(nodes=[_whole("h0", 3), _whole("h1", 3)])
    got = await tight.plan(two, await _snapshot(h, tight))
    h.check(isinstance(got, Infeasible) and "fragmented" in got.reason, f"two of three: {got}")


@case(
    "ALC-020",
    "device-plugin: MIG from existing instances only, never a geometry change",
    contract=ALC,
)
async def device_plugin_mig(h: Harness) -> None:
    b = await h.open(nodes=[_mixed("m1"), _whole("n1", 1)], authority="device-plugin")
    plan = await _plan(h, b, _mig("w", "2g.20gb"))
    h.equal(plan.placements[0].node, "m1", "node with the instance")
    h.check(not any(n.geometry_change for n in plan.nodes), "no geometry change")
    got = await b.plan([_mig("x", "7g.80gb")], await _snapshot(h, b))
    h.check(isinstance(got, Infeasible) and "geometry" in got.reason, f"needs a change: {got}")
    claim = await b.reserve(plan, "op", None)
    h.equal(claim.phase, "allocated", "ready without a geometry write")
    h.equal(
        (await b.bindings(claim.claim_id, "w")).resource, "nvidia.com/mig-2g.20gb", "resource name"
    )


@case("ALC-021", "a fixture and a labelled node are judged alike", contract=ALC)
async def fixture_matches_labels(h: Harness) -> None:
    pending = _labels(1, **{"nvidia.com/mig.config.state": "pending"})
    invalid = {
        "nvidia.com/gpu.product": f"{H100}-MIG-INVALID",
        "nvidia.com/gpu.count": "0",
        "nvidia.com/mig.strategy": "single",
    }
    nodes = [
        _whole("w", 1),
        _mixed("m"),
        NodeFixture("p", H100, 1, 80.0, labels=pending),
        NodeFixture("i", H100, 1, 80.0, labels=invalid),
    ]
    expected = {"w": "whole-gpu", "m": "mig-mixed", "p": "reconfiguring", "i": "invalid"}
    for node in nodes:
        h.equal(node.classification(), classify_gfd_labels(node.labels), f"{node.name} alike")
        h.equal(node.classification(), expected[node.name], f"{node.name} classification")
    b = await h.open(nodes=nodes)
    for view in (await _snapshot(h, b)).nodes:
        h.equal(view.classification, expected[view.name], f"{view.name} in inventory")


@case(
    "ALC-022",
    "two last owners racing on the shared config tombstone it exactly once",
    contract=ALC,
    needs=GEOMETRY,
    controls=("shared_config", "pointer"),
)
async def config_cas_race(h: Harness) -> None:
    b = await h.open(
        nodes=[_whole("n1", 1), _whole("n2", 1)], authority="mig-manager", mig_apply_seconds=0.0
    )
    ctl = h.controls(b)
    original = await ctl.pointer()
    snap = await _snapshot(h, b)
    claims = []
    for i, node in enumerate(("n1", "n2")):
        plan = h.expect_type(
            await b.plan([_mig(f"w{i}", "1g.10gb", nodes=(node,))], snap), FeasiblePlan
        )
        claims.append(await b.reserve(plan, f"op{i}", None))
    _, version, _ = await ctl.shared_config()
    results: list[Any] = []

    async def release(i: int) -> None:
        results.append(await b.release(claims[i].claim_id, f"r{i}", claims[i].generation))

    gate = faults.arm("config.read.after", times=2)
    async with anyio.create_task_group() as tg:
        tg.start_soon(release, 0)
        tg.start_soon(release, 1)
        await gate.wait_paused(2)
        gate.release()
    h.equal(await ctl.shared_config(), ({}, version + 2, True), "config after both releases")
    h.equal(sum(r.config_tombstoned for r in results), 1, "releases that tombstoned")
    h.equal(await ctl.pointer(), original, "pointer restored")


@case(
    "ALC-023",
    "whole-device packing finds an assignment that greedy best fit misses (small inventories)",
    contract=ALC,
)
async def packing_backtracks(h: Harness) -> None:
    # best fit, largest first, puts a on h1, the 3s on h2 and h0 and strands both 2s;
    # h0: 3 + 3, h1: 4, h2: 2 + 2 fits every request
    b = await h.open(nodes=[_whole("h0", 6), _whole("h1", 4), _whole("h2", 4)])
    wants = {"a": 4, "b": 3, "c": 3, "d": 2, "e": 2}
    plan = await _plan(h, b, *(_dev(w, n) for w, n in wants.items()))
    used: dict[str, int] = {}
    for p in plan.placements:
        h.equal(p.devices, wants[p.workload_id], f"{p.workload_id}'s devices")
        used[p.node] = used.get(p.node, 0) + p.devices
    h.check(
        all(used.get(n, 0) <= cap for n, cap in (("h0", 6), ("h1", 4), ("h2", 4))),
        f"no host over its capacity: {used}",
    )
    claim = await b.reserve(plan, "op", None)
    h.equal(claim.phase, "allocated", "the packing reserves")
    # two hosts alike in free devices but not in who may use them are not interchangeable
    c = await h.open(nodes=[_whole("h1", 4), _whole("h2", 4)])
    plan = await _plan(h, c, _dev("a", 4), _dev("b", 4, nodes=("h1",)))
    placed = {p.workload_id: p.node for p in plan.placements}
    h.equal(placed, {"a": "h2", "b": "h1"}, "the constrained request gets its only host")


@case(
    "ALC-024",
    "a claim's old generation conflicts; a used operation_id takes only its own plan",
    contract=ALC,
)
async def claim_generations(h: Harness) -> None:
    b = await h.open(nodes=[_whole("n1", 2), _whole("n2", 2)])
    plan = await _plan(h, b, _dev("a", 2))
    claim = await b.reserve(plan, "op", None)
    other = await _plan(h, b, _dev("x", 1))
    with h.raises(ValidationError, "another plan under a used operation_id"):
        await b.reserve(other, "op", None)
    again = await b.reserve(plan, "op", claim.generation)
    h.equal((again.claim_id, again.generation), (claim.claim_id, claim.generation), "the retry")
    await b.release(claim.claim_id, "rel", claim.generation)
    now = await _observe(h, b, claim.claim_id)
    h.check(now.generation != claim.generation, f"the release moved the generation: {now!r}")
    with h.raises(OwnershipConflict, "a retried reserve naming the old generation"):
        await b.reserve(plan, "op", claim.generation)
    with h.raises(OwnershipConflict, "a new release naming the old generation"):
        await b.release(claim.claim_id, "rel-2", claim.generation)
    with h.raises(OwnershipConflict, "reconcile naming the old generation"):
        await b.reconcile(claim.claim_id, "released", claim.generation)


@case(
    "ALC-025",
    "a node taken and given back since the snapshot conflicts, though it looks free again",
    contract=ALC,
)
async def moved_version_conflicts(h: Harness) -> None:
    b = await h.open(nodes=[_whole("n1", 2)])
    stale = await _plan(h, b, _dev("a", 2))
    other = await b.reserve(await _plan(h, b, _dev("x", 2)), "op-x", None)
    await b.release(other.claim_id, "rel-x", other.generation)
    node = (await _snapshot(h, b)).nodes[0]
    h.equal(node.owner, None, "free again")
    h.check(
        node.resource_version != stale.nodes[0].resource_version,
        f"its version moved: {node.resource_version!r}",
    )
    with h.raises(OwnershipConflict, "reserve of the plan made before"):
        await b.reserve(stale, "op", None)
    h.equal((await _snapshot(h, b)).nodes[0].owner, None, "nothing held after the conflict")


@case(
    "ALC-026",
    "a later claim's devices are disjoint from the devices still in use on the node",
    contract=ALC,
    controls=("bind_workload",),
)
async def devices_after_retained(h: Harness) -> None:
    b = await h.open(nodes=[_whole("n1", 4)])
    first = await b.reserve(await _plan(h, b, _dev("a", 2)), "op-a", None)
    held = (await b.bindings(first.claim_id, "a")).devices
    await h.controls(b).bind_workload("n1", "a", 2)
    await b.release(first.claim_id, "rel-a", first.generation, keep_workloads=True)
    second = await b.reserve(await _plan(h, b, _dev("b", 2)), "op-b", None)
    got = (await b.bindings(second.claim_id, "b")).devices
    h.equal(len(got), 2, "b's devices")
    h.check(not set(got) & set(held), f"none of a's devices, still in use: {got} vs {held}")


@case(
    "ALC-027",
    "a geometry change is planned only on an idle node, never under running workloads",
    contract=ALC,
    needs=GEOMETRY,
    controls=("bind_workload",),
)
async def geometry_only_on_idle(h: Harness) -> None:
    b = await h.open(
        nodes=[_whole("busy", 2), _whole("idle", 1)], authority="mig-manager", mig_apply_seconds=0.0
    )
    await h.controls(b).bind_workload("busy", "foreign", 1)
    plan = await _plan(h, b, _mig("w", "1g.10gb"))
    changed = [n.node for n in plan.nodes if n.geometry_change]
    h.equal(changed, ["idle"], "the geometry change goes to the idle node")
    got = await b.plan([_mig("w", "1g.10gb", nodes=("busy",))], await _snapshot(h, b))
    h.check(isinstance(got, Infeasible), f"not on the busy node: {got!r}")


@case(
    "ALC-028",
    "inventory scope: nodes by name, and labels matched by equal value only",
    contract=ALC,
)
async def inventory_scope(h: Harness) -> None:
    pool = "example.com/pool"
    nodes = [
        NodeFixture(name, H100, 1, 80.0, labels=_labels(1, **{pool: value}))
        for name, value in (("a1", "a"), ("b1", "b"), ("a2", "a"))
    ]
    b = await h.open(nodes=[*nodes, _whole("plain", 1)])
    scopes: list[tuple[InventoryScope, list[str]]] = [
        ({"labels": {pool: "a"}}, ["a1", "a2"]),
        ({"labels": {pool: "b"}}, ["b1"]),
        ({"labels": {pool: "0"}}, []),
        ({"nodes": ["b1", "plain"]}, ["b1", "plain"]),
        ({"nodes": ["a1", "b1"], "labels": {pool: "a"}}, ["a1"]),
    ]
    for scope, names in scopes:
        got = await b.inventory(scope)
        h.check(isinstance(got, Known), f"inventory({scope}) is Known: {got!r}")
        if isinstance(got, Known):
            h.equal(sorted(n.name for n in got.value.nodes), names, f"inventory({scope})")


@case(
    "ALC-029",
    "release restores a node's own MIG config and geometry, not a default",
    contract=ALC,
    needs=GEOMETRY,
)
async def release_restores_own_geometry(h: Harness) -> None:
    b = await h.open(nodes=[_mixed("m")], authority="mig-manager", mig_apply_seconds=h.seconds(1))
    before = (await _snapshot(h, b)).nodes[0]
    claim = await b.reserve(await _plan(h, b, _mig("w", "7g.80gb")), "op", None)
    await h.sleep(1.5)
    during = (await _snapshot(h, b)).nodes[0]
    h.equal(during.mig_layout, {"7g.80gb": 1}, "the claim's geometry")
    rel = await b.release(claim.claim_id, "rel", claim.generation)
    h.equal(rel.restored, ("m",), "restored nodes")
    await h.sleep(1.5)
    after = (await _snapshot(h, b)).nodes[0]
    h.equal(
        (after.mig_config, after.mig_layout),
        (before.mig_config, before.mig_layout),
        "the node's own config and geometry",
    )


# cases register themselves by ID (``case``) and run through the registry: none is imported by
# name, so the module exports nothing
__all__: list[str] = []
