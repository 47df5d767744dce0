"""The ``redis-secure`` provider: the ``redis`` cases over TLS as a least-privilege ACL user.

Without ``url=`` it starts the two servers of ``redis`` with TLS only (``rediss://``) and an
ACL file: no default user, ``admin`` (everything: the harness controls act as an operator
would), and ``app`` with exactly :func:`~videoflow_aio.adapters.redis.acl_rules` on the
``vfsec`` namespace — the stores under test connect as ``app``. Without CONFIG the runtime
store does not promise durability (RTS cases needing it skip). With ``url=`` it connects with
the environment's TLS settings and credentials (``providers._secure``) and offers no control.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...testing.servers import RedisServer, Server
from .._case import Case
from .._server_provider import MAIN
from ._secure import ROOT, Secured, env_url, trustme_missing
from .redis import EVICTABLE, RedisProvider

if TYPE_CHECKING:
    from ...adapters.redis import RedisOptions


class SecureRedisProvider(RedisProvider):
    """``redis`` over TLS with ACL users (see the module docstring)."""

    name = "redis-secure"

    def __init__(
        self, url: str | None = None, evictable_url: str | None = None, scale: float = 0.1
    ) -> None:
        super().__init__(url or env_url("redis"), evictable_url, scale)
        self.secured = Secured("redis")
        self._admins: dict[int, Any] = {}

    def unavailable(self) -> str | None:
        if self.urls.get(MAIN) is None and (why := trustme_missing()) is not None:
            return why
        return super().unavailable()

    def _acl(self) -> list[str]:
        from ...adapters.redis import acl_rules

        if not self.secured.passwords:
            return []
        admin, app = self.secured.password("admin"), self.secured.password("app")
        return [
            "user default off",
            f"user admin on >{admin.reveal()} ~* &* +@all",
            f"user app on >{app.reveal()} {acl_rules([ROOT])}",
        ]

    def server_options(self) -> Mapping[str, Server]:
        certs, acl = self.secured.certs, self._acl()
        return {
            MAIN: RedisServer(
                maxmemory="256mb",
                policy="noeviction",
                appendonly=True,
                appendfsync="always",
                tls=certs,
                acl=acl,
            ),
            EVICTABLE: RedisServer(maxmemory="64mb", policy="volatile-lru", tls=certs, acl=acl),
        }

    def setup(self) -> None:
        if self.urls.get(MAIN) is None:
            self.secured.make("admin", "app")
        super().setup()

    def close(self) -> None:
        super().close()
        self.secured.remove()

    def namespace_for(self, case: Case) -> str:
        return f"{ROOT}:{case.id}-{uuid.uuid4().hex[:8]}"

    def connection_options(self) -> RedisOptions:
        options = self.secured.client_options()
        return {
            "tls": options["tls"],
            "username": options["username"],
            "password": options["password"],
        }

    def controls(self, contract: str) -> frozenset[str] | None:
        if not self.secured.passwords:  # a given server: no operator credentials
            return frozenset()
        return super().controls(contract)

    async def open_backend(self, case: Case, namespace: str, options: dict[str, Any]) -> Any:
        store = await super().open_backend(case, namespace, options)
        if case.contract == "payload" and self.secured.passwords:
            from ...adapters.redis import RedisPayloadStore

            # the controls act as an operator: an admin connection on the same keys
            self._admins[id(store)] = RedisPayloadStore(
                store._conn.url.replace("redis://", "rediss://", 1),
                namespace=namespace,
                tier=store.tier,
                check_policy=False,
                tls=self.secured.client_tls(),
                username="admin",
                password=self.secured.password("admin"),
            )
        return store

    def controls_for(self, backend: Any) -> Any:
        from ...adapters.redis import RedisPayloadControls

        return RedisPayloadControls(self._admins.get(id(backend), backend))

    async def discard(self, backend: Any) -> None:
        admin = self._admins.pop(id(backend), None)
        try:
            await super().discard(backend)
        finally:
            if admin is not None:
                await admin.aclose()


__all__ = ["SecureRedisProvider"]
