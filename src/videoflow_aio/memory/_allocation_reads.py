"""Reads of the allocation model: listings that can fail, and nodes as a reader sees them.

``fail_reads(kind)`` switches a listing (``nodes``, ``pods``, ``config``) to failing; a read
path then reports it (``Unknown``, ``partial``) and a write path refuses before writing
anything (``BackendUnavailable``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..contracts.allocation import NodeView
from ..contracts.errors import BackendUnavailable, ValidationError
from ..gpu.geometry import family_for
from ._allocation_fixture import NodeFixture

READ_KINDS = ("nodes", "pods", "config")
"""The listings a model control can make fail (``fail_reads(kind, reason)``): nodes, pods,
the MIG config."""
SCOPE_KEYS = frozenset({"nodes", "labels"})


class Reads:
    """Which listings fail now, and why."""

    def __init__(self) -> None:
        self.failing: dict[str, str] = {}

    def fail(self, kind: str, reason: str | None) -> None:
        """Make ``kind`` fail with ``reason`` (None restores it)."""
        if kind not in READ_KINDS:
            raise ValidationError(f"kind must be one of {READ_KINDS}", field="kind", value=kind)
        if reason is None:
            self.failing.pop(kind, None)
        else:
            self.failing[kind] = reason

    def why(self, kind: str) -> str | None:
        """Why reading ``kind`` fails, or None when it works."""
        return self.failing.get(kind)

    def require(self, *kinds: str) -> None:
        """Raise ``BackendUnavailable`` unless every listing in ``kinds`` can be read."""
        for kind in kinds:
            why = self.failing.get(kind)
            if why is not None:
                raise BackendUnavailable(f"{kind} read failed: {why}", backend="memory")


def node_view(node: NodeFixture, pods: bool) -> NodeView:
    """``node`` as read; occupancy (``workloads``, ``used_devices``) only when ``pods``."""
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


def scoped(nodes: Iterable[NodeFixture], scope: Mapping[str, Any]) -> list[NodeFixture]:
    """The nodes an inventory ``scope`` selects (``{}`` all; ``nodes`` names, ``labels``
    equal); ``ValidationError`` for a scope that is not a mapping or has unknown keys."""
    if not isinstance(scope, Mapping):
        raise ValidationError("scope must be a mapping", field="scope", value=scope)
    unknown = set(scope) - SCOPE_KEYS
    if unknown:
        raise ValidationError(
            f"unknown scope keys {sorted(unknown)}", field="scope", value=sorted(unknown)
        )
    names = scope.get("nodes")
    labels: Mapping[str, str] = scope.get("labels") or {}
    return [
        node
        for node in nodes
        if (names is None or node.name in names)
        and all(node.labels.get(k) == v for k, v in labels.items())
    ]


__all__ = ["READ_KINDS", "Reads", "node_view", "scoped"]
