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

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...testing.servers import EtcdServer
from .._capabilities import CapabilityStruct
from .._case import Case
from .._harness import Skip
from .._server_provider import MAIN, ServerProvider, Startable

if TYPE_CHECKING:
    from ...adapters.etcd import EtcdConnection, EtcdOptions


class EtcdProvider(ServerProvider):
    """Runs the runtime_store cases on etcd."""

    name = "etcd"
    client_modules = ("aetcd",)

    def __init__(self, url: str | None = None, scale: float = 0.5) -> None:
        super().__init__(urls={MAIN: url}, scale=scale)

    def contracts(self) -> frozenset[str]:
        return frozenset({"runtime_store"})

    def server_options(self) -> Mapping[str, Startable]:
        return {MAIN: EtcdServer()}

    def offered(self, contract: str) -> Sequence[CapabilityStruct]:
        from ...adapters.etcd.runtime_store import runtime_capabilities

        return [runtime_capabilities()]

    def controls(self, contract: str) -> frozenset[str] | None:
        return frozenset()

    async def open_backend(self, case: Case, namespace: str, options: dict[str, Any]) -> Any:
        from ...adapters.etcd import EtcdRuntimeStore

        if options:
            raise Skip(f"etcd runtime store takes no options {sorted(options)}")
        return EtcdRuntimeStore(self.connection(), namespace=namespace)

    def connection_options(self) -> EtcdOptions:
        """The connection settings of every store (TLS, credentials: ``etcd-secure``)."""
        return {}

    def connection(self) -> EtcdConnection:
        """The connection every store of this provider is opened on."""
        from ...adapters.etcd import EtcdConnection

        return EtcdConnection(self.url(), **self.connection_options())


__all__ = ["EtcdProvider"]
