"""A joining stage (``join = "all"``): one copy of a frame from every input, served once.

:class:`JoinBackend` stands between the messaging model and the stage's worker. Its pump
tasks (one per input subscription, :meth:`JoinBackend.run`) lease every copy that arrives
and hold it, renewing its lease, until a copy of the same frame (the envelope's
``event_id``) has arrived from every input; the frame is then ready and the worker's
replicas — competing on one join subscription — receive it as one delivery (the envelope of
the copy that arrived last). Settling that delivery settles every copy; renewing it renews
every copy; a replica that dies holding it lets every copy's lease expire, so they are
redelivered and joined again.

A frame whose copies have not all arrived ``join_timeout_ms`` after its first is dropped:
its copies are settled, its late copies settled as they arrive, and the run's frame ledger
counts it dropped (reason ``join_timeout``). Once every input sent end-of-stream and nothing
is pending upstream, a frame still incomplete can never complete: it is dropped the same way
(reason ``join_incomplete``).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import Any

import anyio

from ..contracts import Known
from ..contracts.messaging import (
    ChannelId,
    Completed,
    Delivery,
    DeliveryToken,
    LeaseObservation,
    SettleConfirmed,
    SettleOutcome,
    SettleStale,
    SubscriptionId,
    SubscriptionObservation,
)
from ..pipeline import loop_clock

_COMPLETED = Completed()
_PUMP_ITEMS = 256


class _Frame:
    __slots__ = ("copies", "first")

    def __init__(self, n: int, first: float) -> None:
        self.copies: list[Delivery | None] = [None] * n
        self.first = first


class JoinBackend:
    """The messaging model as a join stage's worker sees it (see the module docstring).

    ``subscriptions``: the stage's input subscriptions, in ``inputs`` order. ``timeout``:
    seconds a frame may wait for its last copy (None: no bound). ``lost(frame, reason)`` is
    called once per dropped frame. Every other call passes through to ``inner``."""

    def __init__(
        self,
        inner: Any,
        stage: str,
        subscriptions: tuple[SubscriptionId, ...],
        *,
        timeout: float | None,
        poll_seconds: float,
        lost: Callable[[str, str], None],
    ) -> None:
        self._inner = inner
        self.publish = inner.publish
        self.subscriptions = subscriptions
        first = subscriptions[0]
        self.subscription = SubscriptionId(
            ChannelId(first.channel.flow_id, first.channel.run_id, f"{stage}~join"), stage
        )
        self._timeout = timeout
        self._poll = poll_seconds
        self._lost = lost
        self._now, self._sleep = loop_clock()
        self._waiting: dict[str, _Frame] = {}  # frames with copies missing, oldest first
        self._ready: deque[Delivery] = deque()  # joined, not yet received by a replica
        self._copies: dict[str, list[Delivery]] = {}  # lease id -> the copies it stands for
        self._deadline: dict[str, float] = {}  # lease id -> its (renewed) deadline
        self._late: dict[str, int] = {}  # dropped frame -> copies still to come
        self._wake = anyio.Event()
        self._serial = 0
        self._lease: float | None = None
        self.draining: Callable[[], bool] = lambda: False
        self.received: dict[int, float] = {}
        self.timed_out = 0
        self.incomplete = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    # -- the pumps ---------------------------------------------------------------------------
    async def run(self) -> None:
        """Pump every input until cancelled (the stage's worker is done)."""
        async with anyio.create_task_group() as tg:
            for i, sub in enumerate(self.subscriptions):
                tg.start_soon(self._pump, i, sub)
            tg.start_soon(self._renew_held)
            if self._timeout is not None:
                tg.start_soon(self._expire, self._timeout)

    async def _pump(self, index: int, sub: SubscriptionId) -> None:
        receive = self._inner.receive
        now = self._now
        n = len(self.subscriptions)
        while True:
            got = await receive(sub, _PUMP_ITEMS, 1 << 62, now() + self._poll)
            for d in got:
                if self._lease is None:
                    self._lease = d.lease_deadline - now()
                env = d.envelope
                frame = env.event_id or env.publication_id
                late = self._late.get(frame)
                if late is not None:  # dropped already: settle the straggler
                    if late <= 1:
                        del self._late[frame]
                    else:
                        self._late[frame] = late - 1
                    await self._settle_copy(d)
                    continue
                f = self._waiting.get(frame)
                if f is None:
                    f = self._waiting[frame] = _Frame(n, now())
                f.copies[index] = d  # a redelivered copy replaces the expired one
                if all(c is not None for c in f.copies):
                    del self._waiting[frame]
                    self._ready.append(self._joined(f, d))
                    self._notify()

    def _notify(self) -> None:
        """Wake every receive waiting for a ready frame (they take turns)."""
        wake, self._wake = self._wake, anyio.Event()
        wake.set()

    def _joined(self, f: _Frame, last: Delivery) -> Delivery:
        copies = [c for c in f.copies if c is not None]
        self._serial += 1
        lease_id = f"join-{self._serial}"
        self._copies[lease_id] = copies
        token = DeliveryToken(self.subscription, self._serial, 1, lease_id)
        deadline = min(c.lease_deadline for c in copies)
        self._deadline[lease_id] = deadline
        attempt = max(c.attempt for c in copies)
        return Delivery(last.envelope, self._serial, attempt, token, deadline)

    async def _settle_copy(self, d: Delivery) -> None:
        await self._inner.settle(d.token, _COMPLETED, f"{d.sequence}:{d.token.lease_id}")

    async def _drop(self, frame: str, f: _Frame, reason: str) -> None:
        del self._waiting[frame]
        missing = sum(1 for c in f.copies if c is None)
        if missing and reason == "join_timeout":
            self._late[frame] = missing
        for c in f.copies:
            if c is not None:
                await self._settle_copy(c)
        if reason == "join_timeout":
            self.timed_out += 1
        else:
            self.incomplete += 1
        self._lost(frame, reason)

    async def _expire(self, timeout: float) -> None:  # noqa: ASYNC109 - the join's bound
        """Drop each frame ``timeout`` after its first copy arrived (never later: a frame
        that arrives while this sleeps has a deadline after the wake-up)."""
        while True:
            waiting = self._waiting
            if not waiting:
                await self._sleep(timeout)
                continue
            frame, f = next(iter(waiting.items()))
            delay = f.first + timeout - self._now()
            if delay > 0:
                await self._sleep(delay)
                continue
            await self._drop(frame, f, "join_timeout")

    async def _renew_held(self) -> None:
        """Every quarter lease, renew the held copies (waiting or ready) past half theirs."""
        while self._lease is None:
            await self._sleep(self._poll)
        lease = self._lease
        renew = self._inner.renew
        while True:
            await self._sleep(lease / 4)
            now = self._now()
            held = [c for f in self._waiting.values() for c in f.copies if c is not None]
            held += [c for d in self._ready for c in self._copies[d.token.lease_id]]
            for c in held:
                if c.lease_deadline - now <= lease / 2:
                    await renew(c.token)

    # -- what the worker calls -----------------------------------------------------------------
    async def receive(
        self, subscription: SubscriptionId, item_credit: int, byte_credit: int, deadline: float
    ) -> list[Delivery]:
        if subscription != self.subscription:
            out: list[Delivery] = await self._inner.receive(
                subscription, item_credit, byte_credit, deadline
            )
            return out
        ready = self._ready
        while not ready:
            if self._now() >= deadline:
                return []
            wake = self._wake
            with anyio.move_on_after(deadline - self._now()):
                await wake.wait()
        got = [ready.popleft() for _ in range(min(item_credit, len(ready)))]
        at = self._now()
        for d in got:
            self.received[id(d)] = at
        if ready:
            self._notify()  # more for another replica
        return got

    async def settle(self, token: DeliveryToken, outcome: SettleOutcome, settlement_id: str) -> Any:
        if token.subscription != self.subscription:
            return await self._inner.settle(token, outcome, settlement_id)
        copies = self._copies.pop(token.lease_id, None)
        self._deadline.pop(token.lease_id, None)
        if copies is None:
            return SettleStale("join: already settled")
        answers = [
            await self._inner.settle(c.token, outcome, f"{c.sequence}:{c.token.lease_id}")
            for c in copies
        ]
        if all(type(a) is SettleConfirmed for a in answers):
            return SettleConfirmed(token.sequence)
        return next(a for a in answers if type(a) is not SettleConfirmed)

    async def renew(self, token: DeliveryToken) -> LeaseObservation:
        if token.subscription != self.subscription:
            obs: LeaseObservation = await self._inner.renew(token)
            return obs
        copies = self._copies.get(token.lease_id)
        if copies is None:
            return LeaseObservation(False, None, token.attempt, "join: settled")
        deadline = math.inf
        for c in copies:
            got = await self._inner.renew(c.token)
            if not got.held or got.lease_deadline is None:
                return LeaseObservation(got.held, None, token.attempt, got.reason)
            deadline = min(deadline, got.lease_deadline)
        self._deadline[token.lease_id] = deadline
        return LeaseObservation(True, deadline, token.attempt)

    async def observe_subscription(self, subscription: SubscriptionId) -> Any:
        if subscription != self.subscription:
            return await self._inner.observe_subscription(subscription)
        upstream = 0
        for sub in self.subscriptions:
            seen = await self._inner.observe_subscription(sub)
            if not isinstance(seen, Known):
                return seen
            upstream += seen.value.pending
        if not upstream and self._waiting and self.draining():
            for frame, f in list(self._waiting.items()):  # no copy can come any more
                await self._drop(frame, f, "join_incomplete")
        held = sum(1 for f in self._waiting.values() for c in f.copies if c is not None)
        now = self._now()
        for lease_id, until in list(self._deadline.items()):
            if until <= now:  # its replica died holding it: the copies come back
                del self._deadline[lease_id]
                self._copies.pop(lease_id, None)
        return Known(
            SubscriptionObservation(
                subscription=self.subscription,
                pending=upstream + len(self._ready),
                leased=len(self._copies) - len(self._ready) + held,
                unresolved=0,
                dropped=0,
                redelivered=0,
            )
        )


__all__ = ["JoinBackend"]
