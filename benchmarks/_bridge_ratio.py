"""The trio bridge measured: the same workload through an adapter under asyncio and under trio
(``adapters._trio_bridge``: every call crosses to a trio-asyncio loop), in alternating rounds.

A round is one ``anyio.run`` on one backend, so each side opens its own client on its own
loop; rounds alternate (asyncio, trio, asyncio, …) on this shared machine so that its load
drift mostly cancels in the per-round ratio. The ratio is trio ÷ asyncio speed (ops/s; for
client CPU µs per op, asyncio ÷ trio, so it too reads "trio's speed relative to asyncio's"),
the median over paired rounds. Wall-clock reads are deliberate (a benchmark).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

Figures = dict[str, float]
"""workload → ops/s, and ``"<workload> cpu"`` → client CPU µs per op."""


class Timer:
    """Wall and CPU time of one timed section (this process only)."""

    def __init__(self) -> None:
        self.wall = time.perf_counter()  # wall-clock: a benchmark measures elapsed time
        self.cpu = time.process_time()

    def record(self, out: Figures, key: str, n: int) -> None:
        wall = time.perf_counter() - self.wall  # wall-clock: as above
        out[key] = n / wall
        out[f"{key} cpu"] = (time.process_time() - self.cpu) / n * 1e6


async def run_tasks(n: int, tasks: int, op: Callable[[int], Awaitable[object]]) -> None:
    """``op(i)`` for ``i`` in ``range(n)`` over ``tasks`` anyio tasks (either backend)."""

    async def worker(w: int) -> None:
        for i in range(w, n, tasks):
            await op(i)

    if tasks == 1:
        await worker(0)
        return
    async with anyio.create_task_group() as tg:
        for w in range(tasks):
            tg.start_soon(worker, w)


def unbatched() -> None:
    """Measure the bridge as trio-asyncio runs it alone: one asyncio callback per trio
    round (``--unbatched``: what ``_trio_bridge._batch_callbacks`` saves)."""
    from videoflow_aio.adapters import _trio_bridge

    _trio_bridge._batch_callbacks = lambda loop: None  # type: ignore[assignment]


def trio_vs_asyncio(round_fn: Callable[[], Awaitable[Figures]], rounds: int) -> dict[str, Figures]:
    """``round_fn`` under asyncio and under trio, ``rounds`` times each, alternating:
    each side's median round and the median per-round ratio trio ÷ asyncio."""
    sides: dict[str, list[Figures]] = {"asyncio": [], "trio": []}
    for _ in range(rounds):
        for backend in ("asyncio", "trio"):
            sides[backend].append(anyio.run(round_fn, backend=backend))
    a, t = sides["asyncio"], sides["trio"]
    ratio: Figures = {}
    for k in a[0]:
        pairs = list(zip(a, t, strict=True))
        if k.endswith(" cpu"):
            ratio[k] = statistics.median(x[k] / y[k] for x, y in pairs)
        else:
            ratio[k] = statistics.median(y[k] / x[k] for x, y in pairs)
    return {
        "asyncio": {k: statistics.median(r[k] for r in a) for k in a[0]},
        "trio": {k: statistics.median(r[k] for r in t) for k in t[0]},
        "trio / asyncio (median of rounds)": ratio,
    }


def print_ratios(title: str, figures: dict[str, Any], target: float = 0.8) -> bool:
    """Print the table; True when every workload's speed ratio meets ``target``."""
    a, t = figures["asyncio"], figures["trio"]
    ratio = figures["trio / asyncio (median of rounds)"]
    print(f"{title}: median round of each side; ratio = trio / asyncio, median of paired rounds")
    print(
        f"{'workload':22} {'asyncio':>10} {'trio':>10} {'ratio':>6}"
        "   client CPU µs/op asyncio / trio, ratio"
    )
    ok = True
    for k in [k for k in a if not k.endswith(" cpu")]:
        cpu = f"{k} cpu"
        ok &= ratio[k] >= target
        flag = "" if ratio[k] >= target else f"  < {target} target"
        print(
            f"{k:22} {a[k]:8.0f}/s {t[k]:8.0f}/s {ratio[k]:6.2f}"
            f"   {a[cpu]:7.1f} / {t[cpu]:7.1f}  {ratio[cpu]:5.2f}{flag}"
        )
    return ok
