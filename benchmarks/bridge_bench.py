"""Where the trio bridge's time goes: its unit costs, each beside asyncio's own.

    .venv/bin/python benchmarks/bridge_bench.py [--n 5000] [--requests 2000] [--unbatched]

- ``hop``: one call from a trio task run whole as an asyncio task on the bridge's
  trio-asyncio loop (``_trio_bridge.run_on_asyncio`` of a coroutine that returns at once);
  beside it, creating and awaiting an asyncio task on a plain asyncio loop;
- ``callback round``: one asyncio callback (``await asyncio.sleep(0)``) on the bridge's loop,
  and on a plain asyncio loop;
- ``nats-py request``: a raw nats-py request/reply round trip to a local nats-server, all of
  them inside ONE hop (so: what running the client on trio-asyncio costs, hops aside), and on
  a plain asyncio loop.

``--unbatched`` measures the bridge without ``_trio_bridge._batch_callbacks`` (trio-asyncio's
own loop: one callback per trio scheduling round). Wall and this process's CPU time per op;
on a shared machine read the CPU figures. Wall-clock reads are deliberate (a benchmark).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

import nats
import trio

from _bridge_ratio import unbatched
from videoflow_aio.adapters import _trio_bridge
from videoflow_aio.testing.servers import start_nats


async def _noop() -> int:
    return 1


async def _spins(n: int) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


def _timed(n: int, run: Callable[[], Any]) -> tuple[float, float]:
    """``(wall µs, cpu µs)`` per op of ``run()`` doing ``n`` ops."""
    c0, w0 = time.process_time(), time.perf_counter()  # wall-clock: a benchmark
    run()
    wall = time.perf_counter() - w0  # wall-clock: as above
    return wall / n * 1e6, (time.process_time() - c0) / n * 1e6


def _on_trio(fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
    async def main() -> Any:
        await _trio_bridge.run_on_asyncio(_noop)  # the loop is up before timing
        return await _trio_bridge.run_on_asyncio(fn, *args)

    return trio.run(main)


async def _hops(n: int) -> None:
    for _ in range(n):
        await _trio_bridge.run_on_asyncio(_noop)


async def _tasks(n: int) -> None:
    loop = asyncio.get_running_loop()
    for _ in range(n):
        await loop.create_task(_noop())


async def _requests(url: str, n: int) -> tuple[float, float]:
    nc = await nats.connect(url)

    async def echo(msg: Any) -> None:
        await msg.respond(b"ok")

    await nc.subscribe("echo", cb=echo)
    for _ in range(50):
        await nc.request("echo", b"x", timeout=5)
    c0, w0 = time.process_time(), time.perf_counter()  # wall-clock: a benchmark
    for _ in range(n):
        await nc.request("echo", b"x", timeout=5)
    wall = time.perf_counter() - w0  # wall-clock: as above
    cpu = time.process_time() - c0
    await nc.close()
    return wall / n * 1e6, cpu / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--n", type=int, default=5000, help="hops and callback rounds")
    ap.add_argument("--requests", type=int, default=2000, help="nats-py round trips")
    ap.add_argument("--unbatched", action="store_true", help="without the callback batching")
    args = ap.parse_args()
    if args.unbatched:
        unbatched()
    n, r = args.n, args.requests
    srv = start_nats()
    try:
        rows = [
            (
                "hop",
                _timed(n, lambda: trio.run(_hops, n)),
                _timed(n, lambda: asyncio.run(_tasks(n))),
            ),
            (
                "callback round",
                _timed(n, lambda: _on_trio(_spins, n)),
                _timed(n, lambda: asyncio.run(_spins(n))),
            ),
            (
                "nats-py request",
                _on_trio(_requests, srv.url, r),
                asyncio.run(_requests(srv.url, r)),
            ),
        ]
    finally:
        srv.stop()
    mode = "unbatched" if args.unbatched else "batched"
    print(f"per op, µs: trio bridge ({mode}) vs plain asyncio; CPU ratio = bridge / asyncio")
    print(
        f"{'':16} {'bridge wall':>12} {'bridge cpu':>11} {'asyncio wall':>13} {'asyncio cpu':>12}"
    )
    for name, (bw, bc), (aw, ac) in rows:
        print(f"{name:16} {bw:12.1f} {bc:11.1f} {aw:13.1f} {ac:12.1f}   {bc / ac:5.2f}×")


if __name__ == "__main__":
    main()
