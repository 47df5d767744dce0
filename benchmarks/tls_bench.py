"""What TLS costs each adapter: the same work over TLS and in plain text, in the same run.

    .venv/bin/python benchmarks/tls_bench.py [--ops N] [--rounds N]

Starts its own servers on 127.0.0.1 with a throwaway CA (``trustme``):

- Redis: ONE redis-server listening on a TLS port and a plain port (same process, same data,
  same ACL user ``app`` with the least-privilege rules): RedisRuntimeStore CAS, sequential and
  64 tasks.
- etcd: two single-member etcd servers, one https, one http, both with authentication on and
  the same prefix-limited user: EtcdRuntimeStore CAS, sequential and 64 tasks.
- NATS: two nats-server -js, one with ``tls {}``, one plain, the same user/password:
  JetStreamMessagingBackend confirmed publish, sequential and 64 in flight.
- connect: a fresh Redis store's first CAS (TCP + TLS handshake + AUTH + the command) —
  what a new pooled connection costs.

Each figure is the median of ``--rounds`` alternating rounds (plain, TLS, plain, …); it
prints ops/s for both and the ratio TLS ÷ plain (1.0 = free), and the client's CPU time per
op (process_time), steadier than wall time on a shared machine.
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from typing import Any

import anyio

from videoflow_aio.adapters.etcd import EtcdRuntimeStore, enable_auth, grant_prefix
from videoflow_aio.adapters.nats import (
    JetStreamMessagingBackend,
    jetstream_permissions,
    permissions_config,
)
from videoflow_aio.adapters.redis import RedisRuntimeStore, acl_rules
from videoflow_aio.contracts.messaging import make_channel, make_envelope
from videoflow_aio.testing.servers import (
    Certificates,
    EtcdServer,
    NatsServer,
    RedisServer,
    ServerProcess,
)

PASSWORD = uuid.uuid4().hex
ROOT_PASSWORD = uuid.uuid4().hex

Work = Callable[[Any, int, int], Awaitable[None]]


async def timed(work: Work, target: Any, ops: int, tasks: int) -> tuple[float, float]:
    """(ops/s wall, client CPU µs per op) of ``ops`` operations on ``tasks`` tasks."""
    cpu0, t0 = time.process_time(), time.perf_counter()
    async with anyio.create_task_group() as tg:
        for t in range(tasks):
            tg.start_soon(work, target, t, ops // tasks)
    wall = time.perf_counter() - t0
    cpu = time.process_time() - cpu0
    return ops / wall, cpu / ops * 1e6


async def cas_work(store: Any, task: int, n: int) -> None:
    prefix = f"{uuid.uuid4().hex[:6]}-{task}-"
    for i in range(n):
        await store.cas(f"{prefix}{i}", None, b"v" * 64)


async def publish_work(backend: Any, task: int, n: int) -> None:
    ch = backend.bench_channel
    for _ in range(n):
        await backend.publish(make_envelope(ch, uuid.uuid4().hex), anyio.current_time() + 5)


async def compare(
    name: str, plain: Any, tls: Any, work: Work, ops: int, tasks: int, rounds: int
) -> None:
    rates: dict[str, list[float]] = {"plain": [], "tls": []}
    cpus: dict[str, list[float]] = {"plain": [], "tls": []}
    await work(plain, 0, 20)  # connections open, scripts loaded
    await work(tls, 0, 20)
    for _ in range(rounds):
        for label, target in (("plain", plain), ("tls", tls)):
            rate, cpu = await timed(work, target, ops, tasks)
            rates[label].append(rate)
            cpus[label].append(cpu)
    p, t = statistics.median(rates["plain"]), statistics.median(rates["tls"])
    pc, tc = statistics.median(cpus["plain"]), statistics.median(cpus["tls"])
    print(
        f"{name:<34} plain {p:>8.0f}/s  tls {t:>8.0f}/s  tls÷plain {t / p:5.2f}   "
        f"cpu µs/op {pc:6.1f} → {tc:6.1f} ({tc / pc:4.2f}×)"
    )


async def redis_connect(srv: ServerProcess, certs: Certificates, rounds: int, n: int) -> None:
    async def fresh(url: str, tls: Any) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            store = RedisRuntimeStore(
                url, namespace="vfb", username="app", password=PASSWORD, tls=tls
            )
            await store.cas(uuid.uuid4().hex, None, b"v")
            await store.aclose()
        return n / (time.perf_counter() - t0)

    assert srv.plain_url is not None
    plain, tls = [], []
    for _ in range(rounds):
        plain.append(await fresh(srv.plain_url, None))
        tls.append(await fresh(srv.url, certs.client_tls(client_cert=False)))
    p, t = statistics.median(plain), statistics.median(tls)
    print(f"{'redis: new connection + first CAS':<34} plain {p:>8.0f}/s  tls {t:>8.0f}/s  "
          f"tls÷plain {t / p:5.2f}")  # fmt: skip


async def main(ops: int, rounds: int) -> None:
    certs = Certificates.make()
    with ExitStack() as stack:
        stack.callback(certs.remove)
        tls = certs.client_tls(client_cert=False)
        # -- Redis: one server, two ports
        rsrv = RedisServer(
            tls=certs,
            plain_port=True,
            acl=["user default off", f"user app on >{PASSWORD} {acl_rules(['vfb'])}"],
        ).start()
        stack.callback(rsrv.stop)
        assert rsrv.plain_url is not None
        rp = RedisRuntimeStore(rsrv.plain_url, namespace="vfb", username="app", password=PASSWORD)
        rt = RedisRuntimeStore(
            rsrv.url, namespace="vfb", username="app", password=PASSWORD, tls=tls
        )
        await compare("redis CAS, sequential", rp, rt, cas_work, ops, 1, rounds)
        await compare("redis CAS, 64 tasks", rp, rt, cas_work, ops, 64, rounds)
        await redis_connect(rsrv, certs, rounds, max(20, ops // 20))
        await rp.drop_namespace()
        for s in (rp, rt):
            await s.aclose()
        # -- etcd: two servers, both with auth and the same prefix-limited user
        stores = []
        for server_tls in (None, certs):
            esrv = EtcdServer(tls=server_tls).start()
            stack.callback(esrv.stop)
            client_tls = None if server_tls is None else tls
            await enable_auth(esrv.url, root_password=ROOT_PASSWORD, tls=client_tls)
            await grant_prefix(
                esrv.url,
                username="app",
                password=PASSWORD,
                namespace="vfb",
                root_password=ROOT_PASSWORD,
                tls=client_tls,
            )
            stores.append(
                EtcdRuntimeStore(
                    esrv.url, namespace="vfb", username="app", password=PASSWORD, tls=client_tls
                )
            )
        eops = max(64, ops // 4)
        await compare("etcd CAS, sequential", *stores, cas_work, eops, 1, rounds)
        await compare("etcd CAS, 64 tasks", *stores, cas_work, eops, 64, rounds)
        for s in stores:
            await s.aclose()
        # -- NATS: two servers, the same user and permissions
        perms = permissions_config(jetstream_permissions("vfb"))
        conf = (
            "accounts { A { jetstream: enabled, users: ["
            f'{{user: app, password: "{PASSWORD}", permissions: {perms}}}] }} }}\n'
        )
        backends = []
        for server_tls in (None, certs):
            nsrv = NatsServer(tls=server_tls, config=conf).start()
            stack.callback(nsrv.stop)
            b = JetStreamMessagingBackend(
                nsrv.url,
                subject_prefix="vfb",
                username="app",
                password=PASSWORD,
                tls=None if server_tls is None else tls,
            )
            ch = make_channel("bench", "run", "n", "work", retention="limits", max_msgs=100_000)
            await b.ensure_channel(ch, "op-bench")
            b.bench_channel = ch.channel  # type: ignore[attr-defined]
            backends.append(b)
        await compare("nats confirmed publish, sequential", *backends, publish_work, ops, 1, rounds)
        await compare("nats confirmed publish, 64 tasks", *backends, publish_work, ops, 64, rounds)
        for b in backends:
            await b.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=2000, help="operations per round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (median)")
    args = parser.parse_args()
    anyio.run(main, args.ops, args.rounds)
