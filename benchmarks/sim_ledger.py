"""Where a simulated message's CPU time goes: the same pipeline, one layer added at a time.

    .venv/bin/python benchmarks/sim_ledger.py [--spec examples/camera-farm.toml]
                                              [--duration 120] [--runs 1]

(``--duration`` at or below the spec's warm-up runs a quarter of it as warm-up.)

Every row runs the spec's sources and stages (faults and GPUs left out) for the same virtual
duration, drawing arrivals and service times from the same seeded streams, and prints
simulated messages (frames × stages) per CPU second of this process, its ratio to the SimPy
hand model of ``sim_bench.py`` (measured in the same run), and the CPU microseconds per
message the layer adds to the row above it:

1. **SimPy** — the anchor: one process per frame, one ``simpy.Resource`` per stage.
2. **loop floor** — the virtual-time loop with ``asyncio.Queue`` per channel and ``replicas``
   worker tasks per stage: get → sleep the service time → put downstream. No contract.
3. **messaging contract** — the same workers on the memory messaging model through the
   contract: ``receive(sub, 1, …)`` → sleep → ``publish`` downstream → ``settle(Completed)``,
   on the channels and subscriptions the simulator creates (interest retention, leases,
   dedup window). Hand-written loops, nothing else.
4. **simulate, no payload** — ``videoflow_aio.sim.simulate`` with ``bytes = 0``: adds the
   pipeline toolkit (stage workers, publisher, ``vf-sent-at`` headers, exception policy,
   counters) and the recorders (histograms, time series, probes).
5. **simulate** — the spec's frames put, read and released through the payload model.

The ledger is what the speed targets of issue #17 are measured against: row 3 is the contract
code every row above SimPy must run.
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from sim_bench import _fields, simpy_model  # noqa: E402
from videoflow_aio.contracts.messaging import (  # noqa: E402
    Completed,
    Envelope,
    MessagingBackend,
    SubscriptionId,
)
from videoflow_aio.memory.messaging import MemoryMessagingBackend  # noqa: E402
from videoflow_aio.pipeline import ensure_pipeline, loop_clock  # noqa: E402
from videoflow_aio.sim import load_spec, simulate  # noqa: E402
from videoflow_aio.sim._dist import sampler  # noqa: E402
from videoflow_aio.sim._run import pipeline_nodes  # noqa: E402
from videoflow_aio.sim._spec import SimSpec  # noqa: E402
from videoflow_aio.vtime import VirtualClock  # noqa: E402
from videoflow_aio.vtime import run as vrun  # noqa: E402


def _arrivals(spec: SimSpec, start: float) -> list[tuple[float, str, int, int]]:
    """Every frame ``(capture time, source, stream, n)`` in time order, drawn as the
    simulator's load generator draws them."""
    out: list[tuple[float, str, int, int]] = []
    end = start + spec.run.duration_seconds
    for src in spec.sources:
        rng = random.Random(f"{spec.run.seed}/source/{src.name}")
        period = 1.0 / src.rate_hz
        poisson = src.arrival == "poisson"
        phases = []
        heap: list[tuple[float, int, int]] = []
        for k in range(src.streams):
            phase = rng.random() * period
            phases.append(phase)
            heap.append((start + (rng.expovariate(src.rate_hz) if poisson else phase), k, 0))
        heapq.heapify(heap)
        while heap and heap[0][0] < end:
            at, k, n = heap[0]
            out.append((at, src.name, k, n))
            nxt = (
                at + rng.expovariate(src.rate_hz)
                if poisson
                else start + phases[k] + (n + 1) * period
            )
            heapq.heapreplace(heap, (nxt, k, n + 1))
    out.sort()
    return out


def _samplers(spec: SimSpec) -> dict[str, Callable[[], float]]:
    return {
        s.name: sampler(s.service, random.Random(f"{spec.run.seed}/stage/{s.name}"))
        for s in spec.stages
    }


def _readers(spec: SimSpec) -> dict[str, list[str]]:
    readers: dict[str, list[str]] = {}
    for s in spec.stages:
        for i in s.inputs:
            readers.setdefault(i, []).append(s.name)
    return readers


async def _feed(spec: SimSpec, put: Callable[[str, float, str], Any]) -> None:
    """Hand every frame to ``put(source, capture time, id)`` at its capture time."""
    now, sleep = loop_clock()
    for at, name, k, n in _arrivals(spec, now()):
        if at > now():
            await sleep(at - now())
        await put(name, at, f"{name}-{k}-{n}")


def loop_floor(spec: SimSpec) -> int:
    """Row 2: ``asyncio.Queue`` channels; messages served."""
    served = [0]

    async def main() -> None:
        sleep = loop_clock()[1]
        readers = _readers(spec)
        queues = {s.name: asyncio.Queue[float]() for s in spec.stages}
        draw = _samplers(spec)

        async def worker(name: str) -> None:
            q, service, outs = queues[name], draw[name], readers.get(name, [])
            while True:
                ts = await q.get()
                await sleep(service())
                served[0] += 1
                for r in outs:
                    queues[r].put_nowait(ts)

        async def put(source: str, at: float, _pid: str) -> None:
            for r in readers[source]:
                queues[r].put_nowait(at)

        tasks = [
            asyncio.ensure_future(worker(s.name)) for s in spec.stages for _ in range(s.replicas)
        ]
        await _feed(spec, put)
        await sleep(spec.run.drain_seconds)
        for t in tasks:
            t.cancel()

    vrun(main, clock=VirtualClock())
    return served[0]


