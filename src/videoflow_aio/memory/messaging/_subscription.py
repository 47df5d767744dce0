"""A subscription as the broker holds it: which messages it sees, its cursor, its ack floor,
its settlement ledger and its counters — and the lease state that ``_leases`` drives.

Everything is keyed by stream sequence in dicts, sets and heaps, so no per-message operation
costs more with a larger backlog.
"""

from __future__ import annotations

from collections import deque
from heapq import heappush
from typing import TYPE_CHECKING

from ...contracts.messaging import SubscriptionSpec
from ._records import Msg, Recent
from ._waiters import Waiters

if TYPE_CHECKING:
    from ._channel import Channel

LEASE = 0
RETRY = 1
"""Timer kinds: a lease expiry and a delayed retry (``Retry(delay_seconds > 0)``)."""

SETTLEMENT_MEMORY = 65536
"""Settlement ids remembered per subscription (idempotent settle retries)."""


class Sub:
    """One subscription of one channel (shared by every competing replica).

    * It **sees** the messages of its kind (and of its partition, when it has one).
    * ``cursor``: the next sequence never delivered; ``undelivered`` counts what it sees at or
      past the cursor.
    * The **ack floor**: every sequence at or below ``floor`` is settled (or gone, or not
      seen); settled sequences above it wait in ``settled_above``.
    * Settlement ids map to the sequence they settled (the last ``SETTLEMENT_MEMORY``).
    * Lease state (``leased``, ``attempts``, ``redeliver``, ``retry_wait``, ``unresolved``,
      ``timers``) is driven by :class:`~._leases.Leases`.
    * ``core_queue``: in Core NATS mode, the client queue copies are pushed into.
    """

    __slots__ = (
        "attempts",
        "channel",
        "core_queue",
        "cursor",
        "dead_lettered",
        "dropped",
        "fail_reason",
        "floor",
        "id",
        "kind",
        "leased",
        "lose_reply",
        "pstr",
        "receivers",
        "redeliver",
        "redeliver_set",
        "redelivered",
        "retry_wait",
        "settled_above",
        "settlements",
        "spec",
        "timers",
        "undelivered",
        "unresolved",
        "waiters",
    )

    def __init__(self, spec: SubscriptionSpec, channel: Channel) -> None:
        self.spec = spec
        self.id = spec.id
        self.channel = channel
        self.kind = spec.kind
        self.pstr = None if spec.partition is None else str(spec.partition)
        self.cursor = 1
        self.undelivered = 0
        # seq -> (attempt, lease deadline, lease id)
        self.leased: dict[int, tuple[int, float, str]] = {}
        self.attempts: dict[int, int] = {}  # attempts made of a message not leased now
        self.redeliver: list[int] = []  # a heap of sequences awaiting redelivery
        self.redeliver_set: set[int] = set()
        self.retry_wait: dict[int, float] = {}  # seq -> when a delayed retry is due
        self.unresolved: dict[int, None] = {}
        # (due, seq, attempt, LEASE|RETRY)
        self.timers: list[tuple[float, int, int, int]] = []
        self.floor = 0
        self.settled_above: set[int] = set()
        self.settlements: Recent[int] = Recent(SETTLEMENT_MEMORY)  # settlement id -> seq
        self.dropped = 0
        self.redelivered = 0
        self.dead_lettered = 0
        self.waiters = Waiters()
        self.receivers = 0
        self.fail_reason: str | None = None
        self.lose_reply = False  # the lose_reply control: the next answer is lost
        self.core_queue: deque[Msg] = deque()

    def start_at_head(self) -> None:
        """A new (stream) subscription starts at the oldest retained message."""
        ch = self.channel
        first = next(iter(ch.msgs)) if ch.msgs else ch.last_seq + 1
        self.cursor = first
        self.floor = first - 1
        self.undelivered = sum(1 for m in ch.msgs.values() if self.sees(m))

    def sees(self, m: Msg) -> bool:
        return m.kind == self.kind and (self.pstr is None or m.pkey == self.pstr)

    def is_settled(self, seq: int) -> bool:
        return seq <= self.floor or seq in self.settled_above

    def pending(self) -> int:
        """Messages waiting to be delivered: new, queued for redelivery, or in a retry delay."""
        return self.undelivered + len(self.redeliver_set) + len(self.retry_wait)

    def wake(self) -> None:
        """Wake every receive waiting on this subscription (something changed for all)."""
        if self.waiters:
            self.waiters.notify_all()

    def wake_one(self) -> None:
        """Wake the longest-waiting receive (one more message is available)."""
        if self.waiters:
            self.waiters.notify(1)

    def next_due(self) -> float | None:
        return self.timers[0][0] if self.timers else None

    def push_timer(self, due: float, seq: int, attempt: int, kind: int) -> None:
        heappush(self.timers, (due, seq, attempt, kind))
        self.timer_added(due)

    def timer_added(self, due: float) -> None:
        """A timer due before a waiting receive's wake-up wakes it, so it fires on time."""
        waiters = self.waiters
        if waiters and due < waiters.earliest:
            waiters.notify_all()

    def forget(self, seq: int) -> None:
        """Drop every trace of ``seq`` (it left the channel) except the settled marks."""
        self.leased.pop(seq, None)
        self.attempts.pop(seq, None)
        self.redeliver_set.discard(seq)
        self.retry_wait.pop(seq, None)
        self.unresolved.pop(seq, None)

    def lose(self, m: Msg) -> bool:
        """``m`` left the channel. If this subscription sees it and had not settled it, it
        loses it (lease, redelivery and timers go; ``dropped`` + 1): return True."""
        seq = m.seq
        if self.kind != m.kind or (self.pstr is not None and self.pstr != m.pkey):
            return False
        if seq <= self.floor or seq in self.settled_above:
            return False  # settled by this subscription: nothing lost
        if seq >= self.cursor:
            self.undelivered -= 1
        self.forget(seq)
        self.dropped += 1
        return True

    def mark_settled(self, seq: int) -> None:
        """``seq`` is settled (Completed or Terminal): raise the ack floor over it."""
        if self.attempts:
            self.attempts.pop(seq, None)
        if seq == self.floor + 1:
            self.floor = seq
            if self.settled_above:
                self.advance_floor()
            # else: gaps after the floor are skipped lazily (advance_floor on observe or on
            # the next out-of-order settle); is_settled stays exact either way
        else:
            self.settled_above.add(seq)
            self.advance_floor()

    def advance_floor(self) -> None:
        """Move the ack floor over settled, removed and non-matching sequences."""
        f = self.floor
        ch = self.channel
        msgs = ch.msgs
        last = ch.last_seq
        sa = self.settled_above
        while f < last:
            n = f + 1
            if n in sa:
                sa.discard(n)
                f = n
                continue
            m = msgs.get(n)
            if m is None or not self.sees(m):
                f = n
                continue
            break
        self.floor = f
