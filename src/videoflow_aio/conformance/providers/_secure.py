"""What the secured providers (``redis-secure``, ``etcd-secure``, ``nats-secure``) share.

Without ``url=`` a secured provider starts its own servers with TLS and authentication: a
throwaway CA and certificates (``trustme``, a test dependency) and random passwords, made in
``setup`` and gone after ``close``; its backends connect as a least-privilege user. With
``url=`` (or ``VIDEOFLOW_<ENGINE>_SECURE_URL``) it connects to that server with the TLS
settings and credentials of the environment (``VIDEOFLOW_<ENGINE>_SECURE_USERNAME``,
``…_PASSWORD`` or ``…_PASSWORD_FILE``, ``…_TLS_CA_FILE``, ``…_TLS_CERT_FILE``,
``…_TLS_KEY_FILE``, …: :meth:`Credentials.from_env`, :meth:`TLSConfig.from_env`), never from
arguments a command line would show.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
from dataclasses import dataclass, field
from typing import Any

from ...adapters import Credentials, Secret, TLSConfig
from ...testing.servers import Certificates

ROOT = "vfsec"
"""The namespace / subject root every secured provider's least-privilege user is limited to."""


def env_prefix(engine: str) -> str:
    """``VIDEOFLOW_<ENGINE>_SECURE_``: where a secured provider reads its settings."""
    return f"VIDEOFLOW_{engine.upper()}_SECURE_"


def env_url(engine: str) -> str | None:
    return os.environ.get(f"{env_prefix(engine)}URL") or None


def trustme_missing() -> str | None:
    """Why certificates cannot be made here, or None."""
    if importlib.util.find_spec("trustme") is None:
        return "trustme is not installed (pip install 'videoflow-aio[test]')"
    return None


@dataclass
class Secured:
    """The certificates and passwords of the servers a secured provider started (made by
    :meth:`make`, removed by :meth:`remove`), or the environment's settings for a given
    server."""

    engine: str
    certs: Certificates | None = None
    passwords: dict[str, Secret] = field(default_factory=dict)

    def make(self, *roles: str) -> Certificates:
        self.certs = Certificates.make()
        self.passwords = {role: Secret(secrets.token_urlsafe(24)) for role in roles}
        return self.certs

    def remove(self) -> None:
        if self.certs is not None:
            self.certs.remove()
        self.certs = None
        self.passwords = {}

    def password(self, role: str) -> Secret:
        return self.passwords[role]

    def client_tls(self, *, client_cert: bool = False) -> TLSConfig:
        """TLS for a client of the started server, else from the environment."""
        if self.certs is not None:
            tls: TLSConfig = self.certs.client_tls(client_cert=client_cert)
            return tls
        return TLSConfig.from_env(env_prefix(self.engine)) or TLSConfig()

    def client_options(self, *, client_cert: bool = False) -> dict[str, Any]:
        """``tls`` and the credentials of the least-privilege user ``app`` of the started
        server, else those of the environment (every field the engine's adapters take)."""
        if self.passwords:
            return {
                "tls": self.client_tls(client_cert=client_cert),
                "username": "app",
                "password": self.password("app"),
            }
        creds = Credentials.from_env(env_prefix(self.engine)) or Credentials()
        out: dict[str, Any] = {
            "tls": self.client_tls(),
            "username": creds.username,
            "password": creds.password,
        }
        if self.engine == "nats":
            out.update(
                token=creds.token, nkey_seed_file=creds.nkey_seed_file, creds_file=creds.creds_file
            )
        return out


__all__ = ["ROOT", "Secured", "env_prefix", "env_url", "trustme_missing"]
