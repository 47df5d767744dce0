"""An independent MIG geometry oracle (the seed's ``memory.mig_geometry``, re-exported there).

``videoflow_aio.gpu.layout`` plans layouts with a deliberately simplified card model. This
module is the independent check a plan is evaluated against: memory slices are counted
separately from compute slices, and every profile carries the start positions the hardware
allows, so a layout that fits by compute-slice count but cannot be placed is rejected here,
and a layout the planner rejects for the wrong reason is caught as well.

The tables are the copy of ``mig_profiles.json`` shipped beside this module (sources, known
conflicts and the meaning of ``null`` in ``docs/mig.md``). A family's ``key`` is a substring of
the GFD ``nvidia.com/gpu.product`` label; the longest matching key wins. A profile's
``memory_gib`` may be ``None``: no source was found, which means *unknown*, never zero.

Keep this file boring: no imports from the planner (``gpu.layout``, ``gpu.placement``) or
anywhere else in the package, nothing shared with the planner it audits (both read the same
data file, each with its own code).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache, lru_cache
from importlib import resources
from types import MappingProxyType
from typing import Any

__all__ = [
    "Family",
    "Profile",
    "check_layout",
    "families",
    "family_for",
    "smallest_profile",
]

_DATA_FILE = "mig_profiles.json"
_PLAIN_PROFILE = re.compile(r"^\d+g\.\d+gb$")  # no media/graphics variant suffix
_MIG_SUFFIX = re.compile(r"-MIG-.*$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Profile:
    """One MIG profile of a family: its slices, memory, per-card cap and legal starts.

    ``memory_slices`` is the placement size; an instance started at ``s`` occupies memory
    slices ``[s, s + memory_slices)``. ``memory_gib`` is the ``nvidia-smi mig -lgip`` value
    (driver dependent), or ``None`` when unknown.
    """

    name: str
    compute_slices: int
    memory_slices: int
    memory_gib: float | None
    max_instances: int
    starts: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Family:
    """A GPU family: its card's compute and memory slices, nominal memory and profiles."""

    key: str
    compute_slices: int
    memory_slices: int
    memory_gib: float
    profiles: Mapping[str, Profile] = field(hash=False)


# --------------------------------------------------------------------------------------------
# loading


def _int(raw: Mapping[str, Any], name: str, where: str) -> int:
    value = raw[name]
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{where}: {name} must be a non-negative integer, got {value!r}")
    return value


def _profile(name: str, raw: Mapping[str, Any], card_memory_slices: int, where: str) -> Profile:
    memory = raw["memory_gib"]
    if memory is not None and not isinstance(memory, int | float):
        raise ValueError(f"{where}: memory_gib must be a number or null")
    starts = tuple(int(s) for s in raw["starts"])
    size = _int(raw, "memory_slices", where)
    if size < 1 or not starts or any(s < 0 or s + size > card_memory_slices for s in starts):
        raise ValueError(f"{where}: starts {starts} of size {size} leave the card")
    return Profile(
        name=name,
        compute_slices=_int(raw, "compute_slices", where),
        memory_slices=size,
        memory_gib=None if memory is None else float(memory),
        max_instances=_int(raw, "max_instances", where),
        starts=starts,
    )


def _family(raw: Mapping[str, Any]) -> Family:
    key = str(raw["key"])
    memory_slices = _int(raw, "memory_slices", key)
    profiles = {
        name: _profile(name, p, memory_slices, f"{key}/{name}")
        for name, p in raw["profiles"].items()
    }
    return Family(
        key=key,
        compute_slices=_int(raw, "compute_slices", key),
        memory_slices=memory_slices,
        memory_gib=float(raw["memory_gib"]),
        profiles=MappingProxyType(profiles),
    )


@lru_cache(maxsize=1)
def families() -> tuple[Family, ...]:
    """Every family in the shipped table, in file order (validated on first use)."""
    text = resources.files(__package__).joinpath(_DATA_FILE).read_text(encoding="utf-8")
    data = json.loads(text)
    loaded = tuple(_family(f) for f in data["families"])
    keys = [f.key.casefold() for f in loaded]
    if len(set(keys)) != len(keys):
        raise ValueError("duplicate family key in mig_profiles.json")
    return loaded


# --------------------------------------------------------------------------------------------
# product -> family


@lru_cache(maxsize=4096)
def family_for(product: str) -> Family | None:
    """The family whose key is the longest substring of ``product``, or None.

    ``product`` is a GFD ``nvidia.com/gpu.product`` value or an NVML name: the ``NVIDIA-``
    prefix is optional, spaces count as ``-``, case is ignored, and a ``-MIG-<profile>``
    suffix (MIG ``single`` strategy) is dropped before matching. Longest key first is what
    tells ``GB200`` from ``B200`` and ``GH200-*`` from ``H200``; equal lengths keep file order.
    """
    text = _MIG_SUFFIX.sub("", product.replace(" ", "-")).casefold()
    best: Family | None = None
    for fam in families():
        if fam.key.casefold() in text and (best is None or len(fam.key) > len(best.key)):
            best = fam
    return best


# --------------------------------------------------------------------------------------------
# layouts


@cache
def _masks(family: Family, name: str) -> tuple[int, ...]:
    """Bit masks of the memory slices one instance of ``name`` covers at each legal start."""
    p = family.profiles[name]
    run = (1 << p.memory_slices) - 1
    return tuple(run << s for s in p.starts)


