"""RedisPayloadStore on real redis-server: budget ledger, real OOM, tiers vs server policy,
lost replies and Redis' own eviction (their use from trio: tests/adapters/test_trio_bridge.py).

The PAY-… conformance cases run on the redis provider (both tiers) in
tests/conformance/test_conformance.py.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from _servers_fixtures import need_binary
from _store_proxy import HoldingProxy
from videoflow_aio.adapters.redis import RedisPayloadStore
from videoflow_aio.adapters.redis._payload_controls import RedisPayloadControls
from videoflow_aio.contracts._base import Known
from videoflow_aio.contracts.errors import IncompatibleProfile
from videoflow_aio.contracts.payload import (
    Missing,
    ObligationLedger,
    PayloadBackpressure,
    PayloadBytes,
    RetentionContract,
    Tier,
)
from videoflow_aio.testing.servers import RedisServer, ServerProcess

pytestmark = [pytest.mark.server, pytest.mark.vtime(False)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # real time: a real server's clock does not follow a virtual one


class _Ledger(ObligationLedger):
    def __init__(self, required: dict[str, tuple[str, ...]] | None = None) -> None:
        self.required = dict(required or {})

    def required_obligations(self) -> dict[str, tuple[str, ...]]:
        return self.required


def _ns() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def durable(redis_durable_srv: ServerProcess) -> AsyncIterator[RedisPayloadStore]:
    s = RedisPayloadStore(redis_durable_srv.url, namespace=_ns(), max_bytes=2000)
    yield s
    await s.aclose()


@pytest.mark.anyio
async def test_budget_ledger_follows_ttl_expiry_and_outside_deletes(
    durable: RedisPayloadStore,
) -> None:
    short = RetentionContract(ttl_seconds=0.15)
    a = await durable.put(b"a" * 1000, "a", short)
    await durable.put(b"b" * 1000, "b", RetentionContract(ttl_seconds=60))
    with pytest.raises(PayloadBackpressure) as info:
        await durable.put(b"c" * 1000, "c", RetentionContract(ttl_seconds=60))
    assert (info.value.used, info.value.size, info.value.budget) == (2000, 1000, 2000)
    await anyio.sleep(0.3)  # a's TTL fired on the server; the ledger learns it exactly
    assert isinstance(await durable.read(a), Missing)
    await durable.put(b"c" * 1000, "c", RetentionContract(ttl_seconds=60))
    assert await durable.stored_bytes() == 2000
    await RedisPayloadControls(durable).delete("b")  # behind the store's back
    assert await durable.stored_bytes() == 1000
    await durable.put(b"d" * 1000, "d", RetentionContract(ttl_seconds=60))


@pytest.mark.anyio
async def test_obligation_deadlines_convert_to_the_loop_clock(durable: RedisPayloadStore) -> None:
    ref = await durable.put(b"x" * 10, "k", RetentionContract(ttl_seconds=60))
    t0 = anyio.current_time()
    deadline = t0 + 5.0
    receipt = await durable.acquire_obligation(ref, "reader/a", deadline)
    t1 = anyio.current_time()
    assert receipt.deadline == deadline
    assert receipt.expires_at is not None and receipt.expires_at >= 59
    seen = await RedisPayloadControls(durable).obligations("k")
    t2 = anyio.current_time()
    assert abs(seen["reader/a"] - deadline) <= _conversion_bound(t1 - t0, t2 - t1)


def _conversion_bound(*calls: float) -> float:
    """How far a deadline sent as "remaining seconds" and read back through the server's
    clock (``TIME``) can be off: each conversion reads the loop clock before its call and the
    server's clock during it, so the error is at most the longest of the calls (a fixed
    0.05 s failed under load: a call took 0.19 s), plus the server's millisecond rounding."""
    return max(calls) + 0.002


