"""pytest fixtures that start real servers: ``redis_server``, ``nats_server``, ``etcd_server``.

Opt in with any one of::

    pytest -p videoflow_aio.testing.servers_plugin             # the command line
    pytest_plugins = ["videoflow_aio.testing.servers_plugin"]  # the top-level conftest.py
    videoflow_servers = true                                   # the ini file

Each fixture is session-scoped: the server starts when the first test asks for it (never
while collecting) and is stopped when the session ends; the value is a
:class:`~videoflow_aio.testing.servers.ServerProcess` (``url``, ``port``, ``pid``, ``dir``;
``monitor_url`` for NATS). Servers bind 127.0.0.1 on free ports, keep their data in a
temporary directory, and die with the pytest process however it ends
(:mod:`videoflow_aio.testing._reaper`). Tests share the server of a session: keep them apart
with a namespace, a stream prefix or a key prefix of their own.

A binary that is not installed skips the test, saying what to install; under
``VIDEOFLOW_REQUIRE_SERVERS=1`` (CI) the test fails instead. A server that does not start is
an error of the test, with the server's log.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .servers import (
    REQUIRE_ENV,
    EtcdServer,
    NatsServer,
    RedisServer,
    Server,
    ServerProcess,
    binary_unavailable,
    servers_required,
)

__all__ = ["etcd_server", "nats_server", "need_server", "redis_server"]


def need_server(binary: str) -> None:
    """Skip the calling test when ``binary`` is not installed, saying how to get it; fail it
    instead under ``VIDEOFLOW_REQUIRE_SERVERS=1``."""
    reason = binary_unavailable(binary)
    if reason is None:
        return
    if servers_required():
        pytest.fail(f"{REQUIRE_ENV}=1 but {reason}", pytrace=False)
    pytest.skip(reason)


def _serve(options: Server) -> Iterator[ServerProcess]:
    need_server(options.binary)
    srv = options.start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[ServerProcess]:
    """A ``redis-server`` for the session (``url``: ``redis://127.0.0.1:PORT``; no
    snapshots, ``maxmemory-policy noeviction`` so the payload tiers accept it)."""
    yield from _serve(RedisServer(policy="noeviction"))


@pytest.fixture(scope="session")
def nats_server() -> Iterator[ServerProcess]:
    """A ``nats-server`` with JetStream for the session (``url``: ``nats://127.0.0.1:PORT``,
    ``monitor_url``: its HTTP monitoring)."""
    yield from _serve(NatsServer())


@pytest.fixture(scope="session")
def etcd_server() -> Iterator[ServerProcess]:
    """A single-member ``etcd`` for the session (``url``: ``http://127.0.0.1:PORT``)."""
    yield from _serve(EtcdServer())
