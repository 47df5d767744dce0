"""The ``redis-replicated`` provider: the Redis stores on a primary with a replica, each write
waiting for the replica (``wait_replicas=1``).

Without ``url=`` it starts two :class:`~videoflow_aio.testing.clusters.RedisReplicaSet`s on
127.0.0.1 (once, in ``setup``): one with ``noeviction`` and AOF ``appendfsync always`` (the
durable payload tier and the runtime store), one with ``volatile-lru`` (the evictable tier).
Stores talk to the primary; every write returns only once the replica acknowledged it, or
raises ``ReplicationUnconfirmed``. The member controls act on the processes (there is no
Sentinel: a killed primary stays down until restarted on its data, or until a case promotes
the replica itself); the replica sets are healed after every case. With ``url=`` (a primary)
it uses that server, without member controls. Real payload controls as in ``redis``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...testing.clusters import RedisReplicaSet
from ...testing.servers import RedisServer
from .._controls import offered_controls
from .._server_provider import MAIN, Startable
from ._cluster import ClusterControls, ClusterProvider
from .redis import EVICTABLE, RedisProvider

WAIT_REPLICAS = 1
WAIT_TIMEOUT = 5.0
"""Seconds a write waits for the replica's acknowledgement: milliseconds when healthy; the
bound is for a loaded machine, where a replica fsyncing every write (``appendfsync always``)
can stall for a second or more. No case waits it out: its faults hit the primary."""


if TYPE_CHECKING:
    from ...adapters.redis import RedisOptions


class _PayloadClusterControls(ClusterControls):
    """Member controls plus the Redis payload controls on one store."""

    def __init__(self, cluster: Any, payload: Any) -> None:
        super().__init__(cluster)
        self._payload = payload

    def __getattr__(self, name: str) -> Any:
        return getattr(self._payload, name)


class RedisReplicatedProvider(ClusterProvider, RedisProvider):
    """Runs the runtime_store and payload cases on Redis primaries with a replica each (the
    ``redis`` provider's contracts, capabilities and payload controls, on replica sets)."""

    name = "redis-replicated"
    extra = "redis"

    def server_options(self) -> Mapping[str, Startable]:
        """The ``redis`` provider's servers, each as a primary with one replica."""
        servers = super().server_options()
        return {
            role: RedisReplicaSet(server=spec)
            for role, spec in servers.items()
            if isinstance(spec, RedisServer)
        }

    def controls(self, contract: str) -> frozenset[str] | None:
        from ...adapters.redis import RedisPayloadControls

        payload = offered_controls(contract, RedisPayloadControls)
        return payload | self.member_controls()

    def controls_for(self, backend: Any) -> Any:
        from ...adapters.redis import RedisPayloadControls, RedisPayloadStore

        if isinstance(backend, RedisPayloadStore):
            role = EVICTABLE if backend.tier == "evictable" else MAIN
            return _PayloadClusterControls(self.cluster(role), RedisPayloadControls(backend))
        return self.cluster_controls(MAIN)

    async def store_url(self, role: str) -> str:
        return await self.primary_url(role)

    def connection_options(self) -> RedisOptions:
        return {
            **super().connection_options(),
            "wait_replicas": WAIT_REPLICAS,
            "wait_timeout": WAIT_TIMEOUT,
        }


__all__ = ["RedisReplicatedProvider"]
