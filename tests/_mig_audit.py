"""Audit the MIG planner (``gpu/layout.py``) against the oracle (``gpu/geometry.py``).

Used by ``tests/gpu/test_gpu_mig_cases.py`` (the MIG-… cases) and ``tests/gpu/test_mig_planner.py``.
An audit returns the list of planner bugs it found (empty: consistent) and whether the planner
refused conservatively although the oracle found a way (allowed only when the reason says
``may be conservative``).

Exact refusal categories and the oracle problem (or computation) that must confirm them:

========================================  ===================================================
planner reason starts with / contains     confirmed when
========================================  ===================================================
``no family for product``                 ``family_for(product)`` is None
``unknown profile``                       the oracle reports an unknown profile
``negative count`` / ``count for``        the oracle reports the bad count
``instance cap``                          the oracle reports a cap (card), or the summed count
                                          exceeds ``max_instances * gpu_count`` (node)
``compute slices exhausted``              compute over capacity (card or summed over the node)
``memory slices exhausted``               memory over capacity (card or summed over the node)
``no card can host P``                    every card's layout plus one ``P`` is rejected
``cannot pack …: no assignment fits``     (the exhaustive search below finds no assignment)
``cannot place at legal start positions`` the oracle reports the placement problem
========================================  ===================================================

Besides its category, every exact refusal must be infeasible for the oracle: no assignment of
the requests to the cards (exhaustive search) gives layouts that all pass ``check_layout``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from videoflow_aio.gpu.geometry import Family, check_layout, family_for
from videoflow_aio.gpu.layout import CONSERVATIVE, MigRefusal, NodeMigPlan

# mig-parted ``all-balanced`` per family (pkg/mig/builder/balanced.go, config-default.yaml):
# 2 x 1g + 1 x 2g + 1 x 3g on 7-slice parts, 2 x 1g + 1 x 2g on 4-slice parts, with the
# one-memory-slice 1g profile of each family.
ALL_BALANCED: dict[str, dict[str, int]] = {
    "A100-SXM4-40GB": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
    "A100-PCIE-40GB": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
    "A100-SXM4-80GB": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    "A100-80GB-PCIe": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    "A100-PCIE-80GB": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    "A30": {"1g.6gb": 2, "2g.12gb": 1},
    "H100-80GB-HBM3": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    "H100-SXM5-80GB": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    "H100-PCIe": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    "H100-NVL": {"1g.12gb": 2, "2g.24gb": 1, "3g.47gb": 1},
    "GH200-480GB": {"1g.12gb": 2, "2g.24gb": 1, "3g.48gb": 1},
    "GH200-144G-HBM3e": {"1g.18gb": 2, "2g.36gb": 1, "3g.72gb": 1},
    "H200": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
    "GB200": {"1g.23gb": 2, "2g.47gb": 1, "3g.93gb": 1},
    "B200": {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1},
    "RTX-PRO-6000-Blackwell": {"1g.24gb": 2, "2g.48gb": 1},
}

_CARD_CATEGORIES: tuple[tuple[str, str], ...] = (
    ("unknown profile", "unknown profile"),
    ("negative count", "negative count"),
    ("count for profile", "count for profile"),
    ("instance cap", "instance cap exceeded"),
    ("compute slices exhausted", "compute over capacity"),
    ("memory slices exhausted", "memory over capacity"),
    ("cannot place at legal start positions", "cannot place at legal"),
)


_MALFORMED = ("negative count", "count for profile", "unknown profile", "unknown product")


def combine(existing: Mapping[str, int], names: Sequence[str]) -> dict[str, int]:
    """``existing`` plus one instance per name (zero counts dropped)."""
    out = {n: c for n, c in existing.items() if c}
    for n in names:
        out[n] = out.get(n, 0) + 1
    return out


def _body(reason: str) -> str:
    """The reason without the planner's location prefixes (``existing card 1: ...``)."""
    for marker in ("is not a valid layout: ", "existing: "):
        if marker in reason:
            reason = reason.split(marker, 1)[1]
    if reason.startswith("existing card ") and ": " in reason:
        reason = reason.split(": ", 1)[1]
    return reason


