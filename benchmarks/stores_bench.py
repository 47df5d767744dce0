"""Redis and etcd adapters vs their raw clients, doing the same work on the same server.

    .venv/bin/python benchmarks/stores_bench.py [--ops N] [--payload-cycles N] [--only raw|trio]

Starts its own redis-server (no persistence) and etcd on 127.0.0.1 (or give --redis-url /
--etcd-url). Prints ops/s for each pair and the ratio adapter / raw (target ≥ 0.8):

- Redis CAS: create-only CAS on distinct keys; raw = one Lua EVALSHA (hash {v, ver} + INCR of
  a store-wide counter) on a plain redis.asyncio client; adapter = RedisRuntimeStore.cas
  (input checks, request marker). Sequential and 64 tasks.
- etcd CAS: create-only CAS; raw = aetcd ``transaction(create == 0 → put)``; adapter =
  EtcdRuntimeStore.cas (explicit deadline, request marker in the same txn). Sequential and
  64 tasks.
- payload cycle: put → acquire → read → release of a 4 KiB object; raw = the same five round
  trips with plain commands (SET+HSET pipeline, ZADD, ZADD, GET+HMGET, Lua ZREM/DEL) and the
  same sha256 work; adapter = RedisPayloadStore (durable tier, budget, markers, generations).

Each figure is the median of 7 alternating rounds; "cpu" is this client process's CPU time per
op (process_time), steadier than wall time on a shared machine, and the "cpu ratio" is raw /
adapter CPU per op. Read wall-time differences under ~1.5x as noise on a loaded machine.

Then the trio bridge: the adapters' CAS and get (Redis and etcd runtime stores) and put/read
(Redis payload store) under asyncio and under trio (every call crossing
``adapters._trio_bridge``), alternating rounds of one ``anyio.run`` each (``_bridge_ratio``);
ratio trio ÷ asyncio, the median of paired rounds, target >= 0.8.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import ExitStack

import aetcd
import anyio
import redis.asyncio as aredis

from _bridge_ratio import Figures, Timer, print_ratios, run_tasks, trio_vs_asyncio, unbatched
from videoflow_aio.adapters.etcd import EtcdRuntimeStore
from videoflow_aio.adapters.redis import RedisPayloadStore, RedisRuntimeStore
from videoflow_aio.contracts.payload import RetentionContract
from videoflow_aio.testing.servers import start_etcd, start_redis

RAW_CAS = """
local cur = redis.call('HGET', KEYS[1], 'ver')
if ARGV[1] == '' then
  if cur then return 0 end
elseif cur ~= ARGV[1] then
  return 0
