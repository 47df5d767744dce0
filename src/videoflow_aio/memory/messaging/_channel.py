"""A channel: one stream per pipeline node, with its slot, retention, dead letters and dedup
ledger (JetStream: one stream; data, eos and control are subjects in it).

Messages are keyed by stream sequence in dicts and deques, so no per-message operation costs
more with a larger backlog; the order deques are cleaned lazily as their heads leave.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from ...contracts.messaging import (
    LATEST_PER_KEY_PROFILE,
    ChannelId,
    ChannelSpec,
    Envelope,
    SubscriptionId,
    make_envelope,
)
from ...observe import ObservationLog
from ._profiles import ControlRecords, LatestPerKey
from ._records import Held, Msg, Recent, new_msg
from ._subscription import Sub

LEDGER_MEMORY = 65536
"""Rejected / cancelled publication ids remembered per channel."""


class Channel:
    """One channel and everything the broker keeps for it.

    * The **slot** holds data, eos and control messages under ``max_msgs``, ``max_bytes`` and
      ``max_age_seconds`` (``max_msgs`` per kind when ``per_subject_limits``). A message that
      does not fit is refused (``overflow="reject"``) or makes room by evicting the oldest
      (``"evict_oldest"``): :meth:`admit`, then :meth:`append`.
    * **Retention** ``limits`` keeps a message until a limit removes it; ``interest`` until
      every required subscription that sees it has settled it (:meth:`interest_settled`).
    * **Dead letters** are stored beside the slot: they never occupy, evict or fill it.
    * **Dedup**: a publication id accepted within the window maps to its sequence; the window
      runs from the first accept and outlives eviction. Refused and cancelled ids are
      remembered too, so ``observe_publication`` can say so.
    * Whatever leaves the channel (:meth:`discard`) is a ``drop`` for every subscription that
      sees it and had not settled it, else an ``evict``: nothing leaves silently.

    It also keeps the publications held while acceptance is paused, the durable control
    records and the subscriptions; events are recorded into ``log`` with the channel's name.
    """

    def __init__(self, spec: ChannelSpec, dedup_window: float, log: ObservationLog | None):
        self.id: ChannelId = spec.channel
        self.spec = spec
        self.dedup_window = dedup_window
        self.log = log
        self.msgs: dict[int, Msg] = {}
        self.last_seq = 0
        self.order: deque[int] = deque()  # slot seqs in store order (lazily cleaned)
        self.count = 0
        self.bytes = 0
        # per kind, kept only while limits are per kind (per_subject_limits)
        self.per_kind = False
        self.kind_order: dict[str, deque[int]] = {}
        self.kind_count: dict[str, int] = {}
        self.dead_letters = 0
        self.pubs: dict[str, int] = {}  # publication id -> sequence, within the dedup window
        self.pub_order: deque[tuple[float, str, int]] = deque()  # (accepted at, id, sequence)
        self.refused: Recent[str] = Recent(LEDGER_MEMORY)  # publication id -> reason
        self.interest = spec.retention == "interest"  # retention is immutable
        self.paused = False
        self.held: list[Held] = []
        self.latest = LatestPerKey() if spec.profile == LATEST_PER_KEY_PROFILE else None
        self.controls = ControlRecords()
        self.subs: dict[SubscriptionId, Sub] = {}
        self._count_per_kind(spec.per_subject_limits)

    def record(self, event: str, ident: str, at: float | None = None, **attrs: Any) -> None:
        """Record ``event`` about publication (or operation) ``ident`` on this channel."""
        log = self.log
        if log is not None:
            log.record(event, subject=self.id.name, ident=ident, at=at, **attrs)

    # -- dedup ledger ----------------------------------------------------------------------
    def duplicate_of(self, pid: str, now: float) -> int | None:
        """The sequence ``pid`` was accepted at within the dedup window, else None."""
        if self.dedup_window <= 0:
            return None
        po = self.pub_order
        if po and po[0][0] + self.dedup_window <= now:
            self._expire_dedup(now)
        return self.pubs.get(pid)

    def _expire_dedup(self, now: float) -> None:
        """Forget the publication ids accepted a whole window ago."""
        po = self.pub_order
        window = self.dedup_window
        pubs = self.pubs
        while po and po[0][0] + window <= now:
            _, pid, seq = po.popleft()
            if pubs.get(pid) == seq:  # not re-accepted since (at a later sequence)
                del pubs[pid]

    # -- the slot --------------------------------------------------------------------------
    def admit(self, env: Envelope) -> str | None:
        """Make room in the slot for ``env``, or return why it is refused (nothing changed).

        A message larger than ``max_bytes`` never fits. A full ``overflow="reject"`` channel
        refuses (a latest-per-key channel counting the key's previous message as gone); else
        the previous message of the key leaves, and the oldest are evicted until it fits."""
        size = len(env.body)
        spec = self.spec
        if spec.max_bytes is not None and size > spec.max_bytes:
            return f"message of {size} bytes exceeds max_bytes"
        superseded = None if self.latest is None else self._superseded(env)
        if spec.overflow == "reject":
            refusal = self._overflow(env.kind, size, superseded)
            if refusal is not None:
                return refusal
        if superseded is not None:
            self.discard(superseded, "superseded")
        self._evict_for(env.kind, size)
        return None

    def _superseded(self, env: Envelope) -> Msg | None:
        assert self.latest is not None
        seq = self.latest.previous(env)
        return None if seq is None else self.msgs.get(seq)

    def _overflow(self, kind: str, size: int, leaving: Msg | None) -> str | None:
        """Which limit a message of ``kind`` and ``size`` would exceed, counting ``leaving``
        as gone; None when it fits."""
        spec = self.spec
        per_kind = self.per_kind
        count = self.kind_count.get(kind, 0) if per_kind else self.count
        nbytes = self.bytes
        if leaving is not None and (not per_kind or leaving.kind == kind):
            count -= 1
            nbytes -= leaving.size
        if count >= spec.max_msgs:
            return "maximum messages exceeded"
        if spec.max_bytes is not None and nbytes + size > spec.max_bytes:
            return "maximum bytes exceeded"
        return None

    def _evict_for(self, kind: str, size: int) -> None:
        """Evict the oldest until a message of ``kind`` and ``size`` fits (nothing when it
        does): the count cap evicts within the kind's slot (per_subject_limits), the byte cap
        stream-wide."""
        spec = self.spec
        per_kind = self.per_kind
        max_bytes = spec.max_bytes
        while True:
            full = (self.kind_count.get(kind, 0) if per_kind else self.count) >= spec.max_msgs
            if not full and not (max_bytes is not None and self.bytes + size > max_bytes):
                return
            victim = self.oldest(kind if per_kind and full else None)
            if victim is None:
                return
            self.discard(victim, "max_msgs" if full else "max_bytes")

    def append(self, env: Envelope, now: float) -> Msg:
        """Store ``env`` in the slot at the next sequence (room was made by :meth:`admit`)."""
        seq = self.last_seq + 1
        self.last_seq = seq
        kind = env.kind
        m = Msg(seq, env, now, True, len(env.body), kind, env.partition_key)
        self.msgs[seq] = m
        self.order.append(seq)
        self.count += 1
        self.bytes += m.size
        if self.per_kind:
            ko = self.kind_order.get(kind)
            if ko is None:
                ko = self.kind_order[kind] = deque()
            ko.append(seq)
            self.kind_count[kind] = self.kind_count.get(kind, 0) + 1
        if self.latest is not None:
            self.latest.note(env, seq)
        if self.dedup_window > 0:
            self.pubs[env.publication_id] = seq
            self.pub_order.append((now, env.publication_id, seq))
        for sub in self.subs.values():  # _arrived(m), inlined: this is every publish
            if sub.kind == kind and (sub.pstr is None or sub.pstr == m.pkey):
                sub.undelivered += 1
                if sub.waiters:
                    sub.wake_one()
        return m

    def append_dead_letter(self, env: Envelope, now: float) -> Msg:
        """Store a dead letter beside the slot, at the next sequence."""
        seq = self.last_seq + 1
        self.last_seq = seq
        m = new_msg(seq, env, now, False)
        self.msgs[seq] = m
        self.dead_letters += 1
        self._arrived(m)
        return m

    def _arrived(self, m: Msg) -> None:
        for sub in self.subs.values():
            if sub.kind == m.kind and (sub.pstr is None or sub.pstr == m.pkey):
                sub.undelivered += 1
                if sub.waiters:
                    sub.wake_one()

    # -- removal ---------------------------------------------------------------------------
    def discard(self, m: Msg, reason: str, at: float | None = None) -> None:
        """Remove ``m``; record a ``drop`` naming every subscription that sees it and had not
        settled it (an ``evict`` when there is none)."""
        seq = m.seq
        msgs = self.msgs
        del msgs[seq]
        if m.slot:
            # store-order queues drop their head when it leaves, and with it every entry
            # behind it that left earlier (out of order): else, when messages are settled
            # out of order (competing replicas, interest retention), they grow forever
            for order in (self.order, self.kind_order.get(m.kind)):
                if order and order[0] == seq:
                    order.popleft()
                    while order and order[0] not in msgs:
                        order.popleft()
            self.count -= 1
            self.bytes -= m.size
            if self.per_kind:
                self.kind_count[m.kind] -= 1
        else:
            self.dead_letters -= 1
        lost: list[str] = []
        kind = m.kind
        for sub in self.subs.values():
            if sub.kind == kind and sub.lose(m):  # lose() checks the kind too: fewer calls
                lost.append(sub.id.name)
        if self.log is not None:
            self.record(
                "drop" if lost else "evict",
                m.env.publication_id,
                at=at,
                seq=seq,
                reason=reason,
                subscriptions=lost,
            )

    def expire_age(self, now: float) -> None:
        """Remove the slot messages older than ``max_age_seconds`` (recorded when due)."""
        age = self.spec.max_age_seconds
        if age is None:
            return
        while True:
            m = self.oldest(None)
            if m is None or m.at + age > now:
                return
            self.discard(m, "max_age", at=m.at + age)

    def interest_settled(self, m: Msg) -> None:
        """A subscription settled ``m`` on an interest channel: it leaves once every required
        subscription that sees it has settled it."""
        if m.slot and self._interest_done(m):
            self.discard(m, "interest")

    def _interest_done(self, m: Msg) -> bool:
        """Every required subscription that sees ``m`` exists and has settled it (and there is
        at least one: the model never drops a message nobody was required to settle)."""
        seen = False
        kind, pkey, seq = m.kind, m.pkey, m.seq
        for sid in self.spec.required:
            sub = self.subs.get(sid)
            if sub is None:
                return False
            if sub.kind == kind and (sub.pstr is None or pkey == sub.pstr):  # sub.sees(m)
                if not (seq <= sub.floor or seq in sub.settled_above):  # sub.is_settled(seq)
                    return False
                seen = True
        return seen

    def enforce_limits(self) -> None:
        """Evict down to the spec's (smaller) limits after a reconcile."""
        spec = self.spec
        while self.count > 0:
            # the count cap is named when it is exceeded (as in admit), else the byte cap
            over_msgs = self.count > spec.max_msgs and not spec.per_subject_limits
            over_bytes = spec.max_bytes is not None and self.bytes > spec.max_bytes
            victim = self.oldest(None) if over_msgs or over_bytes else None
            if victim is None:
                break
            self.discard(victim, "max_msgs" if over_msgs else "max_bytes")
        if self.per_kind:
            for kind, cnt in list(self.kind_count.items()):
                self._evict_oldest(kind, cnt - spec.max_msgs)

    def _evict_oldest(self, kind: str, n: int) -> None:
        """Evict the ``n`` oldest slot messages of ``kind`` (``max_msgs``)."""
        for _ in range(n):
            victim = self.oldest(kind)
            if victim is None:
                return
            self.discard(victim, "max_msgs")

    def reconfigure(self, spec: ChannelSpec) -> None:
        """Apply a changed (mutable) spec and evict down to its limits."""
        self.spec = spec
        self.dedup_window = float(spec.dedup_window_seconds)
        self._count_per_kind(spec.per_subject_limits)
        self.enforce_limits()

    # -- reading ---------------------------------------------------------------------------
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

    def _count_per_kind(self, per_kind: bool) -> None:
        """Keep (or stop keeping) the per-kind order and counts that per-kind limits need."""
        if per_kind == self.per_kind:
            return
        self.per_kind = per_kind
        self.kind_order = {}
        self.kind_count = {}
        if per_kind:
            for m in self.msgs.values():
                if m.slot:
                    self.kind_order.setdefault(m.kind, deque()).append(m.seq)
                    self.kind_count[m.kind] = self.kind_count.get(m.kind, 0) + 1


def dead_letter_envelope(m: Msg, channel: ChannelId, consumer: str, reason: str) -> Envelope:
    """The dead letter of ``m`` settled ``Terminal(reason)`` by ``consumer``: same event id and
    body, kind ``dlq``, ``dlq-*`` headers naming the reason, origin sequence, kind and
    consumer."""
    env = m.env
    headers = dict(env.headers)
    headers.update(
        {
            "dlq-reason": reason,
            "dlq-origin-seq": str(m.seq),
            "dlq-origin-kind": m.kind,
            "dlq-consumer": consumer,
        }
    )
    return make_envelope(
        channel,
        f"{env.publication_id}~dlq~{consumer}",
        body=env.body,
        event_id=env.event_id,
        kind="dlq",
        partition_key=env.partition_key,
        event_ts=env.event_ts,
        source_epoch=env.source_epoch,
        source_offset=env.source_offset,
        headers=headers,
    )