def _card_category_confirmed(reason: str, problems: Sequence[str]) -> bool:
    body = _body(reason)
    for planner, oracle in _CARD_CATEGORIES:
        if body.startswith(planner):
            return any(p.startswith(oracle) for p in problems)
    return False


def audit_card(
    product: str,
    profiles: Sequence[str],
    existing: Mapping[str, int] | None,
    result: dict[str, int] | MigRefusal,
) -> tuple[list[str], bool]:
    """Check one ``plan_card`` answer. Returns (bugs, conservative_refusal_of_a_valid_layout)."""
    malformed = [
        p for p in (check_layout(product, existing) if existing else []) if p.startswith(_MALFORMED)
    ]
    combined = combine(existing or {}, profiles)
    problems = malformed or check_layout(product, combined)
    if not isinstance(result, MigRefusal):
        bugs = []
        if result != combined:
            bugs.append(f"planner returned {result}, the request combines to {combined}")
        bad = check_layout(product, result)
        if bad:
            bugs.append(f"oracle rejects planner layout {result}: {bad}")
        return bugs, False
    reason = result.reason
    if reason.startswith("no family for product"):
        ok = family_for(product) is None
        return ([] if ok else [f"refused {reason!r} but the oracle knows {product!r}"]), False
    if CONSERVATIVE in reason:
        return [], not problems
    if not problems:
        return [f"exact refusal {reason!r} but the oracle accepts {combined}"], False
    if not _card_category_confirmed(reason, problems):
        return [f"refusal {reason!r} not confirmed by oracle problems {problems}"], False
    return [], False


def node_feasible(
    product: str, gpu_count: int, requests: Sequence[str], existing: Sequence[Mapping[str, int]]
) -> bool:
    """Exhaustive: can the requests be assigned to cards so every card passes the oracle?"""
    if isinstance(requests, str) or isinstance(existing, Mapping):
        return False  # malformed arguments: no plan is valid
    if gpu_count < 0 or len(existing) > gpu_count:
        return False  # malformed node: no plan is valid
    if not all(isinstance(e, Mapping) for e in existing):
        return False
    cards = [dict(existing[i]) if i < len(existing) else {} for i in range(gpu_count)]
    if any(check_layout(product, c) for c in cards):
        return False
    order = sorted(requests)  # identical requests next to each other

    def go(i: int, first: int) -> bool:
        if i == len(order):
            return True
        seen: set[tuple[tuple[str, int], ...]] = set()
        # identical consecutive requests take non-decreasing card indices (no permutations)
        start = first if i > 0 and order[i] == order[i - 1] else 0
        for c in range(start, gpu_count):
            key = tuple(sorted(cards[c].items()))
            if key in seen:  # an identical card was already tried
                continue
            seen.add(key)
            cards[c][order[i]] = cards[c].get(order[i], 0) + 1
            if not check_layout(product, cards[c]) and go(i + 1, c):
                return True
            cards[c][order[i]] -= 1
            if not cards[c][order[i]]:
                del cards[c][order[i]]
        return False

    return go(0, 0)


def _node_total_confirmed(
    fam: Family, reason: str, gpu_count: int, totals: Mapping[str, int]
) -> bool:
    if reason.startswith("instance cap"):
        return any(
            n in fam.profiles and c > fam.profiles[n].max_instances * gpu_count
            for n, c in totals.items()
        )
    known = [(fam.profiles[n], c) for n, c in totals.items() if n in fam.profiles]
    if reason.startswith("compute slices exhausted"):
        return sum(p.compute_slices * c for p, c in known) > fam.compute_slices * gpu_count
    if reason.startswith("memory slices exhausted"):
        return sum(p.memory_slices * c for p, c in known) > fam.memory_slices * gpu_count
    return False


