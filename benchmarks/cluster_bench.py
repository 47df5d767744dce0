"""The adapters on clusters: each beside its raw client on the same cluster, and single server
beside cluster for the same workload — ratios from one run.

    .venv/bin/python benchmarks/cluster_bench.py [--ops N] [--only etcd,redis,nats]

Starts its own servers and clusters on 127.0.0.1 (every process stopped by PID at the end):

- etcd: create-only CAS, sequential and 64 tasks. Adapter = EtcdRuntimeStore given all three
  endpoints; raw = aetcd ``transaction(create == 0 → put)`` on the member the adapter uses.
  Then the adapter on a single etcd vs on the 3-member cluster.
- redis: create-only CAS on a primary with one replica. Adapter with ``wait_replicas=1`` vs raw
  ``EVALSHA`` + ``WAIT 1`` pipelined on one connection (the same round trip); then the cost of
  WAIT (the adapter with ``wait_replicas=1`` vs 0 on the replica set) and single server vs
  primary+replica (``wait_replicas=0``: Redis' own acknowledgement).
- nats: confirmed publish (sequential and 256 in flight) and receive + confirmed settle on
  file streams, R3 on a 3-node JetStream cluster (``sync_interval`` default); adapter vs raw
  nats-py on the same cluster, then the adapter on a single server (R1) vs the cluster (R3).

Each figure is the median of alternating rounds (stores_bench's ``paired``); ratios are
adapter / raw (target ≥ 0.8) and cluster / single. Wall-clock reads are deliberate.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import sys
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import aetcd
import nats
import redis.asyncio as aredis

from nats_bench import contract_round, raw_round
from stores_bench import RAW_CAS, paired, raw_etcd_cas, row, timed
from videoflow_aio.adapters.etcd import EtcdRuntimeStore
from videoflow_aio.adapters.nats import JetStreamMessagingBackend
from videoflow_aio.adapters.redis import RedisRuntimeStore
from videoflow_aio.testing.clusters import EtcdCluster, NatsCluster, RedisReplicaSet
from videoflow_aio.testing.servers import EtcdServer, NatsServer, RedisServer

Op = Callable[[int], Awaitable[object]]
_ids = itertools.count(1)


def compare(name: str, single: tuple[float, float], cluster: tuple[float, float]) -> None:
    print(
        f"{name:<30} single {single[0]:>7.0f}/s | cluster {cluster[0]:>7.0f}/s | "
        f"cluster/single {cluster[0] / single[0]:4.2f}"
    )


async def _warm_pair(n: int, tasks: int, a: Op, b: Op) -> tuple[Any, Any]:
    await timed(min(100, n), tasks, a)
    await timed(min(100, n), tasks, b)
    return await paired(n, tasks, a, b)


# -- etcd -------------------------------------------------------------------------------------
def _cas(store: Any, tag: str) -> Op:
    async def op(i: int) -> object:
        return await store.cas(f"{tag}/{i}", None, b"v")

    return op


async def bench_etcd(n: int) -> None:
    async with EtcdCluster() as cluster, EtcdServer() as single:
        store = EtcdRuntimeStore(endpoints=cluster.urls, namespace=f"b{uuid.uuid4().hex[:6]}")
        await store.get("warm")
        first = store._endpoints.hosts[store._endpoints.order()[0]]
        raw = aetcd.Client(first[0], first[1], timeout=5)
        await raw.connect()
        alone = EtcdRuntimeStore(single.url, namespace="b")
        for tasks in (1, 64):
            tag = uuid.uuid4().hex[:6]

            raw_op = raw_etcd_cas(raw, tag)
            label = "seq" if tasks == 1 else f"{tasks} tasks"
            r, a = await _warm_pair(n, tasks, raw_op, _cas(store, tag))
            row(f"etcd 3 CAS {label}", r, a)
            s, c = await _warm_pair(n, tasks, _cas(alone, "s" + tag), _cas(store, "c" + tag))
            compare(f"etcd adapter CAS {label}", s, c)
        await raw.close()
        await store.aclose()
        await alone.aclose()


# -- redis ------------------------------------------------------------------------------------
async def bench_redis(n: int) -> None:
    async with RedisReplicaSet() as cluster, RedisServer() as single:
        url = cluster.members[0].url
        raw = aredis.Redis.from_url(url, protocol=3)
        script = raw.register_script(RAW_CAS)
        await script(keys=["warm", "raw:rev"], args=["", b"v"])
        waited = RedisRuntimeStore(url, namespace=f"bw{uuid.uuid4().hex[:6]}", wait_replicas=1)
        plain = RedisRuntimeStore(url, namespace=f"bp{uuid.uuid4().hex[:6]}")
        alone = RedisRuntimeStore(single.url, namespace="b")
        for tasks in (1, 64):
            tag = uuid.uuid4().hex[:6]

            async def raw_op(i: int, tag: str = tag) -> object:
                async with raw.pipeline(transaction=False) as p:
                    p.evalsha(script.sha, 2, f"raw:{tag}:{i}", "raw:rev", "", b"v")
                    p.execute_command("WAIT", 1, 1000)
                    return await p.execute()

            label = "seq" if tasks == 1 else f"{tasks} tasks"
            r, a = await _warm_pair(n, tasks, raw_op, _cas(waited, tag))
            row(f"redis WAIT 1 CAS {label}", r, a)
            nowait, wait = await _warm_pair(
                n, tasks, _cas(plain, "p" + tag), _cas(waited, "w" + tag)
            )
            print(
                f"{'redis cost of WAIT 1 ' + label:<30} wait_replicas=0 {nowait[0]:>7.0f}/s | "
                f"wait_replicas=1 {wait[0]:>7.0f}/s | ratio {wait[0] / nowait[0]:4.2f}"
            )
            s, c = await _warm_pair(n, tasks, _cas(alone, "s" + tag), _cas(plain, "c" + tag))
            compare(f"redis adapter CAS {label}", s, c)
        for closeable in (waited, plain, alone):
            await closeable.aclose()
        await raw.aclose()


# -- nats -------------------------------------------------------------------------------------
async def _ready(urls: list[str]) -> None:
    """Wait until the cluster creates (and deletes) an R3 stream: its meta leader is known."""
    nc = await nats.connect(servers=urls)
    js = nc.jetstream()
    for attempt in range(100):
        try:
            await js.add_stream(name="READY", subjects=["ready.>"], num_replicas=3)
            await js.delete_stream("READY")
            break
        except Exception:
            if attempt == 99:
                raise
            await asyncio.sleep(0.1)
    await nc.close()


def _median(rounds: list[dict[str, float]]) -> dict[str, float]:
    return {k: sorted(r[k] for r in rounds)[len(rounds) // 2] for k in rounds[0]}


async def bench_nats(n: int, rounds: int) -> None:
    """nats_bench's workloads on file streams: R3 on the cluster, R1 on a single server."""
    async with NatsCluster() as cluster, NatsServer() as single:
        await _ready(cluster.urls)
        on_cluster = JetStreamMessagingBackend(
            cluster.urls, stream_prefix="BC", subject_prefix="bc", replication_factor=3
        )
        on_single = JetStreamMessagingBackend(single.url, stream_prefix="BS", subject_prefix="bs")
        r3 = {"replicas": 3, "persistence": True}
        raw, adapter, alone = [], [], []
        for _ in range(rounds):
            raw.append(await raw_round(cluster.urls, n, storage="file", num_replicas=3))
            adapter.append(await contract_round(on_cluster, n, **r3))
            alone.append(await contract_round(on_single, n, persistence=True))
        r, a, s = _median(raw), _median(adapter), _median(alone)
        for k in r:
            flag = "ok" if a[k] / r[k] >= 0.8 else "BELOW 0.8"
            print(
                f"nats R3 {k:<22} raw {r[k]:>7.0f}/s | adapter {a[k]:>7.0f}/s | "
                f"ratio {a[k] / r[k]:4.2f} {flag}"
            )
        for k in r:
            compare(f"nats adapter {k} (R1 vs R3)", (s[k], 0.0), (a[k], 0.0))
        await on_cluster.aclose()
        await on_single.aclose()


async def main(args: argparse.Namespace) -> None:
    chosen = args.only.split(",")
    if "etcd" in chosen:
        await bench_etcd(args.etcd_ops)
    if "redis" in chosen:
        await bench_redis(args.ops)
    if "nats" in chosen:
        await bench_nats(args.nats_n, args.rounds)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--ops", type=int, default=2000, help="Redis CAS ops per measurement")
    ap.add_argument("--etcd-ops", type=int, default=700, help="etcd CAS ops per measurement")
    ap.add_argument("--nats-n", type=int, default=1000, help="messages per NATS round")
    ap.add_argument("--rounds", type=int, default=3, help="NATS rounds")
    ap.add_argument("--only", default="etcd,redis,nats")
    sys.exit(asyncio.run(main(ap.parse_args())))
