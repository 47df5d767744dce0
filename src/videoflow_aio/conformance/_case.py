"""Conformance cases: an ID, a title, what it needs, and an async function of a Harness."""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ._capabilities import Capability, check_capabilities
from ._controls import check_controls

if TYPE_CHECKING:
    from ._harness import Harness

CONTRACTS = ("runtime_store", "messaging", "payload", "allocation")
"""The contracts a case can be written against (``case(contract=...)``)."""
RESERVED_PREFIXES = ("RTS", "MSG", "PAY", "ALC", "MIG")
"""ID prefixes of the built-in cases: only modules of ``videoflow_aio.conformance.cases`` may
register IDs that start with one of these."""
_ID = re.compile(r"^([A-Z][A-Z0-9]*)-\d{3,}$")
_BUILTIN_MODULES = f"{__package__}.cases"

CaseFunc = Callable[["Harness[Any, Any]"], Awaitable[None]]
"""A case: an async function of the harness of its contract (e.g. ``MessagingHarness``)."""
F = TypeVar("F", bound=CaseFunc)


@dataclass(frozen=True)
class Case:
    """One conformance case. ``needs`` are provider capabilities (profiles) it requires;
    ``controls`` the model controls it uses — a provider lacking either skips it with that reason.
    """

    id: str
    title: str
    contract: str
    func: CaseFunc = field(repr=False, compare=False)
    needs: frozenset[str] = frozenset()
    controls: frozenset[str] = frozenset()


REGISTRY: dict[str, Case] = {}
"""Every registered case by ID. Filled by :func:`case`; read it through
:func:`select_cases`, which imports the built-in case modules first."""


def case(
    id: str,
    title: str,
    *,
    contract: Literal["runtime_store", "messaging", "payload", "allocation"],
    needs: Iterable[Capability] = (),
    controls: Iterable[str] = (),
) -> Callable[[F], F]:
    """Register ``func`` as conformance case ``id``. IDs are stable once published.

    An ID is an upper-case prefix, a hyphen and at least three digits (``MYAPP-001``). The
    prefixes in :data:`RESERVED_PREFIXES` belong to the built-in cases: a case outside
    ``videoflow_aio.conformance.cases`` that uses one is a ``ValueError``, and so is an ID
    already registered by another function — nothing is replaced silently.

    ``needs`` are [`Capability`][videoflow_aio.conformance.Capability] names; ``controls``
    the controls of the contract's Protocol (e.g.
    [`MessagingControls`][videoflow_aio.conformance.MessagingControls]) the case uses. An
    unknown name of either is a ``ValueError`` here, not a silent skip later.
    """
    m = _ID.match(id)
    if m is None:
        raise ValueError(
            f"case id {id!r} must be an upper-case prefix, a hyphen and at least three "
            "digits, e.g. MYAPP-001"
        )
    if contract not in CONTRACTS:
        raise ValueError(f"unknown contract {contract!r}")
    wanted = frozenset[str](needs)
    used = frozenset(controls)
    check_capabilities(wanted, f"case {id} needs=")
    check_controls(contract, used, f"case {id} controls=")

    def register(func: F) -> F:
        fn: object = func  # (a TypeGuard on func itself would narrow away the F)
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"case {id} must be an async def taking the Harness")
        module = getattr(func, "__module__", "") or ""
        builtin = module == _BUILTIN_MODULES or module.startswith(_BUILTIN_MODULES + ".")
        if m.group(1) in RESERVED_PREFIXES and not builtin:
            raise ValueError(
                f"case id {id}: the prefix {m.group(1)} is reserved for the built-in cases; "
                "give your cases a prefix of your own, e.g. MYAPP-001"
            )
        old = REGISTRY.get(id)
        if old is not None and _origin(old.func) != _origin(func):
            raise ValueError(
                f"duplicate case id {id}: already registered by {_origin(old.func)}, "
                f"now by {_origin(func)}"
            )
        REGISTRY[id] = Case(id, title, contract, func, wanted, used)
        return func

    return register


def _origin(func: CaseFunc) -> str:
    return f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', '?')}"


def load_all() -> None:
    """Import every case module so the registry is complete."""
    importlib.import_module(f"{__package__}.cases")


def _glob(pattern: str) -> re.Pattern[str]:
    body = re.escape(pattern).replace(r"\*", ".*").replace(r"\?", ".")
    return re.compile(f"^{body}$", re.IGNORECASE)


def selector(select: str | None) -> Callable[[str, str], bool]:
    """The test ``select`` stands for, as a predicate of ``(id, title)``: comma-separated
    glob-like patterns matched against the whole ID or the whole title, case-insensitive
    (``*`` matches anything, ``?`` one character, e.g. ``MSG-0*,RTS-00?``); None or an empty
    string chooses everything. :func:`select_cases` and ``explore`` choose with it."""
    pats = [_glob(p.strip()) for p in (select or "").split(",") if p.strip()]

    def chosen(id: str, title: str) -> bool:
        return not pats or any(p.match(id) or p.search(title) for p in pats)

    return chosen


def select_cases(contract: str | None = None, select: str | None = None) -> list[Case]:
    """Registered cases in ID order, filtered by contract and by a glob-like ``select``
    (see :func:`selector`)."""
    load_all()
    wanted = selector(select)
    chosen = [
        c
        for c in REGISTRY.values()
        if (contract is None or c.contract == contract) and wanted(c.id, c.title)
    ]
    return sorted(chosen, key=lambda c: c.id)
