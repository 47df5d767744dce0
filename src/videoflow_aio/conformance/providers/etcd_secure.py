"""The ``etcd-secure`` provider: the ``etcd`` cases over mTLS, as a user whose role may only
read and write the ``vfsec/`` keys.

Without ``url=`` it starts etcd with TLS and ``--client-cert-auth``, turns authentication on
through the client API (``root`` with a random password) and creates ``app`` with a role
limited to ``vfsec/…`` (:func:`~videoflow_aio.adapters.etcd.grant_prefix`); every store
connects as ``app`` with the client certificate and the password. With ``url=`` it connects
with the environment's TLS settings and credentials (``providers._secure``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING

import anyio

from ...testing.servers import EtcdServer, Server
from .._case import Case
from .._server_provider import MAIN
from ._secure import ROOT, Secured, env_url, trustme_missing
from .etcd import EtcdProvider

if TYPE_CHECKING:
    from ...adapters.etcd import EtcdOptions


class SecureEtcdProvider(EtcdProvider):
    """``etcd`` over mTLS with a prefix-limited role (see the module docstring)."""

    name = "etcd-secure"

    def __init__(self, url: str | None = None, scale: float = 0.5) -> None:
        super().__init__(url or env_url("etcd"), scale)
        self.secured = Secured("etcd")

    def unavailable(self) -> str | None:
        if self.urls.get(MAIN) is None and (why := trustme_missing()) is not None:
            return why
        return super().unavailable()

    def server_options(self) -> Mapping[str, Server]:
        return {MAIN: EtcdServer(tls=self.secured.certs, client_cert_auth=True)}

    def setup(self) -> None:
        if self.urls.get(MAIN) is not None:
            return super().setup()
        self.secured.make("root", "app")
        super().setup()
        anyio.run(self._grant)
        return None

    async def _grant(self) -> None:
        from ...adapters.etcd import enable_auth, grant_prefix

        tls = self.secured.client_tls(client_cert=True)
        root = self.secured.password("root")
        await enable_auth(self.url(), root_password=root, tls=tls)
        await grant_prefix(
            self.url(),
            username="app",
            password=self.secured.password("app"),
            namespace=ROOT,
            root_password=root,
            tls=tls,
        )

    def close(self) -> None:
        super().close()
        self.secured.remove()

    def namespace_for(self, case: Case) -> str:
        return f"{ROOT}/{case.id}-{uuid.uuid4().hex[:8]}"

    def connection_options(self) -> EtcdOptions:
        options = self.secured.client_options(client_cert=self.secured.certs is not None)
        return {
            "tls": options["tls"],
            "username": options["username"],
            "password": options["password"],
        }


__all__ = ["SecureEtcdProvider"]
