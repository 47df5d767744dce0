"""What one JetStream client keeps in memory, per channel and per subscription.

Only what this client itself saw lives here; everything other clients need is on the server
(the channel's ``__adv``, ``__idx`` and ``__acct`` streams, see ``_names``).

* :class:`SubState` — per subscription and consumer *incarnation* (the consumer's ``created``
  stamp: a consumer deleted and created again under the same name is a new one): the leases
  this client handed out (sequence → attempt and a conservative deadline) so a superseded or
  expired token is answered ``SettleStale`` (the server would accept it); this client's
  deliveries by delivery sequence (they prove which messages were never delivered); settled
  sequences confirmed by the server's own evidence; settlement ids; Retries waiting out their
  delay; final-attempt Retries; deliveries that arrived after their receive gave up.
* :class:`ChanState` — per channel: the publish index (sequence → kind, partition key, body
  size) of what this client published, and the part of it not yet written to ``__idx``; what
  it read of other publishers' index records; the consumer advisory ledger read from ``__adv``
  (exhausted and deleted-while-leased sequences per consumer, with the server time of each).
"""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ...contracts.messaging import (
    ChannelId,
    ChannelSpec,
    Delivery,
    SubscriptionId,
    SubscriptionSpec,
)
from ._ledger import parse_ts

MEMORY = 65536
"""How many settled sequences / settlement ids / publication outcomes a ledger remembers."""


class Bounded:
    """A dict that forgets its oldest keys past ``limit`` entries (the oldest half of twice
    ``limit`` at once, so a ``put`` costs a dict store)."""

    __slots__ = ("data", "limit")

    def __init__(self, limit: int = MEMORY) -> None:
        self.data: dict[Any, Any] = {}
        self.limit = limit

    def put(self, key: Any, value: Any) -> None:
        data = self.data
        data[key] = value
        if len(data) > 2 * self.limit:
            for old in list(itertools.islice(data, len(data) - self.limit)):
                del data[old]

    def get(self, key: Any) -> Any:
        return self.data.get(key)

    def pop(self, key: Any) -> Any:
        return self.data.pop(key, None)

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
    done: asyncio.Event = field(default_factory=asyncio.Event)
    first: asyncio.Event = field(default_factory=asyncio.Event)
    closed: bool = False


@dataclass
class Ledger:
    """A consumer's advisories: sequence → the server time (ns) of its ``MAX_DELIVERIES``
    (``exhausted``) or "deleted while leased" ``MSG_TERMINATED`` (``deleted``) advisory. An
    advisory older than the consumer incarnation it is read for belongs to a previous one."""

    exhausted: dict[int, int] = field(default_factory=dict)
    deleted: dict[int, int] = field(default_factory=dict)

    def exhausted_since(self, since: int) -> set[int]:
        return {s for s, at in self.exhausted.items() if at >= since}

    def deleted_since(self, since: int) -> set[int]:
        return {s for s, at in self.deleted.items() if at >= since}