@pytest.mark.anyio
async def test_tier_must_match_the_server_policy(
    redis_durable_srv: ServerProcess,
    redis_evictable_srv: ServerProcess,
) -> None:
    mismatched: list[tuple[str, Tier]] = [
        (redis_durable_srv.url, "evictable"),
        (redis_evictable_srv.url, "durable"),
    ]
    for url, tier in mismatched:
        s = RedisPayloadStore(url, tier=tier, namespace=_ns())
        with pytest.raises(IncompatibleProfile):
            await s.put(b"x", "k", RetentionContract())
        await s.aclose()


@pytest.mark.anyio
async def test_real_oom_is_backpressure_and_release_still_runs() -> None:
    need_binary("redis-server")
    async with RedisServer(maxmemory="3mb", policy="noeviction") as srv:
        s = RedisPayloadStore(srv.url, namespace=_ns())
        refs = []
        with pytest.raises(PayloadBackpressure) as info:
            for i in range(64):
                refs.append(
                    await s.put(
                        bytes([i]) * (256 << 10), f"o{i}", RetentionContract(obligations=("r",))
                    )
                )
        assert "maxmemory" in str(info.value)
        assert refs, "some puts fit before the server refused"
        # under memory pressure, releases (allow-oom scripts) still run and free memory
        outcomes = [(await s.release_obligation(r, "r", "done")).outcome for r in refs]
        assert outcomes == ["reclaimed"] * len(refs)
        assert await s.inventory() == Known(())
        await s.aclose()


@pytest.mark.anyio
async def test_lost_put_reply_is_resolved(redis_durable_srv: ServerProcess) -> None:
    async with HoldingProxy(redis_durable_srv.port) as proxy:
        s = RedisPayloadStore(f"redis://127.0.0.1:{proxy.port}/0", namespace=_ns(), timeout=0.3)
        await s.put(b"warm", "warm", RetentionContract())
        proxy.hold("down")
        proxy.release_later(0.45)
        ref = await s.put(b"v" * 100, "k", RetentionContract(obligations=("r",)))
        result = await s.read(ref)
        assert isinstance(result, PayloadBytes) and result.data == b"v" * 100
        assert (await s.release_obligation(ref, "r", "done")).outcome == "reclaimed"
        await s.aclose()


@pytest.mark.anyio
async def test_release_replay_returns_the_recorded_outcome(durable: RedisPayloadStore) -> None:
    ref = await durable.put(b"x", "k", RetentionContract(obligations=("a", "b")))
    args = ["rid-1", ref.key, ref.generation, "a"]
    first = await durable._release(keys=(), args=args)
    again = await durable._release(keys=(), args=args)  # the same request, delivered twice
    assert first == again and b"released" in first
    r = await durable.release_obligation(ref, "a", "done")
    assert r.outcome == "already-released"


@pytest.mark.anyio
async def test_redis_own_eviction_reads_as_missing_and_reconcile_cleans_up() -> None:
    need_binary("redis-server")
    async with RedisServer(maxmemory="4mb", policy="volatile-lru") as srv:
        s = RedisPayloadStore(srv.url, tier="evictable", namespace=_ns())
        refs = [
            await s.put(
                bytes([i]) * (128 << 10),
                f"e{i}",
                RetentionContract(ttl_seconds=600, obligations=("r",), obligation_seconds=600),
            )
            for i in range(60)
        ]
        results = [await s.read(r) for r in refs]
        missing = [r for r in results if isinstance(r, Missing)]
        assert missing, "Redis evicted objects although readers held obligations"
        assert all(isinstance(r, Missing | PayloadBytes) for r in results)
        obs = await s.reconcile(_Ledger(), "after-eviction")
        by_key = {r.key: r for r in refs}
        for key in obs.dangling_sets_removed:  # only sets whose object is really gone
            assert isinstance(await s.read(by_key[key]), Missing)
        inv = await s.inventory()
        assert isinstance(inv, Known) and inv.value
        for ref in inv.value:  # metadata may be evicted apart from the bytes: still readable
            assert isinstance(await s.read(ref), PayloadBytes | Missing)
        await s.aclose()


