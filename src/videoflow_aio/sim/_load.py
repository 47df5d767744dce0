"""Load generators and the simulated work of a stage.

A source publishes its frames through the pipeline toolkit's :class:`Publisher` (frame bytes
through the payload store, ``event_ts`` = capture time); a stage's handler sleeps one service
time drawn from its distribution.
"""

from __future__ import annotations

import bisect
import heapq
import math
import random
from collections.abc import Callable
from typing import Any

from ..contracts.messaging import Accepted, Delivery, Rejected
from ..pipeline import Output, Publisher, loop_clock
from ._e2e import FrameLedger
from ._faults import SlowDown
from ._spec_types import SourceSpec


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
    out = _Emitter(source.name, publisher, frame, counts, ledger)
    if source.arrival == "trace" or source.rate_schedule or source.burst or source.jitter_ms:
        await _generate_shaped(source, out, rng, start, end)
        await out.close()
        return
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
    expo = rng.expovariate
    emit = out.emit
    while heap:
        at, k, n = heap[0]
        if at >= end:
            break
        await emit(at, k, n)
        nxt = at + expo(rate) if poisson else start + phases[k] + (n + 1) * period
        heapq.heapreplace(heap, (nxt, k, n + 1))
    await out.close()


class _Emitter:
    """Publishes one source's frames (in the ledger first; counted) and its ``eos``."""

    __slots__ = ("counts", "frame", "ledger", "name", "now", "publisher", "sent", "sleep")

    def __init__(
        self,
        name: str,
        publisher: Publisher,
        frame: bytes | None,
        counts: dict[str, int],
        ledger: FrameLedger,
    ) -> None:
        self.name, self.publisher, self.frame = name, publisher, frame
        self.counts, self.ledger = counts, ledger
        self.now, self.sleep = loop_clock()
        self.sent = 0

    async def emit(self, at: float, k: int, n: int) -> None:
        """Publish frame ``n`` of stream ``k``, captured at ``at``, once that time comes."""
        delay = at - self.now()
        if delay > 0:
            await self.sleep(delay)
        pid = f"{self.name}-{k}-{n}"
        self.ledger.published(pid, self.name)
        outcome = await self.publisher.send(pid, b"", event_ts=at, data=self.frame)
        self.sent += 1
        if type(outcome) is not Accepted:
            self.counts["rejected"] += 1
            if type(outcome) is Rejected:
                self.ledger.refused(pid)

    async def close(self) -> None:
        self.counts["frames"] = self.sent
        await self.publisher.send(f"eos@{self.name}", b"", kind="eos")


class RateFunction:
    """A stream's rate over time (seconds from the start of the load): the source's
    ``rate_schedule`` (or ``rate_hz``), replaced by ``burst.rate_hz`` while the source's
    on/off modulation is on. The modulation — off first, then on, … each period drawn
    from ``burst.dist`` with its mean, from its own ``rng`` — is shared by all the source's
    streams and drawn lazily as time advances."""

    def __init__(self, source: SourceSpec, rng: random.Random) -> None:
        self._steps = list(source.rate_schedule) or [(0.0, source.rate_hz)]
        self._burst = source.burst
        self._rng = rng
        self._toggles: list[float] = []  # switch instants: off -> on at even indices

    def _draw(self, mean: float) -> float:
        assert self._burst is not None
        if self._burst.dist == "constant":
            return mean
        return self._rng.expovariate(1.0 / mean)

    def _toggle_index(self, t: float) -> int:
        """How many switches happened at or before ``t`` (drawing more as needed)."""
        burst = self._burst
        assert burst is not None
        toggles = self._toggles
        while not toggles or toggles[-1] <= t:
            last = toggles[-1] if toggles else 0.0
            on_next = len(toggles) % 2 == 0
            toggles.append(
                last + self._draw(burst.mean_off_seconds if on_next else burst.mean_on_seconds)
            )
        return bisect.bisect_right(toggles, t)

    def rate(self, t: float) -> float:
        if self._burst is not None and self._toggle_index(t) % 2 == 1:
            return self._burst.rate_hz
        k = bisect.bisect_right(self._steps, (t, math.inf)) - 1
        return self._steps[max(k, 0)][1]

    def next_change(self, t: float) -> float:
        """The first instant after ``t`` where the rate may change (inf: none)."""
        k = bisect.bisect_right(self._steps, (t, math.inf))
        nxt = self._steps[k][0] if k < len(self._steps) else math.inf
        if self._burst is not None:
            nxt = min(nxt, self._toggles[self._toggle_index(t)])
        return nxt

    def next_poisson(self, t: float, expo: Callable[[float], float], end: float) -> float:
        """The next arrival after ``t`` of a Poisson process of this rate (piecewise: at a
        change the exponential clock restarts, exact by memorylessness); >= ``end`` when
        none comes before it."""
        while t < end:
            r = self.rate(t)
            change = self.next_change(t)
            if r > 0:
                at = t + expo(r)
                if at < change:
                    return at
            t = change
        return t

    def next_periodic(self, t: float, end: float) -> float:
        """The next frame of a periodic stream whose last frame was at ``t``: where the
        rate's integral from ``t`` reaches 1 (one period at a constant rate; across a
        change, the rest of the period at the new rate); >= ``end`` when none comes
        before it."""
        need = 1.0
        while t < end:
            r = self.rate(t)
            change = self.next_change(t)
            if r > 0:
                if t + need / r < change:
                    return t + need / r
                need -= r * (change - t)
            t = change
        return t


async def _generate_shaped(
    source: SourceSpec, out: _Emitter, rng: random.Random, start: float, end: float
) -> None:
    """:func:`generate` for a trace, a rate schedule, bursts or jitter: per stream the
    next nominal capture time (seconds from ``start``) from :class:`RateFunction`, each
    frame captured ``uniform(0, jitter_ms)`` after its nominal time."""
    duration = end - start
    expo = rng.expovariate
    jitter = source.jitter_ms / 1000.0
    uniform = rng.random
    heap: list[tuple[float, int, int, float]] = []  # (capture, stream, n, nominal)
    trace = source.trace_seconds
    fn = RateFunction(source, random.Random(f"{rng.random()}/burst"))
    poisson = source.arrival == "poisson"
    if source.arrival == "trace":
        if trace and trace[0] < duration:
            heap.append((trace[0], 0, 0, trace[0]))
    else:
        for k in range(source.streams):
            r0 = fn.rate(0.0)
            if poisson:
                first = fn.next_poisson(0.0, expo, duration)
            elif r0 > 0:
                first = rng.random() / r0
            else:
                first = fn.next_change(0.0)
            if first < duration:
                heap.append((first + (uniform() * jitter if jitter else 0.0), k, 0, first))
        heapq.heapify(heap)
    while heap:
        rel, k, n, nominal = heap[0]
        await out.emit(start + rel, k, n)
        if trace:
            nxt = trace[n + 1] if n + 1 < len(trace) else math.inf
        elif poisson:
            nxt = fn.next_poisson(nominal, expo, duration)
        else:
            nxt = fn.next_periodic(nominal, duration)
        if nxt < duration:
            captured = nxt + uniform() * jitter if jitter else nxt
            heapq.heapreplace(heap, (captured, k, n + 1, nxt))
        else:
            heapq.heappop(heap)


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


__all__ = ["RateFunction", "batch_handler", "generate", "stage_handler"]