@dataclass
class SubState:
    id: SubscriptionId
    spec: SubscriptionSpec
    stream: str
    consumer: str
    chan: ChanState
    created: str = ""
    created_ns: int = 0
    start_seq: int = 1
    sampled: bool = True
    leases: dict[int, tuple[int, float, int]] = field(
        default_factory=dict
    )  # attempt, deadline, dseq
    deliveries: dict[int, int] = field(default_factory=dict)  # delivery seq -> stream seq
    settled: Bounded = field(default_factory=Bounded)  # stream seq -> attempt (server-confirmed)
    settlements: Bounded = field(default_factory=Bounded)  # settlement id -> stream seq
    unanswered: Bounded = field(default_factory=Bounded)  # settlement id -> seq: sent, no answer
    outcomes: Bounded = field(default_factory=Bounded)  # stream seq -> payload sent (re-settle)
    retry_wait: dict[int, tuple[float, int]] = field(default_factory=dict)  # due, dseq
    final_retry: dict[int, bool] = field(default_factory=dict)  # seq -> server decided it
    lost: set[int] = field(default_factory=set)  # live leases the server no longer held
    late: deque[Delivery] = field(default_factory=deque)
    current: Pull | None = None
    last_sent: float = 0.0
    lock: asyncio.Lock | None = None
    evidence: Any = None  # _settle.Evidence once this client settled on the subscription
    resettled: int = 0  # redeliveries of messages whose confirmed settle the server lost
    nudge_at: dict[int, asyncio.TimerHandle] = field(default_factory=dict)  # final leases
    dead: set[int] = field(default_factory=set)  # incarnations (created_ns) seen deleted
    checked_d: int = 0  # delivery sequences up to here were checked for other clients' ones
    foreign_d: int = 0  # the highest delivery sequence another client received (0: none seen)

    def reset(self, created: str, start_seq: int) -> None:
        """Forget everything about a previous incarnation of the consumer."""
        self.created = created
        self.created_ns = parse_ts(created)
        self.start_seq = start_seq
        self.leases.clear()
        self.cancel_nudges()
        self.deliveries.clear()
        self.settled = Bounded()
        self.outcomes = Bounded()
        self.retry_wait.clear()
        self.final_retry.clear()
        self.lost.clear()
        self.late.clear()
        self.checked_d = self.foreign_d = 0

    def __post_init__(self) -> None:
        self.created_ns = parse_ts(self.created)

    def cancel_nudge(self, seq: int) -> None:
        """Cancel the nudge timed for the lapse of ``seq``'s final-attempt lease, if any."""
        handle = self.nudge_at.pop(seq, None)
        if handle is not None:
            handle.cancel()

    def cancel_nudges(self) -> None:
        """Cancel every nudge timed by this client on the subscription (its leases are
        forgotten: a new incarnation, the subscription forgotten, the client closed)."""
        for handle in self.nudge_at.values():
            handle.cancel()
        self.nudge_at.clear()

    def void_give_backs(self) -> None:
        """Leave every delivery given back so far to the server's count: after a reconnect
        the server may have forgotten it, or delivered it again under a reused sequence."""
        known = [self.foreign_d, self.checked_d]
        known += [d for _a, _dl, d in self.leases.values()]
        known += [d for _due, d in self.retry_wait.values()]
        self.foreign_d = max(known) + 1

    def forget_deliveries_below(self, dseq: int) -> None:
        """Drop delivery records at or below ``dseq`` (already accounted)."""
        for d in [d for d in self.deliveries if d <= dseq]:
            del self.deliveries[d]


@dataclass
class ChanState:
    id: ChannelId
    spec: ChannelSpec
    stream: str
    dlq: str
    adv: str
    idx: str
    acct: str
    index: dict[int, tuple[str, str | None, int]] = field(default_factory=dict)
    unindexed: list[tuple[int, str, str | None]] = field(default_factory=list)
    index_timer: Any = None
    attrib: dict[int, tuple[str, str | None]] = field(default_factory=dict)
    idx_next: int = 1
    adv_next: int = 1
    ledgers: dict[tuple[str, str], Ledger] = field(default_factory=dict)
    live_adv: Any = None
    removed: Bounded = field(default_factory=Bounded)  # interest: seqs seen gone after settles
    created: str = ""  # the slot stream's incarnation (its ``created`` stamp)
    acked_last: int = 0  # the highest sequence this client saw stored in this incarnation
    subjects: dict[tuple[str, str | None], str] = field(default_factory=dict)  # publish subjects

    def new_stream(self, created: str) -> None:
        """The slot stream was deleted and created again: its sequences start over, so what
        this client knew of the old one's (its publish index, the index records read, the
        removals seen) no longer names them."""
        self.created = created
        self.acked_last = 0
        self.index.clear()
        self.unindexed.clear()
        self.attrib.clear()
        self.removed = Bounded()

    def ledger(self, stream: str, consumer: str) -> Ledger:
        key = (stream, consumer)
        led = self.ledgers.get(key)
        if led is None:
            led = self.ledgers[key] = Ledger()
        return led

    def trim_index(self, keep: int) -> None:
        """Keep the newest ``keep`` entries of the publish index (amortised)."""
        newest = sorted(self.index)[-keep:]
        self.index = {s: self.index[s] for s in newest}
