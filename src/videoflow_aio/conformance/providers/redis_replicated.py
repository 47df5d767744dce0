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

from collections.abc import Mapping, Sequence
from typing import Any

from ...contracts.errors import IncompatibleProfile
from ...contracts.payload import TIERS
from ...testing.clusters import RedisReplicaSet
from .._capabilities import CapabilityStruct
from .._case import Case
from .._controls import offered_controls
from .._harness import Skip
from .._provider import register_provider
from .._server_provider import MAIN, Startable
from ._cluster import ClusterControls, ClusterProvider

EVICTABLE = "evictable"
WAIT_REPLICAS = 1
WAIT_TIMEOUT = 2.0


class _PayloadClusterControls(ClusterControls):
    """Member controls plus the Redis payload controls on one store."""

    def __init__(self, cluster: Any, payload: Any) -> None:
        super().__init__(cluster)
        self._payload = payload

    def __getattr__(self, name: str) -> Any:
        return getattr(self._payload, name)


class RedisReplicatedProvider(ClusterProvider):
    """Runs the runtime_store and payload cases on Redis primaries with a replica each."""

    name = "redis-replicated"
    client_modules = ("redis",)
    extra = "redis"

    def __init__(
        self, url: str | None = None, evictable_url: str | None = None, scale: float = 0.1
    ) -> None:
        super().__init__(urls={MAIN: url, EVICTABLE: evictable_url or url}, scale=scale)

    def contracts(self) -> frozenset[str]:
        return frozenset({"runtime_store", "payload"})

    def server_options(self) -> Mapping[str, Startable]:
        return {
            MAIN: RedisReplicaSet(
                maxmemory="256mb", policy="noeviction", appendonly=True, appendfsync="always"
            ),
            EVICTABLE: RedisReplicaSet(maxmemory="64mb", policy="volatile-lru"),
        }

    def offered(self, contract: str) -> Sequence[CapabilityStruct]:
        from ...adapters.redis.payload import payload_capabilities
        from ...adapters.redis.runtime_store import runtime_capabilities

        if contract == "payload":
            return [payload_capabilities(tier) for tier in TIERS]
        return [runtime_capabilities(durable=True)]

    def controls(self, contract: str) -> frozenset[str] | None:
        from ...adapters.redis._payload_controls import RedisPayloadControls

        payload = offered_controls(contract, RedisPayloadControls)
        return payload | self.member_controls()

    def controls_for(self, backend: Any) -> Any:
        from ...adapters.redis import RedisPayloadStore
        from ...adapters.redis._payload_controls import RedisPayloadControls

        if isinstance(backend, RedisPayloadStore):
            role = EVICTABLE if backend.tier == "evictable" else MAIN
            return _PayloadClusterControls(self.cluster(role), RedisPayloadControls(backend))
        return self.cluster_controls(MAIN)

    async def open_backend(self, case: Case, namespace: str, options: dict[str, Any]) -> Any:
        from ...adapters.redis import RedisPayloadStore, RedisRuntimeStore

        if "clock" in options or options.get("log") is not None:
            raise Skip(f"redis provider cannot honour {sorted(options)} (real clock)")
        wait: dict[str, Any] = {"wait_replicas": WAIT_REPLICAS, "wait_timeout": WAIT_TIMEOUT}
        if case.contract == "runtime_store":
            if options:
                raise Skip(f"redis runtime store takes no options {sorted(options)}")
            return RedisRuntimeStore(await self.primary_url(MAIN), namespace=namespace, **wait)
        tier = options.get("tier", "durable")
        url = await self.primary_url(EVICTABLE if tier == "evictable" else MAIN)
        try:
            store = RedisPayloadStore(url, namespace=namespace, store_id="redis", **options, **wait)
        except TypeError as exc:
            raise Skip(f"RedisPayloadStore cannot be configured with {options}: {exc}") from exc
        try:
            await store.ensure_policy()
        except IncompatibleProfile as exc:
            await store.aclose()
            raise Skip(f"server at {url} cannot host tier {tier!r} ({exc})") from exc
        return store


register_provider("redis-replicated", RedisReplicatedProvider)
