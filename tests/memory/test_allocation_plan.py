"""Plans audited against independent oracles: capacity, the MIG geometry oracle, exact packing."""

from __future__ import annotations

from typing import Literal

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from _alloc_helpers import A100, H100, whole_labels
from videoflow_aio.contracts import Known
from videoflow_aio.contracts.allocation import (
    FeasiblePlan,
    Infeasible,
    InventorySnapshot,
    WorkloadRequest,
)
from videoflow_aio.memory.allocation import MemoryAllocationBackend, NodeFixture, pack_whole_devices
from videoflow_aio.memory.mig_geometry import check_layout

PRODUCTS = (H100, A100, "NVIDIA-A30", "NVIDIA-L4")
PROFILES = ("1g.10gb", "2g.20gb", "3g.40gb", "1g.5gb", "2g.10gb", "3g.20gb", "1g.6gb", "4g.24gb")

node_st = st.tuples(st.sampled_from(PRODUCTS), st.integers(1, 4), st.integers(0, 4), st.booleans())
request_st = st.one_of(
    st.tuples(st.just("whole"), st.integers(1, 4)),
    st.tuples(st.just("mig"), st.sampled_from(PROFILES)),
    st.tuples(st.just("mem"), st.sampled_from([4.0, 9.0, 19.0, 30.0])),
)

Authority = Literal["device-plugin", "mig-manager"]


def _cluster(specs: list[tuple[str, int, int, bool]]) -> list[NodeFixture]:
    nodes = []
    for i, (product, count, busy, owned) in enumerate(specs):
        workloads = {f"f{i}": min(busy, count)} if busy else {}
        nodes.append(
            NodeFixture(
                f"n{i}",
                product,
                count,
                40.0,
                labels=whole_labels(product, count),
                workloads=workloads,
                owner="someone" if owned else None,
            )
        )
    return nodes


def _requests(specs: list[tuple[str, object]]) -> list[WorkloadRequest]:
    out = []
    for i, (kind, value) in enumerate(specs):
        if kind == "whole":
            out.append(WorkloadRequest(workload_id=f"w{i}", devices=int(value)))  # type: ignore[call-overload]
        elif kind == "mig":
            out.append(WorkloadRequest(workload_id=f"w{i}", mig_profile=str(value)))
        else:
            out.append(WorkloadRequest(workload_id=f"w{i}", mig_memory_gib=float(value)))  # type: ignore[arg-type]
    return out


def _plan(
    nodes: list[NodeFixture],
    requests: list[WorkloadRequest],
    authority: Authority,
) -> tuple[FeasiblePlan | Infeasible, InventorySnapshot]:
    async def main() -> tuple[FeasiblePlan | Infeasible, InventorySnapshot]:
        b = MemoryAllocationBackend(nodes, authority=authority)
        got = await b.inventory({})
        assert isinstance(got, Known)
        return await b.plan(requests, got.value), got.value

    return anyio.run(main)


def _audit(plan: FeasiblePlan, snap: InventorySnapshot, requests: list[WorkloadRequest]) -> None:
    views = {v.name: v for v in snap.nodes}
    assert sorted(p.workload_id for p in plan.placements) == sorted(r.workload_id for r in requests)
    by_id = {r.workload_id: r for r in requests}
    node_plans = {n.node: n for n in plan.nodes}
    assert set(node_plans) == {p.node for p in plan.placements}
    for name, nplan in node_plans.items():
        view = views[name]
        assert view.owner is None and nplan.resource_version == view.resource_version
        mine = [p for p in plan.placements if p.node == name]
        whole = sum(p.devices for p in mine if p.mig_profile is None)
        assert whole <= view.gpu_count - (view.used_devices or 0)
        if nplan.geometry_change:
            assert not view.workloads and not whole
            assert len(nplan.card_layouts) == view.gpu_count
            for card in nplan.card_layouts:
                assert check_layout(view.product, card) == [], (view.product, card)
            total: dict[str, int] = {}
            for card in nplan.card_layouts:
                for profile, count in card.items():
                    total[profile] = total.get(profile, 0) + count
            assert total == nplan.mig_layout
            for p in mine:
                assert p.card is not None and nplan.card_layouts[p.card].get(p.mig_profile or "")
        else:
            for profile in {p.mig_profile for p in mine if p.mig_profile is not None}:
                placed = sum(1 for p in mine if p.mig_profile == profile)
                assert placed <= view.mig_layout.get(profile, 0) - (view.used_devices or 0)
        for p in mine:
            req = by_id[p.workload_id]
            if req.mig_profile is not None:
                assert p.mig_profile == req.mig_profile


@settings(max_examples=120, deadline=None)
@given(
    nodes=st.lists(node_st, min_size=1, max_size=5),
    reqs=st.lists(request_st, max_size=6),
    authority=st.sampled_from(["device-plugin", "mig-manager"]),
)
def test_every_plan_passes_the_oracles(
    nodes: list[tuple[str, int, int, bool]],
    reqs: list[tuple[str, object]],
    authority: Authority,
) -> None:
    requests = _requests(reqs)
    plan, snap = _plan(_cluster(nodes), requests, authority)
    if isinstance(plan, FeasiblePlan):
        _audit(plan, snap, requests)
    else:
        assert plan.reason


@settings(max_examples=120, deadline=None)
@given(
    nodes=st.lists(node_st, min_size=1, max_size=5),
    sizes=st.lists(st.integers(1, 4), max_size=6),
)
def test_whole_device_plans_are_exact(
    nodes: list[tuple[str, int, int, bool]], sizes: list[int]
) -> None:
    fixtures = _cluster(nodes)
    requests = [WorkloadRequest(workload_id=f"w{i}", devices=n) for i, n in enumerate(sizes)]
    plan, snap = _plan(fixtures, requests, "device-plugin")
    free = {v.name: v.gpu_count - (v.used_devices or 0) for v in snap.nodes if v.owner is None}
    oracle = pack_whole_devices([(r.workload_id, r.devices) for r in requests], free)
    assert isinstance(plan, FeasiblePlan) == (oracle is not None), plan
