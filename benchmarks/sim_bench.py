"""The simulator against a SimPy model of the same pipeline written by hand.

    .venv/bin/python benchmarks/sim_bench.py [--spec examples/camera-farm.toml]
                                             [--duration 300] [--hour]

Both run the spec's sources and stages without its faults (the hand model knows no leases,
redelivery, credit or payload store): ``videoflow-aio simulate`` runs the real contract code
(memory messaging and payload models, stage workers) on virtual time; the SimPy model is one
process per frame going through one ``simpy.Resource`` per stage. The hand model draws from
the same seeded streams in the same order (arrival phases per source, service times per
stage in the order service starts), so the two give the same latencies up to how ties
between same-instant events are broken: the percentile table shows both side by side.

Throughput is simulated messages (frames × stages) per CPU second of this process — the
machine is shared, CPU time is what each engine spent — with the ratio from the same run.

``--hour`` then runs the spec as written (faults included) for its full duration, printing
wall and CPU time and the resident memory at each tenth of the run (flat when retained
messages are settled and their payloads released).
"""

from __future__ import annotations

import argparse
import heapq
import random
import resource
import sys
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from videoflow_aio.observe import percentiles  # noqa: E402
from videoflow_aio.sim import load_spec, simulate  # noqa: E402
from videoflow_aio.sim._dist import sampler  # noqa: E402
from videoflow_aio.sim._spec import SimSpec  # noqa: E402

QS = (0.5, 0.9, 0.99, 0.999)


