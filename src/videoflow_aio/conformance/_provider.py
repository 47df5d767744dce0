"""Providers: who can open a harness for which contract, with which capabilities and controls."""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager

from ._case import Case
from ._harness import Harness


class Provider(abc.ABC):
    """A source of backends for one or more contracts (the memory models, a NATS server, …)."""

    name: str = ""
    real_time: bool = False

    @abc.abstractmethod
    def contracts(self) -> frozenset[str]:
        """The contracts this provider implements."""

    def unavailable(self) -> str | None:
        """Why the provider cannot run here (server binary missing, …), or None."""
        return None

    def capabilities(self, contract: str) -> frozenset[str] | None:
        """Profiles offered for ``contract`` (cases' ``needs``); None means every profile."""
        return None

    def controls(self, contract: str) -> frozenset[str] | None:
        """Controls offered for ``contract``; None means every model control."""
        return None

    @abc.abstractmethod
    def harness(self, case: Case) -> AbstractAsyncContextManager[Harness]:
        """A fresh harness for one run of ``case``; closed (servers cleaned) when the case ends."""

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release whatever the provider holds across cases (a server it started)."""


PROVIDERS: dict[str, Callable[[], Provider]] = {}


def register_provider(name: str, factory: Callable[[], Provider]) -> None:
    PROVIDERS[name] = factory


def get_provider(name: str) -> Provider:
    _load_builtin()
    try:
        return PROVIDERS[name]()
    except KeyError:
        raise ValueError(f"unknown provider {name!r}; known: {', '.join(sorted(PROVIDERS))}") from None


def provider_names() -> list[str]:
    _load_builtin()
    return sorted(PROVIDERS)


def _load_builtin() -> None:
    from . import providers  # noqa: F401


__all__ = ["PROVIDERS", "Provider", "get_provider", "provider_names", "register_provider"]

_ = AsyncIterator  # re-exported type used by provider modules
