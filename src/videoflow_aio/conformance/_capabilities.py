"""The capability names cases may need (``needs=``), and how a capabilities struct maps to them.

:data:`Capability` is the one list of names: ``case(needs=...)`` is checked against it by mypy
and at registration (an unknown name is a ``ValueError``). :func:`capability_names` derives the
names a backend offers from the struct its ``capabilities()`` returns, so a provider never
spells them by hand. Adding a capability: a name in :data:`Capability` and, if a struct
advertises it, a line in :func:`capability_names`.
"""

from __future__ import annotations

from typing import Literal, get_args

from ..contracts.allocation import AllocationCapabilities
from ..contracts.messaging import MessagingCapabilities
from ..contracts.payload import PayloadCapabilities
from ..contracts.runtime_store import RuntimeCapabilities

Capability = Literal[
    # messaging: MessagingCapabilities.profiles()
    "core_only",
    "latest_per_key",
    "durable_control",
    "archive",
    "mixed_retention",
    # payload: the evictable tier (TTL and LRU eviction regardless of obligations)
    "evictable",
    # runtime store: records survive a restart; CAS read and write are separate steps with a
    # fault barrier between them (a race can be staged there)
    "durable",
    "client_side_cas",
    # allocation: the backend may change MIG geometry
    "geometry_changes",
    # any contract: a deployment of several members, one of which may die or pause (the
    # cluster providers; cases using MemberControls need it)
    "replicated",
]
"""A capability name a case can need (``needs=``) and a provider can offer; mypy checks the
spelling. The names come from the providers' ``capabilities()`` structs."""
CAPABILITIES: frozenset[str] = frozenset(get_args(Capability))
"""Every :data:`Capability` name, as a set (for checks at run time)."""

CapabilityStruct = (
    MessagingCapabilities | PayloadCapabilities | RuntimeCapabilities | AllocationCapabilities
)


def capability_names(*structs: CapabilityStruct) -> frozenset[Capability]:
    """The capability names the given ``capabilities()`` structs advertise, together."""
    names: set[Capability] = set()
    for caps in structs:
        if isinstance(caps, MessagingCapabilities):
            names.update(n for n in _as_capabilities(caps.profiles()))
        elif isinstance(caps, PayloadCapabilities):
            if caps.tier == "evictable":
                names.add("evictable")
        elif isinstance(caps, RuntimeCapabilities):
            if caps.durable:
                names.add("durable")
        elif caps.geometry_changes:
            names.add("geometry_changes")
    return frozenset(names)


def _as_capabilities(profiles: frozenset[str]) -> list[Capability]:
    unknown = profiles - CAPABILITIES
    if unknown:  # a profile added to the contract must be named here too
        raise ValueError(f"profiles {sorted(unknown)} are not conformance capabilities")
    return [p for p in get_args(Capability) if p in profiles]


def check_capabilities(names: frozenset[str], where: str) -> None:
    """``ValueError`` naming the first of ``names`` that is not a :data:`Capability`."""
    unknown = sorted(names - CAPABILITIES)
    if unknown:
        known = ", ".join(sorted(CAPABILITIES))
        raise ValueError(f"{where}: unknown capability {unknown[0]!r}; known: {known}")


__all__ = ["CAPABILITIES", "Capability", "CapabilityStruct", "capability_names"]
