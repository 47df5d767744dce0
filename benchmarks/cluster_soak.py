"""Fault soak: workloads on each cluster while a seeded schedule kills and pauses members; the
nothing-lost checker's figures for each deployment.

    .venv/bin/python benchmarks/cluster_soak.py [--faults N] [--seed S] [--only etcd,redis,nats]

Starts its own clusters on 127.0.0.1 (every process stopped by PID at the end):

- etcd: 3 members; CAS increments on 4 keys from 6 workers (EtcdRuntimeStore given every
  endpoint); faults: kill -9 the leader, kill -9 a member, SIGSTOP a member.
- redis: a primary (AOF appendfsync always) and a replica; CAS increments and payload puts +
  releases with wait_replicas=1; faults: kill -9 and restart the primary on its data, kill -9
  or pause the replica (there is no automatic failover). Then manual failovers (primary
  killed -9 under 8 writers, replica promoted), with wait_replicas=0 and 1: after a crash
  alone, and after the replica was paused (a partition) for the second half of the writes.
- nats: 3 nodes, JetStream R3 with sync_interval always; publish/receive/settle with two
  competing consumers; faults: kill -9 the stream's leader, kill -9 a node, SIGSTOP a node.

Prints one line per soak: operations, faults injected, acknowledged, acknowledged-and-lost,
other violations, ambiguous outcomes by how they resolved, unverified. Exit status 1 when a
deployment that promises durability lost an acknowledged write (every soak but the Redis
failover without WAIT).
"""

from __future__ import annotations

import argparse
import sys
import uuid
from typing import Any

import anyio

from videoflow_aio.observe import ObservationLog
from videoflow_aio.testing import soak, workload
from videoflow_aio.testing.clusters import EtcdCluster, NatsCluster, RedisReplicaSet

CAP = 120.0  # seconds any one workload may run


async def etcd_soak(args: argparse.Namespace) -> list[soak.SoakResult]:
    from videoflow_aio.adapters.etcd import EtcdRuntimeStore

    async with EtcdCluster() as cluster:
        store = EtcdRuntimeStore(endpoints=cluster.urls, namespace="soak", timeout=2.0)

        async def cas(log: ObservationLog, stop: anyio.Event) -> None:
            deadline = anyio.current_time() + CAP
            await workload.cas_workload(
                store, log, keys=4, workers=6, ops=100_000, deadline=deadline, stop=stop
            )

        result = await soak.soak(
            "etcd 3 members", cluster, [cas], faults=args.faults, seed=args.seed, down_for=2.0
        )
        result.extra["lost replies the adapter resolved"] = _counts(store.resolutions)
        await store.aclose()
    return [result]


async def redis_soak(args: argparse.Namespace) -> list[soak.SoakResult]:
    from videoflow_aio.adapters.redis import RedisPayloadStore, RedisRuntimeStore

    spec = RedisReplicaSet(
        maxmemory="256mb", policy="noeviction", appendonly=True, appendfsync="always"
    )
    results = []
    async with spec as cluster:
        primary = cluster.members[0].url
        rts = RedisRuntimeStore(primary, namespace="soak", wait_replicas=1, wait_timeout=1.0)
        pay = RedisPayloadStore(primary, namespace="soakp", wait_replicas=1, wait_timeout=1.0)

        async def cas(log: ObservationLog, stop: anyio.Event) -> None:
            deadline = anyio.current_time() + CAP
            await workload.cas_workload(
                rts, log, keys=4, workers=6, ops=100_000, deadline=deadline, stop=stop
            )

        async def puts(log: ObservationLog, stop: anyio.Event) -> None:
            deadline = anyio.current_time() + CAP
            await workload.payload_workload(pay, log, puts=100_000, deadline=deadline, stop=stop)

        results.append(
            await soak.soak(
                "redis primary+replica, wait_replicas=1",
                cluster,
                [cas, puts],
                faults=args.faults,
                seed=args.seed,
                down_for=1.0,
            )
        )
        results[-1].extra["lost replies the adapters resolved"] = _counts(
            rts.resolutions + pay.resolutions
        )
        await rts.aclose()
        await pay.aclose()
    for partition in (False, True):
        for wait in (0, 1):
            async with RedisReplicaSet(appendonly=True, appendfsync="always") as cluster:
                results.append(
                    await soak.redis_failover(cluster, wait_replicas=wait, partition=partition)
                )
    return results


async def nats_soak(args: argparse.Namespace) -> list[soak.SoakResult]:
    from videoflow_aio.adapters.nats import JetStreamMessagingBackend
    from videoflow_aio.contracts.messaging import make_channel, make_subscription

    async with NatsCluster(sync_interval="always") as cluster:
        tag = uuid.uuid4().hex[:6]
        backend = JetStreamMessagingBackend(
            cluster.urls,
            stream_prefix=f"S{tag}",
            subject_prefix=f"s{tag}",
            replication_factor=3,
            request_timeout=2.0,
        )
        spec = make_channel(
            "flow", "run", "node", "work", "limits", max_msgs=1_000_000, replicas=3,
            persistence=True,
        )  # fmt: skip
        await _retry(lambda: backend.ensure_channel(spec, "op-ch"))
        sub = make_subscription(spec.channel, "w", ack_wait_seconds=2.0, max_deliver=-1)
        await _retry(lambda: backend.ensure_subscription(sub, "op-sub"))

        async def messages(log: ObservationLog, stop: anyio.Event) -> None:
            deadline = anyio.current_time() + CAP
            await workload.messaging_workload(
                backend, log, sub, publications=100_000, publish_seconds=2.0,
                receive_seconds=0.5, deadline=deadline, stop=stop,
            )  # fmt: skip

        options, stream = cluster.options, backend.names.stream(spec.channel)
        assert isinstance(options, NatsCluster)
        result = await soak.soak(
            "nats 3 nodes R3", cluster, [messages], faults=args.faults, seed=args.seed,
            down_for=2.0, leader=lambda: options.stream_leader(cluster, stream),
        )  # fmt: skip
        await backend.aclose()
    return [result]


def _counts(c: Any) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(c.items())) or "none"


async def _retry(call: Any, tries: int = 100) -> Any:
    """A set-up call on a cluster that has just formed (a new R3 stream elects its leader)."""
    for i in range(tries):
        try:
            return await call()
        except Exception:
            if i == tries - 1:
                raise
            await anyio.sleep(0.1)
    return None


SOAKS = {"etcd": etcd_soak, "redis": redis_soak, "nats": nats_soak}


async def main(args: argparse.Namespace) -> int:
    failed = False
    for name in args.only.split(","):
        for result in await SOAKS[name](args):
            print(result.figure(), flush=True)
            promises = "wait_replicas=0" not in result.deployment
            if promises and not result.report.ok:
                failed = True
                print(result.report.summary(), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--faults", type=int, default=4, help="faults per soak (default 4)")
    ap.add_argument("--seed", type=int, default=1, help="the schedule's seed (default 1)")
    ap.add_argument("--only", default="etcd,redis,nats", help="comma-separated deployments")
    sys.exit(anyio.run(main, ap.parse_args()))
