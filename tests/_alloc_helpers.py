"""Helpers for the allocation tests: GFD label sets and node fixtures."""

from __future__ import annotations

from typing import Any

from videoflow_aio.contracts import Known
from videoflow_aio.contracts.allocation import (
    ClaimObservation,
    FeasiblePlan,
    InventorySnapshot,
    WorkloadRequest,
)
from videoflow_aio.memory.allocation import MemoryAllocationBackend, NodeFixture

H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-40GB"


def whole_labels(product: str = H100, count: int = 1, **extra: str) -> dict[str, str]:
    """GFD labels of a whole-GPU node (5a, abridged)."""
    labels = {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.count": str(count),
        "nvidia.com/gpu.memory": "81559",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/mig.config": "all-disabled",
        "nvidia.com/mig.config.state": "success",
    }
    labels.update(extra)
    return labels


def whole_node(name: str, count: int = 1, product: str = H100, **kw: Any) -> NodeFixture:
    return NodeFixture(name, product, count, 80.0, labels=whole_labels(product, count), **kw)


def mixed_labels(product: str = H100, geometry: dict[str, int] | None = None) -> dict[str, str]:
    """GFD labels of a MIG ``mixed`` node (5c, abridged)."""
    geometry = geometry if geometry is not None else {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    labels = {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.count": "1",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/mig.config": "all-balanced",
        "nvidia.com/mig.config.state": "success",
    }
    for profile, count in geometry.items():
        labels[f"nvidia.com/mig-{profile.replace('+', '.')}.count"] = str(count)
        labels[f"nvidia.com/mig-{profile.replace('+', '.')}.product"] = f"{product}-MIG-{profile}"
    return labels


def mixed_node(name: str, geometry: dict[str, int] | None = None, **kw: Any) -> NodeFixture:
    return NodeFixture(name, H100, 1, 80.0, labels=mixed_labels(H100, geometry), **kw)


def whole(workload: str, devices: int, **kw: Any) -> WorkloadRequest:
    return WorkloadRequest(workload_id=workload, devices=devices, **kw)


def mig(workload: str, profile: str, **kw: Any) -> WorkloadRequest:
    return WorkloadRequest(workload_id=workload, mig_profile=profile, **kw)


async def snapshot(backend: MemoryAllocationBackend) -> InventorySnapshot:
    got = await backend.inventory({})
    assert isinstance(got, Known), got
    return got.value


async def planned(backend: MemoryAllocationBackend, *requests: WorkloadRequest) -> FeasiblePlan:
    plan = await backend.plan(list(requests), await snapshot(backend))
    assert isinstance(plan, FeasiblePlan), plan
    return plan


async def observed(backend: MemoryAllocationBackend, claim_id: str) -> ClaimObservation:
    got = await backend.observe(claim_id)
    assert isinstance(got, Known), got
    return got.value
