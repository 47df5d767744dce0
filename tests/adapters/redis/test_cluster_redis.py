"""The Redis stores on a primary and a replica: what an acknowledged write means with and
without ``wait_replicas`` (WAIT), and that a write WAIT could not confirm is never reported as
replicated.

Real time, asyncio only; RTS-… and PAY-… run on the ``redis-replicated`` provider in
tests/conformance/test_conformance.py.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import anyio
import pytest

from _store_proxy import HoldingProxy
from videoflow_aio.adapters.redis import (
    RedisPayloadStore,
    RedisRuntimeStore,
    ReplicationUnconfirmed,
)
from videoflow_aio.conformance.providers._cluster import heal
from videoflow_aio.contracts.errors import OutcomeUnknown, ValidationError
from videoflow_aio.contracts.payload import RetentionContract
from videoflow_aio.testing.clusters import ClusterProcess, RedisReplicaSet, redis_call
from videoflow_aio.testing.servers import RedisServer

pytestmark = [pytest.mark.anyio, pytest.mark.vtime(False)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def cluster(redis_replicaset: ClusterProcess) -> Iterator[ClusterProcess]:
    """The module's replica set, every member running and in sync again after each test."""
    yield redis_replicaset
    heal(redis_replicaset)


def _ns() -> str:
    return f"c{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def rts(cluster: ClusterProcess) -> AsyncIterator[RedisRuntimeStore]:
    # a healthy replica acknowledges in milliseconds; the bound is for a loaded machine
    s = RedisRuntimeStore(cluster.members[0].url, namespace=_ns(), wait_replicas=1, wait_timeout=10)
    yield s
    await s.drop_namespace()
    await s.aclose()


def test_wait_options_are_checked() -> None:
    for bad in (-1, True, 1.5):
        with pytest.raises(ValidationError):
            RedisRuntimeStore("redis://127.0.0.1:1", wait_replicas=bad)  # type: ignore[arg-type]
    for bad_timeout in (0, -1.0):
        with pytest.raises(ValidationError):
            RedisPayloadStore("redis://127.0.0.1:1", wait_replicas=1, wait_timeout=bad_timeout)


async def test_a_waited_write_is_on_the_replica_when_it_returns(
    rts: RedisRuntimeStore, cluster: ClusterProcess
) -> None:
    replica = cluster.members[1]
    for i in range(20):
        assert await rts.cas(f"k{i}", None, b"v")
        # the replica already has it: WAIT returned only after its acknowledgement
        assert redis_call(replica.port, "HGET", f"{rts.namespace}:rs:k:k{i}", "v") == "v"
    n = await rts.append("log", b"r")
    assert n >= 1


async def test_a_paused_replica_makes_the_write_unconfirmed_not_failed(
    rts: RedisRuntimeStore, cluster: ClusterProcess
) -> None:
    assert await rts.cas("k", None, b"1")
    _, v1 = await rts.get("k")
    cluster.members[1].pause()
    fast = RedisRuntimeStore(
        cluster.members[0].url, namespace=rts.namespace, wait_replicas=1, wait_timeout=0.2
    )
    with pytest.raises(ReplicationUnconfirmed) as info:
        await fast.cas("k", v1, b"2")
    err = info.value
    assert isinstance(err, OutcomeUnknown)
    assert (err.acked, err.wanted, err.fields["applied"]) == (0, 1, True)
    assert int(err.reply) != 0  # the script's own answer on the primary: it applied
    assert (await fast.get("k"))[0] == b"2"  # applied on the primary, only not replicated
    cluster.members[1].resume()
    cluster.wait_formed(30)
    await fast.aclose()


async def test_more_replicas_than_exist_is_never_confirmed(
    rts: RedisRuntimeStore, cluster: ClusterProcess
) -> None:
    # the one replica acknowledges writes now (a paused or resyncing replica acknowledged
    # none within 100 ms in a full run: the count is the test's, its timing is the server's)
    assert await rts.cas("ready", None, b"v")
    s = RedisRuntimeStore(
        cluster.members[0].url, namespace=rts.namespace, wait_replicas=2, wait_timeout=2.0
    )
    try:
        with pytest.raises(ReplicationUnconfirmed) as info:
            await s.cas("k", None, b"v")
    finally:
        await s.aclose()
    assert (info.value.acked, info.value.wanted) == (1, 2)


async def test_payload_put_and_release_wait_for_the_replica(cluster: ClusterProcess) -> None:
    store = RedisPayloadStore(cluster.members[0].url, namespace=_ns(), wait_replicas=1)
    contract = RetentionContract(ttl_seconds=60, obligation_seconds=60, obligations=("r1",))
    ref = await store.put(b"frame", "f1", contract)
    replica = cluster.members[1]
    assert redis_call(replica.port, "GET", store.obj_key("f1")) == "frame"
    receipt = await store.release_obligation(ref, "r1", "done")
    assert receipt.outcome in ("reclaimed", "released")
    assert redis_call(replica.port, "EXISTS", store.obj_key("f1")) == 0
    cluster.members[1].pause()
    slow = RedisPayloadStore(
        cluster.members[0].url, namespace=store.namespace, wait_replicas=1, wait_timeout=0.2
    )
    with pytest.raises(ReplicationUnconfirmed):
        await slow.put(b"frame2", "f2", RetentionContract(ttl_seconds=60))
    cluster.members[1].resume()
    await store.drop_namespace()
    await store.aclose()
    await slow.aclose()


async def test_a_lost_reply_resolved_as_applied_still_waits_for_the_replica(
    cluster: ClusterProcess,
) -> None:
    primary = cluster.members[0]
    async with HoldingProxy(primary.port) as proxy:
        s = RedisRuntimeStore(
            f"redis://127.0.0.1:{proxy.port}",
            namespace=_ns(),
            timeout=0.5,
            wait_replicas=1,
            wait_timeout=10,  # the replica's acknowledgement, on a loaded machine
        )
        assert await s.cas("warm", None, b"up")
        proxy.hold("down")  # the reply of the next write is held past its deadline
        proxy.release_later(1.2)
        assert await s.cas("k", None, b"v") is True  # resolved through the marker, then WAIT
        assert redis_call(cluster.members[1].port, "HGET", f"{s.namespace}:rs:k:k", "v") == "v"
        await s.drop_namespace()
        await s.aclose()


async def test_failover_keeps_every_write_the_replica_acknowledged() -> None:
    """Writes confirmed with wait_replicas=1, then the primary killed and its replica
    promoted by hand: every confirmed write is on the new primary."""
    from _servers_fixtures import need_binary

    need_binary("redis-server")
    async with RedisReplicaSet(server=RedisServer(appendonly=True, appendfsync="always")) as c:
        old, new = c.members
        s = RedisRuntimeStore(old.url, namespace="fo", wait_replicas=1)
        confirmed = []
        for i in range(200):
            assert await s.cas(f"k{i}", None, b"v")
            confirmed.append(i)
        await s.aclose()
        old.kill()
        spec = c.options
        assert isinstance(spec, RedisReplicaSet)
        await anyio.to_thread.run_sync(spec.promote, c, new)
        after = RedisRuntimeStore(new.url, namespace="fo")
        present = [i for i in confirmed if (await after.get(f"k{i}"))[0] == b"v"]
        assert present == confirmed
        await after.aclose()
