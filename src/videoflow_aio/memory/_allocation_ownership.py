"""Node ownership of the allocation model: a compare-and-swap on ``resource_version``.

Taking a node is a kubectl ``get`` then ``update``: read the version, owner and occupancy;
judge what was read (barrier ``owner.read.after`` in between); write naming the version read
(barrier ``owner.update.before`` first). A writer that moved the node meanwhile makes the
update lose with ``OwnershipConflict`` — the model's ``409 Conflict``.
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import faults
from ..contracts.allocation import NodePlan, OwnershipConflict, Placement
from ..contracts.errors import NotFound, VideoflowError
from ._allocation_cluster import Cluster
from ._allocation_fixture import NodeFixture
from ._allocation_reads import Reads


def _whole_moved(node: NodeFixture, mine: Sequence[Placement]) -> str | None:
    whole = sum(p.devices for p in mine if p.mig_profile is None)
    if whole and (node.mig_layout or node.gpu_count - node.used_devices < whole):
        return f"{node.name} no longer has {whole} whole devices free"
    return None


def _mig_moved(node: NodeFixture, mine: Sequence[Placement]) -> str | None:
    for p in mine:
        if p.mig_profile is None:
            continue
        want = sum(1 for q in mine if q.mig_profile == p.mig_profile)
        if node.mig_layout.get(p.mig_profile, 0) - node.used_devices < want:
            return f"{node.name} no longer has {want} free {p.mig_profile} instances"
    return None


def still_fits(node: NodeFixture, nplan: NodePlan, placements: Sequence[Placement]) -> str | None:
    """Why ``node`` can no longer take the plan's placements (occupancy moved), or None."""
    if nplan.geometry_change:
        return None if not node.workloads else f"workloads appeared on {node.name}"
    mine = [p for p in placements if p.node == nplan.node]
    return _whole_moved(node, mine) or _mig_moved(node, mine)


def _judge(
    node: NodeFixture, nplan: NodePlan, read: int, owner: str | None, moved: str | None
) -> None:
    """Refuse (``OwnershipConflict``) what the read shows: a moved version, an owner, or
    occupancy that no longer fits."""
    resource = f"node/{node.name}"
    if read != nplan.resource_version:
        raise OwnershipConflict(
            f"node {node.name} changed since the plan's snapshot (resource_version "
            f"{nplan.resource_version} -> {read})",
            resource=resource,
            expected=nplan.resource_version,
            actual=read,
        )
    if owner is not None:
        raise OwnershipConflict(
            f"node {node.name} is owned by {owner}", resource=resource, expected=None, actual=owner
        )
    if moved is not None:
        raise OwnershipConflict(
            f"occupancy changed since the plan's snapshot: {moved}",
            resource=resource,
            expected=nplan.resource_version,
            actual=read,
        )


async def take(
    c: Cluster,
    reads: Reads,
    nplan: NodePlan,
    placements: Sequence[Placement],
    claim_id: str,
    operation_id: str,
) -> None:
    """Read the node, then take ownership for ``claim_id`` with a CAS naming the version read.

    A node already owned by this claim *and this operation* (an earlier attempt that died
    between two node writes) is adopted without writing again.
    """
    reads.require("nodes")
    node = c.nodes.get(nplan.node)
    if node is None:
        raise NotFound(f"no node {nplan.node!r}", kind="node", name=nplan.node)
    # the read: version, owner and (pods) occupancy as they are now; the checks below
    # judge what was read, and the write names the version read (like kubectl get/update)
    read = node.resource_version
    owner_read = node.owner
    if owner_read == claim_id and node.owner_epoch == operation_id:
        return  # taken by an earlier attempt of this operation that died: already ours
    reads.require("pods")
    moved = still_fits(node, nplan, placements)
    await faults.reach(
        "owner.read.after", node=node.name, operation_id=operation_id, resource_version=read
    )
    _judge(node, nplan, read, owner_read, moved)
    await faults.reach(
        "owner.update.before", node=node.name, operation_id=operation_id, resource_version=read
    )

    def own(n: NodeFixture) -> None:
        n.owner = claim_id
        n.owner_epoch = operation_id

    c.cas_node(node, read, operation_id, "node.owner", f"owner={claim_id}", own)


def drop(c: Cluster, name: str, claim_id: str, by: str) -> bool:
    """Give ``name`` back if ``claim_id`` owns it; whether it did."""
    if c.nodes[name].owner != claim_id:
        return False
    c.set_owner(name, None, None, by)
    return True


async def take_all(
    c: Cluster,
    reads: Reads,
    nodes: Sequence[NodePlan],
    placements: Sequence[Placement],
    claim_id: str,
    operation_id: str,
) -> None:
    """Take every node in order; on a refusal (a ``VideoflowError``) give back the ones taken,
    so a failed reserve holds nothing, and re-raise. A crash leaves what it took, as a dead
    process would; the retry of the same operation adopts it."""
    taken: list[str] = []
    try:
        for nplan in nodes:
            await take(c, reads, nplan, placements, claim_id, operation_id)
            taken.append(nplan.node)
    except VideoflowError:
        for name in taken:
            drop(c, name, claim_id, operation_id)
        raise


__all__ = ["drop", "still_fits", "take", "take_all"]
