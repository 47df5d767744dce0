"""Providers: who can open a harness for which contract, with which capabilities and controls.

Life cycle of a provider (the runner and the pytest plugin drive it):

1. ``get_provider(name, **options)`` builds it. Construction must be cheap and must not start
   anything: the pytest plugin builds every provider while collecting tests.
2. ``unavailable()`` says why it cannot run here (e.g. the server binary is missing), or None.
   ``capabilities()`` and ``controls()`` say what it offers, from its configuration alone:
   pytest asks them while collecting, before anything is started (and the runner asks again
   after ``setup()``). What only the live server can tell, a case checks at run time
   (``h.require(caps.durable, ...)``).
3. ``setup()`` (sync, called once before its first case) starts what it shares across cases,
   such as a server process on 127.0.0.1. Each case runs in a fresh event loop, so anything
   shared across cases must outlive a loop: a subprocess, a temporary directory — not a client.
4. ``harness(case)`` (an async context manager, once per case, inside that case's loop) opens a
   fresh :class:`Harness`; clients and per-case state live and die here.
5. ``close()`` (sync, called once at the end) releases what ``setup()`` started. A provider
   that prefers ``async def aclose()`` may override that instead; ``close()`` runs it in a loop
   of its own.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any

import anyio

from ._capabilities import CapabilityStruct, capability_names
from ._case import Case
from ._harness import Harness


class Provider(abc.ABC):
    """A source of backends for one or more contracts (the memory models, a NATS server, …).

    ``real_time`` providers run cases on the real clock of their engine, with durations scaled
    by the harness (``Harness(scale=...)``); the runner caps each such case's wall time.
    """

    name: str = ""
    real_time: bool = False
    scheduling_slack: float = 0.0
    """Real seconds a timer, a wake-up or a reply may come late on this provider under load
    (a loaded machine runs the server and the client late): the margin a timing case allows
    past a due time (``Harness.at_most``). 0 on virtual time, where nothing is late."""
    backends: tuple[str, ...] = ("asyncio", "trio")
    """The async backends this provider's adapters run under (an asyncio-only client library
    makes a provider asyncio-only; its cases are then not applicable under trio)."""
    parallel_backends: bool = False
    """Runs side by side (``run(parallel=True)``) may run this provider's asyncio and trio
    cases at the same time (its cases share nothing but its servers)."""
    exclusive_controls: frozenset[str] = frozenset()
    """Controls that act on the shared servers (pause, restart, kill a member): a case using
    one runs alone on this provider, even with ``parallel_backends``."""

    @abc.abstractmethod
    def contracts(self) -> frozenset[str]:
        """The contracts this provider implements."""

    def unavailable(self) -> str | None:
        """Why the provider cannot run here (server binary missing, …), or None."""
        return None

    def offered(self, contract: str) -> Sequence[CapabilityStruct] | None:
        """The ``capabilities()`` structs of the backends this provider opens for ``contract``
        (one per configuration it can open); None: it offers every profile."""
        return None

    def capabilities(self, contract: str) -> frozenset[str] | None:
        """Capability names offered for ``contract`` (cases' ``needs``); None means every one.

        Derived from :meth:`offered` by default. Answered from the provider's configuration:
        asked before :meth:`setup` (pytest collects without starting servers) and again after.
        """
        structs = self.offered(contract)
        return None if structs is None else frozenset[str](capability_names(*structs))

    def controls(self, contract: str) -> frozenset[str] | None:
        """Controls offered for ``contract`` (see :func:`offered_controls`); None means every
        control of the contract's Protocol. Answered from configuration, like capabilities."""
        return None

    @abc.abstractmethod
    def harness(self, case: Case) -> AbstractAsyncContextManager[Harness]:
        """A fresh harness for one run of ``case``; closed (servers cleaned) when the case ends."""

    def setup(self) -> None:  # noqa: B027 - optional hook
        """Start what is shared across cases (sync; called once, before the first case)."""

    def close(self) -> None:
        """Release what :meth:`setup` started (sync; called once, after the last case)."""
        if type(self).aclose is not Provider.aclose:
            anyio.run(self.aclose)

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Async alternative to :meth:`close`, run in a loop of its own."""

    def __enter__(self) -> Provider:
        self.setup()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


ProviderFactory = Callable[..., Provider]
PROVIDERS: dict[str, ProviderFactory] = {}


def register_provider(name: str, factory: ProviderFactory, *, replace: bool = False) -> None:
    """Make ``get_provider(name, **options)`` call ``factory(**options)``.

    The factory is usually the provider class; keyword options (e.g. ``url=``) are its
    constructor arguments. A name that is already registered (a built-in such as ``nats``, an
    entry point's, or another project's provider) is refused with a ``ValueError`` and nothing
    changes, unless ``replace=True``; registering the same factory under the same name again
    is a no-op. The built-in providers and the ``videoflow_aio.providers`` entry points are
    registered before any other, so the answer does not depend on import order. (A package
    that other projects install declares an entry point instead of calling this: see
    ``docs/conformance.md``, "Adding a provider".)
    """
    _load_builtin()
    old = PROVIDERS.get(name)
    if old is not None and old is not factory and not replace:
        raise ValueError(
            f"provider {name!r} is already registered ({_describe(old)}); pick another name, "
            "or pass replace=True to replace it"
        )
    PROVIDERS[name] = factory


def _describe(factory: ProviderFactory) -> str:
    if not hasattr(factory, "__qualname__"):  # a lazily loaded one says where it comes from
        return repr(factory)
    module = getattr(factory, "__module__", "?")
    return f"{module}.{factory.__qualname__}"


def get_provider(name: str, **options: Any) -> Provider:
    """A new provider ``name`` built with ``options`` (``url=...`` for an existing server, …).

    Raises ValueError for an unknown name or an option the provider does not take, and
    :class:`~videoflow_aio.conformance.ProviderLoadError` (a ValueError) for a provider whose
    module or entry point is broken (one whose optional dependency is missing loads as an
    unavailable placeholder instead).
    """
    _load_builtin()
    try:
        factory = PROVIDERS[name]
    except KeyError:
        known = ", ".join(sorted(PROVIDERS))
        raise ValueError(f"unknown provider {name!r}; known: {known}") from None
    resolve = getattr(factory, "resolve", None)
    if resolve is not None:  # a lazily loaded provider: import it now, outside the TypeError net
        resolve()
    try:
        provider = factory(**options)
    except TypeError as exc:
        if not options:
            raise
        given = ", ".join(sorted(options))
        raise ValueError(f"provider {name!r} does not take option(s) {given}: {exc}") from exc
    if not provider.name:
        provider.name = name
    return provider


def env_options(name: str) -> dict[str, Any]:
    """Options for provider ``name`` from the environment: ``VIDEOFLOW_<NAME>_URL`` → ``url``
    (``-`` in the name becomes ``_``: ``VIDEOFLOW_ETCD_CLUSTER_URL``).

    Both the CLI and the pytest plugin use this, so an existing server can be named once.
    """
    url = os.environ.get(f"VIDEOFLOW_{name.upper().replace('-', '_')}_URL")
    return {"url": url} if url else {}


def provider_names() -> list[str]:
    """Names of every registered provider, sorted."""
    _load_builtin()
    return sorted(PROVIDERS)


_LOADED: list[bool] = []


def _load_builtin() -> None:
    """Register the built-in table, then the entry points (once; nothing is imported)."""
    if _LOADED:
        return
    from ._registry import LazyFactory, entry_point_factories, unique
    from .providers import BUILTIN

    for b in BUILTIN:
        PROVIDERS.setdefault(b.name, LazyFactory(b.name, f"{__package__}.providers.{b.target}"))
    for factory in unique(entry_point_factories(), PROVIDERS):
        PROVIDERS[factory.name] = factory
    _LOADED.append(True)


__all__ = [
    "PROVIDERS",
    "Provider",
    "ProviderFactory",
    "env_options",
    "get_provider",
    "provider_names",
    "register_provider",
]
