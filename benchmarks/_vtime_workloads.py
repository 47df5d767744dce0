"""The three virtual-time workloads, written once per engine family with the same logic.

W1 sleepers: 1,000 tasks x 200 sleeps of ``random.Random(12345).uniform(0.001, 1.0)`` s.
W2 ping-pong: 100 producer/consumer pairs over a capacity-1 queue, 2,000 messages each,
   the producer sleeping 0.01 s before each send.
W3 timeouts: 100 workers x 110 operations, each a 1 s sleep inside a 5 s timeout (every
   11th: a 0.5 s timeout, so it expires).

Every engine starts its clock at 0.0 and computes deadlines as ``now + delay``, so all
virtual-time engines must end at the same final virtual time.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable, Generator
from typing import Any

W1_TASKS, W1_SLEEPS = 1000, 200
W2_PAIRS, W2_MESSAGES, W2_GAP = 100, 2000, 0.01
W3_WORKERS, W3_OPS = 100, 110

#: events counted per workload: timer events, messages, operations
EVENTS = {"W1": W1_TASKS * W1_SLEEPS, "W2": W2_PAIRS * W2_MESSAGES, "W3": W3_WORKERS * W3_OPS}


def w1_delays() -> list[list[float]]:
    rng = random.Random(12345)
    return [[rng.uniform(0.001, 1.0) for _ in range(W1_SLEEPS)] for _ in range(W1_TASKS)]


def w3_timeout(op: int) -> float:
    return 0.5 if op % 11 == 10 else 5.0


# -- asyncio (this library's loop, looptime, aiotools, and the sleep(0) floor) -----------

Sleep = Callable[[float], Awaitable[None]]


async def asyncio_w1(sleep: Sleep, delays: list[list[float]]) -> None:
    async def sleeper(ds: list[float]) -> None:
        for d in ds:
            await sleep(d)

    await asyncio.gather(*(sleeper(ds) for ds in delays))


async def asyncio_w2(sleep: Sleep, _: Any) -> None:
    async def producer(q: asyncio.Queue[int]) -> None:
        for i in range(W2_MESSAGES):
            await sleep(W2_GAP)
            await q.put(i)

    async def consumer(q: asyncio.Queue[int]) -> None:
        for _ in range(W2_MESSAGES):
            await q.get()

    coros = []
    for _ in range(W2_PAIRS):
        q: asyncio.Queue[int] = asyncio.Queue(maxsize=1)
        coros += [producer(q), consumer(q)]
    await asyncio.gather(*coros)


async def asyncio_w3(sleep: Sleep, _: Any) -> None:
    async def worker() -> None:
        for op in range(W3_OPS):
            try:
                async with asyncio.timeout(w3_timeout(op)):
                    await sleep(1.0)
            except TimeoutError:
                pass

    await asyncio.gather(*(worker() for _ in range(W3_WORKERS)))


ASYNCIO = {"W1": asyncio_w1, "W2": asyncio_w2, "W3": asyncio_w3}


# -- trio (this library's trio clock and trio's MockClock) -------------------------------


async def trio_w1(delays: list[list[float]]) -> None:
    import trio

    async def sleeper(ds: list[float]) -> None:
        for d in ds:
            await trio.sleep(d)

    async with trio.open_nursery() as nursery:
        for ds in delays:
            nursery.start_soon(sleeper, ds)


async def trio_w2(_: Any) -> None:
    import trio

    async def producer(send: trio.MemorySendChannel[int]) -> None:
        for i in range(W2_MESSAGES):
            await trio.sleep(W2_GAP)
            await send.send(i)

    async def consumer(receive: trio.MemoryReceiveChannel[int]) -> None:
        for _ in range(W2_MESSAGES):
            await receive.receive()

    async with trio.open_nursery() as nursery:
        for _ in range(W2_PAIRS):
            send, receive = trio.open_memory_channel[int](1)
            nursery.start_soon(producer, send)
            nursery.start_soon(consumer, receive)


async def trio_w3(_: Any) -> None:
    import trio

    async def worker() -> None:
        for op in range(W3_OPS):
            with trio.move_on_after(w3_timeout(op)):
                await trio.sleep(1.0)

    async with trio.open_nursery() as nursery:
        for _ in range(W3_WORKERS):
            nursery.start_soon(worker)


TRIO = {"W1": trio_w1, "W2": trio_w2, "W3": trio_w3}


# -- SimPy -------------------------------------------------------------------------------


def simpy_run(workload: str, data: Any) -> float:
    import simpy

    env = simpy.Environment()

    def sleeper(ds: list[float]) -> Generator[Any, Any, None]:
        for d in ds:
            yield env.timeout(d)

    def producer(store: simpy.Store) -> Generator[Any, Any, None]:
        for i in range(W2_MESSAGES):
            yield env.timeout(W2_GAP)
            yield store.put(i)

    def consumer(store: simpy.Store) -> Generator[Any, Any, None]:
        for _ in range(W2_MESSAGES):
            yield store.get()

    def worker() -> Generator[Any, Any, None]:
        for op in range(W3_OPS):
            yield env.timeout(1.0) | env.timeout(w3_timeout(op))

    procs = []
    if workload == "W1":
        procs = [env.process(sleeper(ds)) for ds in data]
    elif workload == "W2":
        for _ in range(W2_PAIRS):
            store = simpy.Store(env, capacity=1)
            procs += [env.process(producer(store)), env.process(consumer(store))]
    else:
        procs = [env.process(worker()) for _ in range(W3_WORKERS)]
    # run until every process is done (W3 leaves unawaited 1 s timeouts behind)
    env.run(until=env.all_of(procs))
    return float(env.now)
