"""A stage's view of the messaging model: receives that note when each message was received
(its waiting time) and, for batched service, collect a batch and tag its first message with
the batch's size.

The stage worker serves the messages of one receive one after another; a batched stage's
handler (:func:`~videoflow_aio.sim._load.batch_handler`) spends the whole batch's service
time on the first message of the batch and none on the others, so every message of the
batch completes when the batch does.
"""

from __future__ import annotations

from typing import Any

from ..contracts import unchecked
from ..contracts.messaging import Delivery, SubscriptionId
from ..pipeline import loop_clock


class StageBackend:
    """Wraps the messaging model for one stage's worker (every other call passes through).

    ``received`` maps ``id(delivery)`` to the instant its receive returned (read back by the
    stage's recorder when the message completes); ``batch_of`` maps the first delivery of
    each batch to the batch's size. ``max_wait``: seconds a receive that got fewer than it
    asked for waits for more (0: it returns what it got at once); ``None``: no batching.
    """

    def __init__(self, inner: Any, *, max_wait: float | None = None) -> None:
        self._inner = inner
        self._max_wait = max_wait
        self.received: dict[int, float] = {}
        self.batch_of: dict[int, int] = {}
        self.settle = inner.settle
        self.renew = inner.renew
        self.publish = inner.publish
        self._receive = inner.receive
        self._fast_receive = unchecked(inner.receive)
        self._now = loop_clock()[0]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def receive(
        self, subscription: SubscriptionId, item_credit: int, byte_credit: int, deadline: float
    ) -> list[Delivery]:
        got: list[Delivery] = await self._receive(subscription, item_credit, byte_credit, deadline)
        # the worker's receive checked these arguments once (its first call went to the
        # checked method): the model's receive without the boundary from here on
        self._receive = self._fast_receive
        if not got:
            return got
        now = self._now
        wait = self._max_wait
        if wait is not None:
            if wait > 0 and len(got) < item_credit:
                until = now() + wait
                while len(got) < item_credit:
                    more = await self._fast_receive(
                        subscription, item_credit - len(got), byte_credit, until
                    )
                    if not more:
                        break
                    got.extend(more)
            batch_of = self.batch_of
            for d in got:  # an id reused from a message that was never served
                batch_of[id(d)] = 0
            batch_of[id(got[0])] = len(got)
        at = now()
        received = self.received
        for d in got:
            received[id(d)] = at
        return got


__all__ = ["StageBackend"]
