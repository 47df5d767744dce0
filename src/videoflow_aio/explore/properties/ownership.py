"""PROP-ALC-ONE-OWNER: reservers racing for the GPU nodes of the allocation model, each
planning from the same snapshot and reserving under compare-and-swap on the nodes'
``resource_version``; a reserver that crashes mid-reserve (faults at ``owner.read.after`` /
``owner.update.before``) retries with the same operation id, as a restarted process would.
In every schedule: no node is held by two claims; every claim that was granted owns exactly
its nodes; a node's owner is a granted claim (or the claim of a reserver that died on every
attempt); and releasing the granted claims frees their nodes.
"""

from __future__ import annotations

import random

import anyio

from ... import faults
from ...conformance.cases.alc import _whole  # the cases' whole-GPU node (GFD labels)
from ...contracts import Known
from ...contracts.allocation import (
    ClaimObservation,
    FeasiblePlan,
    OwnershipConflict,
    WorkloadRequest,
)
from ...memory.allocation import MemoryAllocationBackend
from .._program import Context, program

ATTEMPTS = 3


async def _reserve(
    b: MemoryAllocationBackend,
    plan: FeasiblePlan,
    op: str,
    rng: random.Random,
    granted: dict[str, ClaimObservation],
    died: list[str],
) -> None:
    await anyio.sleep(rng.choice((0.0, 0.0, 0.5)))
    for _ in range(ATTEMPTS):
        try:
            granted[op] = await b.reserve(plan, op, None)
            return
        except OwnershipConflict:
            return
        except faults.SimulatedCrash:
            await anyio.sleep(rng.choice((0.0, 1.0)))  # the process restarts, tries again
    died.append(op)


@program(
    "PROP-ALC-ONE-OWNER",
    "allocation: reservers racing under CAS (crashing and retrying) never share a node, "
    "and every granted claim owns exactly its nodes",
)
async def one_owner(ctx: Context) -> None:
    rng = ctx.rng
    nodes = [_whole(f"n{i}", rng.randint(1, 2)) for i in range(rng.randint(1, 3))]
    b = MemoryAllocationBackend(nodes, log=ctx.log)
    snap = await b.inventory({})
    assert isinstance(snap, Known), snap
    plans: dict[str, FeasiblePlan] = {}
    for r in range(rng.randint(2, 4)):
        plan = await b.plan([WorkloadRequest(workload_id=f"w{r}", devices=1)], snap.value)
        if isinstance(plan, FeasiblePlan):
            plans[f"op{r}"] = plan
    granted: dict[str, ClaimObservation] = {}
    died: list[str] = []
    async with anyio.create_task_group() as tg:
        for op, plan in plans.items():
            rng_r = random.Random(rng.getrandbits(64))
            tg.start_soon(_reserve, b, plan, op, rng_r, granted, died)
    held: dict[str, str] = {}
    for op, claim in granted.items():
        for node in claim.nodes:
            assert node.node not in held, f"{node.node} held by {held[node.node]} and {op}"
            held[node.node] = op
            assert b.node(node.node).owner == claim.claim_id, f"{op} does not own {node.node}"
    # a reserver that died on every attempt may leave nodes owned by its claim (the state a
    # dead process leaves, for reconcile to clean up); nobody else may own anything
    owners = {c.claim_id for c in granted.values()} | {f"claim-{op}" for op in died}
    for fixture in nodes:
        owner = b.node(fixture.name).owner
        assert owner is None or owner in owners, f"{fixture.name} is owned by {owner}"
    for op, claim in granted.items():
        await b.release(claim.claim_id, f"release-{op}", claim.generation)
        for node in claim.nodes:
            assert b.node(node.node).owner is None, f"{node.node} still owned after release"


# programs register themselves by ID (``program``) and run through the registry: none is
# imported by name, so the module exports nothing
__all__: list[str] = []
