"""MemoryAllocationBackend: every modelled behaviour, on virtual time under asyncio and trio."""

from __future__ import annotations

import anyio
import msgspec
import pytest

from _alloc_helpers import H100, mig, mixed_node, observed, planned, snapshot, whole, whole_node
from videoflow_aio import faults
from videoflow_aio.contracts import Known, Unknown
from videoflow_aio.contracts.allocation import (
    FeasiblePlan,
    Infeasible,
    OwnershipConflict,
    WorkloadRequest,
)
from videoflow_aio.contracts.errors import BackendUnavailable, NotFound, ValidationError
from videoflow_aio.memory.allocation import MemoryAllocationBackend, NodeFixture
from videoflow_aio.memory.clock import FakeClock
from videoflow_aio.observe import ObservationLog
from videoflow_aio.vtime import VirtualClock

pytestmark = pytest.mark.anyio


def geometry_backend(*nodes: NodeFixture, seconds: float = 5.0) -> MemoryAllocationBackend:
    return MemoryAllocationBackend(list(nodes), authority="mig-manager", mig_apply_seconds=seconds)


# -- reads can fail --------------------------------------------------------------------------


async def test_failed_pod_read_is_partial_and_occupancy_unknown() -> None:
    b = MemoryAllocationBackend([whole_node("n1", 4)])
    b.fail_reads("pods")
    before = b.mutations()
    snap = await snapshot(b)
    assert snap.completeness == "partial" and snap.missing == ("pods",)
    assert snap.nodes[0].workloads is None and snap.nodes[0].used_devices is None
    assert await b.plan([whole("w", 1)], snap) == Infeasible("occupancy unknown")
    assert b.mutations() == before
    b.fail_reads("pods", None)
    assert (await snapshot(b)).completeness == "complete"


async def test_failed_node_read_is_unknown() -> None:
    b = MemoryAllocationBackend([whole_node("n1", 4)])
    plan = await planned(b, whole("w", 1))
    claim = await b.reserve(plan, "op", None)
    b.fail_reads("nodes", "apiserver timeout")
    got = await b.inventory({})
    assert isinstance(got, Unknown) and "apiserver timeout" in got.reason
    assert isinstance(await b.observe(claim.claim_id), Unknown)
    with pytest.raises(BackendUnavailable):
        await b.release(claim.claim_id, "rel", claim.generation)


async def test_failed_config_read_blocks_geometry_plans() -> None:
    b = geometry_backend(whole_node("n1", 1))
    b.fail_reads("config")
    snap = await snapshot(b)
    assert snap.missing == ("config",) and snap.config_version is None
    assert await b.plan([mig("w", "1g.10gb")], snap) == Infeasible("mig config unknown")


async def test_fail_reads_rejects_unknown_kind() -> None:
    with pytest.raises(ValidationError):
        MemoryAllocationBackend([]).fail_reads("gpus")


# -- ownership CAS ---------------------------------------------------------------------------


@pytest.mark.parametrize("barrier", ["owner.read.after", "owner.update.before"])
async def test_two_reservers_race_like_kubectl(barrier: str) -> None:
    node = whole_node("n1", 2)
    b = MemoryAllocationBackend([node])
    snap = await snapshot(b)
    p1 = await b.plan([whole("a", 2)], snap)
    p2 = await b.plan([whole("b", 2)], snap)
    assert isinstance(p1, FeasiblePlan) and isinstance(p2, FeasiblePlan)
    outcomes: dict[str, object] = {}

    async def reserve(plan: FeasiblePlan, op: str) -> None:
        try:
            outcomes[op] = await b.reserve(plan, op, None)
        except OwnershipConflict as exc:
            outcomes[op] = exc

    with faults.isolated():
        gate = faults.arm(barrier, times=2)
        async with anyio.create_task_group() as tg:
            tg.start_soon(reserve, p1, "op1")
            tg.start_soon(reserve, p2, "op2")
            await gate.wait_paused(2)
            assert node.resource_version == 1  # both read version 1, neither wrote
            gate.release()
    winners = [op for op, o in outcomes.items() if not isinstance(o, OwnershipConflict)]
    losers = [o for o in outcomes.values() if isinstance(o, OwnershipConflict)]
    assert len(winners) == 1 and len(losers) == 1
    assert losers[0].expected == 1 and losers[0].actual == 2
    assert node.resource_version == 2  # the version moved exactly once
    assert len(b.mutations(["node.owner"])) == 1


