"""The ``nats-secure`` provider: the ``nats`` cases over TLS, as a least-privilege user in a
JetStream account of its own.

Without ``url=`` it starts nats-server with TLS and an account ``APP`` (JetStream enabled)
whose user ``app`` (random password) has exactly
:func:`~videoflow_aio.adapters.nats.jetstream_permissions` and
:func:`~videoflow_aio.adapters.nats.core_permissions` for the ``vfsec`` subject root;
every backend connects as ``app`` and its subjects start with ``vfsec.``. The pause/resume
controls act on the server process, as in ``nats``. With ``url=`` it connects with the
environment's TLS settings and credentials (``providers._secure``: user/password, token,
NKey seed file or ``.creds`` file).
"""

from __future__ import annotations

import json
from typing import Any

from ...testing.servers import NatsServer
from .._provider import register_provider
from ._secure import ROOT, Secured, env_url, trustme_missing
from .nats import NatsProvider


class SecureNatsProvider(NatsProvider):
    """``nats`` over TLS with a least-privilege account user (see the module docstring)."""

    name = "nats-secure"
    subject_root = f"{ROOT}."

    def __init__(self, url: str | None = None, scale: float = 0.05) -> None:
        super().__init__(url or env_url("nats"), scale)
        self.secured = Secured("nats")

    def unavailable(self) -> str | None:
        if self.url is None and (why := trustme_missing()) is not None:
            return why
        return super().unavailable()

    def setup(self) -> None:
        if self.url is not None:
            return
        from ...adapters.nats import (
            core_permissions,
            jetstream_permissions,
            merge_permissions,
            permissions_config,
        )

        certs = self.secured.make("app")
        perms = permissions_config(
            merge_permissions(jetstream_permissions(ROOT), core_permissions(ROOT))
        )
        password = json.dumps(self.secured.password("app").reveal())
        config = (
            "accounts {\n  APP { jetstream: enabled, users: [\n"
            f"    {{user: app, password: {password}, permissions: {perms}}}\n  ] }}\n}}\n"
        )
        self._server = NatsServer(tls=certs, config=config).start()
        self.url = self._server.url

    def close(self) -> None:
        super().close()
        self.secured.remove()

    def connection_options(self) -> dict[str, Any]:
        return self.secured.client_options()


register_provider("nats-secure", SecureNatsProvider)
