"""The ``nats-secure`` provider: the ``nats`` cases over TLS, as a least-privilege user in a
JetStream account of its own.

Without ``url=`` it starts nats-server with TLS and an account ``APP`` (JetStream enabled)
whose user ``app`` (random password) has exactly
:func:`~videoflow_aio.adapters.nats.jetstream_permissions` and
:func:`~videoflow_aio.adapters.nats.core_permissions` for the ``vfsec`` subject root; every
backend (and the administrator of the purge/delete controls, the same user: the account's
JetStream API is what an administrator of that account uses) connects as ``app``, its
subjects under ``vfsec.``. The server-process controls (pause, resume, restart) act as in
``nats``. With ``url=`` it connects with the environment's TLS settings and credentials
(``providers._secure``: user/password, token, NKey seed file or ``.creds`` file).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ...testing.servers import NatsServer, Server
from .._server_provider import MAIN
from ._secure import ROOT, Secured, env_url, trustme_missing
from .nats import NatsProvider

if TYPE_CHECKING:
    from ...adapters.nats import NatsConnection


class SecureNatsProvider(NatsProvider):
    """``nats`` over TLS with a least-privilege account user (see the module docstring)."""

    name = "nats-secure"

    def __init__(self, url: str | None = None, scale: float = 0.05) -> None:
        url = url or env_url("nats")
        super().__init__(url, scale)
        self.secured = Secured("nats")

    def unavailable(self) -> str | None:
        if self.urls.get(MAIN) is None and (why := trustme_missing()) is not None:
            return why
        return super().unavailable()

    def server_options(self) -> Mapping[str, Server]:
        from ...adapters.nats import (
            core_permissions,
            jetstream_permissions,
            merge_permissions,
            permissions_config,
        )

        config = ""
        if self.secured.passwords:
            perms = permissions_config(
                merge_permissions(jetstream_permissions(ROOT), core_permissions(ROOT))
            )
            password = json.dumps(self.secured.password("app").reveal())
            config = (
                "accounts {\n  APP { jetstream: enabled, users: [\n"
                f"    {{user: app, password: {password}, permissions: {perms}}}\n  ] }}\n}}\n"
            )
        return {MAIN: NatsServer(data_dir=self._store, tls=self.secured.certs, config=config)}

    def setup(self) -> None:
        if self.urls.get(MAIN) is None:
            self.secured.make("app")
        super().setup()

    def close(self) -> None:
        super().close()
        self.secured.remove()

    def connection(self) -> NatsConnection:
        from ...adapters.nats import NatsConnection

        return NatsConnection(
            self.url(), connect_timeout=self.connect_timeout, **self.secured.client_options()
        )

    def subject_for(self, namespace: str) -> str:
        root = f"{ROOT}."
        return namespace if namespace.startswith(root) else f"{root}{namespace}"


__all__ = ["SecureNatsProvider"]
