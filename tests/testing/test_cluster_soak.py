"""The fault soak, bounded: workloads on each cluster while the schedule kills and pauses members
(leader first); the checker's figures are printed (even under ``pytest -q``) and nothing
acknowledged may be lost where the deployment promises durability.

The longer soak with more faults: ``python benchmarks/cluster_soak.py``.
"""

from __future__ import annotations

import dataclasses

import anyio
import pytest

from _servers_fixtures import need_binary
from videoflow_aio.testing import soak
from videoflow_aio.testing.clusters import ClusterProcess, RedisReplicaSet
from videoflow_aio.testing.servers import RedisServer

pytestmark = [pytest.mark.server, pytest.mark.cluster, pytest.mark.slow]
SCHEDULE = soak.Schedule(faults=2)  # kill -9 the leader, then SIGSTOP the leader


def _show(capsys: pytest.CaptureFixture[str], result: soak.SoakResult) -> None:
    with capsys.disabled():
        print(f"\n  soak: {result.figure()}")


def _durable(result: soak.SoakResult) -> None:
    r = result.report
    assert r.faults >= SCHEDULE.faults, result.figure()
    assert r.acknowledged > 0, result.figure()
    assert r.ok, r.summary()
    assert not r.unverified, r.summary()
    assert all(a.resolution != "unresolved" for a in r.ambiguous), r.summary()


@pytest.mark.parametrize("kind", ["etcd", "redis", "nats"])
def test_soak(
    kind: str, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    fixture = {"etcd": "etcd_cluster", "redis": "redis_replicaset", "nats": "nats_cluster"}[kind]
    cluster: ClusterProcess = request.getfixturevalue(fixture)
    deployment = {"etcd": soak.etcd, "redis": soak.redis, "nats": soak.nats}[kind]
    schedule = SCHEDULE if kind != "redis" else dataclasses.replace(SCHEDULE, down_for=1.0)
    result = anyio.run(deployment, cluster, schedule)
    _show(capsys, result)
    _durable(result)


@pytest.mark.parametrize("wait", [0, 1])
def test_redis_failover_after_a_partition(wait: int, capsys: pytest.CaptureFixture[str]) -> None:
    """Jepsen's Sentinel finding, by hand: the replica cut off, the primary acknowledging
    alone, then killed and the replica promoted. Without WAIT acknowledged writes are lost;
    with wait_replicas=1 none that was confirmed is."""
    need_binary("redis-server")

    async def main() -> soak.SoakResult:
        async with RedisReplicaSet(
            server=RedisServer(appendonly=True, appendfsync="always")
        ) as cluster:
            return await soak.redis_failover(cluster, wait_replicas=wait, partition=True)

    result = anyio.run(main)
    _show(capsys, result)
    r = result.report
    if wait:
        assert r.ok and r.acknowledged > 0, r.summary()
    else:
        assert len(r.lost) > 0, r.summary()  # reproduced: Redis promised nothing here
        assert {v.kind for v in r.violations} == {"lost"}
