"""Join (fusion) stages: one copy of a frame from each of several inputs, handled once.

A :class:`JoinWorker` serves a stage with two or more inputs (detector + depth, two camera
views, audio + video). A frame is identified across branches by its envelope's
``event_id`` (stage workers carry it from input to output; the publication id when it is
empty). Each part received is *parked* — its lease held and renewed, nothing settled —
until a part of the same frame has arrived from every input; then the handler is called
once with all parts (in input order), its outputs are forwarded once (as the first
input's envelope: publication id ``<event id>@<stage>``), and every part is settled with
the one outcome.

Guarantees:

* A duplicate part (a redelivery, or the same frame again on one input) never fires a
  second join: a part for a frame still waiting replaces the older part (which is settled
  ``Terminal``, a no-op when its lease was already gone); a part for a frame that joined
  (or was dropped) within the last ``join_memory`` frames is settled as that frame was.
* ``join_timeout_seconds``: a frame still missing a part that long after its first part
  arrived is dropped — its parts settled ``Terminal`` with a reason naming the missing
  inputs — and counted in ``join_timeouts``.
* At end of stream (every input sent ``eos`` and nothing else is pending or held) frames
  still missing parts can never join: they are dropped the same way, counted in
  ``join_incomplete``, and the stage finishes.
* Restarts and crashes: partial joins live in the worker's memory only. When the worker
  stops (cancellation, :meth:`~StageWorker.stop`, a process death) its parked leases are
  neither settled nor renewed, so they expire and redeliver, and the next worker forms the
  joins again from the redeliveries (each counts toward ``max_deliver``). A replica that
  dies while handling a join lets that join's parts expire the same way.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Unpack

import anyio

from ..contracts import Known
from ..contracts.errors import ValidationError
from ..contracts.messaging import (
    Delivery,
    MessagingBackend,
    Retry,
    SettleOutcome,
    SubscriptionId,
    Terminal,
)
from ..contracts.payload import ImmutablePayloadRef
from ._topology import Pipeline
from ._worker import (
    _COMPLETED,
    PayloadRead,
    Result,
    StageCounters,
    StageOptions,
    StageWorker,
    WorkerOptions,
    _optional_seconds,
    _Replica,
    stage_wiring,
)

JoinHandler = Callable[[Sequence[Delivery], Sequence[bytes | None]], Awaitable[Result]]
"""``await handler(deliveries, payloads)`` — one of each per input, in input order — →
outputs to forward once (or None)."""

DEFAULT_JOIN_MEMORY = 10_000
"""How many joined (or dropped) frames a :class:`JoinWorker` remembers to recognise late
duplicate parts."""


@dataclass(slots=True)
class JoinCounters(StageCounters):
    """:class:`StageCounters` (``completed`` etc. count parts) plus: ``joined``, frames
    whose handler ran and whose parts were settled ``Completed``; ``join_timeouts`` and
    ``join_incomplete``, frames dropped after ``join_timeout_seconds`` or at end of
    stream; ``join_duplicates``, parts that arrived for a frame already holding that part,
    or already joined or dropped."""

    joined: int = 0
    join_timeouts: int = 0
    join_incomplete: int = 0
    join_duplicates: int = 0


class _Part:
    __slots__ = ("delivery", "payload", "ref")

    def __init__(
        self, delivery: Delivery, payload: bytes | None, ref: ImmutablePayloadRef | None
    ) -> None:
        self.delivery = delivery
        self.payload = payload
        self.ref = ref


class _Waiting:
    __slots__ = ("deadline", "parts")

    def __init__(self, inputs: int, deadline: float) -> None:
        self.parts: list[_Part | None] = [None] * inputs
        self.deadline = deadline


class JoinWorker(StageWorker):
    """A stage that joins one part per input for each frame (see the module docstring).

    ``subscription``: the stage's data subscriptions, one per input (at least two);
    ``handler``: a :data:`JoinHandler`. ``join_timeout_seconds`` (default None: wait until
    end of stream): how long a frame may wait for its last part. ``join_memory``: how many
    finished frames are remembered to recognise late duplicates. The other arguments are
    :class:`StageWorker`'s; ``replicas`` serve each input.
    """

    counters: JoinCounters

    def __init__(
        self,
        backend: MessagingBackend,
        subscription: Sequence[SubscriptionId],
        handler: JoinHandler,
        *,
        join_timeout_seconds: float | None = None,
        join_memory: int = DEFAULT_JOIN_MEMORY,
        **options: Unpack[WorkerOptions],
    ) -> None:
        super().__init__(
            backend,
            subscription,
            handler,  # type: ignore[arg-type]  # called by _fire with the join's parts
            **options,
        )
        if len(self.subscriptions) < 2:
            raise ValidationError(
                "a join needs at least two input subscriptions",
                field="subscription",
                value=len(self.subscriptions),
            )
        if len({s.name for s in self.subscriptions}) != len(self.subscriptions):
            raise ValidationError(
                "a join's input subscriptions must differ", field="subscription", value=None
            )
        if isinstance(join_memory, bool) or not isinstance(join_memory, int) or join_memory < 0:
            raise ValidationError(
                "join_memory must be an int >= 0", field="join_memory", value=join_memory
            )
        self.join_timeout = _optional_seconds(join_timeout_seconds, "join_timeout_seconds")
        self.join_memory = join_memory
        self.join_handler = handler
        self.counters = JoinCounters([0.0] * len(self._replicas))
        # parked parts, one holder per input (sequences are per channel); renewed as leases
        self._parked = [_Replica(-1 - i, s) for i, s in enumerate(self.subscriptions)]
        self._holders.extend(self._parked)
        self._waiting: dict[str, _Waiting] = {}
        self._finished: OrderedDict[str, SettleOutcome] = OrderedDict()
        self._wake: anyio.Event | None = None
        self._parts = True

    def waiting(self) -> dict[str, tuple[str, ...]]:
        """Per frame still waiting: the inputs (channel names) whose part it lacks."""
        return {key: self._missing(w) for key, w in self._waiting.items()}

    def _more_tasks(self) -> list[Callable[[], Coroutine[Any, Any, None]]]:
        return [self._expire] if self.join_timeout is not None else []

    # -- parts -----------------------------------------------------------------------------
    async def _part(self, r: _Replica, d: Delivery, read: PayloadRead) -> None:
        data, ref, outcome = read
        env = d.envelope
        key = env.event_id or env.publication_id
        done = self._finished.get(key)
        if done is not None:
            self.counters.join_duplicates += 1
            await self._settle(r, d, done, ref)
            return
        if outcome is not _COMPLETED:
            if type(outcome) is not Retry:  # the part will never come: the frame cannot join
                self._remember(key, outcome)
                await self._drop(key, outcome)
            await self._settle(r, d, outcome, ref)
            return
        i = r.index // self.replicas
        w = self._waiting.get(key)
        if w is None:
            deadline = self._now() + (self.join_timeout or 0.0)
            w = self._waiting[key] = _Waiting(len(self.subscriptions), deadline)
            if self._wake is not None:
                self._wake.set()
        old = w.parts[i]
        w.parts[i] = _Part(d, data, ref)
        holder = self._parked[i]
        holder.leases[d.sequence] = r.leases.pop(d.sequence)
        if d.sequence in r.deadlines:
            holder.deadlines[d.sequence] = r.deadlines.pop(d.sequence)
        if old is not None:  # a second part from this input: the newer lease stands
            self.counters.join_duplicates += 1
            if old.delivery.sequence != d.sequence:
                await self._settle(
                    holder, old.delivery, Terminal(f"duplicate part of frame {key!r}"), old.ref
                )
            return
        if all(p is not None for p in w.parts):
            del self._waiting[key]
            await self._fire(key, w.parts)  # type: ignore[arg-type]

    async def _fire(self, key: str, parts: list[_Part]) -> None:
        """Handle a complete frame once and settle each part with the outcome."""
        deliveries = [p.delivery for p in parts]
        first = deliveries[0]
        try:
            _, outcome = await self._invoke(
                self.join_handler, (deliveries, [p.payload for p in parts]), first, first.envelope
            )
            if type(outcome) is not Retry:
                self._remember(key, outcome)
            if outcome is _COMPLETED:
                self.counters.joined += 1
            for i, p in enumerate(parts):
                await self._settle(self._parked[i], p.delivery, outcome, p.ref)
        except BaseException:
            # this replica dies (crash, cancellation): the parts it has not settled are
            # renewed no more, so they expire, redeliver and join again
            self._unpark(parts)
            raise

    def _unpark(self, parts: Sequence[_Part | None]) -> None:
        for i, p in enumerate(parts):
            if p is not None:
                seq = p.delivery.sequence
                self._parked[i].leases.pop(seq, None)
                self._parked[i].deadlines.pop(seq, None)

    def _remember(self, key: str, outcome: SettleOutcome) -> None:
        finished = self._finished
        if self.join_memory == 0:
            return
        finished[key] = outcome
        finished.move_to_end(key)
        while len(finished) > self.join_memory:
            finished.popitem(last=False)

    def _missing(self, w: _Waiting) -> tuple[str, ...]:
        return tuple(
            s.channel.name for s, p in zip(self.subscriptions, w.parts, strict=True) if p is None
        )

    async def _drop(self, key: str, outcome: SettleOutcome) -> bool:
        """Drop the frame ``key`` is waiting for (if it is): settle its parts with
        ``outcome``. True when there was one."""
        w = self._waiting.pop(key, None)
        if w is None:
            return False
        try:
            for i, p in enumerate(w.parts):
                if p is not None:
                    await self._settle(self._parked[i], p.delivery, outcome, p.ref)
        except BaseException:
            self._unpark(w.parts)
            raise
        return True

    async def _drop_waiting(self, key: str, why: str) -> None:
        w = self._waiting.get(key)
        if w is None:
            return
        outcome = Terminal(f"join {why}: no part from {', '.join(self._missing(w))}")
        self._remember(key, outcome)
        await self._drop(key, outcome)

    # -- timeouts and end of stream --------------------------------------------------------
    async def _expire(self) -> None:
        """Drop each frame still incomplete ``join_timeout_seconds`` after its first part."""
        assert self.join_timeout is not None
        while True:
            if not self._waiting:
                self._wake = anyio.Event()
                await self._wake.wait()
                self._wake = None
                continue
            key, w = next(iter(self._waiting.items()))
            now = self._now()
            if w.deadline > now:
                await self._sleep(w.deadline - now)
                continue
            self.counters.join_timeouts += 1
            await self._drop_waiting(key, f"timeout after {self.join_timeout:g} s")

    async def _drained(self) -> bool:
        """Drained as a stage worker is, except that parked parts may stay leased: once
        nothing else is pending or held, the frames still waiting can never complete and
        are dropped."""
        if any(r.busy for r in self._replicas):
            return False
        for i, sub in enumerate(self.subscriptions):
            obs = await self.backend.observe_subscription(sub)
            if not isinstance(obs, Known):
                return False
            held = len(self._parked[i].leases)
            if obs.value.pending or obs.value.leased > held:
                return False
        if any(r.busy for r in self._replicas):
            return False
        for key in list(self._waiting):
            self.counters.join_incomplete += 1
            await self._drop_waiting(key, "incomplete at end of stream")
        return True


class JoinOptions(StageOptions, total=False):
    """:class:`StageOptions` with a :class:`JoinWorker`'s own (``join_timeout_seconds``,
    ``join_memory``)."""

    join_timeout_seconds: float | None
    join_memory: int


def join_worker(
    backend: MessagingBackend,
    pipeline: Pipeline,
    stage: str,
    handler: JoinHandler,
    **options: Unpack[JoinOptions],
) -> JoinWorker:
    """A :class:`JoinWorker` for ``stage`` of ``pipeline`` (a stage with two or more
    inputs), wired as :func:`~videoflow_aio.pipeline.stage_worker` wires one."""
    subs, wiring = stage_wiring(pipeline, stage)
    return JoinWorker(backend, subs, handler, **wiring, **options)


__all__ = [
    "DEFAULT_JOIN_MEMORY",
    "JoinCounters",
    "JoinHandler",
    "JoinOptions",
    "JoinWorker",
    "join_worker",
]
