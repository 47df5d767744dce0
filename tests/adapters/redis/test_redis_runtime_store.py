"""RedisRuntimeStore on a real redis-server: versions, paging, lost replies, errors.

Real time, asyncio only (redis-py is asyncio); the conformance cases RTS-… run on the redis
provider in tests/conformance/test_conformance.py. Replies and requests are cut with a holding
proxy.
"""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from redis import exceptions as rexc

from _servers_fixtures import need_binary
from _store_proxy import HoldingProxy
from videoflow_aio.adapters._errors import NotSent, ReplyLost
from videoflow_aio.adapters.redis import RedisRuntimeStore
from videoflow_aio.adapters.redis import runtime_store as rts_mod
from videoflow_aio.adapters.redis._client import WaitingConnectionPool, errors
from videoflow_aio.contracts.errors import BackendUnavailable, OutcomeUnknown, ValidationError
from videoflow_aio.testing.servers import RedisServer, ServerProcess, free_port

pytestmark = [pytest.mark.anyio, pytest.mark.server, pytest.mark.vtime(False)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # real time: a real server's clock does not follow a virtual one


@pytest.fixture
async def store(redis_srv: ServerProcess) -> AsyncIterator[RedisRuntimeStore]:
    s = RedisRuntimeStore(redis_srv.url, namespace=f"t-{uuid.uuid4().hex[:8]}", timeout=2.0)
    yield s
    await s.aclose()


def _n(version: str | None) -> int:
    assert version is not None
    return int(version.split("-")[0])


async def test_versions_come_from_one_store_wide_counter(store: RedisRuntimeStore) -> None:
    assert await store.cas("a", None, b"1")
    _, va = await store.get("a")
    assert await store.cas("b", None, b"1")
    _, vb = await store.get("b")
    assert await store.delete("a", va)
    assert await store.cas("a", None, b"2")
    _, va2 = await store.get("a")
    assert _n(va) < _n(vb) < _n(va2)  # never reused, not even after delete + re-create
    assert not await store.cas("a", va, b"stale")  # no ABA
    assert (await store.get("a"))[0] == b"2"


async def test_scan_pages_in_key_order(
    store: RedisRuntimeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rts_mod, "_PAGE", 3)
    keys = [f"p/{i:02d}" for i in range(10)] + ["p", "q/1", "o/9"]
    for k in keys:
        assert await store.cas(k, None, k.encode())
    got = await store.scan("p/")
    assert [k for k, _, _ in got] == sorted(k for k in keys if k.startswith("p/"))
    assert all(v == k.encode() for k, v, _ in got)
    assert len(await store.scan("")) == len(keys)
    for i in range(7):
        await store.append("log", b"%d" % i)
    assert await store.log_entries("log") == [b"%d" % i for i in range(7)]


async def test_protocol_is_pinned_and_pool_blocks(redis_srv: ServerProcess) -> None:
    for protocol in (2, 3):
        s = RedisRuntimeStore(redis_srv.url, namespace=f"p{protocol}", protocol=protocol)
        pool = s.client.connection_pool
        assert isinstance(pool, WaitingConnectionPool)
        assert pool.connection_kwargs["protocol"] == protocol
        assert await s.cas("k", None, b"v")
        assert (await s.get("k"))[0] == b"v"
        assert [k for k, _, _ in await s.scan("")] == ["k"]
        await s.aclose()


async def test_aclose_closes_every_pooled_connection(redis_srv: ServerProcess) -> None:
    s = RedisRuntimeStore(redis_srv.url, namespace=f"close-{uuid.uuid4().hex[:6]}")
    pool = s.client.connection_pool
    async with anyio.create_task_group() as tg:  # several connections at once
        for i in range(4):
            tg.start_soon(s.cas, f"k{i}", None, b"v")
    opened = list(pool._available_connections)
    assert opened and any(c.is_connected for c in opened)
    await s.drop_namespace()
    await s.aclose()
    assert not any(c.is_connected for c in [*opened, *pool._in_use_connections])


async def test_capabilities_durable_only_with_aof_always(store: RedisRuntimeStore) -> None:
    caps = await store.capabilities()
    assert caps.durable is False  # the fixture server runs without AOF
    assert caps.dense_log_numbers is True
    assert [await store.append("l", b"x") for _ in range(3)] == [1, 2, 3]


async def test_bad_input_is_refused(store: RedisRuntimeStore) -> None:
    with pytest.raises(ValidationError):
        await store.cas("", None, b"x")
    with pytest.raises(ValidationError):
        await store.cas("k", None, "text")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        await store.cas("k", "garbage", b"x")
    assert await store.scan("") == []


async def test_foreign_data_is_mapped_not_leaked(store: RedisRuntimeStore) -> None:
    # a key of the wrong type behind the store's back: Redis answers WRONGTYPE
    await store.client.set(f"{store.namespace}:rs:k:broken", b"not a hash")
    with pytest.raises(BackendUnavailable) as info:
        await store.get("broken")
    assert "WRONGTYPE" in str(info.value)
    with pytest.raises(BackendUnavailable):
        await store.cas("broken", None, b"x")


async def test_unreachable_server() -> None:
    s = RedisRuntimeStore(f"redis://127.0.0.1:{free_port()}/0", timeout=0.5)
    with pytest.raises(BackendUnavailable):
        await s.get("k")
    # a write that could not even connect was never sent: a definite "not applied"
    with pytest.raises(BackendUnavailable) as info:
        await s.cas("k", None, b"v")
    assert info.value.fields["applied"] is False
    await s.aclose()


async def test_a_deadline_passing_while_connecting_is_not_sent() -> None:
    """A server that accepts TCP but never answers redis-py's HELLO: the deadline passes
    before the pool hands out a connection, so the write was never sent — a definite "not
    applied", not an unknown outcome (which the unreachable server above also got on a
    loaded machine, once the refused connect and its diagnosis outlasted the deadline)."""
    with socket.create_server(("127.0.0.1", 0)) as silent:  # the kernel accepts; no reply
        s = RedisRuntimeStore(f"redis://127.0.0.1:{silent.getsockname()[1]}/0", timeout=0.3)
        with pytest.raises(BackendUnavailable) as info:
            await s.cas("k", None, b"v")
        assert info.value.fields["applied"] is False
        assert not isinstance(info.value, OutcomeUnknown)
        await s.aclose()


# -- lost replies -----------------------------------------------------------------------------


async def _proxied(srv: ServerProcess, proxy: HoldingProxy, deadline: float) -> RedisRuntimeStore:
    s = RedisRuntimeStore(
        f"redis://127.0.0.1:{proxy.port}/0", namespace=f"x-{uuid.uuid4().hex[:8]}", timeout=deadline
    )
    assert await s.cas("warm", None, b"up")  # one pooled connection now exists
    return s


async def test_lost_reply_is_resolved_as_applied(redis_srv: ServerProcess) -> None:
    async with HoldingProxy(redis_srv.port) as proxy:
        s = await _proxied(redis_srv, proxy, deadline=0.6)
        proxy.hold("down")  # the CAS reaches the server; its reply does not come back
        proxy.release_later(0.9)  # after the deadline, before the read-back's deadline
        assert await s.cas("k", None, b"v") is True
        assert (await s.get("k"))[0] == b"v"
        await s.aclose()


async def test_lost_request_is_fenced_and_never_applies_late(
    redis_srv: ServerProcess,
) -> None:
    async with HoldingProxy(redis_srv.port) as proxy:
        s = await _proxied(redis_srv, proxy, deadline=0.6)
        proxy.hold("up")  # the CAS request is held on the existing connection
        with pytest.raises(BackendUnavailable) as info:
            await s.cas("k", None, b"late")
        assert info.value.fields.get("applied") is False
        proxy.release()  # now the held request reaches the server: the fence refuses it
        await anyio.sleep(0.2)
        assert await s.get("k") == (None, None)
        assert await s.cas("k", None, b"fresh") is True
        await s.aclose()


async def test_unresolvable_loss_is_outcome_unknown(redis_srv: ServerProcess) -> None:
    async with HoldingProxy(redis_srv.port) as proxy:
        s = await _proxied(redis_srv, proxy, deadline=0.2)
        proxy.hold("down", existing_only=False)  # every reply, the read-back's included
        with pytest.raises(OutcomeUnknown) as info:
            await s.cas("k", None, b"v")
        assert info.value.operation == "cas"
        proxy.release()
        direct = RedisRuntimeStore(redis_srv.url, namespace=s.namespace)
        assert (await direct.get("k"))[0] == b"v"  # it had committed: unknown was the truth
        await direct.aclose()
        await s.aclose()


async def test_cancelled_cas_is_settled_before_cancellation_returns(
    redis_srv: ServerProcess,
) -> None:
    async with HoldingProxy(redis_srv.port) as proxy:
        s = await _proxied(redis_srv, proxy, deadline=1.0)
        proxy.hold("down")
        proxy.release_later(0.3)
        with anyio.move_on_after(0.05) as scope:
            await s.cas("k", None, b"v")
        assert scope.cancelled_caught
        # the outcome is settled: the CAS applied (its marker says so), and a repeat loses
        assert (await s.get("k"))[0] == b"v"
        assert await s.cas("k", None, b"again") is False
        await s.aclose()


async def test_a_full_pool_waits_instead_of_raising(redis_srv: ServerProcess) -> None:
    s = RedisRuntimeStore(
        redis_srv.url, namespace=f"pool-{uuid.uuid4().hex[:6]}", max_connections=2
    )
    results: list[bool] = []

    async def one(i: int) -> None:
        results.append(await s.cas(f"k{i}", None, b"v"))

    async with anyio.create_task_group() as tg:
        for i in range(40):
            tg.start_soon(one, i)
    assert results == [True] * 40
    await s.aclose()


async def test_failed_connects_do_not_widen_the_pool(redis_srv: ServerProcess) -> None:
    """A connect that failed gave its pool slot back twice (redis-py releases the connection
    itself): after an outage the pool opened more than ``max_connections`` and a caller got
    redis-py's "Too many connections" instead of waiting for a free one."""
    port = free_port()
    pool = WaitingConnectionPool(wait_timeout=30.0, host="127.0.0.1", port=port, max_connections=2)
    for _ in range(3):  # the server is down
        with pytest.raises(NotSent, match="connecting to"):
            await pool.get_connection()

    async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_r, up_w = await asyncio.open_connection("127.0.0.1", redis_srv.port)

        async def pipe(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            while data := await r.read(65536):
                w.write(data)
            w.close()

        await asyncio.gather(pipe(reader, up_w), pipe(up_r, writer), return_exceptions=True)

    back = await asyncio.start_server(forward, "127.0.0.1", port)  # the server is back
    held = [await pool.get_connection() for _ in range(2)]
    got: list[object] = []

    async def third() -> None:
        got.append(await pool.get_connection())

    async with anyio.create_task_group() as tg:
        tg.start_soon(third)
        await anyio.wait_all_tasks_blocked()  # the third caller waits, or has raised
        assert got == []  # the pool is full: it waits (it raised "Too many connections")
        await pool.release(held[0])
    assert got == [held[0]]
    await pool.disconnect()
    back.close()
    await back.wait_closed()


async def test_aof_always_server_keeps_records_and_versions_across_a_restart(
    tmp_path: Path,
) -> None:
    need_binary("redis-server")
    server = RedisServer(appendonly=True, appendfsync="always", data_dir=tmp_path / "aof")
    async with server as srv:
        s = RedisRuntimeStore(srv.url, namespace="dur")
        assert (await s.capabilities()).durable
        assert await s.cas("k", None, b"v1")
        _, v1 = await s.get("k")
        assert await s.append("log", b"r1") == 1
        await s.aclose()
    async with server as srv2:  # a new process on the same AOF
        s = RedisRuntimeStore(srv2.url, namespace="dur")
        assert await s.get("k") == (b"v1", v1)
        assert await s.cas("k", v1, b"v2")
        _, v2 = await s.get("k")
        assert _n(v2) > _n(v1)  # the store-wide counter survived: no version reused
        assert await s.append("log", b"r2") == 2
        assert await s.log_entries("log") == [b"r1", b"r2"]
        await s.aclose()


async def test_scan_pages_are_bounded_in_bytes(
    store: RedisRuntimeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rts_mod, "_PAGE_BYTES", 10)
    for i in range(5):
        assert await store.cas(f"b/{i}", None, b"x" * 8)  # two values per 10-byte page
    got = await store.scan("b/")
    assert [k for k, _, _ in got] == [f"b/{i}" for i in range(5)]


# -- the one exception map (no server) ------------------------------------------------------------
@pytest.mark.parametrize(
    ("raised", "write", "expected", "applied"),
    [
        (rexc.ResponseError("OOM command not allowed"), True, BackendUnavailable, None),
        (rexc.ConnectionError("No connection available."), True, BackendUnavailable, False),
        (
            rexc.ConnectionError("Error 111 connecting to 127.0.0.1:1."),
            True,
            BackendUnavailable,
            False,
        ),
        (rexc.ConnectionError("Connection reset by peer"), True, ReplyLost, None),
        (TimeoutError(), True, ReplyLost, None),
        (rexc.TimeoutError(), False, BackendUnavailable, None),
        (ConnectionResetError(), False, BackendUnavailable, None),
        (rexc.ConnectionError("Connection reset by peer"), False, BackendUnavailable, None),
    ],
)
def test_map_exceptions_classifies_by_what_the_server_may_have_done(
    raised: Exception, write: bool, expected: type[Exception], applied: bool | None
) -> None:
    with pytest.raises(expected) as info, errors("cas", timeout=1.0, write=write):
        raise raised
    assert info.value.__cause__ is raised
    if isinstance(info.value, BackendUnavailable):
        assert info.value.applied is applied


def test_map_exceptions_lets_cancellation_and_other_errors_through() -> None:
    with pytest.raises(KeyError), errors("get", timeout=1.0):
        raise KeyError("not a redis error")
    with pytest.raises(asyncio.CancelledError), errors("get", timeout=1.0):
        raise asyncio.CancelledError()