async def test_stale_plan_conflicts_and_leaves_nothing_held() -> None:
    b = MemoryAllocationBackend([whole_node("n1", 2), whole_node("n2", 2)])
    plan = await planned(b, whole("a", 2), whole("b", 2))
    b.bind_workload("n2", "foreign", 1)  # occupancy moved after the snapshot
    with pytest.raises(OwnershipConflict):
        await b.reserve(plan, "op", None)
    assert b.node("n1").owner is None and b.node("n2").owner is None
    assert not b.mutations(["claim.create"])


async def test_retry_after_a_crash_mid_reserve_adopts_its_own_nodes() -> None:
    b = MemoryAllocationBackend([whole_node("n1", 2), whole_node("n2", 2)])
    plan = await planned(b, whole("a", 2), whole("b", 2))
    first = plan.nodes[0].node
    died: list[BaseException] = []

    async def attempt() -> None:
        try:
            await b.reserve(plan, "op", None)
        except faults.SimulatedCrash as exc:
            died.append(exc)

    with faults.isolated():
        gate = faults.arm("owner.update.before")  # the first node's write pauses here
        async with anyio.create_task_group() as tg:
            tg.start_soon(attempt)
            await gate.wait_paused()
            crash = faults.arm("owner.update.before", crash=True)  # releases the first write
    assert len(died) == 1 and crash.hits == 1
    # the process died holding the first node and nothing else; no claim was recorded
    assert b.node(first).owner == "claim-op"
    assert not b.mutations(["claim.create"])
    version = b.node(first).resource_version
    claim = await b.reserve(plan, "op", None)  # the retry of the same operation
    assert claim.claim_id == "claim-op" and claim.phase == "allocated"
    assert b.node(first).resource_version == version  # adopted, not written again
    assert all(b.node(n).owner == "claim-op" for n in ("n1", "n2"))


async def test_crash_before_the_geometry_write_reads_preparing_and_reconcile_finishes() -> None:
    node = whole_node("n1", 1)
    b = geometry_backend(node, seconds=0.0)
    plan = await planned(b, mig("w", "1g.10gb"))
    died: list[BaseException] = []

    async def attempt() -> None:
        try:
            await b.reserve(plan, "op", None)
        except faults.SimulatedCrash as exc:
            died.append(exc)

    with faults.isolated():
        faults.arm("config.read.after", crash=True)
        await attempt()
    assert died and node.owner == "claim-op" and node.mig_config == "all-disabled"
    claim = await b.reserve(plan, "op", None)  # the retry finds the recorded claim
    assert claim.phase == "preparing" and claim.nodes[0].geometry == "pending"
    obs = await b.reconcile(claim.claim_id, "held", claim.generation)
    assert obs.nodes[0].mig_config == "vf-claim-op-n1"
    assert (await observed(b, claim.claim_id)).phase == "allocated"
    assert b.shared_config()[0] == {"vf-claim-op-n1": {"1g.10gb": 1}}


async def test_reserve_is_idempotent_by_operation_id() -> None:
    b = MemoryAllocationBackend([whole_node("n1", 2)])
    plan = await planned(b, whole("a", 1))
    first = await b.reserve(plan, "op", None)
    count = len(b.mutations())
    again = await b.reserve(plan, "op", None)
    assert again.claim_id == first.claim_id and len(b.mutations()) == count
    with pytest.raises(OwnershipConflict):
        await b.reserve(plan, "op", "bogus-generation")


async def test_reserve_refuses_a_reused_operation_id_with_a_different_plan() -> None:
    b = MemoryAllocationBackend([whole_node("n1", 2), whole_node("n2", 2)])
    plan = await planned(b, whole("a", 2))
    first = await b.reserve(plan, "op", None)
    other = await planned(b, whole("b", 2))  # feasible: the other node is free
    state = (b.mutations(), b.node("n1").owner, b.node("n2").owner)
    altered = msgspec.structs.replace(plan, plan_id="forged")
    for wrong in (other, altered):
        with pytest.raises(ValidationError) as info:
            await b.reserve(wrong, "op", None)
        assert info.value.field == "plan" and info.value.fields["operation_id"] == "op"
        assert info.value.fields["claim_id"] == first.claim_id
        assert (b.mutations(), b.node("n1").owner, b.node("n2").owner) == state
    # the same plan again is still the idempotent retry
    again = await b.reserve(plan, "op", first.generation)
    assert again == first and b.mutations() == state[0]


