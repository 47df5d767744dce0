"""The ``redis`` provider: RedisRuntimeStore and RedisPayloadStore on real redis-server processes.

Without ``url=`` it starts two servers on 127.0.0.1 (once, in ``setup``): one with
``maxmemory-policy noeviction`` and AOF ``appendfsync always`` (the durable payload tier and
the runtime store, which is then durable), one with ``volatile-lru`` (the evictable tier). With
``url=`` it uses that server for everything, and ``evictable_url=`` for the evictable tier
(without it, evictable cases skip unless the server's policy matches).

Every ``h.open()`` gets its own key namespace, deleted when the case ends. Cases run in real
time with durations scaled by ``scale`` (Redis TTLs have millisecond resolution).

Runs under asyncio and trio: under trio the adapters cross ``adapters._trio_bridge`` (one
trio-asyncio loop per case run), and so do the controls and the namespace clean-up. Real
controls: :class:`~videoflow_aio.adapters.redis.RedisPayloadControls`; ``fail_reads`` and
``fail_inventory`` are model-only and skip.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...contracts.errors import IncompatibleProfile
from ...contracts.payload import TIERS
from ...testing.servers import RedisServer
from .._capabilities import CapabilityStruct
from .._case import Case
from .._controls import offered_controls
from .._harness import Skip
from .._server_provider import MAIN, ServerProvider, Startable

EVICTABLE = "evictable"


if TYPE_CHECKING:
    from ...adapters.redis import RedisConnection, RedisOptions


class RedisProvider(ServerProvider):
    """Runs the runtime_store and payload cases on redis-server."""

    name = "redis"
    client_modules = ("redis",)

    def __init__(
        self, url: str | None = None, evictable_url: str | None = None, scale: float = 0.1
    ) -> None:
        # one given server hosts everything: the evictable tier there only if its policy allows
        urls = {MAIN: url, EVICTABLE: evictable_url or url}
        super().__init__(urls=urls, scale=scale)

    def contracts(self) -> frozenset[str]:
        return frozenset({"runtime_store", "payload"})

    def server_options(self) -> Mapping[str, Startable]:
        return {
            MAIN: RedisServer(
                maxmemory="256mb", policy="noeviction", appendonly=True, appendfsync="always"
            ),
            EVICTABLE: RedisServer(maxmemory="64mb", policy="volatile-lru"),
        }

    def offered(self, contract: str) -> Sequence[CapabilityStruct]:
        from ...adapters.redis.payload import payload_capabilities
        from ...adapters.redis.runtime_store import runtime_capabilities

        if contract == "payload":  # a server per tier
            return [payload_capabilities(tier) for tier in TIERS]
        # the runtime-store server runs AOF with appendfsync always: records survive a restart
        # (on a given url= server, RTS-008 checks the live capabilities() and skips if not)
        return [runtime_capabilities(durable=True)]

    def controls(self, contract: str) -> frozenset[str] | None:
        from ...adapters.redis import RedisPayloadControls

        return offered_controls(contract, RedisPayloadControls)

    def controls_for(self, backend: Any) -> Any:
        from ...adapters.redis import RedisPayloadControls

        return RedisPayloadControls(backend)

    async def store_url(self, role: str) -> str:
        """Where a store of ``role`` connects (the replicated provider: the current primary)."""
        return self.url(role)

    def connection_options(self) -> RedisOptions:
        """The connection settings of every store (TLS, credentials: ``redis-secure``; WAIT:
        ``redis-replicated``)."""
        return {}

    def connection(self, url: str) -> RedisConnection:
        """The connection a store on ``url`` is opened on."""
        from ...adapters.redis import RedisConnection

        return RedisConnection(url, **self.connection_options())

    async def open_backend(self, case: Case, namespace: str, options: dict[str, Any]) -> Any:
        from ...adapters.redis import RedisPayloadStore, RedisRuntimeStore

        if "clock" in options or options.get("log") is not None:
            raise Skip(f"redis provider cannot honour {sorted(options)} (real clock)")
        if case.contract == "runtime_store":
            if options:
                raise Skip(f"redis runtime store takes no options {sorted(options)}")
            return RedisRuntimeStore(
                self.connection(await self.store_url(MAIN)), namespace=namespace
            )
        tier = options.get("tier", "durable")
        url = await self.store_url(EVICTABLE if tier == "evictable" else MAIN)
        try:
            store = RedisPayloadStore(
                self.connection(url), namespace=namespace, store_id="redis", **options
            )
        except TypeError as exc:
            raise Skip(f"RedisPayloadStore cannot be configured with {options}: {exc}") from exc
        try:
            await store.ensure_policy()
        except IncompatibleProfile as exc:
            await store.aclose()
            raise Skip(
                f"server at {url} cannot host tier {tier!r} ({exc}); "
                "give evictable_url= for a volatile-lru server"
            ) from exc
        return store


__all__ = ["RedisProvider"]
