"""Client-side ledgers the JetStream adapter keeps where the server is silent.

* :class:`SubState` — per subscription: the leases this client handed out (sequence → attempt
  and a conservative deadline) so a superseded or expired token is answered ``SettleStale``
  (the server would accept it); settled sequences and settlement ids (idempotent settle);
  nak'd sequences waiting for their delay; deliveries that arrived after their receive gave up.
* :class:`ChanState` — per channel: the publish index (sequence → kind, partition key, body
  size) of what this client published, the durable advisory ledger read from the channel's
  ``__adv`` stream (unresolved sequences per consumer, sequences deleted while leased, dead
  letter counts) and per-consumer drop accounting for messages evicted before delivery.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import anyio

from ...contracts.messaging import (
    ChannelId,
    ChannelSpec,
    Delivery,
    SubscriptionId,
    SubscriptionSpec,
)

MEMORY = 65536
"""How many settled sequences / settlement ids / publication outcomes a ledger remembers."""


class Bounded:
    """A dict that forgets its oldest keys past ``limit`` entries."""

    __slots__ = ("data", "limit", "order")

    def __init__(self, limit: int = MEMORY) -> None:
        self.data: dict[Any, Any] = {}
        self.order: deque[Any] = deque()
        self.limit = limit

    def put(self, key: Any, value: Any) -> None:
        if key not in self.data:
            self.order.append(key)
            if len(self.order) > self.limit:
                self.data.pop(self.order.popleft(), None)
        self.data[key] = value

    def get(self, key: Any) -> Any:
        return self.data.get(key)

    def __contains__(self, key: Any) -> bool:
        return key in self.data


@dataclass
class Pull:
    """One pull request in flight (its reply subject ends with ``token``)."""

    sub: SubState
    want: int
    sent_at: float
    expires_at: float
    msgs: list[Any] = field(default_factory=list)
    status: tuple[str, str] | None = None
    done: anyio.Event = field(default_factory=anyio.Event)
    first: anyio.Event = field(default_factory=anyio.Event)
    closed: bool = False


@dataclass
class SubState:
    id: SubscriptionId
    spec: SubscriptionSpec
    stream: str
    consumer: str
    chan: ChanState
    start_seq: int = 1
    leases: dict[int, tuple[int, float]] = field(default_factory=dict)
    settled: Bounded = field(default_factory=Bounded)
    settlements: Bounded = field(default_factory=Bounded)
    retry_wait: dict[int, float] = field(default_factory=dict)
    late: deque[Delivery] = field(default_factory=deque)
    current: Pull | None = None
    last_sent: float = 0.0
    lock: anyio.Lock | None = None
    delivered_seqs: set[int] = field(default_factory=set)
    forgot_upto: int = 0

    def trim_delivered(self, keep: int) -> None:
        """Keep the newest ``keep`` delivered sequences (amortised: called at twice that)."""
        ordered = sorted(self.delivered_seqs)
        self.forgot_upto = max(self.forgot_upto, ordered[-keep - 1])
        self.delivered_seqs = set(ordered[-keep:])


@dataclass
class ChanState:
    id: ChannelId
    spec: ChannelSpec
    stream: str
    dlq: str
    adv: str
    index: dict[int, tuple[str, str | None, int]] = field(default_factory=dict)
    adv_next: int = 1
    exhausted: dict[str, set[int]] = field(default_factory=dict)
    deleted: dict[str, set[int]] = field(default_factory=dict)
    termed: dict[str, int] = field(default_factory=dict)
    accounted: dict[str, int] = field(default_factory=dict)
    watermark: dict[str, int] = field(default_factory=dict)
    evicted_unseen: dict[str, int] = field(default_factory=dict)
    gone_unresolved: dict[str, set[int]] = field(default_factory=dict)
    live_adv: Any = None

    def trim_index(self, keep: int) -> None:
        """Keep the newest ``keep`` entries of the publish index (amortised)."""
        newest = sorted(self.index)[-keep:]
        self.index = {s: self.index[s] for s in newest}

    def deleted_for(self, consumer: str) -> set[int]:
        return self.deleted.setdefault(consumer, set())
