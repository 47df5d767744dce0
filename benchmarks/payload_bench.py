"""MemoryPayloadStore throughput, with its anchors from the same run.

    .venv/bin/python benchmarks/payload_bench.py [--cycles 50000] [--sizes 50000,100000,200000]
        [--repeat 3] [--backend asyncio|trio] [--json PATH]
    .venv/bin/python benchmarks/payload_bench.py --sim 3

Measures, in the durable model (no log):

- ``cycle``: put -> acquire_obligation -> read -> release_obligation (which reclaims) on
  64 KiB objects, one task, a new key each cycle. Two variants:
  ``same buffer`` re-puts one immutable ``bytes`` object (the store memoizes the digest of the
  last buffer it hashed: exact, since ``bytes`` cannot change), target >= 50,000 cycles/s;
  ``fresh bytes`` rotates 64 distinct buffers so every put hashes 64 KiB.
- ``frame``: what a pipeline does with each frame (``pipeline/_publish.py``, ``_worker.py``):
  put with a contract naming the reader as an obligation, read, release (which reclaims),
  same buffer, eight frames in flight; in microseconds per frame.
- anchors: ``sha256 64 KiB`` (hashlib alone: the ceiling for fresh bytes, since every put of
  new bytes must digest them) and ``4 awaits`` (four awaited no-op coroutines: the floor of
  any four-call cycle).
- ``reconcile``: one pass over N objects (a third listed with their reader, which cancels an
  intent each; a third listed with ``()``, reclaimed; a third unlisted and young, left
  alone), objects/s at each N (best of ``--repeat`` passes, each on a fresh store) and the
  growth exponent between the smallest and largest N (log time ratio / log size ratio:
  1 is linear, 2 quadratic). Below ~50k objects the store still fits in the CPU caches and
  the collector's passes are short, so per-object cost is lower there; the default sizes
  start past that.

``--sim N`` measures instead what the payload model costs the simulator per frame:
``examples/camera-farm.toml`` for 120 virtual seconds without GPUs and faults (as
``benchmarks/sim_bench.py`` compares it), once as written (every 64 KiB frame put, read and
released) and once with ``bytes = 0`` (no payload store: the anchor), alternating, ``N`` times
each, every run in a fresh process; the difference of the median CPU times divided by the
frames published.

Times are CPU seconds of this process (``time.process_time``): the machine is shared, and
CPU time does not count the time other processes hold the cores. Exit status 1 when the
same-buffer cycle misses 50,000/s or the reconcile growth exponent is 1.5 or more.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from videoflow_aio.contracts.payload import RetentionContract
from videoflow_aio.memory.payload import MemoryPayloadStore, StaticLedger

SIZE = 64 * 1024
TARGET = 50_000
SPEC = Path(__file__).resolve().parent.parent / "examples" / "camera-farm.toml"


async def cycles(n: int, buffers: list[bytes]) -> float:
    """Seconds for ``n`` put/acquire/read/release cycles (each reclaims its object)."""
    store = MemoryPayloadStore(tier="durable")
    contract = RetentionContract(ttl_seconds=3600.0)
    put, acquire, read, release = (
        store.put,
        store.acquire_obligation,
        store.read,
        store.release_obligation,
    )
    nbuf = len(buffers)
    keys = [f"cam/{i}" for i in range(n)]
    t0 = time.process_time()  # CPU seconds of this process: throughput
    deadline = anyio.current_time() + 60.0
    for i in range(n):
        ref = await put(buffers[i % nbuf], keys[i], contract)
        await acquire(ref, "reader/a", deadline)
        result = await read(ref, "reader/a")
        receipt = await release(ref, "reader/a", "done")
        if receipt.outcome != "reclaimed":
            raise RuntimeError(f"cycle {i}: {receipt.outcome} / {type(result).__name__}")
    elapsed = time.process_time() - t0  # CPU seconds: as above
    if store.object_count() != 0:
        raise RuntimeError("objects left behind")
    return elapsed


async def frames(n: int, buffer: bytes, in_flight: int = 8) -> float:
    """Seconds for ``n`` frames as a pipeline handles them: put with the reader's obligation,
    then (``in_flight`` frames later) read and release, which reclaims."""
    store = MemoryPayloadStore(tier="durable")
    contract = RetentionContract(
        ttl_seconds=3600.0, obligations=("decode",), obligation_seconds=600.0
    )
    put, read, release = store.put, store.read, store.release_obligation
    keys = [f"cams/cams-{i % 16}-{i}" for i in range(n)]
    pending: list[Any] = []
    t0 = time.process_time()  # CPU seconds of this process: throughput
    for i in range(n):
        pending.append(await put(buffer, keys[i], contract))
        if len(pending) > in_flight:
            ref = pending.pop(0)
            await read(ref, "decode")
            await release(ref, "decode", f"{i}:lease")
    for ref in pending:
        await read(ref, "decode")
        await release(ref, "decode", "last:lease")
    elapsed = time.process_time() - t0  # CPU seconds: as above
    if store.object_count() != 0:
        raise RuntimeError("objects left behind")
    return elapsed


def sim_once(with_bytes: bool) -> tuple[float, int]:
    """CPU seconds of one 120-virtual-second run of the camera farm (no GPUs, no faults) and
    the frames it published; ``with_bytes=False`` sets every source's ``bytes`` to 0."""
    from videoflow_aio.sim import load_spec, simulate

    def fields(s: Any, **change: Any) -> Any:
        return s.__class__(**{**{f: getattr(s, f) for f in s.__struct_fields__}, **change})

    spec = load_spec(SPEC, {"duration_seconds": 120})
    spec = spec.__class__(
        run=spec.run,
        sources=tuple(s if with_bytes else fields(s, bytes=0) for s in spec.sources),
        stages=tuple(fields(s, gpu=None) for s in spec.stages),
        payload=spec.payload,
    )
    t0 = time.process_time()  # CPU seconds of this process: throughput
    result = simulate(spec)
    elapsed = time.process_time() - t0  # CPU seconds: as above
    return elapsed, sum(s["frames"] for s in result["sources"].values())


