"""The base for providers whose backends live on real servers (NATS, Redis, etcd, …).

A :class:`ServerProvider` subclass says which servers it needs (``server_options``: role →
:class:`~videoflow_aio.testing.servers.Server`), which client libraries must import
(``client_modules``), and how to open one backend in a namespace (``open_backend``). The base
does the rest, the same way for every engine:

- ``unavailable()``: a missing client library, or a missing binary for a server it would start;
- ``setup()``: starts each server whose URL was not given (``urls[role] is None``), once;
  ``close()`` stops them and forgets their URLs;
- ``harness(case)``: every ``h.open(**options)`` gets a fresh namespace (``reopen_of=<a
  backend of this harness>`` reuses that backend's ``namespace``: a restarted process); when
  the case ends each backend's namespace is dropped (``await backend.drop_namespace()``, best
  effort) and the backend closed;
- cases run in real time with durations scaled by ``scale``.
"""

from __future__ import annotations

import abc
import contextlib
import importlib
import uuid
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

import anyio

from ..adapters import install_hint
from ..testing.servers import ServerProcess
from ._case import Case
from ._harness import Harness
from ._provider import Provider

MAIN = "main"


class Running(Protocol):
    """A started server or cluster (``ServerProcess``, ``ClusterProcess``)."""

    @property
    def url(self) -> str: ...

    @property
    def dir(self) -> Path: ...

    def stop(self) -> None: ...

    def log_tail(self, n: int = 20) -> str: ...


class Startable(Protocol):
    """What starts one (``testing.servers.Server``, ``testing.clusters.Cluster``)."""

    def unavailable(self) -> str | None: ...

    def start(self) -> Running: ...


class ServerProvider(Provider):
    """A provider backed by real servers it starts itself, or finds at given URLs."""

    real_time = True
    scheduling_slack = 1.0
    """A real server and its client on a loaded 2-core machine: wake-ups seen a few hundred
    milliseconds late (MSG-009 failed on nats-cluster with 5 ms of slack)."""
    client_modules: tuple[str, ...] = ()
    """Modules that must import for this provider to run (its client libraries)."""
    extra: str = ""
    """The package extra that installs them (default: the provider's name)."""

    def __init__(self, *, urls: Mapping[str, str | None], scale: float) -> None:
        self.urls: dict[str, str | None] = dict(urls)
        self.scale = scale
        self._started: dict[str, Running] = {}

    # -- what a subclass says ----------------------------------------------------------------
    @abc.abstractmethod
    def server_options(self) -> Mapping[str, Startable]:
        """The server (or cluster) to start for each role (``"main"``, …) whose URL was not
        given."""

    @abc.abstractmethod
    async def open_backend(self, case: Case, namespace: str, options: dict[str, Any]) -> Any:
        """A new backend for ``case`` in ``namespace``, configured with the case's ``options``
        (raise :class:`~videoflow_aio.conformance.Skip` for one it cannot honour)."""

    def controls_for(self, backend: Any) -> Any:
        """The object whose methods are the controls the provider performs on ``backend``."""
        return backend

    def namespace_for(self, case: Case) -> str:
        """A fresh namespace (key prefix, stream prefix, …) for one backend of ``case``."""
        return f"vf-{case.id}-{uuid.uuid4().hex[:8]}"

    # -- what the base does --------------------------------------------------------------------
    def url(self, role: str = MAIN) -> str:
        """The URL of the ``role`` server (given, or started by :meth:`setup`)."""
        url = self.urls.get(role)
        if url is None:
            raise RuntimeError(f"provider {self.name}: no {role} server (setup() not called?)")
        return url

    def started(self, role: str = MAIN) -> ServerProcess | None:
        """The ``role`` server this provider started (None when its URL was given, or when
        it started a cluster there: see ``ClusterProvider.cluster``)."""
        running = self._started.get(role)
        return running if isinstance(running, ServerProcess) else None

    def log_tail(self, n: int = 20) -> str:
        """The last ``n`` log lines of each server (each cluster member) this provider
        started, headed by its role: what a failed case's report shows after its reason."""
        return "\n".join(
            f"{role} ({running.url}):\n{running.log_tail(n)}"
            for role, running in self._started.items()
        )

    def unavailable(self) -> str | None:
        for module in self.client_modules:
            try:
                importlib.import_module(module)
            except ImportError as exc:
                return f"{module} is not installed ({exc}); {install_hint(self.extra or self.name)}"
        for role, spec in self.server_options().items():
            if self.urls.get(role) is None:
                reason = spec.unavailable()
                if reason is not None:
                    return reason
        return None

    def setup(self) -> None:
        for role, spec in self.server_options().items():
            if self.urls.get(role) is None:
                server = spec.start()
                self._started[role] = server
                self.urls[role] = server.url

    def close(self) -> None:
        for role, server in reversed(self._started.items()):
            server.stop()
            self.urls[role] = None
        self._started.clear()

    def harness(self, case: Case) -> AbstractAsyncContextManager[Harness]:
        return self._harness(case)

    @asynccontextmanager
    async def _harness(self, case: Case) -> AsyncIterator[Harness]:
        opened: list[Any] = []

        async def factory(**options: Any) -> Any:
            reopen_of = options.pop("reopen_of", None)
            namespace = self.namespace_for(case) if reopen_of is None else reopen_of.namespace
            backend = await self.open_backend(case, namespace, options)
            opened.append(backend)
            return backend

        try:
            yield Harness(
                provider=self.name,
                contract=case.contract,
                factory=factory,
                controls_for=self.controls_for,
                scale=self.scale,
                slack=self.scheduling_slack,
                allowed_controls=case.controls,
            )
        finally:
            with anyio.CancelScope(shield=True):
                for backend in reversed(opened):
                    await self.discard(backend)

    async def discard(self, backend: Any) -> None:
        """Drop ``backend``'s namespace (best effort: the case is over) and close it."""
        drop = getattr(backend, "drop_namespace", None)
        if drop is not None:
            with contextlib.suppress(Exception):
                await drop()
        await backend.aclose()


__all__ = ["MAIN", "Running", "ServerProvider", "Startable"]
