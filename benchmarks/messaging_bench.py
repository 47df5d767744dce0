"""Messaging model throughput on the virtual-time loop, beside its floor.

Throughput is messages per CPU second of this process ("on one core"): the machine is
shared, and wall time would measure the neighbours. Full cycle: publish 64 → receive one
batch of 64 → settle each, then ``sleep(1 ms)`` of virtual time (so dedup windows and leases
age as in a running pipeline). The floor is ``asyncio.Queue`` put/get of the same batches on
the same loop. Scaling: the same cycle against a channel that retains 1k / 10k / 100k / 1M
settled messages (``max_msgs`` = backlog, so every publish also evicts the oldest) —
throughput at 1M should be ≥ 0.8× throughput at 1k.

    .venv/bin/python benchmarks/messaging_bench.py            # everything
    .venv/bin/python benchmarks/messaging_bench.py --quick    # smaller counts, no 1M point

Figures are ratios from one run on a shared machine: rerun before trusting small differences.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import time
from collections.abc import Awaitable, Callable

import anyio

from videoflow_aio.contracts.messaging import (
    Completed,
    make_channel,
    make_envelope,
    make_subscription,
)
from videoflow_aio.memory.messaging import MemoryMessagingBackend
from videoflow_aio.vtime import VirtualClock
from videoflow_aio.vtime import run as vrun

BATCH = 64


async def _open(backlog: int) -> tuple[MemoryMessagingBackend, object, object]:
    b = MemoryMessagingBackend()
    ch = make_channel("bench", "r", "n", "work", "limits", max_msgs=backlog, dedup_window_seconds=1)
    await b.ensure_channel(ch, "op")
    sub = make_subscription(ch.channel, "w", item_credit=BATCH, ack_wait_seconds=30.0)
    await b.ensure_subscription(sub, "op")
    return b, ch.channel, sub.id


async def _cycle(b: MemoryMessagingBackend, cid: object, sid: object, n: int, tag: str) -> float:
    """Publish/receive/settle ``n`` messages; wall seconds spent."""
    envs = [make_envelope(cid, f"{tag}{i}") for i in range(n)]  # type: ignore[arg-type]
    done = Completed()
    pub, rec, st = b.publish, b.receive, b.settle
    t0 = time.process_time()  # CPU seconds of this process: "on one core", robust to load
    for i in range(0, n, BATCH):
        dl = anyio.current_time() + 1.0
        for env in envs[i : i + BATCH]:
            await pub(env, dl)
        for d in await rec(sid, BATCH, 1 << 30, dl):  # type: ignore[arg-type]
            await st(d.token, done, d.token.lease_id)
        await anyio.sleep(0.001)
    return time.process_time() - t0  # CPU seconds: as above


async def full_cycle(n: int, backlog: int = 1000) -> float:
    b, cid, sid = await _open(backlog)
    if backlog:
        await _cycle(b, cid, sid, backlog, "pre")  # fill the channel with settled messages
    obs = await b.observe_channel(cid)  # type: ignore[arg-type]
    assert obs.value.messages == backlog, obs  # type: ignore[union-attr]
    wall = await _cycle(b, cid, sid, n, "m")
    return n / wall


async def queue_floor(n: int) -> float:
    q: asyncio.Queue[int] = asyncio.Queue()
    t0 = time.process_time()  # CPU seconds of the floor
    for _ in range(0, n, BATCH):
        for j in range(BATCH):
            await q.put(j)
        for _ in range(BATCH):
            await q.get()
            q.task_done()
        await asyncio.sleep(0.001)
    return n / (time.process_time() - t0)  # CPU seconds: as above


def _run(fn: Callable[..., Awaitable[float]], *args: int, backend: str = "asyncio") -> float:
    return vrun(fn, *args, backend=backend, clock=VirtualClock())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller counts, no 1M point")
    args = parser.parse_args()
    n = 100_000 if args.quick else 300_000
    backlogs = [1_000, 10_000, 100_000] if args.quick else [1_000, 10_000, 100_000, 1_000_000]

    floor = _run(queue_floor, n)
    aio = _run(full_cycle, n)
    tri = _run(full_cycle, n, backend="trio")
    print(f"full cycle (publish → receive ×{BATCH} → settle), {n:,} messages, virtual-time loop")
    print(f"  asyncio.Queue put/get floor (asyncio) {floor:>12,.0f} msgs/s")
    print(f"  MemoryMessagingBackend    (asyncio) {aio:>12,.0f} msgs/s  {aio / floor:5.2f}× floor")
    print(f"  MemoryMessagingBackend    (trio)    {tri:>12,.0f} msgs/s  {tri / floor:5.2f}× floor")
    print(f"  target ≥ 100,000 msgs/s on asyncio: {'met' if aio >= 100_000 else 'NOT met'}")
    print()
    print(f"scaling with retained backlog (asyncio), {n // 2:,} messages per point")
    base = None
    for backlog in backlogs:
        rate = _run(full_cycle, n // 2, backlog)
        base = rate if base is None else base
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"  retained {backlog:>9,}  {rate:>12,.0f} msgs/s  {rate / base:5.2f}× the 1k point"
              f"   (peak RSS so far {rss:,.0f} MiB)")  # fmt: skip
    print("  target: the largest backlog ≥ 0.80× the 1k point")


if __name__ == "__main__":
    main()
