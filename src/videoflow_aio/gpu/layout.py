"""The MIG layout planner: requests (profile names) -> per-card layouts on one node.

A deliberately simple card model, audited by the independent oracle
``videoflow_aio.gpu.geometry`` (which this module does not import): per card it counts
compute slices, memory slices and per-profile instance caps, and places instances greedily —
largest memory size first (fewer legal starts first on ties), each at the highest free legal
start — instead of searching. Across the cards of a node it packs first-fit decreasing (best
fit by memory slices); when that fails, a bounded exhaustive search over request -> card
assignments (``SEARCH_BUDGET`` steps, symmetric cards and identical requests tried once) decides.

Every layout it returns passes ``check_layout``. Refusals say why, truthfully:

* exact — the oracle rejects every layout or assignment containing the request:
  ``no family for product``, ``unknown profile``, ``negative count``, ``instance cap``,
  ``compute slices exhausted``, ``memory slices exhausted``, ``no card can host`` (every card
  refused with an exact reason), ``cannot pack …: no assignment fits (exhaustive search)``, and
  input errors (``gpu_count``, ``existing``, ``requests``, ``the node has no GPUs``);
* conservative — the heuristic gave up, a search might succeed; the reason then contains
  :data:`CONSERVATIVE` (``may be conservative``): the greedy placement refused on one card, or
  the assignment search ran out of budget. (On the shipped tables the greedy placement is
  exact — checked by exhaustive enumeration in ``tests/gpu/test_mig_planner.py`` — but the code
  does not rely on that.)

Layouts are counts only (mig-parted ``mig-devices``); placements are not part of a layout, and
``existing`` instances are re-placed together with the new ones, as mig-parted does when it
applies a whole config.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import msgspec

__all__ = [
    "CONSERVATIVE",
    "SEARCH_BUDGET",
    "MigRefusal",
    "NodeMigPlan",
    "plan_card",
    "plan_node",
    "profile_for_memory",
    "profile_names",
]

CONSERVATIVE = "may be conservative"
"""Marker in a refusal reason that the planner's heuristic gave up (a search might succeed)."""


class MigRefusal(msgspec.Struct, frozen=True):
    """The planner cannot serve the request; ``reason`` says why (see the module docstring)."""

    reason: str


class NodeMigPlan(msgspec.Struct, frozen=True):
    """Per-card layouts of a node (existing instances included) and, per request in request
    order, the index of the card it was assigned to."""

    layouts: tuple[dict[str, int], ...]
    assignment: tuple[int, ...]


# --------------------------------------------------------------------------------------------
# the planner's own view of the tables (read from the same shipped data file)


class _RawProfile(msgspec.Struct):
    compute_slices: int
    memory_slices: int
    memory_gib: float | None
    max_instances: int
    starts: list[int]


class _RawFamily(msgspec.Struct):
    key: str
    compute_slices: int
    memory_slices: int
    profiles: dict[str, _RawProfile]


class _RawTable(msgspec.Struct):
    families: list[_RawFamily]


@dataclass(frozen=True, slots=True)
class _Shape:
    name: str
    compute: int
    memory: int
    cap: int
    gib: float | None
    masks: tuple[int, ...]  # highest start first: the greedy rule's preference order


@dataclass(frozen=True, slots=True, eq=False)  # identity hash: a cache key
class _Card:
    key: str
    compute: int
    memory: int
    shapes: Mapping[str, _Shape]


_PLAIN = re.compile(r"^\d+g\.\d+gb$")


@lru_cache(maxsize=1)
def _cards() -> tuple[_Card, ...]:
    raw = resources.files(__package__).joinpath("mig_profiles.json").read_bytes()
    table = msgspec.json.decode(raw, type=_RawTable)
    cards = []
    for f in table.families:
        shapes = {
            name: _Shape(
                name,
                p.compute_slices,
                p.memory_slices,
                p.max_instances,
                p.memory_gib,
                tuple(((1 << p.memory_slices) - 1) << s for s in sorted(p.starts, reverse=True)),
            )
            for name, p in f.profiles.items()
        }
        cards.append(_Card(f.key, f.compute_slices, f.memory_slices, shapes))
    # longest key first: the first substring hit is the longest (GB200 before B200, ...)
    return tuple(sorted(cards, key=lambda c: -len(c.key)))


