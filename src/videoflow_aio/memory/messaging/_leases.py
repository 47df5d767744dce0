"""Leases and redelivery: what a receive takes, how long it holds it, and what happens when
it does not settle in time."""

from __future__ import annotations

import itertools
from heapq import heappop, heappush

from ...contracts.messaging import (
    Delivery,
    DeliveryToken,
    LeaseObservation,
    SettleStale,
)
from ._records import Msg
from ._subscription import LEASE, RETRY, Sub


class Leases:
    """Leases and redelivery for every subscription of one broker.

    * A delivery is **leased** for the subscription's ``ack_wait_seconds``; ``renew`` extends
      it from now. A token names one lease: once that lease expired, was superseded, settled
      or its message left the channel, the token is stale (and :meth:`stale_reason` says why).
    * When a lease **expires**, or a ``Retry`` ends an attempt, the message is queued for
      redelivery with ``attempt + 1`` (``Retry(delay)`` waits ``delay`` first);
      redeliveries come before new messages, lowest sequence first.
    * After ``max_deliver`` attempts (``-1``: unlimited) the message is **unresolved**:
      retained, never delivered again, counted — never folded into "nothing pending".
    * **Credit**: the subscription's ``item_credit`` caps its leases across every competing
      replica; a receive's byte credit bounds the bodies it takes, and a head message larger
      than that makes the receive return ``[]`` at once.

    Timers are heap entries ``(due, seq, attempt, LEASE | RETRY)``. An entry whose lease or
    retry has changed since is stale and skipped when it reaches the top; live ones fire
    lazily, at the next call that touches the subscription (:meth:`fire_due`), and are
    recorded at their due time. Lease ids come from one counter per broker, so a token never
    matches a lease of a re-created subscription.
    """

    __slots__ = ("_ids",)

    def __init__(self) -> None:
        self._ids = map(str, itertools.count(1))  # fresh lease ids

    # -- timers ----------------------------------------------------------------------------
    def fire_due(self, sub: Sub, now: float) -> None:
        """Fire every lease expiry and delayed retry of ``sub`` due at ``now``."""
        timers = sub.timers
        leased = sub.leased
        while timers:
            due, seq, attempt, kind = timers[0]
            if kind == LEASE:
                lease = leased.get(seq)
                live = lease is not None and lease[0] == attempt and lease[1] == due
            else:
                live = sub.retry_wait.get(seq) == due
            if live and due > now:
                return
            heappop(timers)
            if not live:
                continue
            if kind == LEASE:
                del leased[seq]
                sub.attempts[seq] = attempt
                self.end_attempt(sub, seq, attempt, due, "lease_expired")
            else:
                del sub.retry_wait[seq]
                _queue_redelivery(sub, seq)

    def end_attempt(self, sub: Sub, seq: int, attempt: int, at: float, why: str) -> None:
        """An attempt ended without settling: redeliver, or mark unresolved past the cap."""
        ch = sub.channel
        m = ch.msgs.get(seq)
        if m is None:
            sub.forget(seq)
            return
        pid = m.env.publication_id
        cap = sub.spec.max_deliver
        if cap != -1 and attempt >= cap:
            sub.unresolved[seq] = None
            ch.record(
                "unresolved",
                pid,
                at=at,
                seq=seq,
                subscription=sub.id.name,
                attempts=attempt,
                reason=why,
            )
            return
        event = "expire" if why == "lease_expired" else "retry_due"
        ch.record(event, pid, at=at, seq=seq, subscription=sub.id.name, attempt=attempt)
        _queue_redelivery(sub, seq)

    def retry(self, sub: Sub, m: Msg, attempt: int, delay: float, now: float) -> None:
        """``Retry(delay)`` ended ``attempt``: redeliver after ``delay`` (at once for 0)."""
        seq = m.seq
        sub.channel.record(
            "retry",
            m.env.publication_id,
            seq=seq,
            subscription=sub.id.name,
            attempt=attempt,
            delay=delay,
        )
        sub.attempts[seq] = attempt
        cap = sub.spec.max_deliver
        if delay > 0 and (cap == -1 or attempt < cap):
            due = now + delay
            sub.retry_wait[seq] = due
            sub.push_timer(due, seq, attempt, RETRY)
        else:
            self.end_attempt(sub, seq, attempt, now, "retry")

    # -- taking ----------------------------------------------------------------------------
    def take(
        self, sub: Sub, item_credit: int, byte_credit: int, now: float
    ) -> list[Delivery] | None:
        """Lease what is available now: redeliveries first, then new messages. None when
        nothing is; ``[]`` when the next message is larger than the byte credit."""
        spec = sub.spec
        room = spec.item_credit - len(sub.leased)
        if room <= 0:
            return None
        n = item_credit if item_credit < room else room
        budget = byte_credit if byte_credit < spec.byte_credit else spec.byte_credit
        deadline = now + spec.ack_wait_seconds
        out: list[Delivery] = []
        left: int | None = budget  # None: blocked by a message larger than the budget left
        if sub.redeliver:
            left = self._redeliver(sub, out, n, budget, deadline)
        if left is not None and len(out) < n and sub.undelivered > 0:
            left = self._deliver_new(sub, out, n, left, deadline)
        if out:
            sub.timer_added(deadline)  # the new leases' expiry
            return out
        return [] if left is None else None

    def _redeliver(
        self, sub: Sub, out: list[Delivery], n: int, budget: int, deadline: float
    ) -> int | None:
        """Lease queued redeliveries (lowest sequence first) into ``out``, up to ``n`` and
        ``budget`` bytes; the budget left, or None when the next one is larger than it."""
        red = sub.redeliver
        queued = sub.redeliver_set
        msgs = sub.channel.msgs
        while red and len(out) < n:
            seq = red[0]
            if seq not in queued:
                heappop(red)
                continue
            m = msgs.get(seq)
            if m is None:
                heappop(red)
                queued.discard(seq)
                continue
            if m.size > budget:
                return None
            heappop(red)
            queued.discard(seq)
            budget -= m.size
            sub.redelivered += 1
            out.append(self.lease(sub, m, sub.attempts.pop(seq, 0) + 1, deadline))
        return budget

    def _deliver_new(
        self, sub: Sub, out: list[Delivery], n: int, budget: int, deadline: float
    ) -> int | None:
        """Lease new messages from the cursor on into ``out``, up to ``n`` and ``budget``
        bytes; the budget left, or None when the next one is larger than it."""
        msgs = sub.channel.msgs
        lease = self.lease
        cur = sub.cursor
        last = sub.channel.last_seq
        kind = sub.kind
        pstr = sub.pstr
        blocked = False
        while cur <= last and len(out) < n:
            m = msgs.get(cur)
            if m is None or m.kind != kind or (pstr is not None and m.pkey != pstr):
                cur += 1
                continue
            if m.size > budget:
                blocked = True
                break
            budget -= m.size
            cur += 1
            sub.undelivered -= 1
            out.append(lease(sub, m, 1, deadline))
        sub.cursor = cur
        return None if blocked else budget

    def lease(self, sub: Sub, m: Msg, attempt: int, deadline: float) -> Delivery:
        """Lease ``m`` to ``sub`` until ``deadline`` under a fresh lease id."""
        lease_id = next(self._ids)
        seq = m.seq
        sub.leased[seq] = (attempt, deadline, lease_id)
        heappush(sub.timers, (deadline, seq, attempt, LEASE))
        ch = sub.channel
        if ch.log is not None:
            ch.record(
                "deliver",
                m.env.publication_id,
                seq=seq,
                attempt=attempt,
                subscription=sub.id.name,
            )
        return Delivery(
            m.env, seq, attempt, DeliveryToken(sub.id, seq, attempt, lease_id), deadline
        )

    # -- holding and ending ----------------------------------------------------------------
    def renew(self, sub: Sub, token: DeliveryToken, now: float) -> LeaseObservation:
        """Extend the token's lease by ``ack_wait_seconds`` from now, if it is current."""
        self.fire_due(sub, now)
        lease = _current(sub, token)
        if lease is None:
            return LeaseObservation(False, None, token.attempt, self.stale_reason(sub, token))
        seq = token.sequence
        deadline = now + sub.spec.ack_wait_seconds
        sub.leased[seq] = (lease[0], deadline, lease[2])
        sub.push_timer(deadline, seq, lease[0], LEASE)
        sub.channel.record(
            "renew",
            sub.channel.msgs[seq].env.publication_id,
            seq=seq,
            subscription=sub.id.name,
            deadline=deadline,
        )
        return LeaseObservation(True, deadline, lease[0])

    def stale_settle(self, sub: Sub, token: DeliveryToken) -> SettleStale:
        """Record and answer a settle with a token that is not the current lease."""
        seq = token.sequence
        reason = self.stale_reason(sub, token)
        m = sub.channel.msgs.get(seq)
        sub.channel.record(
            "settle_stale",
            f"#{seq}" if m is None else m.env.publication_id,
            seq=seq,
            subscription=sub.id.name,
            reason=reason,
        )
        return SettleStale(reason)

    def stale_reason(self, sub: Sub, token: DeliveryToken) -> str:
        seq = token.sequence
        if seq not in sub.channel.msgs:
            return "message no longer retained"
        if sub.is_settled(seq):
            return "already settled"
        lease = sub.leased.get(seq)
        if lease is not None:
            return f"lease superseded by attempt {lease[0]}"
        if seq in sub.unresolved:
            return "lease expired; message unresolved (max_deliver reached)"
        return "lease expired; message awaits redelivery"


def _current(sub: Sub, token: DeliveryToken) -> tuple[int, float, str] | None:
    lease = sub.leased.get(token.sequence)
    if lease is None or lease[0] != token.attempt or lease[2] != token.lease_id:
        return None
    return lease


def _queue_redelivery(sub: Sub, seq: int) -> None:
    if seq not in sub.redeliver_set:
        sub.redeliver_set.add(seq)
        heappush(sub.redeliver, seq)
    sub.wake()
