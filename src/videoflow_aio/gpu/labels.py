"""Reading GPU nodes off Kubernetes labels (GPU Feature Discovery, GPU Operator, mig-manager).

:func:`classify_gfd_labels` judges one node from its labels alone. The rules follow
``data/gfd_labels.md`` §7 (the classifier cheat-sheet); the model's ``NodeFixture`` uses the
same function, so a fixture and a real node with the same labels are judged identically.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

WHOLE_GPU = "whole-gpu"
"""Whole GPUs are advertised (MIG disabled or absent); ``gpu.count`` GPUs are usable."""
MIG_SINGLE = "mig-single"
"""MIG ``single`` strategy: ``gpu.product`` ends in ``-MIG-<profile>``, ``gpu.count`` devices."""
MIG_MIXED = "mig-mixed"
"""MIG ``mixed`` strategy: ``nvidia.com/mig-<profile>.count`` labels give the geometry."""
RECONFIGURING = "reconfiguring"
"""The manager is (or may be) changing geometry: state ``pending``/``rebooting``, a
``gpu.deploy.*=paused-for-mig-change`` label, or a MIG config requested whose geometry GFD
does not show yet. Do not read geometry from GFD labels now."""
INVALID = "invalid"
"""The node is unusable as labelled: ``-MIG-INVALID`` product, a MIG single node with no
devices, or ``mig.config.state=failed`` (the geometry left on the GPU is then unknown)."""
UNKNOWN = "unknown"
"""Not enough to judge: not a GPU node, or labels with values this reader does not know."""

CLASSIFICATIONS = (WHOLE_GPU, MIG_SINGLE, MIG_MIXED, RECONFIGURING, INVALID, UNKNOWN)
"""Every answer :func:`classify_gfd_labels` can give, in order."""

PREFIX = "nvidia.com/"
PRODUCT = "nvidia.com/gpu.product"
COUNT = "nvidia.com/gpu.count"
PRESENT = "nvidia.com/gpu.present"
STRATEGY = "nvidia.com/mig.strategy"
MIG_CONFIG = "nvidia.com/mig.config"
MIG_STATE = "nvidia.com/mig.config.state"
PAUSED = "paused-for-mig-change"
MIG_STATES = ("pending", "rebooting", "success", "failed")
_MIXED_COUNT = re.compile(r"^nvidia\.com/mig-(.+)\.count$")
_SINGLE_SUFFIX = re.compile(r"-MIG-(.+)$", re.IGNORECASE)
_BASE_PROFILE = re.compile(r"^(\d+g\.\d+gb)\.(.+)$")


def _count(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        n = int(value)
    except ValueError:
        return None
    return n if n >= 0 else None


def mixed_geometry(labels: Mapping[str, str]) -> dict[str, int] | None:
    """``{label-profile: count}`` from ``nvidia.com/mig-<profile>.count`` labels (counts > 0);
    None when a count is not a non-negative integer. Profile names are as labelled
    (``+`` written as ``.``)."""
    found: dict[str, int] = {}
    for key, value in labels.items():
        m = _MIXED_COUNT.match(key)
        if m is None:
            continue
        n = _count(value)
        if n is None:
            return None
        if n > 0:
            found[m.group(1)] = n
    return found


def profile_label(profile: str) -> str:
    """The label/resource spelling of a MIG profile (``+`` becomes ``.``)."""
    return profile.replace("+", ".")


def profile_from_label(name: str) -> str:
    """Undo GFD's ``+`` → ``.`` spelling: ``1g.10gb.me`` → ``1g.10gb+me``."""
    m = _BASE_PROFILE.match(name)
    return f"{m.group(1)}+{m.group(2)}" if m else name


def labelled_geometry(labels: Mapping[str, str]) -> dict[str, int]:
    """MIG devices shown by GFD labels (``single`` or ``mixed``), profile → count."""
    product = labels.get(PRODUCT, "")
    m = _SINGLE_SUFFIX.search(product)
    if m and m.group(1).upper() != "INVALID":
        try:
            count = int(labels.get(COUNT, "0"))
        except ValueError:
            count = 0
        return {m.group(1): count} if count > 0 else {}
    mixed = mixed_geometry(labels) or {}
    return {profile_from_label(p): c for p, c in mixed.items()}


def classify_gfd_labels(labels: Mapping[str, str]) -> str:
    """One of :data:`CLASSIFICATIONS` for a node's labels.

    Order of the rules (first match wins): not a GPU node or unreadable count → ``unknown``;
    state ``failed`` → ``invalid``; state ``pending``/``rebooting`` or a paused deploy label →
    ``reconfiguring``; an unknown state value → ``unknown``; ``-MIG-INVALID`` → ``invalid``;
    ``-MIG-<profile>`` product → ``mig-single`` (``invalid`` with no devices, ``unknown`` if
    the strategy label says otherwise); ``mig-<profile>.count`` labels → ``mig-mixed``; a MIG
    config other than ``all-disabled`` with no geometry visible → ``reconfiguring``;
    otherwise ``whole-gpu``.
    """
    product = labels.get(PRODUCT)
    raw_count = labels.get(COUNT)
    if product is None and raw_count is None and labels.get(PRESENT) != "true":
        return UNKNOWN
    count = _count(raw_count)
    if raw_count is not None and count is None:
        return UNKNOWN
    by_state = _by_state(labels)
    if by_state is not None:
        return by_state
    strategy = labels.get(STRATEGY)
    if strategy not in (None, "single", "mixed"):
        return UNKNOWN
    return _by_geometry(labels, (product or "").upper(), strategy, count)


def _by_state(labels: Mapping[str, str]) -> str | None:
    """The manager's state rules: failed, changing, or a state this reader does not know."""
    state = labels.get(MIG_STATE)
    if state == "failed":
        return INVALID
    paused = any(k.startswith("nvidia.com/gpu.deploy.") and v == PAUSED for k, v in labels.items())
    if state in ("pending", "rebooting") or paused:
        return RECONFIGURING
    if state is not None and state != "success":
        return UNKNOWN
    return None


def _by_geometry(
    labels: Mapping[str, str], product: str, strategy: str | None, count: int | None
) -> str:
    """The geometry rules, once the state is settled: single, mixed, asked for, or none."""
    if product.endswith("-MIG-INVALID"):
        return INVALID
    if "-MIG-" in product:
        if strategy != "single":
            return UNKNOWN
        return INVALID if not count else MIG_SINGLE
    geometry = mixed_geometry(labels)
    if geometry is None:
        return UNKNOWN
    if geometry:
        return MIG_MIXED if strategy in (None, "mixed") else UNKNOWN
    if labels.get(MIG_CONFIG) not in (None, "", "all-disabled"):
        return RECONFIGURING
    return UNKNOWN if count is None else WHOLE_GPU


__all__ = [
    "CLASSIFICATIONS",
    "INVALID",
    "MIG_MIXED",
    "MIG_SINGLE",
    "RECONFIGURING",
    "UNKNOWN",
    "WHOLE_GPU",
    "classify_gfd_labels",
    "labelled_geometry",
    "mixed_geometry",
    "profile_from_label",
    "profile_label",
]
