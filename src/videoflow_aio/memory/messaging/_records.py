"""The smallest records of the messaging model: a stored message, a held publication, and a
bounded memory of ids."""

from __future__ import annotations

from collections import deque
from typing import TypeVar

import anyio
import msgspec

from ...contracts.messaging import Envelope, PublishOutcome

CLOSED = "channel closed"
"""The reason recorded for every fate ``close`` decides (drops, evictions, held rejects)."""


class Msg(msgspec.Struct, gc=False):
    """One stored envelope at stream sequence ``seq``, accepted at ``at``. ``slot`` is False
    for dead letters, which live outside the channel's limits.

    Untracked by the cyclic GC (it references only an Envelope and scalars), so a large
    backlog costs no collector time.
    """

    seq: int
    env: Envelope
    at: float
    slot: bool
    size: int
    kind: str
    pkey: str | None


def new_msg(seq: int, env: Envelope, at: float, slot: bool) -> Msg:
    return Msg(seq, env, at, slot, len(env.body), env.kind, env.partition_key)


class Held:
    """A publication held while acceptance is paused; ``done`` is set once it has an outcome
    (stored late, cancelled, or refused by a close)."""

    __slots__ = ("cancelled", "done", "env", "outcome")

    def __init__(self, env: Envelope) -> None:
        self.env = env
        self.done = anyio.Event()
        self.outcome: PublishOutcome | None = None
        self.cancelled = False


V = TypeVar("V")


class Recent(dict[str, V]):
    """A dict that remembers the last ``limit`` ids :meth:`remember`-ed, forgetting the oldest
    first (a deque keeps the order: popping a dict's head repeatedly is O(n) in CPython)."""

    __slots__ = ("_limit", "_order")

    def __init__(self, limit: int) -> None:
        super().__init__()
        self._limit = limit
        self._order: deque[str] = deque()

    def remember(self, key: str, value: V) -> None:
        self[key] = value
        order = self._order
        order.append(key)
        if len(order) > self._limit:
            self.pop(order.popleft(), None)
