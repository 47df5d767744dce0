"""Built-in providers: each module here registers itself with ``register_provider``.

A provider module whose optional dependency is missing (``ImportError``, e.g. nats-py not
installed) does not break the others: a placeholder provider of the module's name takes its
place, and ``unavailable()`` gives the import error, so its cases are skipped with that reason
(or fail where servers are required). Any other error while importing is raised.
"""

from __future__ import annotations

import importlib
import pkgutil
from contextlib import AbstractAsyncContextManager

from .._case import CONTRACTS, Case
from .._harness import Harness
from .._provider import PROVIDERS, Provider, register_provider

IMPORT_ERRORS: dict[str, str] = {}
"""provider module name -> the import error that put a placeholder in its place."""


class UnimportableProvider(Provider):
    """Stands in for a provider module that could not be imported."""

    def __init__(self, name: str, error: str) -> None:
        self.name = name
        self.error = error

    def contracts(self) -> frozenset[str]:
        return frozenset(CONTRACTS)

    def unavailable(self) -> str | None:
        return f"provider module {self.name!r} cannot be imported: {self.error}"

    def harness(self, case: Case) -> AbstractAsyncContextManager[Harness]:
        raise RuntimeError(self.unavailable())


def _placeholder(name: str, error: str) -> None:
    def factory(**_: object) -> Provider:
        return UnimportableProvider(name, error)

    register_provider(name, factory)


for _info in pkgutil.iter_modules(__path__):
    if _info.name.startswith("_"):
        continue
    try:
        importlib.import_module(f"{__name__}.{_info.name}")
    except ImportError as _exc:
        IMPORT_ERRORS[_info.name] = f"{type(_exc).__name__}: {_exc}"
        if _info.name not in PROVIDERS:
            _placeholder(_info.name, IMPORT_ERRORS[_info.name])

__all__ = ["IMPORT_ERRORS", "UnimportableProvider"]