@lru_cache(maxsize=1024)
def _card_for(product: str) -> _Card | None:
    text = re.sub(r"-mig-.*$", "", product.replace(" ", "-").lower())
    for card in _cards():
        if card.key.lower() in text:
            return card
    return None


@lru_cache(maxsize=1)
def profile_names() -> frozenset[str]:
    """Every MIG profile name of every family in the planner's tables."""
    return frozenset(name for card in _cards() for name in card.shapes)


# --------------------------------------------------------------------------------------------
# one card


def _greedy_place(card: _Card, layout: Mapping[str, int]) -> bool:
    order = sorted(
        (card.shapes[n] for n, c in layout.items() for _ in range(c)),
        key=lambda s: (-s.memory, len(s.masks)),
    )
    used = 0
    for shape in order:
        for m in shape.masks:
            if not used & m:
                used |= m
                break
        else:
            return False
    return True


@lru_cache(maxsize=65536)
def _verdict_cached(card: _Card, items: tuple[tuple[str, int], ...]) -> str | None:
    compute = memory = 0
    for name, count in items:
        s = card.shapes[name]
        if count > s.cap:
            return f"instance cap: {count} x {name} on one card, {card.key} allows {s.cap}"
        compute += count * s.compute
        memory += count * s.memory
    if compute > card.compute:
        return f"compute slices exhausted: {compute} needed, {card.key} has {card.compute}"
    if memory > card.memory:
        return f"memory slices exhausted: {memory} needed, {card.key} has {card.memory}"
    if not _greedy_place(card, dict(items)):
        return (
            f"cannot place at legal start positions (greedy placement, {CONSERVATIVE}): "
            + ", ".join(f"{c} x {n}" for n, c in items)
        )
    return None


def _verdict(card: _Card, layout: Mapping[str, int]) -> str | None:
    """None if ``layout`` (known profiles, counts >= 0) fits one card, else the reason."""
    return _verdict_cached(card, tuple(sorted((n, c) for n, c in layout.items() if c)))


def _clean_existing(card: _Card, existing: Mapping[str, int], where: str) -> dict[str, int] | str:
    out: dict[str, int] = {}
    for name, count in existing.items():
        if not isinstance(count, int) or isinstance(count, bool):
            return f"{where}: count for profile {name!r} is not an integer: {count!r}"
        if count < 0:
            return f"{where}: negative count {count} for profile {name!r}"
        if name not in card.shapes:
            return f"{where}: unknown profile {name!r} for {card.key}"
        if count:
            out[name] = count
    return out


def plan_card(
    product: str, profiles: Sequence[str], existing: Mapping[str, int] | None = None
) -> dict[str, int] | MigRefusal:
    """The layout of one card holding ``existing`` plus one instance per name in ``profiles``.

    Returns the combined layout (profile -> count, zero counts dropped) or a refusal.
    """
    card = _card_for(product)
    if card is None:
        return MigRefusal(f"no family for product {product!r}")
    if isinstance(profiles, str):
        return MigRefusal("profiles must be a sequence of profile names, not one string")
    layout = _clean_existing(card, existing or {}, "existing")
    if isinstance(layout, str):
        return MigRefusal(layout)
    for name in profiles:
        if name not in card.shapes:
            return MigRefusal(f"unknown profile {name!r} for {card.key}")
        layout[name] = layout.get(name, 0) + 1
    why = _verdict(card, layout)
    return layout if why is None else MigRefusal(why)


# --------------------------------------------------------------------------------------------
# a node


def plan_node(
    product: str,
    gpu_count: int,
    requests: Sequence[str],
    existing: Sequence[Mapping[str, int]] = (),
) -> NodeMigPlan | MigRefusal:
    """Assign each requested MIG profile to one of the node's ``gpu_count`` cards.

    ``existing`` gives the current layout per card (instances that must stay; missing trailing
    cards are empty). Returns every card's resulting layout and, per request in order, its card
    index — or a refusal whose reason is true (exact, or marked :data:`CONSERVATIVE`).
    """
    card = _card_for(product)
    if card is None:
        return MigRefusal(f"no family for product {product!r}")
    layouts = _node_layouts(card, gpu_count, requests, existing)
    if isinstance(layouts, MigRefusal):
        return layouts
    for name in requests:
        if name not in card.shapes:
            return MigRefusal(f"unknown profile {name!r} for {card.key}")
    if not requests:
        return NodeMigPlan(tuple(layouts), ())
    if gpu_count == 0:
        return MigRefusal(f"the node has no GPUs for {len(requests)} MIG requests")
    return _node_bounds(card, layouts, requests) or _pack(card, layouts, requests)


