"""The JetStream adapter beside raw nats-py on one nats-server, and the memory model beside both.

    .venv/bin/python benchmarks/nats_bench.py [--n 2000] [--rounds 5] [--url nats://…] [--json PATH]
        [--only raw|trio]

Workloads (each message 128 bytes with a ``Nats-Msg-Id``, as the adapter always sends one):

- ``publish``: sequential publish, each waiting for its PubAck (raw: ``js.publish``);
- ``pipelined``: 256 publishes in flight (raw: ``js.publish`` tasks under a semaphore);
- ``receive+settle``: pull 64 at a time and settle each with a confirmed double ack (raw:
  ``psub.fetch(64)`` + ``msg.ack_sync()``; adapter: ``receive`` + ``settle(Completed())``).

Raw and adapter alternate in rounds on fresh streams (this 2-core machine is shared: its load
drifts). Each side's best round is reported, and the ratio is the median of the per-round
ratios (a round's raw and adapter runs are next to each other in time, so the machine's load
drift mostly cancels); the target is a median ratio >= 0.8 on each workload.
The memory model runs the same workloads on a plain asyncio loop (real time) for the
model-vs-broker table in docs/nats.md. Without ``--url`` a server is started (file storage in
a temp dir). Exit status 1 when a target is missed. Wall-clock reads are deliberate.

Then the trio bridge: the adapter's three workloads under asyncio and under trio (every call
crossing ``adapters._trio_bridge`` to a trio-asyncio loop), alternating rounds of one
``anyio.run`` each, driven through anyio on both (``_bridge_ratio``); the ratio is trio ÷
asyncio, the median of paired rounds, target >= 0.8. ``--only raw`` / ``--only trio`` runs one
of the two comparisons.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import sys
import time
from typing import Any

import anyio
import nats

from _bridge_ratio import Figures, Timer, print_ratios, run_tasks, trio_vs_asyncio, unbatched
from videoflow_aio.adapters.nats import JetStreamMessagingBackend
from videoflow_aio.contracts.messaging import (
    Accepted,
    Completed,
    SettleConfirmed,
    make_channel,
    make_envelope,
    make_subscription,
)
from videoflow_aio.memory.messaging import MemoryMessagingBackend
from videoflow_aio.testing.servers import start_nats

BODY = b"v" * 128
INFLIGHT = 256
BATCH = 64
_ids = itertools.count(1)


def _now() -> float:
    return time.perf_counter()  # wall-clock: a benchmark measures elapsed time


class Clock:
    """Wall and CPU time of one timed section (CPU: this process only — the client side,
    whatever else the shared machine runs; the server is another process)."""

    def __init__(self) -> None:
        self.wall, self.cpu = _now(), time.process_time()

    def record(self, out: dict[str, float], key: str, n: int) -> None:
        out[key] = n / (_now() - self.wall)
        out[f"{key} cpu"] = (time.process_time() - self.cpu) / n * 1e6  # µs per message


# -- raw nats-py ---------------------------------------------------------------------------------
async def raw_round(url: str | list[str], n: int, **stream: Any) -> dict[str, float]:
    """The raw workloads on a fresh stream (``stream``: more stream options, e.g.
    ``num_replicas``; memory storage unless given)."""
    nc = await nats.connect(url)
    js = nc.jetstream()
    i = next(_ids)
    name, subj = f"RAW{i}", f"raw{i}"
    await js.add_stream(name=name, subjects=[f"{subj}.>"], **({"storage": "memory"} | stream))
    psub = await js.pull_subscribe(f"{subj}.x", f"c{i}", stream=name)
    out: dict[str, float] = {}
    t = Clock()
    for k in range(n):
        await js.publish(f"{subj}.x", BODY, headers={"Nats-Msg-Id": f"s{k}"})
    t.record(out, "publish", n)
    sem = asyncio.Semaphore(INFLIGHT)

    async def one(k: int) -> None:
        async with sem:
            await js.publish(f"{subj}.x", BODY, headers={"Nats-Msg-Id": f"p{k}"})

    t = Clock()
    await asyncio.gather(*(one(k) for k in range(n)))
    t.record(out, "pipelined", n)
    t = Clock()
    done = 0
    while done < n:
        for m in await psub.fetch(BATCH, timeout=5):
            await m.ack_sync()
            done += 1
    t.record(out, "receive+settle", done)
    await js.delete_stream(name)
    await nc.close()
    return out


# -- the contract (adapter or memory model) ------------------------------------------------------
async def contract_round(b: Any, n: int, **channel: Any) -> dict[str, float]:
    """The same workloads through the contract (``channel``: more ChannelSpec fields)."""
    i = next(_ids)
    ch = make_channel(
        "bench", f"r{i}", "n", "work", "limits", **({"max_msgs": 1_000_000} | channel)
    )
    await b.ensure_channel(ch, f"op{i}")
    sub = make_subscription(ch.channel, "c", item_credit=1000, ack_wait_seconds=60)
    await b.ensure_subscription(sub, f"op{i}")
    cid = ch.channel
    out: dict[str, float] = {}
    t = Clock()
    for k in range(n):
        res = await b.publish(make_envelope(cid, f"s{k}", BODY), anyio.current_time() + 5)
        assert isinstance(res, Accepted), res
    t.record(out, "publish", n)
    sem = asyncio.Semaphore(INFLIGHT)  # the same driver as the raw side

    async def one(k: int) -> None:
        async with sem:
            res = await b.publish(make_envelope(cid, f"p{k}", BODY), anyio.current_time() + 5)
            assert isinstance(res, Accepted), res

    t = Clock()
    await asyncio.gather(*(one(k) for k in range(n)))
    t.record(out, "pipelined", n)
    t = Clock()
    done = 0
    while done < n:
        for d in await b.receive(sub.id, BATCH, 1 << 30, anyio.current_time() + 5):
            ans = await b.settle(d.token, Completed(), f"s{d.sequence}")
            assert isinstance(ans, SettleConfirmed), ans
            done += 1
    t.record(out, "receive+settle", done)
    await b.close([cid], "")
    return out


# -- the trio bridge -------------------------------------------------------------------------------
async def bridge_round(url: str, n: int) -> Figures:
    """The adapter's workloads on whichever backend runs this (anyio-driven: the same code on
    asyncio and trio), on a client of its own and a fresh channel."""
    i = next(_ids)
    b = JetStreamMessagingBackend(url, stream_prefix=f"BR{i}", subject_prefix=f"br{i}")
    ch = make_channel("bench", f"r{i}", "n", "work", "limits", max_msgs=1_000_000)
    await b.ensure_channel(ch, f"op{i}")
    sub = make_subscription(ch.channel, "c", item_credit=1000, ack_wait_seconds=60)
    await b.ensure_subscription(sub, f"op{i}")
    cid = ch.channel
    out: Figures = {}

    def publish(prefix: str) -> Any:
        async def op(k: int) -> None:
            res = await b.publish(
                make_envelope(cid, f"{prefix}{k}", BODY), anyio.current_time() + 5
            )
            assert isinstance(res, Accepted), res

        return op

    t = Timer()
    await run_tasks(n, 1, publish("s"))
    t.record(out, "publish", n)
    t = Timer()
    await run_tasks(n, INFLIGHT, publish("p"))
    t.record(out, "pipelined", n)
    t = Timer()
    done = 0
    while done < 2 * n:
        for d in await b.receive(sub.id, BATCH, 1 << 30, anyio.current_time() + 5):
            ans = await b.settle(d.token, Completed(), f"s{d.sequence}")
            assert isinstance(ans, SettleConfirmed), ans
            done += 1
    t.record(out, "receive+settle", done)
    await b.close([cid], "")
    await b.aclose()
    return out


def best(rounds: list[dict[str, float]]) -> dict[str, float]:
    """Per figure, the best round (the highest rate, the least CPU per message)."""
    pick = {k: (min if k.endswith(" cpu") else max) for k in rounds[0]}
    return {k: pick[k](r[k] for r in rounds) for k in rounds[0]}


def median_ratio(num: list[dict[str, float]], den: list[dict[str, float]]) -> dict[str, float]:
    """Per workload, the median over rounds of ``num / den`` (rounds paired in order); for a
    CPU figure (µs per message) ``den / num``, so every ratio reads "adapter / raw speed"."""
    out = {}
    for k in num[0]:
        pairs = list(zip(num, den, strict=True))
        if k.endswith(" cpu"):
            out[k] = statistics.median(b[k] / a[k] for a, b in pairs)
        else:
            out[k] = statistics.median(a[k] / b[k] for a, b in pairs)
    return out


async def run(url: str, n: int, rounds: int) -> dict[str, dict[str, float]]:
    raw: list[dict[str, float]] = []
    adapter: list[dict[str, float]] = []
    b = JetStreamMessagingBackend(url, stream_prefix="BENCH", subject_prefix="bench")
    for _ in range(rounds):
        raw.append(await raw_round(url, n))
        adapter.append(await contract_round(b, n))
    await b.aclose()
    memory = [await contract_round(MemoryMessagingBackend(), n) for _ in range(rounds)]
    return {
        "raw nats-py": best(raw),
        "adapter": best(adapter),
        "memory model": best(memory),
        "ratio (median of rounds)": median_ratio(adapter, raw),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=2000, help="messages per workload and round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--url", default=None, help="an existing server (default: start one)")
    ap.add_argument("--json", default=None, help="also write the figures as JSON here")
    ap.add_argument("--only", choices=("raw", "trio"), default=None, help="one comparison only")
    ap.add_argument(
        "--unbatched", action="store_true", help="the bridge without its callback batching"
    )
    args = ap.parse_args(argv)
    if args.unbatched:
        unbatched()
    srv = None
    url = args.url
    if url is None:
        srv = start_nats()
        url = srv.url
    figures: dict[str, Any] = {}
    ok = True
    try:
        if args.only != "trio":
            figures = asyncio.run(run(url, args.n, args.rounds))
            ok = report(figures)
        if args.only != "raw":
            bridge = trio_vs_asyncio(lambda: bridge_round(url, args.n), args.rounds)
            figures["trio bridge"] = bridge
            ok &= print_ratios("trio bridge (JetStream adapter)", bridge)
    finally:
        if srv is not None:
            srv.stop()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(figures, fh, indent=2)
    return 0 if ok else 1


def report(figures: dict[str, dict[str, float]]) -> bool:
    """Print the raw vs adapter table; True when every ratio meets the target."""
    raw, ad, mem = figures["raw nats-py"], figures["adapter"], figures["memory model"]
    ratios = figures["ratio (median of rounds)"]
    ok = True
    print("best round of each side; ratio = adapter / raw, the median over paired rounds")
    print(
        f"{'workload':16} {'raw nats-py':>12} {'adapter':>10} {'ratio':>6} {'memory model':>13}"
        f"   client CPU µs/msg raw / adapter, ratio"
    )
    for k in [k for k in raw if not k.endswith(" cpu")]:
        ratio, cpu = ratios[k], f"{k} cpu"
        ok &= ratio >= 0.8
        flag = "" if ratio >= 0.8 else "  < 0.8 target"
        print(
            f"{k:16} {raw[k]:10.0f}/s {ad[k]:8.0f}/s {ratio:6.2f} {mem[k]:11.0f}/s"
            f"   {raw[cpu]:6.1f} / {ad[cpu]:6.1f}  {ratios[cpu]:5.2f}{flag}"
        )
    return ok


if __name__ == "__main__":
    sys.exit(main())
