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
controls: see ``adapters.redis._payload_controls``; ``fail_reads`` and
``fail_inventory`` are model-only and skip.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

from ...adapters._extras import missing
from ...adapters._servers import ServerProcess, binary_unavailable, start_redis
from ...contracts.errors import IncompatibleProfile
from .._case import Case
from .._harness import Harness, Skip
from .._provider import Provider, register_provider


class RedisProvider(Provider):
    """Runs the runtime_store and payload cases on redis-server."""

    name = "redis"
    real_time = True

    def __init__(
        self, url: str | None = None, evictable_url: str | None = None, scale: float = 0.1
    ) -> None:
        self.url = url
        self.evictable_url = evictable_url
        self.scale = scale
        self._servers: list[ServerProcess] = []

    def contracts(self) -> frozenset[str]:
        return frozenset({"runtime_store", "payload"})

    def unavailable(self) -> str | None:
        why = missing("redis")
        if why is not None:
            return why
        if self.url is None:
            return binary_unavailable("redis-server")
        return None

    def capabilities(self, contract: str) -> frozenset[str] | None:
        # its runtime-store server runs AOF with appendfsync always: records survive a restart
        return frozenset({"evictable"}) if contract == "payload" else frozenset({"durable"})

    def controls(self, contract: str) -> frozenset[str] | None:
        if contract == "payload":
            from ...adapters.redis._payload_controls import CONTROLS

            return CONTROLS
        return frozenset()

    def setup(self) -> None:
        if self.url is None:
            durable = start_redis(
                maxmemory="256mb", policy="noeviction", appendonly=True, appendfsync="always"
            )
            self._servers.append(durable)
            self.url = durable.url
            if self.evictable_url is None:
                evictable = start_redis(maxmemory="64mb", policy="volatile-lru")
                self._servers.append(evictable)
                self.evictable_url = evictable.url

    def close(self) -> None:
        for srv in self._servers:
            srv.stop()
        self._servers.clear()

    @asynccontextmanager
    async def harness(self, case: Case) -> AsyncIterator[Harness]:
        from ...adapters.redis import RedisPayloadStore, RedisRuntimeStore
        from ...adapters.redis._payload_controls import RedisPayloadControls

        assert self.url is not None, "setup() was not called"
        opened: list[tuple[Any, str]] = []

        async def factory(**options: Any) -> Any:
            if "clock" in options or options.get("log") is not None:
                raise Skip(f"redis provider cannot honour {sorted(options)} (real clock)")
            ns = f"vf-{case.id}-{uuid.uuid4().hex[:8]}"
            if case.contract == "runtime_store":
                reopen_of = options.pop("reopen_of", None)
                if options:
                    raise Skip(f"redis runtime store takes no options {sorted(options)}")
                if reopen_of is not None:
                    ns = reopen_of._conn.ns
                store: Any = RedisRuntimeStore(self.url or "", namespace=ns)
                opened.append((store, self.url or ""))
                return store
            tier = options.get("tier", "durable")
            # one given server hosts the tier its policy allows; the other tier skips
            url = (self.evictable_url or self.url or "") if tier == "evictable" else self.url or ""
            try:
                store = RedisPayloadStore(url, namespace=ns, store_id="redis", **options)
            except TypeError as exc:
                raise Skip(f"RedisPayloadStore cannot be configured with {options}: {exc}") from exc
            try:
                await store._ensure_policy()
            except IncompatibleProfile as exc:
                await store.aclose()
                raise Skip(
                    f"server at {url} cannot host tier {tier!r} ({exc}); "
                    "give evictable_url= for a volatile-lru server"
                ) from exc
            opened.append((store, url))
            return store

        try:
            yield Harness(
                provider=self.name,
                contract=case.contract,
                factory=factory,
                controls_for=lambda store: RedisPayloadControls(store),
                scale=self.scale,
                allowed_controls=case.controls,
            )
        finally:
            for store, _url in reversed(opened):
                await _drop_namespace(store)
                await store.aclose()


async def _drop_namespace(store: Any) -> None:
    """Delete every key of the store's namespace (best effort: the case is over)."""
    with suppress(Exception):
        await store._conn.call(_drop_keys, store)


async def _drop_keys(store: Any) -> None:
    ns = store._conn.ns
    client = store.client
    try:
        batch: list[Any] = []
        async for k in client.scan_iter(match=f"{ns}:*", count=1000):
            batch.append(k)
            if len(batch) >= 500:
                await client.unlink(*batch)
                batch.clear()
        if batch:
            await client.unlink(*batch)
    except Exception:
        pass


register_provider("redis", RedisProvider)
