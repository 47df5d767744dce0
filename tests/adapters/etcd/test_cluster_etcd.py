"""EtcdRuntimeStore on a 3-member etcd: a list of endpoints, failover when a member dies or
pauses, and a write in flight when its member stops answering is resolved — never guessed.

Real time, asyncio only (aetcd is grpc.aio); RTS-… run on the ``etcd-cluster`` provider in
tests/conformance/test_conformance.py.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import anyio
import grpc  # type: ignore[import-untyped]
import pytest

from videoflow_aio.adapters._errors import ReplyLost
from videoflow_aio.adapters.etcd import EtcdRuntimeStore
from videoflow_aio.conformance.providers._cluster import heal
from videoflow_aio.contracts.errors import BackendUnavailable, OutcomeUnknown, ValidationError
from videoflow_aio.testing.clusters import ClusterProcess, Member
from videoflow_aio.testing.servers import free_port

pytestmark = [pytest.mark.anyio, pytest.mark.vtime(False)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # real time: a real server's clock does not follow a virtual one


@pytest.fixture
def cluster(etcd_cluster: ClusterProcess) -> Iterator[ClusterProcess]:
    """The module's cluster, every member running and formed again after each test."""
    yield etcd_cluster
    heal(etcd_cluster)


@pytest.fixture
async def store(cluster: ClusterProcess) -> AsyncIterator[EtcdRuntimeStore]:
    s = EtcdRuntimeStore(endpoints=cluster.urls, namespace=f"c-{uuid.uuid4().hex[:8]}", timeout=1.0)
    yield s
    with anyio.move_on_after(10):
        await s.drop_namespace()
    await s.aclose()


def _in_use(store: EtcdRuntimeStore, cluster: ClusterProcess) -> Member:
    endpoint = store.endpoints[store._endpoints.order()[0]]
    member = next((m for m in cluster.members if m.url.endswith(f"//{endpoint}")), None)
    assert member is not None, f"no member at {endpoint}"
    return member


def test_endpoints_are_parsed() -> None:
    s = EtcdRuntimeStore("http://127.0.0.1:1,http://127.0.0.1:2")
    assert s.endpoints == ["127.0.0.1:1", "127.0.0.1:2"]
    s = EtcdRuntimeStore(endpoints=["127.0.0.1:3", "http://localhost:4/"])
    assert s.endpoints == ["127.0.0.1:3", "localhost:4"]
    with pytest.raises(ValidationError):
        EtcdRuntimeStore(endpoints=["127.0.0.1:http"])
    with pytest.raises(ValidationError):
        EtcdRuntimeStore(endpoints=[])


@pytest.mark.parametrize(
    ("code", "details"),
    [
        (grpc.StatusCode.UNKNOWN, "context deadline exceeded"),  # timed out inside etcd
        (grpc.StatusCode.UNAVAILABLE, "etcdserver: leader changed"),
        (grpc.StatusCode.UNAVAILABLE, "etcdserver: request timed out"),
        (grpc.StatusCode.INTERNAL, "stream terminated"),
    ],
)
def test_a_write_timed_out_inside_etcd_is_resolved_not_refused(
    code: grpc.StatusCode, details: str
) -> None:
    store = EtcdRuntimeStore("http://127.0.0.1:1")
    raised = grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=details)
    with pytest.raises(ReplyLost), store._errors("cas", write=True):
        raise raised


async def test_every_endpoint_down_is_unavailable_and_not_sent() -> None:
    s = EtcdRuntimeStore(endpoints=[f"127.0.0.1:{free_port()}" for _ in range(3)], timeout=0.3)
    with pytest.raises(BackendUnavailable, match="no endpoint answered"):
        await s.get("k")
    with pytest.raises(BackendUnavailable) as info:
        await s.cas("k", None, b"v")
    assert info.value.fields["applied"] is False
    await s.aclose()


async def test_a_killed_member_fails_over(cluster: ClusterProcess) -> None:
    """A follower killed under the store: the next member takes the calls at once (nothing
    was sent to a member that refuses connections)."""
    leader = cluster.leader()
    victim = next(m for m in cluster.members if m is not leader)
    urls = [victim.url] + [m.url for m in cluster.members if m is not victim]
    store = EtcdRuntimeStore(endpoints=urls, namespace=f"c-{uuid.uuid4().hex[:8]}", timeout=2.0)
    assert await store.cas("k", None, b"1")
    _, v1 = await store.get("k")
    assert store._endpoints.order()[0] == 0  # the victim answered
    victim.kill()
    assert await store.get("k") == (b"1", v1)
    assert await store.cas("k", v1, b"2")
    assert store._endpoints.order()[0] != 0
    victim.restart()
    cluster.wait_formed(30)
    # the restarted member has the write it missed
    only = EtcdRuntimeStore(victim.url, namespace=store.namespace, timeout=2.0)
    assert (await _get_retrying(only, "k"))[0] == b"2"
    await only.aclose()
    await store.drop_namespace()
    await store.aclose()


