"""The fault soak, bounded: workloads on each cluster while the schedule kills and pauses members
(leader first); the checker's figures are printed (even under ``pytest -q``) and nothing
acknowledged may be lost where the deployment promises durability.

The longer soak with more faults: ``python benchmarks/cluster_soak.py``.
"""

from __future__ import annotations

import uuid

import anyio
import pytest

from _servers_fixtures import need_binary
from videoflow_aio.observe import ObservationLog
from videoflow_aio.testing import soak, workload
from videoflow_aio.testing.clusters import ClusterProcess, NatsCluster, RedisReplicaSet

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
FAULTS = 2  # kill -9 the leader, then SIGSTOP the leader
CAP = 90.0


def _show(capsys: pytest.CaptureFixture[str], result: soak.SoakResult) -> None:
    with capsys.disabled():
        print(f"\n  soak: {result.figure()}")


def _durable(result: soak.SoakResult) -> None:
    r = result.report
    assert r.faults >= FAULTS, result.figure()
    assert r.acknowledged > 0, result.figure()
    assert r.ok, r.summary()
    assert not r.unverified, r.summary()
    assert all(a.resolution != "unresolved" for a in r.ambiguous), r.summary()


def test_etcd_soak(etcd_cluster: ClusterProcess, capsys: pytest.CaptureFixture[str]) -> None:
    from videoflow_aio.adapters.etcd import EtcdRuntimeStore

    async def main() -> soak.SoakResult:
        store = EtcdRuntimeStore(
            endpoints=etcd_cluster.urls, namespace=f"soak{uuid.uuid4().hex[:6]}", timeout=2.0
        )

        async def cas(log: ObservationLog, stop: anyio.Event) -> None:
            await workload.cas_workload(
                store, log, keys=3, workers=4, ops=100_000,
                deadline=anyio.current_time() + CAP, stop=stop,
            )  # fmt: skip

        result = await soak.soak("etcd 3 members", etcd_cluster, [cas], faults=FAULTS)
        await store.drop_namespace()
        await store.aclose()
        return result

    result = anyio.run(main)
    _show(capsys, result)
    _durable(result)


def test_redis_soak(redis_replicaset: ClusterProcess, capsys: pytest.CaptureFixture[str]) -> None:
    from videoflow_aio.adapters.redis import RedisPayloadStore, RedisRuntimeStore

    async def main() -> soak.SoakResult:
        url, ns = redis_replicaset.members[0].url, f"soak{uuid.uuid4().hex[:6]}"
        rts = RedisRuntimeStore(url, namespace=ns, wait_replicas=1, wait_timeout=1.0)
        pay = RedisPayloadStore(url, namespace=ns + "p", wait_replicas=1, wait_timeout=1.0)

        async def cas(log: ObservationLog, stop: anyio.Event) -> None:
            await workload.cas_workload(
                rts, log, keys=3, workers=4, ops=100_000,
                deadline=anyio.current_time() + CAP, stop=stop,
            )  # fmt: skip

        async def puts(log: ObservationLog, stop: anyio.Event) -> None:
            await workload.payload_workload(
                pay, log, puts=100_000, deadline=anyio.current_time() + CAP, stop=stop
            )

        result = await soak.soak(
            "redis primary+replica, wait_replicas=1", redis_replicaset, [cas, puts],
            faults=FAULTS, down_for=1.0,
        )  # fmt: skip
        for store in (rts, pay):
            await store.drop_namespace()
            await store.aclose()
        return result

    result = anyio.run(main)
    _show(capsys, result)
    _durable(result)


def test_nats_soak(nats_cluster: ClusterProcess, capsys: pytest.CaptureFixture[str]) -> None:
    from videoflow_aio.conformance.providers.nats_cluster import replicated_backend
    from videoflow_aio.contracts.messaging import make_channel, make_subscription

    async def main() -> soak.SoakResult:
        tag = uuid.uuid4().hex[:6]
        backend = replicated_backend(
            nats_cluster.urls, 3, stream_prefix=f"SOAK{tag}", subject_prefix=f"soak{tag}",
            request_timeout=2.0,
        )  # fmt: skip
        spec = make_channel("f", "r", "n", "work", "limits", max_msgs=1_000_000, persistence=True)
        sub = make_subscription(spec.channel, "w", ack_wait_seconds=2.0, max_deliver=-1)
        with anyio.fail_after(30):
            while True:  # a new R3 stream elects its leader first
                try:
                    await backend.ensure_channel(spec, "op-ch")
                    await backend.ensure_subscription(sub, "op-sub")
                    break
                except Exception:
                    await anyio.sleep(0.1)

        async def messages(log: ObservationLog, stop: anyio.Event) -> None:
            await workload.messaging_workload(
                backend, log, sub, publications=100_000, publish_seconds=2.0,
                deadline=anyio.current_time() + CAP, stop=stop,
            )  # fmt: skip

        spec_ = nats_cluster.options
        assert isinstance(spec_, NatsCluster)
        stream = backend.names.stream(spec.channel)
        result = await soak.soak(
            "nats 3 nodes R3", nats_cluster, [messages], faults=FAULTS,
            leader=lambda: spec_.stream_leader(nats_cluster, stream),
        )  # fmt: skip
        await backend.aclose()
        return result

    result = anyio.run(main)
    _show(capsys, result)
    _durable(result)


@pytest.mark.server
@pytest.mark.parametrize("wait", [0, 1])
def test_redis_failover_after_a_partition(wait: int, capsys: pytest.CaptureFixture[str]) -> None:
    """Jepsen's Sentinel finding, by hand: the replica cut off, the primary acknowledging
    alone, then killed and the replica promoted. Without WAIT acknowledged writes are lost;
    with wait_replicas=1 none that was confirmed is."""
    need_binary("redis-server")

    async def main() -> soak.SoakResult:
        async with RedisReplicaSet(appendonly=True, appendfsync="always") as cluster:
            return await soak.redis_failover(cluster, wait_replicas=wait, partition=True)

    result = anyio.run(main)
    _show(capsys, result)
    r = result.report
    if wait:
        assert r.ok and r.acknowledged > 0, r.summary()
    else:
        assert len(r.lost) > 0, r.summary()  # reproduced: Redis promised nothing here
        assert {v.kind for v in r.violations} == {"lost"}
