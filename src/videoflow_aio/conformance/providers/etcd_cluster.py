"""The ``etcd-cluster`` provider: EtcdRuntimeStore on a real 3-member etcd, given every endpoint.

Without ``url=`` it starts an :class:`~videoflow_aio.testing.clusters.EtcdCluster` on
127.0.0.1 (once, in ``setup``) and performs the member controls on it (kill -9, restart on the
same data, SIGSTOP/SIGCONT, find the leader), so the ``replicated`` fault cases run; the
cluster is healed after every case. With ``url=`` (comma-separated endpoints) it uses that
cluster, without member controls. Each ``h.open()`` gets its own key prefix, deleted when the
case ends. Runs under asyncio and trio, like the ``etcd`` provider.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...testing.clusters import EtcdCluster
from .._case import Case
from .._harness import Skip
from .._server_provider import MAIN, Startable
from ._cluster import ClusterControls, ClusterProvider
from .etcd import EtcdProvider

STORE_TIMEOUT = 2.0
"""Seconds an RPC may take before the store asks another member (etcd's default election
timeout is 1 s; a paused member costs this much per call until the store moves on)."""


class EtcdClusterProvider(ClusterProvider, EtcdProvider):
    """Runs the runtime_store cases on a 3-member etcd (the ``etcd`` provider's contracts and
    capabilities, on a cluster)."""

    name = "etcd-cluster"
    extra = "etcd"

    def server_options(self) -> Mapping[str, Startable]:
        return {MAIN: EtcdCluster()}

    def controls(self, contract: str) -> frozenset[str] | None:
        return self.member_controls()

    def controls_for(self, backend: Any) -> ClusterControls:
        return self.cluster_controls(MAIN)

    async def open_backend(self, case: Case, namespace: str, options: dict[str, Any]) -> Any:
        from ...adapters.etcd import EtcdConnection, EtcdRuntimeStore

        if options:
            raise Skip(f"etcd runtime store takes no options {sorted(options)}")
        connection = EtcdConnection(self.url(), timeout=STORE_TIMEOUT)
        return EtcdRuntimeStore(connection, namespace=namespace)


__all__ = ["EtcdClusterProvider"]