def messaging_contract(spec: SimSpec) -> int:
    """Row 3: the memory messaging model through the contract; messages served."""
    served = [0]

    async def main() -> None:
        now, sleep = loop_clock()
        b: MessagingBackend = MemoryMessagingBackend(clock=clock)
        pipe = await ensure_pipeline(b, spec.run.flow_id, spec.run.run_id, pipeline_nodes(spec))
        draw = _samplers(spec)
        done = Completed()

        async def worker(name: str, sub: SubscriptionId) -> None:
            service = draw[name]
            out = pipe.channels.get(name)
            receive, publish, settle = b.receive, b.publish, b.settle
            while True:
                for d in await receive(sub, 1, 1 << 26, now() + 1.0):
                    await sleep(service())
                    env = d.envelope
                    if out is not None:
                        pid = f"{env.publication_id}@{name}"
                        fwd = Envelope(out, pid, b"", pid, "data", None, env.event_ts)
                        await publish(fwd, now() + 5.0)
                    await settle(d.token, done, f"{d.sequence}:{d.token.lease_id}")
                    served[0] += 1

        async def put(source: str, at: float, pid: str) -> None:
            env = Envelope(pipe.channels[source], pid, b"", pid, "data", None, at)
            await b.publish(env, now() + 5.0)

        tasks = [
            asyncio.ensure_future(worker(s.name, sub))
            for s in spec.stages
            for sub in pipe.subscriptions[s.name]
            for _ in range(s.replicas)
        ]
        await _feed(spec, put)
        await sleep(spec.run.drain_seconds)
        for t in tasks:
            t.cancel()

    clock = VirtualClock()
    vrun(main, clock=clock)
    return served[0]


def _simulate(spec: SimSpec) -> int:
    return int(simulate(spec)["run"]["events"])


def _cpu(fn: Callable[[SimSpec], int], spec: SimSpec) -> tuple[int, float]:
    cpu0 = time.process_time()  # CPU seconds of this process: the machine is shared
    n = fn(spec)
    return n, time.process_time() - cpu0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--spec", type=Path, default=ROOT / "examples" / "camera-farm.toml")
    p.add_argument("--duration", type=float, default=120.0, help="virtual seconds")
    args = p.parse_args()
    run = {"duration_seconds": args.duration}
    if load_spec(args.spec).run.warmup_seconds >= args.duration:  # a short run: a quarter
        run["warmup_seconds"] = args.duration / 4  # of it as warm-up (the spec's is longer)
    spec = load_spec(args.spec, run)
    spec = spec.__class__(
        run=spec.run,
        sources=spec.sources,
        stages=tuple(s.__class__(**{**_fields(s), "gpu": None}) for s in spec.stages),
        payload=spec.payload,
    )
    no_bytes = spec.__class__(
        run=spec.run,
        sources=tuple(s.__class__(**{**_fields(s), "bytes": 0}) for s in spec.sources),
        stages=tuple(s.__class__(**{**_fields(s), "output_bytes": 0}) for s in spec.stages),
        payload=spec.payload,
    )
    rows: list[tuple[str, Callable[[SimSpec], int], SimSpec]] = [
        ("SimPy hand model", lambda s: int(simpy_model(s)["messages"]), spec),
        ("loop floor (asyncio.Queue)", loop_floor, spec),
        ("+ messaging contract", messaging_contract, spec),
        ("+ toolkit and recorders", _simulate, no_bytes),
        ("+ payload model (simulate)", _simulate, spec),
    ]
    print(f"spec {args.spec.name} without faults or GPUs, {args.duration:g} virtual s")
    heads = ("messages", "CPU s", "msg/CPU-s", "× SimPy", "µs/msg", "added")
    print(f"  {'layer':<28} " + " ".join(f"{h:>9}" for h in heads))
    simpy_rate = 0.0
    prev_us = 0.0
    for label, fn, s in rows:
        n, cpu = _cpu(fn, s)
        rate = n / cpu
        simpy_rate = simpy_rate or rate
        us = 1e6 * cpu / n
        added = f"{us - prev_us:+.1f}" if prev_us else ""
        cells = (f"{n:,}", f"{cpu:.2f}", f"{rate:,.0f}", f"{rate / simpy_rate:.2f}x", f"{us:.1f}")
        print(f"  {label:<28} " + " ".join(f"{c:>9}" for c in (*cells, added)))
        prev_us = us
    budget = 1e6 / (0.5 * simpy_rate)
    print(f"  the ≥ 0.5× SimPy target allows {budget:.1f} µs per message in all")
    full = load_spec(args.spec).run.duration_seconds
    total = n * full / args.duration
    print(
        f"  the spec's {full:g} s ({total:,.0f} messages) in < 60 s needs {total / 60:,.0f} "
        f"msg/s = {total / 60 / simpy_rate:.2f}x SimPy ({60e6 / total:.1f} µs per message)"
    )


if __name__ == "__main__":
    main()