# -- geometry life cycle ---------------------------------------------------------------------


async def test_geometry_goes_pending_then_success_on_a_real_timer() -> None:
    node = whole_node("n1", 1)
    b = geometry_backend(node, seconds=5.0)
    claim = await b.reserve(await planned(b, mig("w", "3g.40gb")), "op", None)
    entry = claim.nodes[0].mig_config
    assert node.labels["nvidia.com/mig.config"] == entry
    entries, _, tombstoned = b.shared_config()
    assert entries == {entry: {"3g.40gb": 1}} and not tombstoned
    assert b.pointer() == "videoflow-mig-config"
    assert node.mig_state == "pending" and claim.phase == "preparing"
    await anyio.sleep(4.9)
    assert node.mig_state == "pending"  # read straight off the fixture: no call settles it
    await anyio.sleep(0.2)
    assert node.mig_state == "success"  # the timer fired as time passed
    assert node.mig_state_generation == claim.nodes[0].geometry_generation
    assert node.mig_layout == {"3g.40gb": 1} and node.classification() == "mig-mixed"
    assert (await observed(b, claim.claim_id)).phase == "allocated"


async def test_given_loop_clock_timer_fires(vclock: VirtualClock) -> None:
    node = whole_node("n1", 1)
    log = ObservationLog()
    b = MemoryAllocationBackend(
        [node], clock=vclock, authority="mig-manager", mig_apply_seconds=5, log=log
    )
    start = vclock.monotonic()
    await b.reserve(await planned(b, mig("w", "1g.10gb")), "op", None)
    await anyio.sleep(5.01)
    assert node.mig_state == "success"  # fired by the clock's own timer, nothing settled it
    (done,) = [
        e for e in log.events("alloc.node.mig-state") if str(e.attrs["detail"]).startswith("s")
    ]
    assert done.at == pytest.approx(start + 5)


async def test_pointer_drift_supersedes_the_claims_geometry() -> None:
    node = whole_node("n1", 1)
    b = geometry_backend(node, seconds=0.0)
    claim = await b.reserve(await planned(b, mig("w", "1g.10gb")), "op", None)
    assert (await observed(b, claim.claim_id)).phase == "allocated"
    node.mig_config = "all-1g.10gb"  # someone else relabels the node
    obs = await observed(b, claim.claim_id)
    assert obs.phase == "lost" and obs.nodes[0].geometry == "superseded"


async def test_zero_apply_seconds_settles_on_the_next_call() -> None:
    b = geometry_backend(whole_node("n1", 1), seconds=0.0)
    claim = await b.reserve(await planned(b, mig("w", "1g.10gb")), "op", None)
    assert (await observed(b, claim.claim_id)).phase == "allocated"


async def test_manual_fake_clock_and_apply_pending_geometry() -> None:
    clock = FakeClock()
    node = whole_node("n1", 1)
    b = MemoryAllocationBackend([node], clock=clock, authority="mig-manager", mig_apply_seconds=30)
    claim = await b.reserve(await planned(b, mig("w", "1g.10gb")), "op", None)
    await anyio.sleep(100)  # loop time passes; the model's clock does not
    b.apply_pending_geometry()
    assert node.mig_state == "pending"
    await clock.advance(30)
    b.apply_pending_geometry()
    assert node.mig_state == "success"
    assert (await observed(b, claim.claim_id)).phase == "allocated"


