"""The writes of a claim after it owns its nodes: geometry, re-holding, release.

* Geometry: the claim records its intended config entries first, then writes them into the
  shared config (CAS), then points each node at its entry (each a new generation).
* Re-hold (``reconcile(…, 'held')``): retake ownership that was cleared, rewrite geometry that
  failed or drifted.
* Release: unbind the claim's workloads (unless kept), pin geometry still in use, restore
  pointers before dropping the entries they referenced, give ownership back last — so no node
  ever points at a missing entry, and the shared config is never deleted.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..contracts.allocation import NodePlan, ReleaseObservation
from ._allocation_claim import Claim, geometry_state
from ._allocation_cluster import Cluster
from ._allocation_ownership import drop


async def write_geometry(c: Cluster, claim: Claim, nodes: Sequence[NodePlan], by: str) -> None:
    """Write the geometry ``nodes`` change: entries, then pointers (see the module doc)."""
    # the claim records its intent first: if this task dies before the pointers are
    # written, the claim reads "preparing" and reconcile('held') finishes the writes
    for n in nodes:
        claim.entries[n.node] = f"vf-{claim.claim_id}-{n.node}"
    await c.write_config(by, {claim.entries[n.node]: dict(n.mig_layout) for n in nodes})
    for n in nodes:
        claim.geometry[n.node] = c.point(n.node, claim.entries[n.node], dict(n.mig_layout), by)


def bump(c: Cluster, claim: Claim, by: str) -> None:
    """The claim changed: a new generation, audited."""
    claim.generation += 1
    c.mutate("claim.update", claim.claim_id, by, claim.gen)


async def _rehold_node(c: Cluster, claim: Claim, name: str, by: str) -> bool:
    node = c.nodes[name]
    changed = False
    if node.owner is None:
        c.set_owner(name, claim.claim_id, by, by)
        changed = True
    entry = claim.entries.get(name)
    if node.owner != claim.claim_id or entry is None:
        return changed
    state = geometry_state(c, claim, name)
    if state in ("failed", "superseded") or node.mig_config != entry:
        if entry not in c.config:
            await c.write_config(by, {entry: claim.layout_on(name)})
        claim.geometry[name] = c.point(name, entry, dict(c.config[entry]), by)
        changed = True
    return changed


async def hold(c: Cluster, claim: Claim) -> None:
    """Re-assert the claim on every node (see the module doc); a new generation if anything
    changed."""
    by = f"reconcile:{claim.gen}"
    changed = False
    for name in claim.nodes:
        changed = await _rehold_node(c, claim, name, by) or changed
    if changed:
        bump(c, claim, by)


def _unbind(c: Cluster, claim: Claim, by: str) -> None:
    for p in claim.placements:
        workloads = c.nodes[p.node].workloads
        if p.workload_id in workloads:
            del workloads[p.workload_id]
            c.mutate("workload.unbind", p.node, by, p.workload_id)


def _geometry_fates(c: Cluster, claim: Claim) -> tuple[list[str], list[str]]:
    """(nodes whose geometry stays pinned, config entries the release drops)."""
    pinned: list[str] = []
    drop_entries: list[str] = []
    for name in claim.nodes:
        node = c.nodes[name]
        entry = claim.entries.get(name)
        if entry is None:
            continue
        if node.mig_config == entry:
            if node.workloads or node.owner not in (None, claim.claim_id):
                pinned.append(name)
            else:
                drop_entries.append(entry)
        elif entry in c.config:
            drop_entries.append(entry)  # the node moved on; the entry is ours to drop
    return pinned, drop_entries


def _restore_pointers(c: Cluster, claim: Claim, drop_entries: Sequence[str], by: str) -> list[str]:
    restored: list[str] = []
    for name in claim.nodes:
        entry = claim.entries.get(name)
        if entry is not None and entry in drop_entries and c.nodes[name].mig_config == entry:
            c.restore(name, by)
            restored.append(name)
    return restored


async def release(
    c: Cluster, claim: Claim, operation_id: str, keep_workloads: bool
) -> ReleaseObservation:
    """Release the claim (see the module doc); a new generation if anything changed."""
    before = len(c.mutations)
    if not keep_workloads:
        _unbind(c, claim, operation_id)
    held = [p.workload_id for p in claim.placements if p.workload_id in c.nodes[p.node].workloads]
    retained = tuple(sorted(held))
    pinned, drop_entries = _geometry_fates(c, claim)
    # pointers first, then the config entries they referenced, then ownership
    restored = _restore_pointers(c, claim, drop_entries, operation_id)
    tombstoned = c.config_tombstoned
    if drop_entries:
        tombstoned = await c.write_config(operation_id, {}, drop_entries)
    released = [n for n in claim.nodes if drop(c, n, claim.claim_id, operation_id)]
    claim.released = True
    if len(c.mutations) != before:
        bump(c, claim, operation_id)
    return ReleaseObservation(
        claim_id=claim.claim_id,
        operation_id=operation_id,
        generation=claim.gen,
        phase="retained" if retained or pinned else "released",
        released_nodes=tuple(released),
        retained_workloads=retained,
        geometry_pinned=tuple(pinned),
        restored=tuple(restored),
        config_tombstoned=tombstoned,
    )


__all__ = ["bump", "hold", "release", "write_geometry"]