@pytest.mark.anyio
async def test_receipts_report_the_deadline_in_force(
    durable: RedisPayloadStore,
    redis_durable_srv: ServerProcess,
) -> None:
    ref = await durable.put(b"x", "k", RetentionContract(ttl_seconds=60))
    now = anyio.current_time()
    later = now + 20.0
    assert (await durable.acquire_obligation(ref, "a", later)).deadline == later
    acquired = anyio.current_time() - now
    back = await durable.renew_obligation(ref, "a", now + 2.0)
    assert back.deadline == later  # exact: this process set it (no clock conversion)
    assert back.expires_at is not None and back.expires_at >= later
    other = RedisPayloadStore(redis_durable_srv.url, namespace=durable.ns)  # another process
    t0 = anyio.current_time()
    seen = await other.renew_obligation(ref, "a", now + 2.0)
    renewed = anyio.current_time() - t0
    # converted through the server's clock: off by at most the longer of the two calls
    assert abs(seen.deadline - later) <= _conversion_bound(acquired, renewed)
    await other.aclose()


@pytest.mark.anyio
async def test_durable_tier_on_aof_always_survives_a_server_restart(tmp_path: Path) -> None:
    need_binary("redis-server")
    server = RedisServer(
        maxmemory="64mb",
        policy="noeviction",
        appendonly=True,
        appendfsync="always",
        data_dir=tmp_path / "aof",
    )
    contract = RetentionContract(ttl_seconds=600, obligations=("a", "b"))
    async with server as srv:
        s = RedisPayloadStore(srv.url, namespace="dur", max_bytes=10_000)
        ref = await s.put(b"x" * 1000, "k", contract)
        assert (await s.release_obligation(ref, "a", "done")).outcome == "released"
        await s.aclose()
    async with server as srv2:  # a new server process on the same AOF
        s = RedisPayloadStore(srv2.url, namespace="dur", max_bytes=10_000)
        result = await s.read(ref)
        assert isinstance(result, PayloadBytes) and result.verified
        assert (await s.release_obligation(ref, "a", "again")).outcome == "already-released"
        assert await s.stored_bytes() == 1000  # the budget ledger survived too
        newer = await s.put(b"y" * 10, "k2", RetentionContract())
        assert int(newer.generation) > int(ref.generation)  # the counter survived
        assert (await s.release_obligation(ref, "b", "done")).outcome == "reclaimed"
        await s.aclose()


@pytest.mark.anyio
async def test_forwarding_extends_the_ttl_and_evictable_refusal_evicts_nothing(
    redis_evictable_srv: ServerProcess,
) -> None:
    s = RedisPayloadStore(
        redis_evictable_srv.url, tier="evictable", namespace=_ns(), max_bytes=3000
    )
    ref = await s.put(b"a" * 1000, "a", RetentionContract(ttl_seconds=1))
    again = await s.put(b"a" * 1000, "a", RetentionContract(ttl_seconds=60))
    assert again == ref
    assert await s.client.pttl(s.obj_key("a")) > 30_000  # forwarding moved the TTL out
    await s.put(b"b" * 1000, "b", RetentionContract(ttl_seconds=60))
    with pytest.raises(PayloadBackpressure):
        await s.put(b"c" * 3001, "c", RetentionContract(ttl_seconds=60))  # larger than budget
    inv = await s.inventory()
    assert isinstance(inv, Known) and [r.key for r in inv.value] == ["a", "b"]  # none evicted
    await s.put(b"a" * 1000, "a", RetentionContract(ttl_seconds=60))  # forwarding: an access
    b_ref = await s.ref_for_key("b")
    await s.put(b"d" * 2000, "d", RetentionContract(ttl_seconds=60))  # evicts the LRU: "b"
    assert isinstance(await s.read(b_ref), Missing)
    assert isinstance(await s.read(ref), PayloadBytes)
    await s.aclose()
