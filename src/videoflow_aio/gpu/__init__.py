"""GPU knowledge every allocation backend shares: labels, MIG tables, planning, placement.

Nothing here touches backend state; every function is pure and synchronous, so the reference
model (``memory.allocation``) and a real backend (a Kubernetes adapter, say) compute the same
answers from the same inputs.

* **Labels** (:mod:`.labels`): :func:`classify_gfd_labels` judges one node from its GPU Feature
  Discovery labels alone — one of :data:`CLASSIFICATIONS`, ``unknown`` whenever the labels do
  not say enough (never a guess); :func:`labelled_geometry` reads the MIG devices they show.
* **MIG tables and the geometry oracle** (:mod:`.geometry`, also the seed's
  ``memory.mig_geometry``): :func:`check_layout` lists *every* problem with placing a layout on
  one card (an empty list: valid), searching legal start positions exhaustively;
  :func:`family_for` / :func:`smallest_profile` resolve products and memory sizes. The oracle
  imports nothing from the planner it audits.
* **The MIG layout planner** (:mod:`.layout`): :func:`plan_card` / :func:`plan_node` return
  layouts that always pass :func:`check_layout`, or a :class:`MigRefusal` whose reason is true
  (exact, or marked :data:`CONSERVATIVE` when the heuristic gave up);
  :func:`profile_for_memory` follows :func:`smallest_profile`'s rule.
* **Placement** (:mod:`.placement`, :mod:`.packing`): :func:`plan_requests` is the planner
  behind the allocation contract's ``plan()`` — every request placed on one node of one
  inventory snapshot, or ``Infeasible`` with the true reason; :func:`check_requests` refuses
  malformed requests with ``ValidationError``; :func:`pack_whole_devices` is the exhaustive
  per-host packing oracle (the seed's ``memory.allocation.pack_whole_devices``).
"""

from __future__ import annotations

from .geometry import Family, Profile, check_layout, families, family_for, smallest_profile
from .labels import CLASSIFICATIONS, classify_gfd_labels, labelled_geometry
from .layout import (
    CONSERVATIVE,
    SEARCH_BUDGET,
    MigRefusal,
    NodeMigPlan,
    plan_card,
    plan_node,
    profile_for_memory,
)
from .packing import pack_whole_devices
from .placement import check_requests, plan_requests

__all__ = [
    "CLASSIFICATIONS",
    "CONSERVATIVE",
    "SEARCH_BUDGET",
    "Family",
    "MigRefusal",
    "NodeMigPlan",
    "Profile",
    "check_layout",
    "check_requests",
    "classify_gfd_labels",
    "families",
    "family_for",
    "labelled_geometry",
    "pack_whole_devices",
    "plan_card",
    "plan_node",
    "plan_requests",
    "profile_for_memory",
    "smallest_profile",
]