def _node_layouts(
    card: _Card, gpu_count: int, requests: Sequence[str], existing: Sequence[Mapping[str, int]]
) -> list[dict[str, int]] | MigRefusal:
    """The node's current layout per card (checked), or why the arguments are malformed."""
    if not isinstance(gpu_count, int) or isinstance(gpu_count, bool) or gpu_count < 0:
        return MigRefusal(f"gpu_count must be a non-negative integer, got {gpu_count!r}")
    if isinstance(requests, str) or isinstance(existing, Mapping):
        return MigRefusal("requests and existing must be sequences (of names, of layouts)")
    if len(existing) > gpu_count:
        return MigRefusal(f"existing describes {len(existing)} cards, the node has {gpu_count}")
    layouts: list[dict[str, int]] = []
    for i, layout in enumerate(existing):
        empty = type(layout) is dict and not layout  # the common case, answered without a call
        cleaned = {} if empty else _existing_card(card, i, layout)
        if isinstance(cleaned, MigRefusal):
            return cleaned
        layouts.append(cleaned)
    return layouts + [{} for _ in range(gpu_count - len(existing))]


def _existing_card(card: _Card, i: int, layout: object) -> dict[str, int] | MigRefusal:
    """Card ``i``'s existing layout, checked: a mapping of known profiles to counts >= 0 that
    fits the card."""
    if not isinstance(layout, Mapping):
        return MigRefusal(f"existing card {i}: not a layout: {layout!r}")
    cleaned = _clean_existing(card, layout, f"existing card {i}")
    if isinstance(cleaned, str):
        return MigRefusal(cleaned)
    why = _verdict(card, cleaned) if cleaned else None
    if why is not None:
        return MigRefusal(f"existing card {i} is not a valid layout: {why}")
    return cleaned


def _node_bounds(
    card: _Card, layouts: Sequence[Mapping[str, int]], requests: Sequence[str]
) -> MigRefusal | None:
    """Exact node-wide bounds: per-profile caps, compute and memory summed over all cards."""
    gpu_count = len(layouts)
    totals: dict[str, int] = {}
    for layout in layouts:
        for name, count in layout.items():
            totals[name] = totals.get(name, 0) + count
    for name in requests:
        totals[name] = totals.get(name, 0) + 1
    compute = memory = 0
    for name, count in totals.items():
        s = card.shapes[name]
        if count > s.cap * gpu_count:
            return MigRefusal(
                f"instance cap: {count} x {name} on {gpu_count} cards, "
                f"{card.key} allows {s.cap} per card"
            )
        compute += count * s.compute
        memory += count * s.memory
    if compute > card.compute * gpu_count:
        return MigRefusal(
            f"compute slices exhausted: {compute} needed, {gpu_count} x {card.key} "
            f"have {card.compute * gpu_count}"
        )
    if memory > card.memory * gpu_count:
        return MigRefusal(
            f"memory slices exhausted: {memory} needed, {gpu_count} x {card.key} "
            f"have {card.memory * gpu_count}"
        )
    return None


