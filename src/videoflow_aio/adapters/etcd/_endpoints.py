"""Several etcd endpoints, one gRPC channel each, and which to try first.

A channel talks to one ``host:port``. A cluster store keeps one channel per member
and fails over: an RPC goes to the endpoint that answered last; an endpoint that could not
answer (refused, deadline passed) moves the next one to the front. Whether an operation may
be sent again elsewhere is the caller's decision (``EtcdRuntimeStore``: reads and the
request-marker resolution may; a write whose reply was lost may not — it is resolved).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import anyio

from ...contracts.errors import (
    AccessDenied,
    AuthenticationFailed,
    BackendUnavailable,
    ValidationError,
)
from .._security import Credentials, TLSConfig
from ._channel import EtcdChannel


def parse_endpoints(url: str, endpoints: Sequence[str] | None) -> list[tuple[str, int]]:
    """``(host, port)`` of each endpoint: ``endpoints`` when given, else the comma-separated
    ``url`` (``http://h1:2379,http://h2:2379``); a scheme is optional."""
    given = list(endpoints) if endpoints is not None else url.split(",")
    out: list[tuple[str, int]] = []
    for item in given:
        hostport = str(item).strip().split("//", 1)[-1].rstrip("/")
        host, _, port = hostport.rpartition(":")
        try:
            out.append((host or "127.0.0.1", int(port or 2379)))
        except ValueError:
            raise ValidationError(
                f"etcd endpoint {item!r} is not host:port", field="endpoints", value=item
            ) from None
    if not out:
        raise ValidationError("at least one etcd endpoint is needed", field="endpoints")
    return out


class Endpoints:
    """One :class:`EtcdChannel` per endpoint (created at once, connected on first use)."""

    def __init__(
        self,
        hosts: Sequence[tuple[str, int]],
        timeout: float,
        *,
        tls: TLSConfig | None = None,
        credentials: Credentials | None = None,
    ) -> None:
        self.hosts = list(hosts)
        self._timeout = timeout
        creds = credentials or Credentials()
        self._clients = [
            EtcdChannel(f"{h}:{p}", tls=tls, credentials=creds, timeout=timeout)
            for h, p in self.hosts
        ]
        self._connected = [False] * len(self.hosts)
        self._first = 0

    def __len__(self) -> int:
        return len(self.hosts)

    def order(self) -> list[int]:
        """Endpoint indices, the one that answered last first."""
        n = len(self.hosts)
        return [(self._first + k) % n for k in range(n)]

    async def client(self, i: int) -> EtcdChannel:
        """Endpoint ``i``'s channel, connected (and authenticated). A refusal of the client
        (TLS, credentials) is raised as is; a member that cannot be reached is
        ``BackendUnavailable(applied=False)``: nothing was sent to it."""
        client = self._clients[i]
        if not self._connected[i]:
            try:
                with anyio.fail_after(self._timeout):
                    await client.connect()
            except (AuthenticationFailed, AccessDenied):
                await client.close()
                raise
            except Exception as exc:
                await client.close()
                raise BackendUnavailable(
                    f"etcd connect to {self.describe(i)} failed: {type(exc).__name__}: {exc}",
                    backend="etcd",
                    applied=False,
                ) from exc
            self._connected[i] = True
        return client

    def current(self) -> EtcdChannel:
        """The channel of the endpoint tried first now (the one that answered last)."""
        return self._clients[self._first]

    def answered(self, i: int) -> None:
        """Endpoint ``i`` answered: keep trying it first."""
        self._first = i

    def failed(self, i: int) -> None:
        """Endpoint ``i`` could not answer: try the next one first from now on."""
        if self._first == i:
            self._first = (i + 1) % len(self.hosts)

    def describe(self, i: int) -> str:
        host, port = self.hosts[i]
        return f"{host}:{port}"

    async def aclose(self) -> None:
        for i, client in enumerate(self._clients):
            with contextlib.suppress(Exception):
                await client.close()
            self._connected[i] = False