def _placeable(family: Family, items: list[tuple[Profile, int]]) -> bool:
    """Whether the instances fit at legal, pairwise non-overlapping starts (exhaustive)."""
    groups = sorted(items, key=lambda pc: (-pc[0].memory_slices, len(pc[0].starts), pc[0].name))
    masks = [_masks(family, p.name) for p, _ in groups]
    counts = [c for _, c in groups]
    last = len(groups) - 1

    def place(g: int, first: int, used: int, left: int) -> bool:
        # identical instances take strictly increasing start indices: combinations, not orders
        ms = masks[g]
        for i in range(first, len(ms) - left + 1):
            m = ms[i]
            if used & m:
                continue
            if left > 1:
                if place(g, i + 1, used | m, left - 1):
                    return True
            elif g == last or place(g + 1, 0, used | m, counts[g + 1]):
                return True
        return False

    return place(0, 0, 0, counts[0])


def _count_problem(fam: Family, name: str, count: object) -> str | None:
    if not isinstance(count, int) or isinstance(count, bool):
        return f"count for profile {name!r} is not an integer: {count!r}"
    if count < 0:
        return f"negative count {count} for profile {name!r}"
    if name not in fam.profiles:
        return f"unknown profile {name!r} for family {fam.key}"
    return None


def _tally(
    fam: Family, layout: Mapping[str, int], problems: list[str]
) -> tuple[list[tuple[Profile, int]], int, int]:
    """The layout's (profile, count > 0) pairs and their compute and memory slices; malformed
    counts, unknown names and per-profile caps are appended to ``problems`` (a malformed entry
    counts for nothing)."""
    items: list[tuple[Profile, int]] = []
    compute = memory = 0
    profiles = fam.profiles
    for name, count in layout.items():
        prof = profiles.get(name)
        if prof is None or type(count) is not int or count <= 0:  # the rare cases, in order
            why = _count_problem(fam, name, count)
            if why is not None:
                problems.append(why)
                continue
            if count == 0:
                continue
            prof = profiles[name]
        if count > prof.max_instances:
            problems.append(
                f"instance cap exceeded: {count} x {name} on one card, at most {prof.max_instances}"
            )
        items.append((prof, count))
        compute += count * prof.compute_slices
        memory += count * prof.memory_slices
    return items, compute, memory


def check_layout(product: str, layout: Mapping[str, int]) -> list[str]:
    """Every problem with placing ``layout`` (profile name -> instance count) on one card.

    An empty list means the layout is valid. Reported, each as its own string: an unknown
    product (alone), counts that are not integers or are negative, unknown profile names,
    per-profile instance caps, memory slices over capacity, compute slices over capacity,
    and whether the instances can be placed at legal start positions without two
    ``[start, start + memory_slices)`` ranges overlapping (searched exhaustively; when memory
    is already over capacity no placement exists and that is reported too).
    """
    fam = family_for(product)
    if fam is None:
        return [f"unknown product {product!r}: no MIG family key matches"]
    problems: list[str] = []
    items, compute, memory = _tally(fam, layout, problems)
    if memory > fam.memory_slices:
        problems.append(
            f"memory over capacity: {memory} memory slices requested, {fam.key} has "
            f"{fam.memory_slices}"
        )
    if compute > fam.compute_slices:
        problems.append(
            f"compute over capacity: {compute} compute slices requested, {fam.key} has "
            f"{fam.compute_slices}"
        )
    if items and (memory > fam.memory_slices or not _placeable(fam, items)):
        shown = ", ".join(f"{c} x {p.name}" for p, c in items)
        problems.append(
            f"cannot place at legal, non-overlapping start positions: {shown} on {fam.key}"
        )
    return problems


# --------------------------------------------------------------------------------------------
# memory -> profile


def _rank(p: Profile) -> tuple[float, int, int, bool, str]:
    assert p.memory_gib is not None
    return (
        p.memory_gib,
        p.memory_slices,
        p.compute_slices,
        _PLAIN_PROFILE.match(p.name) is None,
        p.name,
    )


def smallest_profile(product: str, memory_gib: float) -> Profile | None:
    """The smallest profile of ``product``'s family with at least ``memory_gib`` GiB, or None.

    Compared against the profile's ``nvidia-smi -lgip`` memory (e.g. 9.75 for ``1g.10gb``),
    not its name. Profiles whose memory is unknown (``None``) are never chosen. Ties are broken
    by, in order: fewer memory slices, fewer compute slices, a plain profile before a variant
    (``+me``, ``+gfx``, ``-me`` …), then the name. None also for an unknown product.
    Raises TypeError for a non-number, ValueError for a negative or non-finite request
    (an int beyond the float range included).
    """
    if not isinstance(memory_gib, int | float):
        raise TypeError(f"memory_gib must be a number, got {memory_gib!r}")
    # its own check, as an oracle shares no code: refuses nan, inf and ints such as 10**400
    if isinstance(memory_gib, bool) or not 0 <= memory_gib <= sys.float_info.max:
        raise ValueError(f"memory_gib must be a finite, non-negative number, got {memory_gib!r}")
    fam = family_for(product)
    if fam is None:
        return None
    fitting = [
        p for p in fam.profiles.values() if p.memory_gib is not None and p.memory_gib >= memory_gib
    ]
    return min(fitting, key=_rank, default=None)