def _pack(
    card: _Card, layouts: list[dict[str, int]], requests: Sequence[str]
) -> NodeMigPlan | MigRefusal:
    """First fit decreasing; when it fails and some card could take the failing request
    alone, first fit again with the scarcest profiles first; then the bounded search."""
    # identical requests adjacent (the search relies on it), largest first
    shapes = card.shapes
    by_size = sorted(
        range(len(requests)),
        key=lambda i: (-shapes[requests[i]].memory, -shapes[requests[i]].compute, requests[i], i),
    )
    packed = _first_fit(card, [dict(lay) for lay in layouts], requests, by_size)
    if isinstance(packed, NodeMigPlan):
        return packed
    alone = [_verdict(card, _plus(lay, packed)) for lay in layouts]
    if all(r is not None and CONSERVATIVE not in r for r in alone):
        why = "; ".join(f"card {i}: {r}" for i, r in enumerate(alone))
        return MigRefusal(f"no card can host {packed}: {why}")
    # the scarcest first (lowest per-card cap: +me variants, 4g, 7g), then by size
    by_cap = sorted(by_size, key=lambda i: shapes[requests[i]].cap)
    packed = _first_fit(card, [dict(lay) for lay in layouts], requests, by_cap)
    if isinstance(packed, NodeMigPlan):
        return packed
    return _search(card, layouts, requests, by_cap)


def _used(card: _Card, layouts: Sequence[Mapping[str, int]]) -> tuple[list[int], list[int]]:
    shapes = card.shapes
    compute = [sum(shapes[n].compute * c for n, c in lay.items()) for lay in layouts]
    memory = [sum(shapes[n].memory * c for n, c in lay.items()) for lay in layouts]
    return compute, memory


def _first_fit(
    card: _Card, layouts: list[dict[str, int]], requests: Sequence[str], order: Sequence[int]
) -> NodeMigPlan | str:
    """First-fit decreasing, best fit: each request goes to the fullest card (memory slices)
    that still takes it; counts are checked arithmetically, the greedy placement only for the
    chosen card. Returns the plan, or the name of the first request that found no card."""
    compute_used, memory_used = _used(card, layouts)
    cards = range(len(layouts))
    assignment = [0] * len(requests)
    for i in order:
        name = requests[i]
        s = card.shapes[name]
        fits = [
            c
            for c in cards
            if layouts[c].get(name, 0) < s.cap
            and compute_used[c] + s.compute <= card.compute
            and memory_used[c] + s.memory <= card.memory
        ]
        chosen = _fullest_fit(card, layouts, name, fits, memory_used)
        if chosen < 0:
            return name
        layouts[chosen][name] = layouts[chosen].get(name, 0) + 1
        compute_used[chosen] += s.compute
        memory_used[chosen] += s.memory
        assignment[i] = chosen
    return NodeMigPlan(tuple(layouts), tuple(assignment))


def _fullest_fit(
    card: _Card, layouts: Sequence[Mapping[str, int]], name: str, fits: list[int], used: list[int]
) -> int:
    """Of the cards in ``fits`` (counts checked), the fullest by memory slices ``used`` whose
    greedy placement takes one more ``name`` (lowest index on ties); -1 if none."""
    while fits:
        best = fits[0]
        for c in fits:
            if used[c] > used[best]:
                best = c
        if _verdict(card, _plus(layouts[best], name)) is None:
            return best
        fits.remove(best)
    return -1


SEARCH_BUDGET = 2_000
"""Assignment steps the fallback search may take before it gives up (conservatively)."""


class _OutOfBudget(Exception):
    pass


