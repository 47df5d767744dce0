"""Fault soak: workloads on each cluster while a seeded schedule kills and pauses members; the
nothing-lost checker's figures for each deployment.

    .venv/bin/python benchmarks/cluster_soak.py [--faults N] [--seed S] [--only etcd,redis,nats]

Starts its own clusters on 127.0.0.1 (every process stopped by PID at the end):

The schedule (``videoflow_aio.testing.soak.Schedule``) takes its faults in turn: kill -9 the
leader, SIGSTOP the leader, kill -9 a member, SIGSTOP a member (members chosen by the seed),
each undone (restart on its data / SIGCONT) before the next. The workloads are
``videoflow_aio.testing.soak.etcd / redis / nats``:

- etcd: 3 members; CAS increments on 3 keys from 4 workers (EtcdRuntimeStore given every
  endpoint).
- redis: a primary (AOF appendfsync always) and a replica; CAS increments and payload puts +
  releases with wait_replicas=1 (there is no automatic failover: a killed primary is
  restarted on its data). Then manual failovers (primary
  killed -9 under 8 writers, replica promoted), with wait_replicas=0 and 1: after a crash
  alone, and after the replica was paused (a partition) for the second half of the writes.
- nats: 3 nodes, JetStream R3 (file storage) with sync_interval always; publish/receive/settle
  with two competing consumers; the leader is the channel's stream leader.

Prints one line per soak: operations, faults injected, acknowledged, acknowledged-and-lost,
other violations, ambiguous outcomes by how they resolved, unverified. Exit status 1 when a
deployment that promises durability lost an acknowledged write (every soak but the Redis
failover without WAIT).
"""

from __future__ import annotations

import argparse
import sys

import anyio

from videoflow_aio.testing import soak
from videoflow_aio.testing.clusters import EtcdCluster, NatsCluster, RedisReplicaSet
from videoflow_aio.testing.servers import RedisServer


async def run(name: str, schedule: soak.Schedule) -> list[soak.SoakResult]:
    if name == "etcd":
        async with EtcdCluster() as cluster:
            return [await soak.etcd(cluster, schedule)]
    if name == "nats":
        async with NatsCluster(sync_interval="always") as cluster:
            return [await soak.nats(cluster, schedule)]
    spec = RedisReplicaSet(
        server=RedisServer(
            maxmemory="256mb", policy="noeviction", appendonly=True, appendfsync="always"
        )
    )
    async with spec as cluster:
        results = [await soak.redis(cluster, soak.dataclasses.replace(schedule, down_for=1.0))]
    for partition in (False, True):
        for wait in (0, 1):
            async with RedisReplicaSet(
                server=RedisServer(appendonly=True, appendfsync="always")
            ) as cluster:
                results.append(
                    await soak.redis_failover(cluster, wait_replicas=wait, partition=partition)
                )
    return results


async def main(args: argparse.Namespace) -> int:
    schedule = soak.Schedule(faults=args.faults, seed=args.seed)
    failed = False
    for name in args.only.split(","):
        for result in await run(name, schedule):
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