async def test_stale_success_never_completes_a_new_write() -> None:
    node = whole_node("n1", 1)
    b = geometry_backend(node, seconds=10.0)
    claim = await b.reserve(await planned(b, mig("w", "1g.10gb")), "op", None)
    gen1 = claim.nodes[0].geometry_generation
    assert gen1 is not None
    # a success label left over from an earlier write must not read as ready
    node.mig_state, node.mig_state_generation = "success", gen1 - 1
    assert (await observed(b, claim.claim_id)).phase == "preparing"
    node.mig_state, node.mig_state_generation = "pending", gen1
    # someone repoints the node; reconcile rewrites it: a second write, generation 2
    await anyio.sleep(5)
    node.mig_config = "all-disabled"
    obs = await b.reconcile(claim.claim_id, "held", claim.generation)
    gen2 = obs.nodes[0].geometry_generation
    assert gen2 is not None and gen2 > gen1
    await anyio.sleep(5)  # the first write's timer fires now: stale, ignored
    assert node.mig_state == "pending" and node.mig_state_generation == gen2
    assert (await observed(b, claim.claim_id)).phase == "preparing"
    await anyio.sleep(5.01)  # just past the deadline: equal deadlines have no fixed order on trio
    assert node.mig_state == "success" and node.mig_state_generation == gen2
    assert (await observed(b, claim.claim_id)).phase == "allocated"


async def test_fail_geometry_is_reported_on_the_claim() -> None:
    b = geometry_backend(whole_node("n1", 1), seconds=2.0)
    b.fail_geometry("n1")
    claim = await b.reserve(await planned(b, mig("w", "1g.10gb")), "op", None)
    await anyio.sleep(2)
    obs = await observed(b, claim.claim_id)
    assert obs.phase == "failed" and obs.reason is not None and "n1" in obs.reason
    assert obs.nodes[0].geometry == "failed"
    assert b.node("n1").classification() == "invalid"
    assert not (await b.bindings(claim.claim_id, "w")).ready
    # repaired: reconcile rewrites the geometry and it becomes ready
    b.clear_geometry_failure("n1")
    obs = await b.reconcile(claim.claim_id, "held", obs.generation)
    assert obs.phase == "preparing"
    await anyio.sleep(2)
    assert (await observed(b, claim.claim_id)).phase == "allocated"


async def test_device_plugin_uses_existing_instances_only() -> None:
    b = MemoryAllocationBackend([mixed_node("m1"), whole_node("n1", 1)])
    plan = await planned(b, mig("w", "2g.20gb"))
    assert plan.placements[0].node == "m1" and not plan.nodes[0].geometry_change
    snap = await snapshot(b)
    got = await b.plan([mig("x", "7g.80gb")], snap)
    assert isinstance(got, Infeasible) and "cannot change geometry" in got.reason
    claim = await b.reserve(plan, "op", None)
    assert claim.phase == "allocated" and b.shared_config() == ({}, 1, False)
    binding = await b.bindings(claim.claim_id, "w")
    assert binding.resource == "nvidia.com/mig-2g.20gb" and binding.ready


async def test_foreign_workloads_pin_geometry_until_they_leave() -> None:
    b = geometry_backend(whole_node("n1", 1), seconds=1.0)
    claim = await b.reserve(await planned(b, mig("w", "1g.10gb"), mig("v", "1g.10gb")), "op", None)
    await anyio.sleep(1.01)
    b.bind_workload("n1", "w", 1)
    b.bind_workload("n1", "foreign", 1)
    rel = await b.release(claim.claim_id, "rel1", claim.generation)
    assert rel.geometry_pinned == ("n1",) and rel.restored == () and rel.released_nodes == ("n1",)
    assert rel.retained_workloads == () and rel.phase == "retained"
    node = b.node("n1")
    assert "w" not in node.workloads and node.mig_config.startswith("vf-")
    entries, _, tombstoned = b.shared_config()
    assert entries and not tombstoned
    await anyio.sleep(10)
    assert node.mig_layout == {"1g.10gb": 2}  # never destroyed under a workload
    b.unbind_workload("n1", "foreign")
    rel2 = await b.release(claim.claim_id, "rel2", rel.generation)
    assert rel2.restored == ("n1",) and rel2.config_tombstoned and rel2.phase == "released"
    await anyio.sleep(1.01)
    assert node.mig_layout == {} and node.mig_config == "all-disabled"
    assert node.classification() == "whole-gpu"


async def test_keep_workloads_retains_and_pins() -> None:
    b = geometry_backend(whole_node("n1", 1), seconds=0.0)
    claim = await b.reserve(await planned(b, mig("w", "1g.10gb")), "op", None)
    b.bind_workload("n1", "w", 1)
    rel = await b.release(claim.claim_id, "rel", claim.generation, keep_workloads=True)
    assert rel.retained_workloads == ("w",) and rel.geometry_pinned == ("n1",)
    assert b.node("n1").workloads == {"w": 1} and b.node("n1").owner is None
    assert (await observed(b, claim.claim_id)).phase == "retained"
    assert b.pointer() == "videoflow-mig-config"


