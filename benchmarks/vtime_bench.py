"""Virtual-time engines compared on three workloads (see ``_vtime_workloads.py``).

    .venv/bin/python benchmarks/vtime_bench.py [--runs 3] [--workloads W1,W2,W3]
                                               [--engines vtime-asyncio,...]

Each (engine, workload) runs ``--runs`` times, each in a fresh interpreter; the wall time
of the workload alone (imports and process start excluded) is measured and the median
reported, with the final virtual time each engine reached (they must agree), the rate,
and ratios. The machine is shared, so absolute figures are noisy: ratios from one run
matter most. Targets (issue 2, this 2-core machine): vtime-asyncio W1 >= 180k events/s,
W2 >= 140k msgs/s, W3 >= 85k ops/s; vtime-trio >= 0.9x trio MockClock. The ``-seeded``
engines run the same loop under ``VirtualClock(seed=1)`` (issue 18: a seed costs <= 1.5x).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _vtime_workloads as wl

ENGINES = [
    "vtime-asyncio",
    "vtime-asyncio-seeded",
    "vtime-trio",
    "vtime-trio-seeded",
    "trio-mockclock",
    "simpy",
    "looptime",
    "aiotools",
    "asyncio-sleep0",
]
TARGETS = {"W1": 180_000.0, "W2": 140_000.0, "W3": 85_000.0}
SEED = 1  # the -seeded engines: the same loop under VirtualClock(seed=SEED)
SEEDED_TARGET = 1.5  # a seed may cost at most 1.5x (CPU time)
UNITS = {"W1": "timer events/s", "W2": "msgs/s", "W3": "ops/s"}


class _Timer:
    """Wall and CPU time of the workload alone."""

    def __enter__(self) -> _Timer:
        self.cpu0 = time.process_time()
        self.wall0 = time.perf_counter()  # wall-clock: the benchmark's measurement
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall0  # wall-clock: as above
        self.cpu = time.process_time() - self.cpu0


def _run_asyncio_engine(engine: str, workload: str, data: Any) -> tuple[_Timer, float | None]:
    import asyncio

    body = wl.ASYNCIO[workload]
    if engine in ("vtime-asyncio", "vtime-asyncio-seeded"):
        from videoflow_aio.vtime import VirtualClock, new_event_loop

        seed = SEED if engine.endswith("-seeded") else None
        loop = new_event_loop(VirtualClock(start=0.0, seed=seed))
        with _Timer() as timer:
            loop.run_until_complete(body(asyncio.sleep, data))
        final = loop.time()
        loop.close()
        return timer, final
    if engine == "looptime":
        import looptime

        lt_loop = looptime.new_event_loop(start=0.0)
        with _Timer() as timer:
            lt_loop.run_until_complete(body(asyncio.sleep, data))
        final = lt_loop.time()
        lt_loop.close()
        return timer, final
    if engine == "aiotools":
        import aiotools

        vclock = aiotools.VirtualClock()

        async def patched() -> None:
            with vclock.patch_loop():
                await body(asyncio.sleep, data)

        plain = asyncio.new_event_loop()
        with _Timer() as timer:
            plain.run_until_complete(patched())
        plain.close()
        return timer, vclock.virtual_time()
    if engine == "asyncio-sleep0":

        async def sleep0(_: float) -> None:
            await asyncio.sleep(0)

        plain = asyncio.new_event_loop()
        with _Timer() as timer:
            plain.run_until_complete(body(sleep0, data))
        plain.close()
        return timer, None
    raise ValueError(engine)


def _run_trio_engine(engine: str, workload: str, data: Any) -> tuple[_Timer, float]:
    import trio
    import trio.testing

    clock: Any
    if engine in ("vtime-trio", "vtime-trio-seeded"):
        from videoflow_aio.vtime import VirtualClock

        seed = SEED if engine.endswith("-seeded") else None
        clock = VirtualClock(start=0.0, seed=seed).trio_clock()
    else:
        clock = trio.testing.MockClock(autojump_threshold=0)
    final: list[float] = []

    async def main() -> None:
        await wl.TRIO[workload](data)
        final.append(trio.current_time())

    with _Timer() as timer:
        trio.run(main, clock=clock)
    return timer, final[0]


def child(engine: str, workload: str) -> dict[str, Any]:
    data = wl.w1_delays() if workload == "W1" else None
    final: float | None
    if engine in ("vtime-trio", "vtime-trio-seeded", "trio-mockclock"):
        timer, final = _run_trio_engine(engine, workload, data)
    elif engine == "simpy":
        import simpy  # noqa: F401  (imported before the measurement)

        with _Timer() as timer:
            final = wl.simpy_run(workload, data)
    else:
        timer, final = _run_asyncio_engine(engine, workload, data)
    return {
        "engine": engine,
        "workload": workload,
        "wall": timer.wall,
        "cpu": timer.cpu,
        "final": final,
    }


def measure(engine: str, workload: str, runs: int) -> dict[str, Any]:
    walls: list[float] = []
    cpus: list[float] = []
    finals: set[float | None] = set()
    for _ in range(runs):
        out = subprocess.run(
            [sys.executable, __file__, "--child", engine, workload],
            capture_output=True,
            text=True,
            check=True,
        )
        result = json.loads(out.stdout.strip().splitlines()[-1])
        walls.append(result["wall"])
        cpus.append(result["cpu"])
        finals.add(result["final"])
    wall = statistics.median(walls)
    cpu = statistics.median(cpus)
    return {
        "wall": wall,
        "rate": wl.EVENTS[workload] / wall,
        "cpu_rate": wl.EVENTS[workload] / cpu,
        "finals": sorted(finals, key=str),
    }


def _fmt_final(finals: list[float | None]) -> str:
    if finals == [None]:
        return "n/a (real time)"
    return ", ".join(repr(f) for f in finals)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workloads", default="W1,W2,W3")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--child", nargs=2, metavar=("ENGINE", "WORKLOAD"))
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    engines = args.engines.split(",")
    print(f"python {sys.version.split()[0]}; {args.runs} fresh-process runs each, medians")
    for workload in args.workloads.split(","):
        print(f"\n{workload} ({wl.EVENTS[workload]:,} events; rate in {UNITS[workload]})")
        print(
            f"  {'engine':<16} {'median wall s':>13} {'rate':>11} {'cpu rate':>11}"
            f" {'this/it':>8}  final virtual t"
        )
        rows = {e: measure(e, workload, args.runs) for e in engines}
        ours = rows.get("vtime-asyncio")
        for engine, row in rows.items():
            ratio = f"{ours['rate'] / row['rate']:.2f}x" if ours else "-"
            print(
                f"  {engine:<16} {row['wall']:>13.3f} {row['rate']:>11,.0f}"
                f" {row['cpu_rate']:>11,.0f} {ratio:>8}  {_fmt_final(row['finals'])}"
            )
        reference = rows["simpy"]["finals"] if "simpy" in rows else None
        differ = [
            e
            for e, r in rows.items()
            if e != "asyncio-sleep0" and reference is not None and r["finals"] != reference
        ]
        print(f"  engines whose final virtual time differs from SimPy's: {differ or 'none'}")
        if ours:
            target = TARGETS[workload]
            verdict = "meets" if ours["rate"] >= target else "MISSES"
            print(f"  vtime-asyncio {ours['rate']:,.0f} {verdict} target {target:,.0f}")
        for base in ("vtime-asyncio", "vtime-trio"):
            if base in rows and f"{base}-seeded" in rows:
                cost = rows[base]["cpu_rate"] / rows[f"{base}-seeded"]["cpu_rate"]
                verdict = "meets" if cost <= SEEDED_TARGET else "MISSES"
                print(
                    f"  {base} seeded/unseeded CPU time = {cost:.2f}x ({verdict} target "
                    f"<= {SEEDED_TARGET}x)"
                )
        if "vtime-trio" in rows and "trio-mockclock" in rows:
            r = rows["vtime-trio"]["rate"] / rows["trio-mockclock"]["rate"]
            print(f"  vtime-trio / trio MockClock = {r:.2f}x (target >= 0.90x)")


if __name__ == "__main__":
    main()
