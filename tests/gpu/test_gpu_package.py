"""``videoflow_aio.gpu`` as a real allocation backend would use it: no ``memory`` import, plans
from a snapshot it builds itself, the same answers as the reference model's ``plan()``."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _alloc_helpers import A100, H100, mixed_labels, snapshot, whole_labels
from videoflow_aio import gpu
from videoflow_aio.contracts.allocation import (
    FeasiblePlan,
    Infeasible,
    InventorySnapshot,
    NodeView,
    WorkloadRequest,
)
from videoflow_aio.contracts.errors import ValidationError
from videoflow_aio.memory.allocation import MemoryAllocationBackend, NodeFixture
from videoflow_aio.vtime import run

GPU_DIR = Path(gpu.__file__).parent


def test_gpu_imports_no_model_adapter_or_conformance_code() -> None:
    for path in sorted(GPU_DIR.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                module = "." * node.level + (node.module or "")
                for banned in ("memory", "adapters", "conformance", "testing", "deploy"):
                    assert banned not in module.split("."), f"{path.name} imports {module}"


def test_importing_gpu_loads_no_model() -> None:
    code = (
        "import sys, videoflow_aio.gpu; "
        "print(sorted(m for m in sys.modules if m.startswith('videoflow_aio.memory')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_public_name_is_documented() -> None:
    for name in gpu.__all__:
        obj = getattr(gpu, name)
        if callable(obj):
            assert obj.__doc__, name


# ------------------------------------------------------------------------------------------
# a snapshot built the way a Kubernetes adapter would: from labels, with gpu's functions


def view_from_labels(
    name: str, labels: dict[str, str], workloads: dict[str, int], resource_version: int = 7
) -> NodeView:
    product = labels["nvidia.com/gpu.product"]
    fam = gpu.family_for(product)
    return NodeView(
        name=name,
        product=product,
        family=None if fam is None else fam.key,
        gpu_count=int(labels["nvidia.com/gpu.count"]),
        memory_gib=80.0,
        labels=labels,
        classification=gpu.classify_gfd_labels(labels),
        owner=None,
        resource_version=resource_version,
        mig_config=labels.get("nvidia.com/mig.config", "all-disabled"),
        mig_state=labels.get("nvidia.com/mig.config.state", "success"),
        mig_state_generation=0,
        mig_layout=gpu.labelled_geometry(labels),
        workloads=workloads,
        used_devices=sum(workloads.values()),
    )


def k8s_snapshot(views: list[NodeView], missing: tuple[str, ...] = ()) -> InventorySnapshot:
    return InventorySnapshot(
        snapshot_id="k8s-1",
        taken_at=0.0,
        completeness="partial" if missing else "complete",
        missing=missing,
        nodes=tuple(views),
        config_version=1,
    )


def test_a_snapshot_built_from_labels_plans_without_the_model() -> None:
    views = [
        view_from_labels("a", whole_labels(H100, 4), {"foreign": 3}),
        view_from_labels("b", whole_labels(A100, 2), {}),
        view_from_labels("m", mixed_labels(H100), {}),
    ]
    requests = [
        WorkloadRequest(workload_id="big", devices=2),
        WorkloadRequest(workload_id="small", devices=1),
        WorkloadRequest(workload_id="slice", mig_profile="2g.20gb"),
    ]
    gpu.check_requests(requests)
    plan = gpu.plan_requests(requests, k8s_snapshot(views), plan_id="p1", can_change_geometry=False)
    assert isinstance(plan, FeasiblePlan), plan
    where = {p.workload_id: p.node for p in plan.placements}
    assert where == {"big": "b", "small": "a", "slice": "m"}
    assert {n.node: n.resource_version for n in plan.nodes} == {"a": 7, "b": 7, "m": 7}
    # unknown occupancy is never "idle"
    partial = gpu.plan_requests(
        requests, k8s_snapshot(views, ("pods",)), plan_id="p2", can_change_geometry=False
    )
    assert partial == Infeasible("occupancy unknown")


def test_known_profiles_default_to_the_shipped_tables_and_can_be_narrowed() -> None:
    views = [view_from_labels("m", mixed_labels(H100), {})]
    request = [WorkloadRequest(workload_id="w", mig_profile="1g.10gb")]
    plan = gpu.plan_requests(request, k8s_snapshot(views), plan_id="p", can_change_geometry=False)
    assert isinstance(plan, FeasiblePlan)
    narrowed = gpu.plan_requests(
        request,
        k8s_snapshot(views),
        plan_id="p",
        can_change_geometry=False,
        known_profiles={"2g.20gb"},
    )
    assert narrowed == Infeasible("unknown MIG profile '1g.10gb' for 'w'")
    # the planner's own view of the tables names the same profiles as the oracle's
    assert gpu.layout.profile_names() == {p for fam in gpu.families() for p in fam.profiles}


@pytest.mark.parametrize(
    ("requests", "why"),
    [
        (["w"], "requests must be WorkloadRequest"),
        ([WorkloadRequest(workload_id="")], "workload_id must be non-empty"),
        ([WorkloadRequest(workload_id="w")], "exactly one of"),
        ([WorkloadRequest(workload_id="w", devices=1, mig_profile="1g.10gb")], "exactly one of"),
        ([WorkloadRequest(workload_id="w", devices=-1)], "devices must be"),
        ([WorkloadRequest(workload_id="w", mig_memory_gib=-1.0)], "mig_memory_gib must be"),
        (
            [
                WorkloadRequest(workload_id="w", devices=1),
                WorkloadRequest(workload_id="w", devices=2),
            ],
            "duplicate workload",
        ),
    ],
)
def test_check_requests_refuses_malformed_requests(requests: list[object], why: str) -> None:
    with pytest.raises(ValidationError, match=why) as info:
        gpu.check_requests(requests)  # type: ignore[arg-type]
    assert info.value.field == "requests"


# ------------------------------------------------------------------------------------------
# the same answers as the reference model's plan(): the model adds its request and snapshot
# checks and nothing else, so a real backend calling gpu plans exactly as the specification

node_st = st.tuples(
    st.sampled_from([H100, A100, "NVIDIA-A30", "NVIDIA-L4"]),
    st.integers(1, 4),
    st.integers(0, 4),
    st.booleans(),
)
request_st = st.one_of(
    st.integers(1, 4).map(lambda n: {"devices": n}),
    st.sampled_from(["1g.10gb", "2g.20gb", "3g.20gb", "1g.6gb", "9g.9gb"]).map(
        lambda p: {"mig_profile": p}
    ),
    st.sampled_from([4.0, 9.0, 19.0, 30.0]).map(lambda g: {"mig_memory_gib": g}),
)


@settings(max_examples=60, deadline=None)
@given(
    nodes=st.lists(node_st, min_size=1, max_size=6),
    asks=st.lists(request_st, min_size=1, max_size=6),
    authority=st.sampled_from(["device-plugin", "mig-manager"]),
)
def test_gpu_plans_equal_the_models(
    nodes: list[tuple[str, int, int, bool]],
    asks: list[dict[str, object]],
    authority: Literal["device-plugin", "mig-manager"],
) -> None:
    fixtures = [
        NodeFixture(
            f"n{i}",
            product,
            count,
            40.0,
            labels=mixed_labels(product) if mixed else whole_labels(product, count),
            workloads={f"f{i}": min(busy, count)} if busy and not mixed else {},
        )
        for i, (product, count, busy, mixed) in enumerate(nodes)
    ]
    requests = [WorkloadRequest(workload_id=f"w{i}", **ask) for i, ask in enumerate(asks)]  # type: ignore[arg-type]
    backend = MemoryAllocationBackend(fixtures, authority=authority)

    async def model() -> tuple[InventorySnapshot, FeasiblePlan | Infeasible]:
        snap = await snapshot(backend)
        return snap, await backend.plan(requests, snap)

    snap, expected = run(model, backend="asyncio")
    got = gpu.plan_requests(
        requests,
        snap,
        plan_id=expected.plan_id if isinstance(expected, FeasiblePlan) else "x",
        can_change_geometry=authority == "mig-manager",
    )
    assert got == expected
