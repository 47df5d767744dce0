"""Server fixtures for tests that need redis-server / etcd / nats-server (import what you use).

A missing binary skips the test, unless ``VIDEOFLOW_REQUIRE_SERVERS=1`` (CI): then it fails.
Servers are module-scoped: one per test module that uses the fixture.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from videoflow_aio.testing.servers import (
    ServerProcess,
    binary_unavailable,
    servers_required,
    start_etcd,
    start_nats,
    start_redis,
)


def need_binary(name: str) -> None:
    """Skip (or, under VIDEOFLOW_REQUIRE_SERVERS=1, fail) when ``name`` is not installed."""
    reason = binary_unavailable(name)
    if reason is None:
        return
    if servers_required():
        pytest.fail(f"VIDEOFLOW_REQUIRE_SERVERS=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def redis_srv() -> Iterator[ServerProcess]:
    """A plain redis-server (no maxmemory)."""
    need_binary("redis-server")
    srv = start_redis()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def redis_durable_srv() -> Iterator[ServerProcess]:
    """redis-server for the durable payload tier: noeviction, a generous maxmemory."""
    need_binary("redis-server")
    srv = start_redis(maxmemory="256mb", policy="noeviction")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def redis_evictable_srv() -> Iterator[ServerProcess]:
    """redis-server for the evictable payload tier: volatile-lru."""
    need_binary("redis-server")
    srv = start_redis(maxmemory="64mb", policy="volatile-lru")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def etcd_srv() -> Iterator[ServerProcess]:
    need_binary("etcd")
    srv = start_etcd()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def nats_srv() -> Iterator[ServerProcess]:
    need_binary("nats-server")
    srv = start_nats()
    yield srv
    srv.stop()
