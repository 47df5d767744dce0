"""The cluster providers (etcd-cluster, redis-replicated): selectable like the others, what
they offer from configuration alone, and member controls only on clusters they started."""

from __future__ import annotations

import anyio
import pytest

from videoflow_aio import conformance
from videoflow_aio.conformance import get_provider
from videoflow_aio.conformance._controls import MemberControls, control_names
from videoflow_aio.conformance._provider import env_options, provider_names
from videoflow_aio.conformance.providers._cluster import ClusterControls, ClusterProvider
from videoflow_aio.testing.clusters import ClusterProcess, EtcdCluster, NatsCluster, RedisReplicaSet

MEMBER = control_names(MemberControls)


def test_cluster_providers_are_registered() -> None:
    names = provider_names()
    assert {"etcd-cluster", "redis-replicated", "nats-cluster"} <= set(names)


def test_what_they_offer_without_starting_anything() -> None:
    etcd = get_provider("etcd-cluster")
    assert isinstance(etcd, ClusterProvider)
    assert etcd.contracts() == {"runtime_store"}
    assert etcd.capabilities("runtime_store") == frozenset({"durable", "replicated"})
    assert etcd.controls("runtime_store") == MEMBER
    assert isinstance(etcd.server_options()["main"], EtcdCluster)
    redis = get_provider("redis-replicated")
    assert isinstance(redis, ClusterProvider)
    assert redis.contracts() == {"runtime_store", "payload"}
    assert redis.capabilities("payload") == frozenset({"evictable", "replicated"})
    assert redis.capabilities("runtime_store") == frozenset({"durable", "replicated"})
    assert (redis.controls("payload") or frozenset()) >= MEMBER
    assert "corrupt" in (redis.controls("payload") or frozenset())
    assert all(isinstance(s, RedisReplicaSet) for s in redis.server_options().values())
    assert not vars(etcd).get("_started") and not vars(redis).get("_started")
    nats = get_provider("nats-cluster")
    assert isinstance(nats, ClusterProvider)
    assert nats.contracts() == {"messaging"}
    caps = nats.capabilities("messaging") or frozenset()
    assert {"replicated", "core_only", "archive", "durable_control", "latest_per_key"} <= caps
    controls = nats.controls("messaging") or frozenset()
    assert MEMBER | {"channel_leader", "another_client", "purge", "pause_acceptance"} <= controls
    assert "restart_server" not in controls  # memory streams outlive a whole-cluster restart
    assert isinstance(nats.server_options()["main"], NatsCluster)


def test_a_given_cluster_is_not_ours_to_kill() -> None:
    etcd = get_provider("etcd-cluster", url="http://127.0.0.1:1,http://127.0.0.1:2")
    assert "replicated" not in (etcd.capabilities("runtime_store") or frozenset())
    assert etcd.controls("runtime_store") == frozenset()
    nats = get_provider("nats-cluster", url="nats://127.0.0.1:1,nats://127.0.0.1:2")
    given = nats.controls("messaging") or frozenset()
    assert "another_client" in given and "pause_acceptance" not in given
    assert not (MEMBER | {"channel_leader", "subscription_leader"}) & given


def test_the_fault_cases_need_replicated_and_skip_elsewhere() -> None:
    fault = [c for c in conformance.select_cases(select="*-8??") if c.id[-3] == "8"]
    assert {c.id for c in fault} >= {"RTS-801", "RTS-802", "PAY-801", "MSG-801"}
    for c in fault:
        assert c.needs == {"replicated"}
        # member faults, leader lookups, and a second client to observe from (MSG-803)
        assert c.controls <= MEMBER | {"channel_leader", "subscription_leader", "another_client"}
    memory = get_provider("memory")
    for contract in ("messaging", "payload", "runtime_store"):
        assert "replicated" not in (memory.capabilities(contract) or frozenset())
    assert "replicated" not in (get_provider("etcd").capabilities("runtime_store") or ())


def test_env_names_have_no_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VIDEOFLOW_ETCD_CLUSTER_URL", "http://a:1,http://b:2")
    assert env_options("etcd-cluster") == {"url": "http://a:1,http://b:2"}


@pytest.mark.anyio
async def test_controls_on_a_cluster_not_started_skip() -> None:
    with pytest.raises(conformance.Skip):
        await ClusterControls(None).leader()
    with pytest.raises(conformance.Skip):
        await ClusterControls(None).kill_member("e1")


def test_nats_cluster_channels_are_replicated(nats_cluster: ClusterProcess) -> None:
    """Every channel on the nats-cluster provider's backend is R3, whatever the case asked,
    and the stream's leader is found from the servers."""
    from videoflow_aio.contracts.messaging import make_channel
    from videoflow_aio.testing.replicated import replicated_backend

    async def main() -> tuple[int, str]:
        b = replicated_backend(nats_cluster.urls, 3, stream_prefix="R3T", subject_prefix="r3t")
        spec = make_channel("f", "r", "n", "work", "limits")  # replicas=1 asked
        with anyio.fail_after(30):
            while True:
                try:
                    verified = await b.ensure_channel(spec, "op")
                    break
                except Exception:
                    await anyio.sleep(0.1)
        spec_ = nats_cluster.options
        assert isinstance(spec_, NatsCluster)
        stream = b.names.stream(spec.channel)
        leader = await anyio.to_thread.run_sync(spec_.stream_leader, nats_cluster, stream)
        await b.aclose()
        return verified.effective.replicas, leader.name if leader else ""

    replicas, leader = anyio.run(main)
    assert replicas == 3
    assert leader in {m.name for m in nats_cluster.members}