async def test_shared_config_is_tombstoned_by_the_last_owner_only() -> None:
    b = geometry_backend(whole_node("n1", 1), whole_node("n2", 1), seconds=0.0)
    snap = await snapshot(b)
    p1 = await b.plan([mig("a", "1g.10gb", nodes=("n1",))], snap)
    p2 = await b.plan([mig("b", "1g.10gb", nodes=("n2",))], snap)
    assert isinstance(p1, FeasiblePlan) and isinstance(p2, FeasiblePlan)
    c1 = await b.reserve(p1, "op1", None)
    c2 = await b.reserve(p2, "op2", None)
    assert len(b.shared_config()[0]) == 2
    r1 = await b.release(c1.claim_id, "r1", c1.generation)
    assert not r1.config_tombstoned and b.pointer() == "videoflow-mig-config"
    version = b.shared_config()[1]
    r2 = await b.release(c2.claim_id, "r2", c2.generation)
    entries, version2, tombstoned = b.shared_config()
    assert r2.config_tombstoned and entries == {} and tombstoned and version2 == version + 1
    assert b.pointer() == "default-mig-parted-config"
    assert len(b.mutations(["config.pointer"])) == 2


async def test_concurrent_last_owners_tombstone_once_under_cas() -> None:
    b = geometry_backend(whole_node("n1", 1), whole_node("n2", 1), seconds=0.0)
    snap = await snapshot(b)
    claims = []
    for i, node in enumerate(("n1", "n2")):
        plan = await b.plan([mig(f"w{i}", "1g.10gb", nodes=(node,))], snap)
        assert isinstance(plan, FeasiblePlan)
        claims.append(await b.reserve(plan, f"op{i}", None))
    _, version, _ = b.shared_config()
    results = []

    async def release(i: int) -> None:
        results.append(await b.release(claims[i].claim_id, f"r{i}", claims[i].generation))

    with faults.isolated():
        gate = faults.arm("config.read.after", times=2)
        async with anyio.create_task_group() as tg:
            tg.start_soon(release, 0)
            tg.start_soon(release, 1)
            await gate.wait_paused(2)  # both read the same config version
            gate.release()
    # the loser of the CAS read again and removed its entry from the winner's result
    assert b.shared_config() == ({}, version + 2, True)
    assert [r.config_tombstoned for r in results].count(True) == 1
    assert b.pointer() == "default-mig-parted-config"
    assert len(b.mutations(["config.update"])) == 4  # two reserves, two releases (no lost CAS)
    assert all(b.node(n).mig_config == "all-disabled" for n in ("n1", "n2"))


# -- release, reconcile, bindings ------------------------------------------------------------


async def test_release_is_idempotent_by_operation_id_and_cas_on_generation() -> None:
    b = MemoryAllocationBackend([whole_node("n1", 2)])
    claim = await b.reserve(await planned(b, whole("a", 2)), "op", None)
    with pytest.raises(OwnershipConflict):
        await b.release(claim.claim_id, "rel", "stale")
    first = await b.release(claim.claim_id, "rel", claim.generation)
    count = len(b.mutations())
    assert await b.release(claim.claim_id, "rel", claim.generation) == first
    assert len(b.mutations()) == count
    assert first.released_nodes == ("n1",) and b.node("n1").owner is None


async def test_bindings_name_the_devices() -> None:
    b = MemoryAllocationBackend([whole_node("n1", 4)])
    b.bind_workload("n1", "foreign", 1)
    claim = await b.reserve(await planned(b, whole("a", 2), whole("b", 1)), "op", None)
    ba = await b.bindings(claim.claim_id, "a")
    bb = await b.bindings(claim.claim_id, "b")
    assert ba.node == "n1" and ba.resource == "nvidia.com/gpu" and len(ba.devices) == 2
    assert len(bb.devices) == 1 and not set(ba.devices) & set(bb.devices)
    assert not ba.bound and ba.ready
    b.bind_workload("n1", "a", 2)
    assert (await b.bindings(claim.claim_id, "a")).bound
    with pytest.raises(NotFound):
        await b.bindings(claim.claim_id, "nope")