end
local ver = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'v', ARGV[2], 'ver', ver)
return ver
"""

RAW_RELEASE = """
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then return 0 end
if redis.call('EXISTS', KEYS[1]) == 0 then redis.call('DEL', KEYS[2], KEYS[3]) return 2 end
return 1
"""


async def timed(n: int, tasks: int, op: Callable[[int], Awaitable[object]]) -> tuple[float, float]:
    """``(ops/s, client CPU µs/op)`` of ``n`` calls of ``op(i)`` over ``tasks`` tasks."""

    async def worker(w: int) -> None:
        for i in range(w, n, tasks):
            await op(i)

    c0 = time.process_time()
    t0 = time.perf_counter()  # wall-clock: a benchmark measures real throughput
    await asyncio.gather(*(worker(w) for w in range(tasks)))
    wall = time.perf_counter() - t0  # wall-clock: as above
    return n / wall, (time.process_time() - c0) / n * 1e6


def _median(xs: list[float]) -> float:
    return sorted(xs)[len(xs) // 2]


async def paired(
    n: int,
    tasks: int,
    raw_op: Callable[[int], Awaitable[object]],
    adapter_op: Callable[[int], Awaitable[object]],
    rounds: int = 7,
) -> tuple[tuple[float, float], tuple[float, float]]:
    """Medians of ``(ops/s, client CPU µs/op)`` for raw and adapter over ``rounds``
    alternating runs of ``n // rounds`` ops each (alternating keeps a drifting machine load
    from favouring either side)."""
    raw: list[tuple[float, float]] = []
    adapter: list[tuple[float, float]] = []
    per = max(1, n // rounds)
    for r in range(rounds):
        base = (r + 1) * 10_000_000
        raw.append(await timed(per, tasks, lambda i, b=base: raw_op(b + i)))
        adapter.append(await timed(per, tasks, lambda i, b=base: adapter_op(b + i)))
    return (
        (_median([x for x, _ in raw]), _median([c for _, c in raw])),
        (_median([x for x, _ in adapter]), _median([c for _, c in adapter])),
    )


def row(name: str, raw: tuple[float, float], adapter: tuple[float, float]) -> None:
    ratio = adapter[0] / raw[0]
    flag = "ok" if ratio >= 0.8 else "BELOW 0.8"
    cpu_ratio = raw[1] / adapter[1]
    print(
        f"{name:<22} raw {raw[0]:>7.0f}/s {raw[1]:>6.0f}µs cpu | adapter {adapter[0]:>7.0f}/s "
        f"{adapter[1]:>6.0f}µs cpu | ratio {ratio:4.2f} {flag} | cpu ratio {cpu_ratio:4.2f}"
    )


async def bench_redis_cas(url: str, n: int) -> None:
    raw = aredis.Redis.from_url(url, protocol=3)
    script = raw.register_script(RAW_CAS)
    store = RedisRuntimeStore(url, namespace=f"b-{uuid.uuid4().hex[:6]}", protocol=3)
    for tasks in (1, 64):
        tag = uuid.uuid4().hex[:6]

        async def raw_op(i: int, tag: str = tag) -> object:
            return await script(keys=[f"raw:{tag}:{i}", "raw:rev"], args=["", b"v"])

        async def adapter_op(i: int, tag: str = tag) -> object:
            return await store.cas(f"{tag}/{i}", None, b"v")

        await timed(200, tasks, raw_op)  # warm-up (script load, connections)
        await timed(200, tasks, adapter_op)
        r, a = await paired(n, tasks, raw_op, adapter_op)
        row(f"redis CAS {'seq' if tasks == 1 else f'{tasks} tasks'}", r, a)
    await raw.aclose()
    await store.aclose()


def raw_etcd_cas(raw: aetcd.Client, tag: str) -> Callable[[int], Awaitable[object]]:
    """Create-only CAS ``i`` with aetcd alone: ``transaction(create == 0 → put)``."""

    async def raw_op(i: int) -> object:
        key = f"raw/{tag}/{i}".encode()
        return await raw.transaction(
            compare=[raw.transactions.create(key) == 0],
            success=[raw.transactions.put(key, b"v")],
            failure=[],
        )

    return raw_op


async def bench_etcd_cas(url: str, n: int) -> None:
    host, port = url.split("//", 1)[1].rsplit(":", 1)
    raw = aetcd.Client(host, int(port), timeout=5)
    await raw.connect()
    store = EtcdRuntimeStore(url, namespace=f"b-{uuid.uuid4().hex[:6]}")
    for tasks in (1, 64):
        tag = uuid.uuid4().hex[:6]

        raw_op = raw_etcd_cas(raw, tag)

        async def adapter_op(i: int, tag: str = tag) -> object:
            return await store.cas(f"{tag}/{i}", None, b"v")

        await timed(50, tasks, raw_op)
        await timed(50, tasks, adapter_op)
        r, a = await paired(n, tasks, raw_op, adapter_op)
        row(f"etcd CAS {'seq' if tasks == 1 else f'{tasks} tasks'}", r, a)
    await raw.close()
    await store.aclose()


async def bench_payload(url: str, n: int) -> None:
    data = bytes(range(256)) * 16  # 4 KiB
    raw = aredis.Redis.from_url(url, protocol=3)
    release = raw.register_script(RAW_RELEASE)
    store = RedisPayloadStore(
        url, namespace=f"bp-{uuid.uuid4().hex[:6]}", max_bytes=1 << 30, orphan_grace_seconds=60
    )
    contract = RetentionContract(ttl_seconds=600, obligations=("stage/a",), obligation_seconds=60)

    async def raw_cycle(i: int) -> object:
        key = f"rawp:{i}"
        o, m, s = f"{key}:o", f"{key}:m", f"{key}:s"
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        async with raw.pipeline(transaction=True) as p:
            p.set(o, data, px=600_000)
            p.hset(m, mapping={"size": len(data), "digest": digest, "gen": i})
            await p.execute()
        await raw.zadd(s, {"stage/a": time.time() + 60})  # wall-clock: raw baseline's deadline
        await raw.zadd(s, {"reader/x": time.time() + 60}, gt=True)  # wall-clock: as above
        async with raw.pipeline(transaction=True) as p:
            p.get(o)
            p.hmget(m, "size", "digest", "gen")
            got, _meta = await p.execute()
        assert "sha256:" + hashlib.sha256(got).hexdigest() == digest
        await release(keys=[s, o, m], args=["reader/x"])
        return await release(keys=[s, o, m], args=["stage/a"])

    async def adapter_cycle(i: int) -> object:
        ref = await store.put(data, f"obj/{i}", contract)
        await store.acquire_obligation(ref, "reader/x", anyio.current_time() + 60)
        await store.read(ref, reader="reader/x")
        await store.release_obligation(ref, "reader/x", "done")
        return await store.release_obligation(ref, "stage/a", "done")

    await timed(100, 1, raw_cycle)
    await timed(100, 1, adapter_cycle)
    r, a = await paired(n, 1, raw_cycle, adapter_cycle)
    row("payload cycle (seq)", r, a)
    await raw.aclose()
    await store.aclose()


async def bridge_round(redis_url: str, etcd_url: str, n: int) -> Figures:
    """The adapters' CAS, get and payload put/read on whichever backend runs this (anyio:
    the same code on asyncio and trio), on stores of their own."""
    out: Figures = {}
    ns = f"br-{uuid.uuid4().hex[:6]}"
    data = bytes(range(256)) * 16  # 4 KiB
    contract = RetentionContract(ttl_seconds=600, obligations=("stage/a",), obligation_seconds=60)
    for name, store in (
        ("redis", RedisRuntimeStore(redis_url, namespace=ns, protocol=3)),
        ("etcd", EtcdRuntimeStore(etcd_url, namespace=ns)),
    ):
        ops = n if name == "redis" else max(1, n // 3)

        async def cas(i: int, store: object = store) -> None:
            assert await store.cas(f"k/{i}", None, b"v")  # type: ignore[attr-defined]

        async def get(i: int, store: object = store) -> None:
            value, _version = await store.get(f"k/{i}")  # type: ignore[attr-defined]
            assert value == b"v"

        await store.get("warm-up")
        t = Timer()
        await run_tasks(ops, 1, cas)
        t.record(out, f"{name} CAS", ops)
        t = Timer()
        await run_tasks(ops, 1, get)
        t.record(out, f"{name} get", ops)
        t = Timer()

        async def cas_after(
            i: int, f: Callable[[int], Awaitable[None]] = cas, base: int = ops
        ) -> None:
            await f(base + i)

        await run_tasks(ops, 64, cas_after)
        t.record(out, f"{name} CAS 64 tasks", ops)
        await store.aclose()
    payload = RedisPayloadStore(
        redis_url, namespace=f"{ns}-p", max_bytes=1 << 30, orphan_grace_seconds=60
    )
    ops = max(1, n // 3)
    refs = []

    async def put(i: int) -> None:
        refs.append(await payload.put(data, f"obj/{i}", contract))

    async def read(i: int) -> None:
        await payload.read(refs[i], reader="stage/a")

    t = Timer()
    await run_tasks(ops, 1, put)
    t.record(out, "payload put", ops)
    t = Timer()
    await run_tasks(ops, 1, read)
    t.record(out, "payload read", ops)
    await payload.aclose()
    return out


async def main(args: argparse.Namespace) -> None:
    with ExitStack() as stack:
        redis_url = args.redis_url
        if redis_url is None:
            srv = start_redis(maxmemory="512mb", policy="noeviction")
            stack.callback(srv.stop)
            redis_url = srv.url
        etcd_url = args.etcd_url
        if etcd_url is None:
            esrv = start_etcd()
            stack.callback(esrv.stop)
            etcd_url = esrv.url
        print(f"redis {redis_url}  etcd {etcd_url}  ops={args.ops}")
        if args.only != "trio":
            await bench_redis_cas(redis_url, args.ops)
            await bench_etcd_cas(etcd_url, args.etcd_ops)
            await bench_payload(redis_url, args.payload_cycles)
        if args.only != "raw":
            # anyio.run per round, so off this asyncio loop: in a thread of its own
            figures = await anyio.to_thread.run_sync(
                lambda: trio_vs_asyncio(
                    lambda: bridge_round(redis_url, etcd_url, args.bridge_ops), args.rounds
                )
            )
            print_ratios("trio bridge (Redis and etcd adapters)", figures)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--ops", type=int, default=3000, help="Redis CAS ops per measurement")
    ap.add_argument("--etcd-ops", type=int, default=1000, help="etcd CAS ops per measurement")
    ap.add_argument("--payload-cycles", type=int, default=500)
    ap.add_argument("--redis-url")
    ap.add_argument("--etcd-url")
    ap.add_argument("--only", choices=("raw", "trio"), default=None, help="one comparison only")
    ap.add_argument(
        "--unbatched", action="store_true", help="the bridge without its callback batching"
    )
    ap.add_argument("--bridge-ops", type=int, default=1000, help="Redis ops per bridge round")
    ap.add_argument("--rounds", type=int, default=5, help="bridge rounds per backend")
    parsed = ap.parse_args()
    if parsed.unbatched:
        unbatched()
    asyncio.run(main(parsed))
