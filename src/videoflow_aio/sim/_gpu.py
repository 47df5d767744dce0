"""GPU slices for the simulator: the spec's ``[[node]]`` entries as allocation-model fixtures,
and one claim per stage that asks for ``gpu``."""

from __future__ import annotations

from typing import NamedTuple

import anyio

from ..contracts import Known
from ..contracts.allocation import ClaimPhase, FeasiblePlan, WorkloadRequest
from ..contracts.errors import VideoflowError
from ..memory.allocation import MemoryAllocationBackend, NodeFixture
from ._result_types import GpuGrant
from ._spec_types import NodeSpec, SimError, StageSpec

POLL_SECONDS = 1.0
"""How often a claim whose geometry is being applied is looked at again."""


def node_fixture(spec: NodeSpec) -> NodeFixture:
    """A GPU node labelled as GPU Feature Discovery would label it: whole GPUs, or the MIG
    instances of ``spec.mig`` under the ``mixed`` strategy."""
    labels = {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": spec.product,
        "nvidia.com/gpu.count": str(spec.gpus),
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mig.strategy": "mixed" if spec.mig else "single",
        "nvidia.com/mig.config": "custom" if spec.mig else "all-disabled",
        "nvidia.com/mig.config.state": "success",
    }
    for profile, count in spec.mig.items():
        label = profile.replace("+", ".")
        labels[f"nvidia.com/mig-{label}.count"] = str(count)
        labels[f"nvidia.com/mig-{label}.product"] = f"{spec.product}-MIG-{profile}"
    return NodeFixture(
        spec.name,
        spec.product,
        spec.gpus,
        spec.memory_gib,
        labels=labels,
        mig_layout=dict(spec.mig),
    )


class Reservation(NamedTuple):
    """What a GPU stage was granted: the profile, the claim and its generation, the nodes
    it was placed on and the devices bound per workload."""

    profile: str
    claim: str
    generation: str
    nodes: list[str]
    devices: dict[str, list[str]]

    def grant(self, released: ClaimPhase) -> GpuGrant:
        """The result's entry, once the claim was released (the phase it ended in)."""
        return GpuGrant(**self._asdict(), released=released)


async def reserve_gpus(alloc: MemoryAllocationBackend, stage: StageSpec, index: int) -> Reservation:
    """Reserve one device (``gpu = "whole"``) or MIG instance per replica of ``stage`` in
    one claim, wait until it is allocated, bind the replicas' workloads; what was granted."""
    field = f"stage[{index}].gpu"
    assert stage.gpu is not None
    requests = [
        WorkloadRequest(workload_id=f"{stage.name}-{i}", devices=1)
        if stage.gpu == "whole"
        else WorkloadRequest(workload_id=f"{stage.name}-{i}", mig_profile=stage.gpu)
        for i in range(stage.replicas)
    ]
    snap = await alloc.inventory({})
    if not isinstance(snap, Known):
        raise SimError(f"{field}: inventory unreadable: {snap.reason}", field=field)
    try:
        plan = await alloc.plan(requests, snap.value)
    except VideoflowError as exc:
        raise SimError(f"{field}: {exc}", field=field) from None
    if not isinstance(plan, FeasiblePlan):
        raise SimError(
            f"{field}: {stage.replicas} × {stage.gpu} for stage {stage.name!r} do not fit: "
            f"{plan.reason}",
            field=field,
        )
    claim = await alloc.reserve(plan, f"sim-{stage.name}", None)
    while claim.phase == "preparing":  # a geometry change: the manager applies it on a timer
        await anyio.sleep(POLL_SECONDS)
        seen = await alloc.observe(claim.claim_id)
        if isinstance(seen, Known):
            claim = seen.value
    if claim.phase not in ("allocated", "ready"):
        raise SimError(
            f"{field}: claim for stage {stage.name!r} is {claim.phase}: {claim.reason}",
            field=field,
        )
    devices: dict[str, list[str]] = {}
    for p in claim.placements:
        alloc.bind_workload(p.node, p.workload_id, 1)
        bound = await alloc.bindings(claim.claim_id, p.workload_id)
        devices[p.workload_id] = list(bound.devices)
    alloc.mark_workload_ready(claim.claim_id)
    return Reservation(
        profile=stage.gpu,
        claim=claim.claim_id,
        generation=claim.generation,
        nodes=sorted({p.node for p in claim.placements}),
        devices=devices,
    )


__all__ = ["Reservation", "node_fixture", "reserve_gpus"]