async def test_mark_workload_ready_and_reconcile_released() -> None:
    b = MemoryAllocationBackend([whole_node("n1", 1)])
    claim = await b.reserve(await planned(b, whole("a", 1)), "op", None)
    b.mark_workload_ready(claim.claim_id)
    assert (await observed(b, claim.claim_id)).phase == "ready"
    obs = await b.reconcile(claim.claim_id, "released", claim.generation)
    assert obs.phase == "released" and b.node("n1").owner is None
    with pytest.raises(ValidationError):
        await b.reconcile(claim.claim_id, "sideways", obs.generation)  # type: ignore[arg-type]


async def test_reconcile_held_retakes_lost_ownership() -> None:
    node = whole_node("n1", 1)
    b = MemoryAllocationBackend([node])
    claim = await b.reserve(await planned(b, whole("a", 1)), "op", None)
    node.owner = None  # an operator cleared the owner annotation
    assert (await observed(b, claim.claim_id)).phase == "lost"
    obs = await b.reconcile(claim.claim_id, "held", claim.generation)
    assert obs.phase == "allocated" and node.owner == claim.claim_id
    assert obs.generation != claim.generation


# -- plans -------------------------------------------------------------------------------------


async def test_fragmentation_is_reported_not_hidden() -> None:
    b = MemoryAllocationBackend([whole_node("h1", 3), whole_node("h2", 3)])
    got = await b.plan([whole(f"w{i}", 2) for i in range(3)], await snapshot(b))
    assert isinstance(got, Infeasible) and got.reason.startswith("fragmented")
    assert got.reason.endswith("(confirmed by exhaustive search)")
    b3 = MemoryAllocationBackend([whole_node(f"h{i}", 2) for i in range(3)])
    plan = await planned(b3, *[whole(f"w{i}", 2) for i in range(3)])
    assert sorted(p.node for p in plan.placements) == ["h0", "h1", "h2"]
    short = await b3.plan([whole("big", 7)], await snapshot(b3))
    assert isinstance(short, Infeasible) and "no eligible node" in short.reason


async def test_constraints_and_owned_nodes() -> None:
    b = MemoryAllocationBackend([whole_node("n1", 2), whole_node("n2", 2, product="NVIDIA-A30")])
    plan = await planned(b, whole("a", 2, product="A30"))
    assert plan.placements[0].node == "n2"
    await b.reserve(plan, "op", None)
    got = await b.plan([whole("b", 1, nodes=("n2",))], await snapshot(b))
    assert isinstance(got, Infeasible)  # n2 is owned now
    sel = await planned(b, whole("c", 1, node_selector={"nvidia.com/gpu.count": "2"}))
    assert sel.placements[0].node == "n1"


async def test_mig_by_memory_and_packing_on_one_node() -> None:
    b = geometry_backend(whole_node("n1", 2), seconds=0.0)
    reqs = [WorkloadRequest(workload_id=f"m{i}", mig_memory_gib=9.0) for i in range(9)]
    plan = await planned(b, *reqs)
    assert {p.mig_profile for p in plan.placements} == {"1g.10gb"}
    assert plan.nodes[0].mig_layout == {"1g.10gb": 9}
    assert sum(sum(card.values()) for card in plan.nodes[0].card_layouts) == 9


# -- bad input: typed error or Infeasible, and no mutation -----------------------------------


