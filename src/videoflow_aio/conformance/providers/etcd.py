"""The ``etcd`` provider: EtcdRuntimeStore on a real single-member etcd.

Without ``url=`` it starts one etcd on 127.0.0.1 (once, in ``setup``); with ``url=`` it uses
that server. Every ``h.open()`` gets its own key prefix, deleted when the case ends;
``reopen_of=`` opens a new client on the same prefix (a restarted process). Cases run in real
time with durations scaled by ``scale`` (etcd leases have second resolution; the runtime store
cases use no durations).

Runs under asyncio and trio: aetcd is built on grpc.aio, so under trio the adapter crosses
``adapters._trio_bridge`` (one trio-asyncio loop per case run).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from ...adapters._extras import missing
from ...adapters._servers import ServerProcess, binary_unavailable, start_etcd
from .._case import Case
from .._harness import Harness, Skip
from .._provider import Provider, register_provider


class EtcdProvider(Provider):
    """Runs the runtime_store cases on etcd."""

    name = "etcd"
    real_time = True

    def __init__(self, url: str | None = None, scale: float = 0.5) -> None:
        self.url = url
        self.scale = scale
        self._server: ServerProcess | None = None

    def contracts(self) -> frozenset[str]:
        return frozenset({"runtime_store"})

    def unavailable(self) -> str | None:
        why = missing("etcd")
        if why is not None:
            return why
        if self.url is None:
            return binary_unavailable("etcd")
        return None

    def capabilities(self, contract: str) -> frozenset[str] | None:
        return frozenset({"durable"})  # etcd persists every committed write (raft WAL)

    def controls(self, contract: str) -> frozenset[str] | None:
        return frozenset()

    def setup(self) -> None:
        if self.url is None:
            self._server = start_etcd()
            self.url = self._server.url

    def close(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    @asynccontextmanager
    async def harness(self, case: Case) -> AsyncIterator[Harness]:
        from ...adapters.etcd import EtcdRuntimeStore

        assert self.url is not None, "setup() was not called"
        opened: list[Any] = []

        async def factory(**options: Any) -> Any:
            reopen_of = options.pop("reopen_of", None)
            if options:
                raise Skip(f"etcd runtime store takes no options {sorted(options)}")
            ns = reopen_of.namespace if reopen_of is not None else f"vf-{uuid.uuid4().hex[:12]}"
            store = EtcdRuntimeStore(self.url or "", namespace=ns)
            opened.append(store)
            return store

        try:
            yield Harness(
                provider=self.name,
                contract=case.contract,
                factory=factory,
                scale=self.scale,
                allowed_controls=case.controls,
            )
        finally:
            for store in reversed(opened):
                with contextlib.suppress(Exception):  # cleanup must not mask the result
                    await store.drop_namespace()
                await store.aclose()


register_provider("etcd", EtcdProvider)