async def test_the_leader_killed_is_unavailable_then_answers(
    store: EtcdRuntimeStore, cluster: ClusterProcess
) -> None:
    """While the others elect a new leader a read may fail — as BackendUnavailable, never as
    an empty answer — and then the store answers again through the new leader."""
    assert await store.cas("k", None, b"1")
    leader = cluster.leader()
    assert leader is not None
    leader.kill()
    assert (await _get_retrying(store, "k"))[0] == b"1"
    assert await store.cas("k2", None, b"after")


async def test_a_write_to_a_paused_member_is_resolved_elsewhere_and_fenced(
    store: EtcdRuntimeStore, cluster: ClusterProcess
) -> None:
    assert await store.cas("warm", None, b"up")
    victim = _in_use(store, cluster)
    victim.pause()
    # the Txn reaches the paused member's socket and gets no answer: its deadline passes, the
    # marker is resolved on another member — not applied, and fenced
    with pytest.raises(BackendUnavailable) as info:
        await store.cas("k", None, b"v")
    assert info.value.fields["applied"] is False
    assert "resolved as not applied" in str(info.value)
    victim.resume()
    cluster.wait_formed(30)
    await anyio.sleep(1.0)  # the resumed member processes what it had received
    assert await store.get("k") == (None, None)  # the late request could not apply
    assert await store.cas("k", None, b"v2")


async def test_reads_fail_over_from_a_paused_member(
    store: EtcdRuntimeStore, cluster: ClusterProcess
) -> None:
    """A follower in use stops answering: the read is asked of the next member. (The member
    in use had been whichever answered first, the leader one time in three: then the others
    must elect one first, and a read may fail meanwhile — under load it did, 1 full run in
    5 — as ``test_the_leader_killed_is_unavailable_then_answers`` states.)"""
    assert await store.cas("k", None, b"1")
    leader = cluster.wait_formed(30)
    for i, endpoint in enumerate(store.endpoints):  # use a follower that answers a read
        if _in_use(store, cluster) is not leader:
            break
        if not leader.url.endswith(f"//{endpoint}"):
            store._endpoints.answered(i)
            assert (await store.get("k"))[0] == b"1"
    victim = _in_use(store, cluster)
    assert victim is not leader
    victim.pause()
    assert (await store.get("k"))[0] == b"1"
    assert [k for k, _, _ in await store.scan("")] == ["k"]
    assert _in_use(store, cluster) is not victim


async def test_increments_while_the_leader_is_killed_lose_nothing(
    store: EtcdRuntimeStore, cluster: ClusterProcess
) -> None:
    """Every confirmed CAS is in the final value; every unknown one resolves either way;
    nothing confirmed as failed appears (each value lists the ids of the CASes applied)."""
    confirmed: set[str] = set()
    refused: set[str] = set()
    unknown: set[str] = set()
    await store.cas("ctr", None, b"")

    async def worker(w: int) -> None:
        for n in range(15):
            op = f"w{w}-{n}"
            value, version = await _get_retrying(store)
            try:
                ok = await store.cas("ctr", version, value + op.encode() + b",")
            except OutcomeUnknown:
                unknown.add(op)
                continue
            except BackendUnavailable as exc:
                (refused if exc.fields.get("applied") is False else unknown).add(op)
                continue
            (confirmed if ok else refused).add(op)

    async with anyio.create_task_group() as tg:
        for w in range(3):
            tg.start_soon(worker, w)
        await anyio.sleep(0.3)
        leader = cluster.leader()
        assert leader is not None
        leader.kill()
    final, _ = await _get_retrying(store)
    applied = {op for op in final.decode().split(",") if op}
    assert confirmed <= applied, f"confirmed CAS lost: {sorted(confirmed - applied)}"
    assert not (applied & refused), f"reported failed but applied: {sorted(applied & refused)}"
    assert applied <= confirmed | unknown
    assert len(confirmed) > 0


async def _get_retrying(store: EtcdRuntimeStore, key: str = "ctr") -> tuple[bytes, str | None]:
    """A read, retried while no member answers (a member just restarted, an election)."""
    with anyio.fail_after(30):
        while True:
            try:
                value, version = await store.get(key)
            except BackendUnavailable:
                await anyio.sleep(0.1)
                continue
            return value or b"", version