async def test_bad_input_changes_nothing() -> None:
    b = geometry_backend(whole_node("n1", 1))
    other = MemoryAllocationBackend([whole_node("n1", 1)])
    snap = await snapshot(b)
    before = b.mutations()
    with pytest.raises(ValidationError):
        await b.plan([whole("w", -1)], snap)
    with pytest.raises(ValidationError):
        await b.plan([WorkloadRequest(workload_id="w")], snap)
    with pytest.raises(ValidationError):
        await b.plan([whole("w", 1), whole("w", 1)], snap)
    got = await b.plan([mig("w", "9g.999gb")], snap)
    assert isinstance(got, Infeasible) and "unknown MIG profile" in got.reason
    got = await b.plan([whole("w", 1, product="NVIDIA-Z9000")], snap)
    assert isinstance(got, Infeasible)
    foreign_snap = await snapshot(other)
    got = await b.plan([whole("w", 1)], foreign_snap)
    assert isinstance(got, Infeasible) and "snapshot" in got.reason
    foreign_plan = await planned(other, whole("w", 1))
    with pytest.raises(ValidationError):
        await b.reserve(foreign_plan, "op", None)
    for call in (
        b.observe("ghost"),
        b.release("ghost", "op", "g"),
        b.reconcile("ghost", "held", "g"),
        b.bindings("ghost", "w"),
    ):
        with pytest.raises(NotFound):
            await call
    with pytest.raises(ValidationError):
        b.bind_workload("n1", "w", -1)
    with pytest.raises(ValidationError):
        b.bind_workload("n1", "w", 5)  # more than the node has
    with pytest.raises(NotFound):
        b.bind_workload("ghost", "w", 1)
    with pytest.raises(ValidationError):
        await b.inventory({"zone": "a"})
    assert b.mutations() == before


@pytest.mark.parametrize(
    "kwargs",
    [
        {"gpu_count": -1},
        {"memory_gib": -1.0},
        {"mig_state": "weird"},
        {"workloads": {"w": -2}},
        {"mig_layout": {"1g.10gb": -1}},
        {"product": ""},
    ],
)
def test_bad_fixture_is_a_validation_error(kwargs: dict[str, object]) -> None:
    args: dict[str, object] = {"name": "n", "product": H100, "gpu_count": 1, "memory_gib": 80.0}
    args.update(kwargs)
    with pytest.raises(ValidationError):
        NodeFixture(**args)  # type: ignore[arg-type]


def test_bad_backend_options() -> None:
    with pytest.raises(ValidationError):
        MemoryAllocationBackend([], authority="kubelet")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        MemoryAllocationBackend([], mig_apply_seconds=-1)
    with pytest.raises(ValidationError):
        MemoryAllocationBackend([whole_node("n"), whole_node("n")])


# -- audit and capabilities ------------------------------------------------------------------


async def test_reads_are_zero_mutation_and_writes_are_audited() -> None:
    log = ObservationLog()
    b = MemoryAllocationBackend(
        [whole_node("n1", 1)], authority="mig-manager", mig_apply_seconds=0.0, log=log
    )
    snap = await snapshot(b)
    plan = await b.plan([mig("w", "1g.10gb")], snap)
    assert isinstance(plan, FeasiblePlan)
    await b.capabilities({})
    assert b.mutations() == []
    claim = await b.reserve(plan, "op", None)
    await b.observe(claim.claim_id)  # settles the 0-second write (a manager mutation)
    count = len(b.mutations())
    await b.observe(claim.claim_id)
    await b.inventory({})
    await b.bindings(claim.claim_id, "w")
    assert len(b.mutations()) == count
    kinds = [m[0] for m in b.mutations()]
    assert kinds[:2] == ["node.owner", "claim.create"]
    assert {"config.update", "node.mig-config", "node.mig-state"} <= set(kinds)
    assert all(m[2] in ("op", "mig-manager") for m in b.mutations())
    assert len(log.events()) == len(b.mutations())
    assert b.mutations(["node.owner"]) == [("node.owner", "n1", "op", f"owner={claim.claim_id}")]


async def test_capabilities_follow_the_authority() -> None:
    plugin = await MemoryAllocationBackend([]).capabilities({})
    manager = await MemoryAllocationBackend([], authority="mig-manager").capabilities({})
    assert plugin.whole_devices and not plugin.geometry_changes and not plugin.shared_config
    assert manager.geometry_changes and manager.shared_config and manager.ownership_cas
    off = await MemoryAllocationBackend([], authority="mig-manager").capabilities(
        {"mig_manager": False}
    )
    assert not off.geometry_changes


async def test_snapshot_views_and_known_wrapper() -> None:
    b = MemoryAllocationBackend([whole_node("n1", 2), mixed_node("m1")])
    got = await b.inventory({"nodes": ["m1"]})
    assert isinstance(got, Known)
    (view,) = got.value.nodes
    assert view.classification == "mig-mixed" and view.family == "H100-80GB-HBM3"
    assert view.mig_layout == {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
