"""``RedisConnection``: how every Redis store reaches the server, and as whom — defined once.

A :class:`RedisConnection` holds the URL (its user info taken out: never printed), TLS, the
ACL user and password, the deadlines, the pool size, the RESP protocol and the replication
policy (:class:`RedisOptions`: the one definition of those keywords).
:class:`~videoflow_aio.adapters.redis.RedisRuntimeStore` and
:class:`~videoflow_aio.adapters.redis.RedisPayloadStore` take one in place of a URL::

    conn = RedisConnection("rediss://db:6380/0", username="app", password=secret)
    records = RedisRuntimeStore(conn, namespace="vf")
    frames = RedisPayloadStore(conn, namespace="vfp")

A URL and the keywords still work (``RedisRuntimeStore(url, timeout=2.0)``). Each store opens
its own client and pool from the connection (its namespace, deadlines and the write-resolution
protocol: ``_client.RedisClient``), whose errors go through one table (``_client.errors``).
Settings are checked once, here: a bad one is a ``ValidationError`` naming it.
"""

from __future__ import annotations

import ssl
from typing import TypedDict, Unpack

from ...contracts.errors import ValidationError
from .._options import check_known
from .._security import Credentials, Secret, TLSConfig
from ._client import client_settings

DEFAULT_URL = "redis://127.0.0.1:6379/0"


class RedisOptions(TypedDict, total=False):
    """The connection keywords of every Redis store.

    * ``timeout`` (5.0): seconds for a connection from the pool, the connect, and each
      command's deadline;
    * ``protocol`` (3): RESP version, 2 or 3;
    * ``max_connections`` (64): the pool's size (a full pool waits up to ``timeout``);
    * ``outcome_window_seconds`` (60.0): how long a write's request marker lives (a lost reply
      is resolved within it);
    * ``wait_replicas`` (0) / ``wait_timeout`` (1.0): ``WAIT`` for that many replicas after each
      write (``ReplicationUnconfirmed`` when fewer acknowledged in time);
    * ``tls`` (a :class:`TLSConfig` or an ``ssl.SSLContext``; ``rediss://`` implies it),
      ``username`` / ``password`` (the ACL user; or the URL's user info).
    """

    timeout: float
    protocol: int
    max_connections: int
    outcome_window_seconds: float
    wait_replicas: int
    wait_timeout: float
    tls: TLSConfig | ssl.SSLContext | None
    username: str | None
    password: str | Secret | None


class RedisConnection:
    """How to reach a Redis server and as whom (see the module docstring)."""

    def __init__(self, url: str = DEFAULT_URL, **options: Unpack[RedisOptions]) -> None:
        check_known(options, RedisOptions.__annotations__)
        self.timeout = float(options.get("timeout", 5.0))
        self.protocol = options.get("protocol", 3)
        self.max_connections = options.get("max_connections", 64)
        self.outcome_window_seconds = float(options.get("outcome_window_seconds", 60.0))
        wait_replicas = options.get("wait_replicas", 0)
        wait_timeout = options.get("wait_timeout", 1.0)
        if self.protocol not in (2, 3):
            raise ValidationError("protocol must be 2 or 3", field="protocol", value=self.protocol)
        if (
            isinstance(wait_replicas, bool)
            or not isinstance(wait_replicas, int)
            or wait_replicas < 0
        ):
            raise ValidationError(
                "wait_replicas must be an int >= 0", field="wait_replicas", value=wait_replicas
            )
        if not isinstance(wait_timeout, int | float) or not wait_timeout > 0:
            raise ValidationError(
                "wait_timeout must be > 0 seconds (WAIT 0 would block forever)",
                field="wait_timeout",
                value=wait_timeout,
            )
        self.wait_replicas = wait_replicas
        self.wait_timeout = float(wait_timeout)
        clean, context, hostname, creds = client_settings(
            url, options.get("tls"), options.get("username"), options.get("password")
        )
        self.url = clean
        """The URL without its user info (never the password)."""
        self.tls_context: ssl.SSLContext | None = context
        self.server_hostname = hostname
        self.credentials: Credentials = creds

    @property
    def username(self) -> str | None:
        """The ACL user (from ``username=`` or the URL), None for the default user."""
        return self.credentials.username

    def __repr__(self) -> str:
        return f"RedisConnection({self.url!r})"


__all__ = ["RedisConnection", "RedisOptions"]