def audit_node(
    product: str,
    gpu_count: int,
    requests: Sequence[str],
    existing: Sequence[Mapping[str, int]],
    result: NodeMigPlan | MigRefusal,
) -> tuple[list[str], bool]:
    """Check one ``plan_node`` answer. Returns (bugs, conservative_refusal_of_a_feasible_node)."""
    fam = family_for(product)
    if isinstance(result, NodeMigPlan):
        return _audit_plan(product, gpu_count, requests, existing, result), False
    reason = result.reason
    if reason.startswith("no family for product"):
        ok = fam is None
        return ([] if ok else [f"refused {reason!r} but the oracle knows {product!r}"]), False
    if fam is None:
        return [f"oracle knows no family for {product!r}, planner said {reason!r}"], False
    feasible = node_feasible(product, gpu_count, requests, existing)
    if CONSERVATIVE in reason:
        return [], feasible
    if feasible:
        return [f"exact refusal {reason!r} but the oracle finds an assignment"], False
    return _confirm_node_reason(fam, product, gpu_count, requests, existing, reason), False


def _confirm_node_reason(
    fam: Family,
    product: str,
    gpu_count: int,
    requests: Sequence[str],
    existing: Sequence[Mapping[str, int]],
    reason: str,
) -> list[str]:
    if reason.startswith("unknown profile"):
        ok = any(n not in fam.profiles for n in requests)
    elif reason.startswith("gpu_count"):
        ok = gpu_count < 0
    elif reason.startswith("existing describes"):
        ok = len(existing) > gpu_count
    elif reason.startswith("the node has no GPUs"):
        ok = gpu_count == 0 and bool(requests)
    elif reason.startswith("requests and existing must be sequences"):
        ok = isinstance(requests, str) or isinstance(existing, Mapping)
    elif reason.startswith("existing card ") and ": not a layout" in reason:
        ok = not isinstance(existing[int(reason.split()[2].rstrip(":"))], Mapping)
    elif reason.startswith("existing card "):
        index = int(reason.split()[2].rstrip(":"))
        ok = _card_category_confirmed(reason, check_layout(product, existing[index]))
    elif reason.startswith("cannot pack "):
        ok = reason.endswith(": no assignment fits (exhaustive search)")  # infeasible: checked
    elif reason.startswith("no card can host "):
        name = reason.split()[4].rstrip(":")
        cards = [existing[i] if i < len(existing) else {} for i in range(gpu_count)]
        ok = all(check_layout(product, combine(c, [name])) for c in cards)
    else:
        totals: Counter[str] = Counter()
        for layout in existing:
            totals.update(layout)  # adds the counts
        totals.update(requests)  # one per request
        ok = _node_total_confirmed(fam, reason, gpu_count, totals)
    return [] if ok else [f"refusal {reason!r} not confirmed by the oracle"]


def _audit_plan(
    product: str,
    gpu_count: int,
    requests: Sequence[str],
    existing: Sequence[Mapping[str, int]],
    plan: NodeMigPlan,
) -> list[str]:
    bugs: list[str] = []
    if len(plan.layouts) != gpu_count:
        bugs.append(f"{len(plan.layouts)} layouts for {gpu_count} cards")
    if len(plan.assignment) != len(requests):
        bugs.append(f"{len(plan.assignment)} assignments for {len(requests)} requests")
        return bugs
    for c, layout in enumerate(plan.layouts):
        mine = [requests[i] for i, a in enumerate(plan.assignment) if a == c]
        expected = combine(existing[c] if c < len(existing) else {}, mine)
        if layout != expected:
            bugs.append(f"card {c}: layout {layout} != existing plus assigned {expected}")
        bad = check_layout(product, layout)
        if bad:
            bugs.append(f"card {c}: oracle rejects planner layout {layout}: {bad}")
    if any(not 0 <= a < gpu_count for a in plan.assignment):
        bugs.append(f"assignment {plan.assignment} names a card outside 0..{gpu_count - 1}")
    return bugs
