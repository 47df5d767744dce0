"""State records of the messaging model: a stored message, a channel, a subscription.

Everything is keyed by stream sequence in dicts, deques and heaps so that no per-message
operation costs more with a larger backlog. Timers (lease expiry, delayed retry) are heap
entries stamped with their due time and processed lazily at the next call that touches the
subscription; a waiting receive bounds its wait by the next due entry.
"""

from __future__ import annotations

import heapq
from collections import deque

import anyio
import msgspec

from ..contracts.messaging import (
    LATEST_PER_KEY_PROFILE,
    ChannelId,
    ChannelSpec,
    Envelope,
    PublishOutcome,
    SubscriptionId,
    SubscriptionSpec,
)
from ._waiters import Waiters

LEASE = 0
RETRY = 1
SETTLEMENT_MEMORY = 65536
"""Settlement ids remembered per subscription (idempotent settle retries)."""
LEDGER_MEMORY = 65536
"""Rejected / cancelled publication ids remembered per channel."""


class Msg(msgspec.Struct, gc=False):
    """One stored envelope. ``slot`` is False for dead letters (outside the channel's limits).

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
    """A publication held while acceptance is paused; ``done`` is set once it has an outcome."""

    __slots__ = ("cancelled", "done", "env", "outcome")

    def __init__(self, env: Envelope) -> None:
        self.env = env
        self.done = anyio.Event()
        self.outcome: PublishOutcome | None = None
        self.cancelled = False


class Sub:
    """A subscription's cursor, leases, redelivery queue, timers, ack floor and counters."""

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
        "pstr",
        "receivers",
        "redeliver",
        "redeliver_set",
        "redelivered",
        "retry_wait",
        "settled_above",
        "settlement_order",
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
        self.attempts: dict[int, int] = {}
        self.redeliver: list[int] = []
        self.redeliver_set: set[int] = set()
        self.retry_wait: dict[int, float] = {}
        self.unresolved: dict[int, None] = {}
        # (due, seq, attempt, LEASE|RETRY)
        self.timers: list[tuple[float, int, int, int]] = []
        self.floor = 0
        self.settled_above: set[int] = set()
        self.settlements: dict[str, int] = {}
        self.settlement_order: deque[str] = deque()
        self.dropped = 0
        self.redelivered = 0
        self.dead_lettered = 0
        self.waiters = Waiters()
        self.receivers = 0
        self.fail_reason: str | None = None
        self.core_queue: deque[Msg] = deque()

    def sees(self, m: Msg) -> bool:
        return m.kind == self.kind and (self.pstr is None or m.pkey == self.pstr)

    def is_settled(self, seq: int) -> bool:
        return seq <= self.floor or seq in self.settled_above

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
        heapq.heappush(self.timers, (due, seq, attempt, kind))
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

    def remember_settlement(self, settlement_id: str, seq: int) -> None:
        # a deque, not next(iter(dict)): popping a dict's head repeatedly is O(n) in CPython
        s = self.settlements
        s[settlement_id] = seq
        order = self.settlement_order
        order.append(settlement_id)
        if len(order) > SETTLEMENT_MEMORY:
            s.pop(order.popleft(), None)

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


class Channel:
    """A channel's retained messages, dedup ledger, held publications and subscriptions."""

    def __init__(self, spec: ChannelSpec, dedup_window: float) -> None:
        self.id: ChannelId = spec.channel
        self.spec = spec
        self.dedup_window = dedup_window
        self.msgs: dict[int, Msg] = {}
        self.last_seq = 0
        self.order: deque[int] = deque()  # slot seqs in store order (lazily cleaned)
        self.kind_order: dict[str, deque[int]] = {}
        self.count = 0
        self.bytes = 0
        self.kind_count: dict[str, int] = {}
        self.dead_letters = 0
        self.pubs: dict[str, tuple[int, float]] = {}
        self.pub_order: deque[tuple[float, str]] = deque()
        self.refused: dict[str, str] = {}
        self.refused_order: deque[str] = deque()
        self.paused = False
        self.held: list[Held] = []
        self.latest: dict[tuple[str, str], int] = {}
        self.latest_profile = spec.profile == LATEST_PER_KEY_PROFILE
        self.controls: dict[str, tuple[bytes, str]] = {}
        self.subs: dict[SubscriptionId, Sub] = {}
        self.core_seq = 0
        self.closed = False

    def expire_dedup(self, now: float) -> None:
        po = self.pub_order
        window = self.dedup_window
        pubs = self.pubs
        while po and po[0][0] + window <= now:
            at, pid = po.popleft()
            entry = pubs.get(pid)
            if entry is not None and entry[1] == at:
                del pubs[pid]

    def remember_refused(self, pid: str, reason: str) -> None:
        r = self.refused
        r[pid] = reason
        order = self.refused_order
        order.append(pid)
        if len(order) > LEDGER_MEMORY:
            r.pop(order.popleft(), None)

    def oldest(self, kind: str | None) -> Msg | None:
        """The oldest slot message (of ``kind`` when limits are per subject)."""
        order = self.order if kind is None else self.kind_order.get(kind)
        if not order:
            return None
        msgs = self.msgs
        while order:
            m = msgs.get(order[0])
            if m is not None:
                return m
            order.popleft()
        return None

    def first_seq(self) -> int:
        m = self.oldest(None)
        return self.last_seq + 1 if m is None else m.seq

    def rebuild_kind_order(self) -> None:
        self.kind_order = {}
        for m in self.msgs.values():
            if m.slot:
                self.kind_order.setdefault(m.kind, deque()).append(m.seq)
