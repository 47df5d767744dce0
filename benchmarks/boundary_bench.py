"""What the contract-boundary checks cost on the hot paths, beside the same calls unchecked.

    .venv/bin/python benchmarks/boundary_bench.py [--rounds 12] [--messages 60000]

- messaging full cycle (``messaging_bench.full_cycle``: publish 64 → receive → settle each) on
  the memory model, three ways interleaved round by round in one process (the shared machine
  drifts): ``unchecked`` (the implementations the boundary wraps, called directly), ``bare
  wrapper`` (an ``async def`` layer with no check: the cost of the extra coroutine frame alone)
  and ``checked`` (what every caller gets);
- ``MemoryRuntimeStore.cas`` (one key, one task), checked and unchecked;
- building an ``Envelope`` (its ``__post_init__`` checks every field), plain and with a
  partition key, headers and an event time.

Figures are medians of the rounds (CPU seconds of this process); target: checked ≥ 0.90 ×
unchecked on the messaging cycle. Exit status 0 always (a shared machine cannot judge it).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import timeit
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).parent))

import messaging_bench
from videoflow_aio.contracts.messaging import ChannelId, make_envelope
from videoflow_aio.memory.messaging import MemoryMessagingBackend
from videoflow_aio.memory.runtime_store import MemoryRuntimeStore

HOT = ("publish", "receive", "settle")


def _bare(impl: Callable[..., Any]) -> Callable[..., Any]:
    async def call(self: Any, *args: Any) -> Any:
        return await impl(self, *args)

    return call


def _messaging(rounds: int, messages: int) -> dict[str, float]:
    checked = {n: getattr(MemoryMessagingBackend, n) for n in HOT}
    unchecked = {n: fn.__wrapped__ for n, fn in checked.items()}
    ways = {"unchecked": unchecked, "bare wrapper": {n: _bare(f) for n, f in unchecked.items()}}
    ways["checked"] = checked
    rates: dict[str, list[float]] = {k: [] for k in ways}
    try:
        for _ in range(rounds):
            for name, methods in ways.items():
                for method, fn in methods.items():
                    setattr(MemoryMessagingBackend, method, fn)
                rates[name].append(messaging_bench._run(messaging_bench.full_cycle, messages))
    finally:
        for method, fn in checked.items():
            setattr(MemoryMessagingBackend, method, fn)
    return {k: statistics.median(v) for k, v in rates.items()}


def _cas(rounds: int, ops: int = 100_000) -> dict[str, float]:
    checked = MemoryRuntimeStore.cas
    out: dict[str, list[float]] = {"unchecked": [], "checked": []}

    async def chain() -> float:
        store = MemoryRuntimeStore()
        await store.cas("key", None, b"v")
        _, version = await store.get("key")
        cpu = time.process_time()  # CPU seconds of this process, as messaging_bench
        for _ in range(ops):
            await store.cas("key", version, b"v")
            _, version = await store.get("key")
        return ops / (time.process_time() - cpu)

    try:
        for _ in range(rounds):
            unchecked: Any = typing.cast(Any, checked).__wrapped__
            for name, fn in (("unchecked", unchecked), ("checked", checked)):
                MemoryRuntimeStore.cas = fn  # type: ignore[method-assign]
                out[name].append(anyio.run(chain))
    finally:
        MemoryRuntimeStore.cas = checked  # type: ignore[method-assign]
    return {k: statistics.median(v) for k, v in out.items()}


def _envelopes() -> dict[str, float]:
    cid = ChannelId("bench", "r", "n")
    n = 100_000

    def plain() -> object:
        return make_envelope(cid, "m1")

    def full() -> object:
        return make_envelope(cid, "m1", partition_key="3", headers={"a": "b"}, event_ts=1.5)

    return {
        name: min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e9
        for name, fn in (("plain", plain), ("partition key + headers + event_ts", full))
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--messages", type=int, default=60_000)
    args = parser.parse_args()
    cycle = _messaging(args.rounds, args.messages)
    base = cycle["unchecked"]
    print(f"messaging full cycle, {args.messages:,} messages × {args.rounds} rounds (median)")
    for name, rate in cycle.items():
        print(f"  {name:<14} {rate:>10,.0f} msgs/s  {rate / base:5.2f} × unchecked")
    ok = cycle["checked"] / base >= 0.90
    print(f"  target: checked ≥ 0.90 × unchecked: {'met' if ok else 'NOT met'}")
    cas = _cas(max(3, args.rounds // 3))
    print("MemoryRuntimeStore cas + get, one key (median)")
    for name, rate in cas.items():
        print(f"  {name:<14} {rate:>10,.0f} ops/s  {rate / cas['unchecked']:5.2f} × unchecked")
    print("building an Envelope (best of 5)")
    for name, ns in _envelopes().items():
        print(f"  {name:<36} {ns:6.0f} ns")


if __name__ == "__main__":
    main()
