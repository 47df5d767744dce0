"""Deployment-side logic: GPU Feature Discovery label classification and the MIG planner.

The planner is deliberately simple; ``memory.mig_geometry`` audits it and shares nothing with it.
"""

from __future__ import annotations

from .cluster import classify_gfd_labels
from .mig import MigRefusal, NodeMigPlan, plan_card, plan_node, profile_for_memory

__all__ = [
    "MigRefusal",
    "NodeMigPlan",
    "classify_gfd_labels",
    "plan_card",
    "plan_node",
    "profile_for_memory",
]