def _search(
    card: _Card, layouts: list[dict[str, int]], requests: Sequence[str], order: Sequence[int]
) -> NodeMigPlan | MigRefusal:
    """Exhaustive search over request -> card assignments, after first fit failed.

    Cards with identical layouts are tried once per step and identical requests take
    non-decreasing card indices, so no assignment is visited twice up to symmetry. Count
    checks are exact; if the greedy placement never refused and the budget held, an empty
    search proves the node cannot take the requests.
    """
    shapes = card.shapes
    lays = [dict(lay) for lay in layouts]
    compute_used, memory_used = _used(card, lays)
    assignment = [0] * len(requests)
    steps = 0
    placement_refused = False
    n = len(order)
    # what the requests from position k on still need: slices, and instances per name
    need_compute = [0] * (n + 1)
    need_memory = [0] * (n + 1)
    need_names: list[tuple[tuple[_Shape, int], ...]] = [()] * (n + 1)
    counts: dict[str, int] = {}
    for k in range(n - 1, -1, -1):
        s = shapes[requests[order[k]]]
        need_compute[k] = need_compute[k + 1] + s.compute
        need_memory[k] = need_memory[k + 1] + s.memory
        counts[s.name] = counts.get(s.name, 0) + 1
        need_names[k] = tuple((shapes[name], c) for name, c in counts.items())
    total_compute = card.compute * len(lays)
    total_memory = card.memory * len(lays)

    def go(k: int, first: int) -> bool:
        nonlocal steps, placement_refused
        if k == n:
            return True
        steps += 1
        if steps > SEARCH_BUDGET:
            raise _OutOfBudget
        # exact bounds: the rest must fit the node's free slices and every name's free caps
        if need_compute[k] > total_compute - sum(compute_used):
            return False
        if need_memory[k] > total_memory - sum(memory_used):
            return False
        for shape, count in need_names[k]:
            if count > sum(max(0, shape.cap - lay.get(shape.name, 0)) for lay in lays):
                return False
        i = order[k]
        name = requests[i]
        s = shapes[name]
        start = first if k > 0 and requests[order[k - 1]] == name else 0
        tried: set[tuple[tuple[str, int], ...]] = set()
        for c in range(start, len(lays)):
            lay = lays[c]
            if (
                lay.get(name, 0) >= s.cap
                or compute_used[c] + s.compute > card.compute
                or memory_used[c] + s.memory > card.memory
            ):
                continue
            state = tuple(sorted(lay.items()))
            if state in tried:
                continue
            tried.add(state)
            if _verdict(card, _plus(lay, name)) is not None:
                placement_refused = True  # counts passed: only the greedy placement refused
                continue
            lay[name] = lay.get(name, 0) + 1
            compute_used[c] += s.compute
            memory_used[c] += s.memory
            assignment[i] = c
            if go(k + 1, c):
                return True
            lay[name] -= 1
            if not lay[name]:
                del lay[name]
            compute_used[c] -= s.compute
            memory_used[c] -= s.memory
        return False

    head = f"cannot pack {len(requests)} requests onto {len(lays)} x {card.key}"
    try:
        if go(0, 0):
            return NodeMigPlan(tuple(lays), tuple(assignment))
    except _OutOfBudget:
        return MigRefusal(f"{head} (search budget of {SEARCH_BUDGET} steps spent, {CONSERVATIVE})")
    if placement_refused:
        return MigRefusal(f"{head} (exhaustive search, greedy placement, {CONSERVATIVE})")
    return MigRefusal(f"{head}: no assignment fits (exhaustive search)")


def _plus(layout: Mapping[str, int], name: str) -> dict[str, int]:
    out = dict(layout)
    out[name] = out.get(name, 0) + 1
    return out


# --------------------------------------------------------------------------------------------
# memory -> profile


def _smallest_shape(card: _Card, memory_gib: float) -> _Shape | None:
    best: _Shape | None = None
    best_rank: tuple[float, int, int, bool, str] | None = None
    for s in card.shapes.values():
        if s.gib is None or s.gib < memory_gib:
            continue
        rank = (s.gib, s.memory, s.compute, not _PLAIN.match(s.name), s.name)
        if best_rank is None or rank < best_rank:
            best, best_rank = s, rank
    return best


def profile_for_memory(product: str, memory_gib: float) -> str | MigRefusal:
    """The name of the smallest profile with at least ``memory_gib`` GiB of known memory.

    Same rule as the oracle's ``smallest_profile``: compared with the ``-lgip`` memory, unknown
    memory never qualifies; ties go to fewer memory slices, fewer compute slices, a plain
    profile before a variant, then the name.
    """
    card = _card_for(product)
    if card is None:
        return MigRefusal(f"no family for product {product!r}")
    number = isinstance(memory_gib, int | float) and not isinstance(memory_gib, bool)
    if not number or not 0 <= memory_gib <= sys.float_info.max:  # nan, inf, 10**400
        return MigRefusal(f"memory_gib must be a finite, non-negative number, got {memory_gib!r}")
    best = _smallest_shape(card, memory_gib)
    if best is not None:
        return best.name
    unknown = sorted(s.name for s in card.shapes.values() if s.gib is None)
    tail = f" (memory unknown for {', '.join(unknown)})" if unknown else ""
    return MigRefusal(f"no profile of {card.key} has at least {memory_gib} GiB known memory{tail}")
