"""Load generators and the simulated work of a stage.

A source publishes its frames through the pipeline toolkit's :class:`Publisher` (frame bytes
through the payload store, ``event_ts`` = capture time); a stage's handler sleeps one service
time drawn from its distribution.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable
from typing import Any

from ..contracts.messaging import Accepted, Delivery, Rejected
from ..pipeline import Output, Publisher, loop_clock
from ._e2e import FrameLedger
from ._faults import SlowDown
from ._spec import SourceSpec


async def generate(
    source: SourceSpec,
    publisher: Publisher,
    rng: random.Random,
    start: float,
    end: float,
    frame: bytes | None,
    counts: dict[str, int],
    ledger: FrameLedger,
) -> None:
    """Publish ``source``'s frames from ``start`` until ``end`` (virtual), then ``eos``.

    Each stream is periodic (rate ``rate_hz`` from a random phase in its first period) or
    Poisson; frames are published in time order, each with ``event_ts`` = its capture time,
    id ``<source>-<stream>-<n>``, entered in ``ledger`` before it is published (refused:
    dropped; unknown after the publisher's retries: left in flight). A publish that blocks
    (a paused channel, a stalled store) delays the frames behind it — they are published
    late, with their capture times.
    """
    now, sleep = loop_clock()
    rate = source.rate_hz
    period = 1.0 / rate
    poisson = source.arrival == "poisson"
    heap: list[tuple[float, int, int]] = []
    phases: list[float] = []
    for k in range(source.streams):
        phase = rng.random() * period
        phases.append(phase)
        first = start + (rng.expovariate(rate) if poisson else phase)
        heap.append((first, k, 0))
    heapq.heapify(heap)
    name = source.name
    send = publisher.send
    expo = rng.expovariate
    sent = 0
    enter = ledger.published
    while heap:
        at, k, n = heap[0]
        if at >= end:
            break
        delay = at - now()
        if delay > 0:
            await sleep(delay)
        pid = f"{name}-{k}-{n}"
        enter(pid, name)
        outcome = await send(pid, b"", event_ts=at, data=frame)
        sent += 1
        if type(outcome) is not Accepted:
            counts["rejected"] += 1
            if type(outcome) is Rejected:
                ledger.refused(pid)
        nxt = at + expo(rate) if poisson else start + phases[k] + (n + 1) * period
        heapq.heapreplace(heap, (nxt, k, n + 1))
    counts["frames"] = sent
    await publisher.send(f"eos@{name}", b"", kind="eos")


def stage_handler(
    sample: Callable[[], float],
    slow: SlowDown,
    output: list[Output | bytes] | None,
    per_item: float = 0.0,
) -> Callable[[Delivery, bytes | None], Any]:
    """The simulated work: sleep one service time (plus ``per_item`` seconds; times the
    slow-down factor), then hand the stage's output (if it has one) to the worker to
    forward."""
    sleep = loop_clock()[1]

    async def handle(d: Delivery, data: bytes | None) -> list[Output | bytes] | None:
        await sleep(sample() * slow.factor)
        return output

    async def handle_per_item(d: Delivery, data: bytes | None) -> list[Output | bytes] | None:
        await sleep((sample() + per_item) * slow.factor)
        return output

    return handle_per_item if per_item else handle


def batch_handler(
    sample: Callable[[], float],
    per_item: float,
    slow: SlowDown,
    output: list[Output | bytes] | None,
    batch_of: dict[int, int],
) -> Callable[[Delivery, bytes | None], Any]:
    """Batched service: the first message of a batch of ``n`` (``batch_of``, filled by the
    stage's :class:`~videoflow_aio.sim._batching.StageBackend`) sleeps one draw of the
    batch's fixed cost plus ``n × per_item`` seconds (times the slow-down factor); the
    others of the batch are served at once after it."""
    sleep = loop_clock()[1]

    async def handle(d: Delivery, data: bytes | None) -> list[Output | bytes] | None:
        n = batch_of.pop(id(d), 0)
        if n:
            await sleep((sample() + per_item * n) * slow.factor)
        return output

    return handle


__all__ = ["batch_handler", "generate", "stage_handler"]