def rss_mb() -> float:
    """Resident memory now (MB), from /proc (0 where there is none)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0.0
    return pages * resource.getpagesize() / 1e6


def simpy_model(spec: SimSpec) -> dict[str, Any]:
    """The pipeline by hand in SimPy; latencies (s) per stage and end to end."""
    import simpy

    env = simpy.Environment()
    run = spec.run
    start, end = 0.0, run.duration_seconds
    lo, hi = run.warmup_seconds, run.duration_seconds
    stages = {s.name: s for s in spec.stages}
    servers = {s.name: simpy.Resource(env, capacity=s.replicas) for s in spec.stages}
    draw = {
        s.name: sampler(s.service, random.Random(f"{run.seed}/stage/{s.name}")) for s in spec.stages
    }
    readers: dict[str, list[str]] = {}
    for s in spec.stages:
        for i in s.inputs:
            readers.setdefault(i, []).append(s.name)
    per_stage: dict[str, list[float]] = {s.name: [] for s in spec.stages}
    e2e: list[float] = []
    messages = [0]

    def visit(name: str, ts: float) -> Generator[Any, Any, None]:
        arrived = env.now
        with servers[name].request() as req:
            yield req
            yield env.timeout(draw[name]())
        messages[0] += 1
        if lo <= ts - start < hi:
            per_stage[name].append(env.now - arrived)
        nxt = readers.get(name, [])
        if not nxt and lo <= ts - start < hi:
            e2e.append(env.now - ts)
        for r in nxt:
            env.process(visit(r, ts))

    def source(src: Any) -> Generator[Any, Any, None]:
        rng = random.Random(f"{run.seed}/source/{src.name}")
        period = 1.0 / src.rate_hz
        poisson = src.arrival == "poisson"
        heap: list[tuple[float, int, int]] = []
        phases = []
        for k in range(src.streams):
            phase = rng.random() * period
            phases.append(phase)
            heap.append((start + (rng.expovariate(src.rate_hz) if poisson else phase), k, 0))
        heapq.heapify(heap)
        while heap:
            at, k, n = heap[0]
            if at >= end:
                break
            if at > env.now:
                yield env.timeout(at - env.now)
            for r in readers.get(src.name, []):
                env.process(visit(r, at))
            nxt = (
                at + rng.expovariate(src.rate_hz)
                if poisson
                else start + phases[k] + (n + 1) * period
            )
            heapq.heapreplace(heap, (nxt, k, n + 1))

    for src in spec.sources:
        env.process(source(src))
    env.run()
    return {"stages": per_stage, "end_to_end": e2e, "messages": messages[0], "stage_specs": stages}


def _row(name: str, sim: dict[str, Any], hand: list[float]) -> str:
    got = [sim[k] for k in ("p50", "p90", "p99", "p999")]
    ref = [v * 1000.0 for v in percentiles(hand, QS)]
    worst = max(abs(g - r) / r for g, r in zip(got, ref, strict=True) if r)
    cells = "  ".join(f"{g:7.3f}/{r:7.3f}" for g, r in zip(got, ref, strict=True))
    return f"  {name:<11} {cells}   max diff {worst:.2%}"


def compare(spec_path: Path, duration: float) -> None:
    spec = load_spec(spec_path, {"duration_seconds": duration})
    no_faults = spec.__class__(
        run=spec.run,
        sources=spec.sources,
        stages=tuple(s.__class__(**{**_fields(s), "gpu": None}) for s in spec.stages),
        payload=spec.payload,
    )
    cpu0 = time.process_time()
    result = simulate(no_faults)
    sim_cpu = time.process_time() - cpu0
    sim_msgs = result["run"]["events"]
    cpu0 = time.process_time()
    hand = simpy_model(no_faults)
    simpy_cpu = time.process_time() - cpu0
    simpy_msgs = hand["messages"]
    print(f"spec {spec_path.name} without faults, {duration:g} virtual s")
    wall = f" (wall {result['run']['wall_seconds']:.2f} s)"
    print(_rate("videoflow-aio simulate:", sim_msgs, sim_cpu) + wall)
    print(_rate("SimPy hand model:      ", simpy_msgs, simpy_cpu))
    ratio = (sim_msgs / sim_cpu) / (simpy_msgs / simpy_cpu)
    print(f"  ratio simulate / SimPy: {ratio:.2f}x   (target >= 0.5x)")
    heads = "".join(f"{h:<18}" for h in ("p50", "p90", "p99", "p99.9"))
    print(f"  latency ms, simulate/SimPy:   {heads}")
    for name, st in result["stages"].items():
        print(_row(name, st["latency_ms"], hand["stages"][name]))
    print(_row("end to end", result["end_to_end"]["latency_ms"], hand["end_to_end"]))


def _rate(label: str, messages: int, cpu: float) -> str:
    return f"  {label} {messages:,} messages in {cpu:.2f} CPU s = {messages / cpu:,.0f} msg/CPU-s"


def _fields(s: Any) -> dict[str, Any]:
    return {f: getattr(s, f) for f in s.__struct_fields__}


def hour(spec_path: Path) -> None:
    spec = load_spec(spec_path)
    duration = spec.run.duration_seconds
    marks: list[tuple[float, float, float]] = []
    next_mark = [duration / 10]
    wall0 = time.perf_counter()  # wall-clock: the benchmark's measurement

    def on_progress(virtual: float, total: float) -> None:
        if virtual >= next_mark[0] - 1e-9:
            marks.append((virtual, time.perf_counter() - wall0, rss_mb()))  # wall-clock: idem
            next_mark[0] += duration / 10

    cpu0 = time.process_time()
    result = simulate(spec, progress=on_progress)
    cpu = time.process_time() - cpu0
    run = result["run"]
    print(f"spec {spec_path.name} as written (faults included), {duration:g} virtual s")
    print(
        f"  {run['events']:,} messages: wall {run['wall_seconds']:.1f} s, CPU {cpu:.1f} s, "
        f"{run['events'] / cpu:,.0f} msg/CPU-s; drained: {run['drained']}"
    )
    print("  virtual s   wall s   RSS MB")
    for virtual, wall, rss in marks:
        print(f"  {virtual:9.0f} {wall:8.1f} {rss:8.1f}")
    e2e = result["end_to_end"]
    print(
        f"  end to end p99 {e2e['latency_ms']['p99']:.1f} ms, redeliveries "
        f"{e2e['redeliveries']}, dropped {e2e['dropped']}, unresolved {e2e['unresolved']}"
    )
    print(f"  peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--spec", type=Path, default=ROOT / "examples" / "camera-farm.toml")
    p.add_argument("--duration", type=float, default=300.0, help="virtual s for the comparison")
    p.add_argument("--hour", action="store_true", help="also run the spec as written")
    args = p.parse_args()
    compare(args.spec, args.duration)
    if args.hour:
        hour(args.spec)


if __name__ == "__main__":
    main()