def sim_delta(rounds: int) -> int:
    """Print the payload model's CPU cost per frame in the simulator (see the docstring)."""
    cpu: dict[str, list[float]] = {"with": [], "without": []}
    published = 0
    for _ in range(rounds):
        for which in cpu:
            out = subprocess.run(
                [sys.executable, __file__, "--sim-once", which],
                check=True,
                capture_output=True,
                text=True,
            ).stdout.split()
            cpu[which].append(float(out[0]))
            published = int(out[1])
    print(f"simulator, {SPEC.name}, 120 virtual s, no GPUs or faults, {published:,} frames:")
    for which, label in (("with", "64 KiB frames     "), ("without", "bytes = 0 (anchor)")):
        runs = " ".join(f"{c:.2f}" for c in cpu[which])
        print(f"  {label}  median {statistics.median(cpu[which]):6.2f} CPU s   ({runs})")
    delta = statistics.median(cpu["with"]) - statistics.median(cpu["without"])
    print(f"  payload per frame: {delta / published * 1e6:.1f} µs (put + read + release)")
    return 0


def sha_anchor(n: int) -> float:
    buf = os.urandom(SIZE)
    t0 = time.process_time()  # CPU seconds of this process: anchor
    for _ in range(n):
        hashlib.sha256(buf).hexdigest()
    return time.process_time() - t0  # CPU seconds: as above


async def await_anchor(n: int) -> float:
    async def noop() -> None:
        return None

    t0 = time.process_time()  # CPU seconds of this process: anchor
    for _ in range(n):
        await noop()
        await noop()
        await noop()
        await noop()
    return time.process_time() - t0  # CPU seconds: as above


async def reconcile_pass(n: int) -> tuple[float, Any]:
    """Seconds for one reconcile over ``n`` objects (filling the store is untimed)."""
    store = MemoryPayloadStore(tier="durable", orphan_grace_seconds=3600.0)
    contract = RetentionContract(ttl_seconds=3600.0, obligations=("reader/a", "intent/p"))
    required: dict[str, tuple[str, ...]] = {}
    for i in range(n):
        key = f"obj/{i}"
        await store.put(b"%08d" % i, key, contract)
        if i % 3 == 0:
            required[key] = ("reader/a",)
        elif i % 3 == 1:
            required[key] = ()
    ledger = StaticLedger(required)
    gc.collect()  # so a collection owed by the untimed fill does not land in the timed pass
    t0 = time.process_time()  # CPU seconds of this process: throughput
    obs = await store.reconcile(ledger, f"bench-{n}")
    elapsed = time.process_time() - t0  # CPU seconds: as above
    expected_reclaimed = len([i for i in range(n) if i % 3 == 1])
    if len(obs.reclaimed) != expected_reclaimed or obs.examined != n:
        raise RuntimeError(f"reconcile over {n}: unexpected {obs.examined=} {len(obs.reclaimed)=}")
    return elapsed, obs


