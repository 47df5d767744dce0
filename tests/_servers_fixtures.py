"""Server fixtures for tests that need redis-server / etcd / nats-server (conftest.py makes
them available everywhere and marks their users ``server``).

A missing binary skips the test, unless ``VIDEOFLOW_REQUIRE_SERVERS=1`` (CI): then it fails.
Servers are module-scoped: one per test module that uses the fixture, started when its first
test runs.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from videoflow_aio.testing.clusters import (
    ClusterProcess,
    EtcdCluster,
    NatsCluster,
    RedisReplicaSet,
)
from videoflow_aio.testing.servers import (
    RedisServer,
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


def _cluster(spec: NatsCluster | EtcdCluster | RedisReplicaSet) -> Iterator[ClusterProcess]:
    need_binary(spec.binary)
    cluster = spec.start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def nats_cluster() -> Iterator[ClusterProcess]:
    """Three nats-server with routes between them, JetStream on each (``sync_interval``
    always: an acknowledged write is on disk)."""
    yield from _cluster(NatsCluster(sync_interval="always"))


@pytest.fixture(scope="module")
def etcd_cluster() -> Iterator[ClusterProcess]:
    """Three etcd members on loopback."""
    yield from _cluster(EtcdCluster())


@pytest.fixture(scope="module")
def redis_replicaset() -> Iterator[ClusterProcess]:
    """A Redis primary (AOF, appendfsync always, noeviction) and one replica."""
    yield from _cluster(
        RedisReplicaSet(
            server=RedisServer(
                maxmemory="256mb", policy="noeviction", appendonly=True, appendfsync="always"
            )
        )
    )


SERVER_FIXTURES = frozenset(
    {
        "redis_srv",
        "redis_durable_srv",
        "redis_evictable_srv",
        "etcd_srv",
        "nats_srv",
        "nats_cluster",
        "etcd_cluster",
        "redis_replicaset",
    }
)
"""The fixtures above: a test using one is marked ``server`` (conftest.py)."""

CLUSTER_FIXTURES = frozenset({"nats_cluster", "etcd_cluster", "redis_replicaset"})
"""The cluster fixtures: a test using one is also marked ``cluster``."""


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``server`` every test that uses one of :data:`SERVER_FIXTURES`."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        if SERVER_FIXTURES.intersection(names) and item.get_closest_marker("server") is None:
            item.add_marker(pytest.mark.server)
        if CLUSTER_FIXTURES.intersection(names) and item.get_closest_marker("cluster") is None:
            item.add_marker(pytest.mark.cluster)
