"""EtcdRuntimeStore on a real etcd: mod_revision versions, append, paging, limits, lost replies.

Real time, asyncio only (aetcd is grpc.aio); the conformance cases RTS-… run on the etcd
provider in tests/conformance/test_conformance.py.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import grpc  # type: ignore[import-untyped]
import pytest
from aetcd import rpc

from _servers_fixtures import need_binary
from _store_proxy import HoldingProxy
from videoflow_aio.adapters._errors import ReplyLost
from videoflow_aio.adapters.etcd import EtcdRuntimeStore
from videoflow_aio.adapters.etcd import runtime_store as etcd_mod
from videoflow_aio.contracts.errors import BackendUnavailable, OutcomeUnknown, ValidationError
from videoflow_aio.testing.servers import EtcdServer, ServerProcess, free_port

pytestmark = [pytest.mark.anyio, pytest.mark.server, pytest.mark.vtime(False)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # real time: a real server's clock does not follow a virtual one


@pytest.fixture
async def store(etcd_srv: ServerProcess) -> AsyncIterator[EtcdRuntimeStore]:
    s = EtcdRuntimeStore(etcd_srv.url, namespace=f"t-{uuid.uuid4().hex[:8]}", timeout=2.0)
    yield s
    await s.drop_namespace()
    await s.aclose()


def _n(version: str | None) -> int:
    assert version is not None
    return int(version.split("-")[0])


async def test_version_is_mod_revision_and_never_reused(store: EtcdRuntimeStore) -> None:
    assert await store.cas("a", None, b"1")
    _, v1 = await store.get("a")
    resp = await store._call("t", "Range", rpc.RangeRequest(key=store._key("a")))
    assert _n(v1) == resp.kvs[0].mod_revision
    assert await store.delete("a", v1)
    assert await store.cas("a", None, b"2")
    _, v2 = await store.get("a")
    resp = await store._call("t", "Range", rpc.RangeRequest(key=store._key("a")))
    assert resp.kvs[0].version == 1  # etcd's per-key version restarted: not usable for CAS
    assert _n(v2) > _n(v1)
    assert not await store.cas("a", v1, b"stale")  # no ABA
    assert await store.delete("a", None) is True
    assert await store.delete("a", None) is False


async def test_append_is_revision_ordered_not_dense(store: EtcdRuntimeStore) -> None:
    caps = await store.capabilities()
    assert caps.dense_log_numbers is False and caps.durable is True
    numbers = []
    for i in range(3):
        numbers.append(await store.append("log", b"%d" % i))
        assert await store.cas(f"noise{i}", None, b"x")  # other writes take revisions too
    assert numbers == sorted(numbers) and numbers[1] - numbers[0] > 1
    assert await store.log_entries("log") == [b"0", b"1", b"2"]
    assert await store.log_entries("a/b") == []
    await store.append("a/b", b"nested")
    assert await store.log_entries("a") == []  # logs do not nest


async def test_scan_and_logs_page(store: EtcdRuntimeStore, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(etcd_mod, "_PAGE", 3)
    keys = [f"p/{i:02d}" for i in range(10)] + ["p", "q/1", "o/9"]
    for k in keys:
        assert await store.cas(k, None, k.encode())
    got = await store.scan("p/")
    assert [k for k, _, _ in got] == sorted(k for k in keys if k.startswith("p/"))
    assert len(await store.scan("")) == len(keys)
    for i in range(8):
        await store.append("log", b"%d" % i)
    assert await store.log_entries("log") == [b"%d" % i for i in range(8)]


async def test_values_over_the_request_limit_are_refused(store: EtcdRuntimeStore) -> None:
    caps = await store.capabilities()
    with pytest.raises(ValidationError) as info:
        await store.cas("big", None, b"x" * (caps.max_value_bytes + 1))
    assert "max" in str(info.value) or "limit" in str(info.value)
    assert await store.cas("big", None, b"x" * caps.max_value_bytes)  # the limit itself fits
    assert await store.get("big") != (None, None)


async def test_server_side_limit_maps_to_validation_error(
    etcd_srv: ServerProcess,
) -> None:
    # a client configured above the server's real limit: etcd's refusal is mapped, not leaked
    s = EtcdRuntimeStore(etcd_srv.url, namespace="lim", max_request_bytes=8 << 20)
    with pytest.raises(ValidationError):
        await s.cas("big", None, b"x" * (3 << 20))
    assert await s.get("big") == (None, None)
    await s.aclose()


async def test_unreachable_server() -> None:
    s = EtcdRuntimeStore(f"http://127.0.0.1:{free_port()}", timeout=0.3)
    with pytest.raises(BackendUnavailable):
        await s.get("k")
    with pytest.raises((BackendUnavailable, OutcomeUnknown)):
        await s.cas("k", None, b"v")
    await s.aclose()


async def test_fence_stops_a_late_request(store: EtcdRuntimeStore) -> None:
    rid = b"late-request"
    lease = await store._marker_lease()
    assert await store._resolve(store._op + rid, lease) is None  # fenced: not applied
    k = store._key("k")
    put = etcd_mod._put(k, b"late")
    resp = await store._write("cas", rid, [etcd_mod._compare(k, "create", 0)], [put])
    assert not resp.succeeded  # the fenced request id can no longer apply
    assert await store.get("k") == (None, None)


async def test_lost_reply_is_resolved_as_applied(etcd_srv: ServerProcess) -> None:
    async with HoldingProxy(etcd_srv.port) as proxy:
        s = EtcdRuntimeStore(f"http://127.0.0.1:{proxy.port}", namespace="lost", timeout=0.8)
        assert await s.cas("warm", None, b"up")
        proxy.hold("down")
        proxy.release_later(1.2)  # after the CAS deadline, before the read-back's
        assert await s.cas("k", None, b"v") is True
        assert (await s.get("k"))[0] == b"v"
        await s.drop_namespace()
        await s.aclose()


async def test_unresolvable_loss_is_outcome_unknown(etcd_srv: ServerProcess) -> None:
    async with HoldingProxy(etcd_srv.port) as proxy:
        s = EtcdRuntimeStore(f"http://127.0.0.1:{proxy.port}", namespace="unk", timeout=0.2)
        assert await s.cas("warm", None, b"up")
        proxy.hold("down", existing_only=False)
        with pytest.raises(OutcomeUnknown) as info:
            await s.cas("k", None, b"v")
        assert info.value.operation == "cas"
        proxy.release()
        direct = EtcdRuntimeStore(etcd_srv.url, namespace="unk")
        assert (await direct.get("k"))[0] == b"v"  # it had committed
        await direct.drop_namespace()
        await direct.aclose()
        await s.aclose()


async def test_cancelled_cas_is_settled(etcd_srv: ServerProcess) -> None:
    async with HoldingProxy(etcd_srv.port) as proxy:
        s = EtcdRuntimeStore(f"http://127.0.0.1:{proxy.port}", namespace="cxl", timeout=1.0)
        assert await s.cas("warm", None, b"up")
        proxy.hold("down")
        proxy.release_later(0.3)
        with anyio.move_on_after(0.05) as scope:
            await s.cas("k", None, b"v")
        assert scope.cancelled_caught
        assert (await s.get("k"))[0] == b"v"
        assert await s.cas("k", None, b"again") is False
        await s.drop_namespace()
        await s.aclose()


async def test_records_versions_and_logs_survive_a_server_restart(tmp_path: Path) -> None:
    need_binary("etcd")
    async with EtcdServer(data_dir=tmp_path / "etcd") as srv:
        s = EtcdRuntimeStore(srv.url, namespace="dur")
        assert await s.cas("k", None, b"v1")
        _, v1 = await s.get("k")
        first = await s.append("log", b"r1")
        await s.aclose()
    async with EtcdServer(data_dir=tmp_path / "etcd") as srv2:
        s = EtcdRuntimeStore(srv2.url, namespace="dur")
        assert await s.get("k") == (b"v1", v1)
        assert await s.cas("k", v1, b"v2")
        _, v2 = await s.get("k")
        assert _n(v2) > _n(v1)
        assert await s.append("log", b"r2") > first
        assert await s.log_entries("log") == [b"r1", b"r2"]
        await s.aclose()


async def test_pages_larger_than_the_grpc_receive_limit_are_split(store: EtcdRuntimeStore) -> None:
    big = (await store.capabilities()).max_value_bytes  # ~1.5 MiB each, 4 MiB gRPC limit
    for i in range(4):
        assert await store.cas(f"big/{i}", None, bytes([i]) * big)
        await store.append("biglog", bytes([i]) * big)
    got = await store.scan("big/")
    assert [(k, len(v)) for k, v, _ in got] == [(f"big/{i}", big) for i in range(4)]
    assert [r[:1] for r in await store.log_entries("biglog")] == [bytes([i]) for i in range(4)]


# -- the one exception map (no server) ------------------------------------------------------------
def _rpc_error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=details)


@pytest.mark.parametrize(
    ("code", "details", "write", "expected", "applied"),
    [
        (grpc.StatusCode.INVALID_ARGUMENT, "etcdserver: request is too large", True,
         ValidationError, None),
        (grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses", True,
         BackendUnavailable, False),
        (grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", True, ReplyLost, None),
        (grpc.StatusCode.UNAVAILABLE, "Socket closed", True, ReplyLost, None),
        (grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", False, BackendUnavailable, None),
        (grpc.StatusCode.FAILED_PRECONDITION, "etcdserver: no leader", True,
         BackendUnavailable, None),
    ],
)  # fmt: skip
def test_errors_map_by_what_the_server_may_have_done(
    code: grpc.StatusCode, details: str, write: bool, expected: type[Exception], applied: object
) -> None:
    store = EtcdRuntimeStore("http://127.0.0.1:1")
    raised = _rpc_error(code, details)
    with pytest.raises(expected) as info, store._errors("cas", write=write):
        raise raised
    assert info.value.__cause__ is raised
    if isinstance(info.value, BackendUnavailable):
        assert info.value.fields.get("applied") is applied