async def main(args: argparse.Namespace) -> int:
    same = [os.urandom(SIZE)]
    fresh = [os.urandom(SIZE) for _ in range(64)]
    n = args.cycles
    await cycles(min(n, 2000), same)  # warm up
    t_same = await cycles(n, same)
    t_fresh = await cycles(max(n // 5, 1000), fresh)
    n_fresh = max(n // 5, 1000)
    t_frames = await frames(n, same[0])
    t_sha = sha_anchor(n_fresh)
    t_await = await await_anchor(n)
    rate_same = n / t_same
    rate_fresh = n_fresh / t_fresh
    rate_sha = n_fresh / t_sha
    rate_await = n / t_await
    print(f"payload cycle (put/acquire/read/release, 64 KiB, durable), {args.backend}:")
    print(
        f"  same buffer   {rate_same:12,.0f} cycles/s   target {TARGET:,}  "
        f"{'met' if rate_same >= TARGET else 'MISSED'}"
    )
    ratio = rate_fresh / rate_sha
    print(f"  fresh bytes   {rate_fresh:12,.0f} cycles/s   = {ratio:.2f} x sha256 anchor")
    print(f"  anchor sha256 64 KiB {rate_sha:12,.0f} /s   (ceiling for fresh bytes)")
    us_frame = t_frames / n * 1e6
    print(
        f"  frame (put with the reader's obligation, read, release) {us_frame:.2f} µs "
        f"= {t_frames / t_await:.1f} x 4 awaits"
    )
    print(
        f"  anchor 4 awaits      {rate_await:12,.0f} /s   (same buffer = "
        f"{rate_same / rate_await:.2f} x this floor)"
    )
    sizes = [int(s) for s in args.sizes.split(",")]
    print("reconcile (durable, one pass):")
    recon: list[dict[str, float]] = []
    for size in sizes:
        elapsed = min([(await reconcile_pass(size))[0] for _ in range(args.repeat)])
        recon.append({"objects": size, "seconds": elapsed, "objects_per_s": size / elapsed})
        print(f"  {size:>8,} objects  {elapsed * 1e3:9.1f} ms  {size / elapsed:12,.0f} objects/s")
    small, large = recon[0], recon[-1]
    size_ratio = large["objects"] / small["objects"]
    time_ratio = large["seconds"] / small["seconds"]
    exponent = math.log(time_ratio) / math.log(size_ratio)
    linear = exponent < 1.5
    print(
        f"  growth: {size_ratio:.0f}x objects -> {time_ratio:.1f}x time, exponent "
        f"{exponent:.2f} ({'linear' if linear else 'WORSE THAN LINEAR'}: linear is 1, "
        f"quadratic 2, i.e. {size_ratio**2:.0f}x time)"
    )
    if args.json:
        with open(args.json, "w") as fh:  # noqa: ASYNC230 - once, after every measurement
            json.dump(
                {
                    "backend": args.backend,
                    "cycle_same_buffer_per_s": rate_same,
                    "cycle_fresh_bytes_per_s": rate_fresh,
                    "anchor_sha256_64k_per_s": rate_sha,
                    "anchor_4_awaits_per_s": rate_await,
                    "frame_us": us_frame,
                    "reconcile": recon,
                    "reconcile_growth_exponent": exponent,
                },
                fh,
                indent=2,
            )
    return 0 if rate_same >= TARGET and linear else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=50_000)
    parser.add_argument("--sizes", default="50000,100000,200000")
    parser.add_argument("--repeat", type=int, default=3, help="reconcile passes per size (best)")
    parser.add_argument("--backend", default="asyncio", choices=("asyncio", "trio"))
    parser.add_argument("--json", default="")
    parser.add_argument("--sim", type=int, default=0, help="rounds of the simulator delta")
    parser.add_argument("--sim-once", choices=("with", "without"), help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.sim_once:
        cpu, published = sim_once(ns.sim_once == "with")
        print(cpu, published)
        sys.exit(0)
    if ns.sim:
        sys.exit(sim_delta(ns.sim))
    sys.exit(anyio.run(main, ns, backend=ns.backend))
