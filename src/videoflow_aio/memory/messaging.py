"""The in-memory MessagingBackend: a faithful model of a JetStream-like broker (and, in
``core_only`` mode, of Core NATS) on virtual time.

Behaviour emerges from real waiting: ``publish`` on a paused channel waits until its deadline
and answers :class:`PublicationUnknown`; ``receive`` blocks until a message arrives or its
deadline passes; a lease is a timer that redelivers with ``attempt + 1``. Timers are stamped
with their due time and processed at the next call that touches the subscription (a waiting
receive wakes for the next one), so they behave the same under asyncio and trio.

Model controls (not part of the contract): :meth:`~MemoryMessagingBackend.pause_acceptance`,
:meth:`~MemoryMessagingBackend.resume_acceptance`,
:meth:`~MemoryMessagingBackend.cancel_publication`,
:meth:`~MemoryMessagingBackend.fail_observation`, :meth:`~MemoryMessagingBackend.stored`.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from collections.abc import Callable, Sequence

import anyio
import anyio.lowlevel
import msgspec
import trio

from ..contracts import Known, Unknown
from ..contracts.errors import (
    ConflictError,
    NotFound,
    Unsupported,
    ValidationError,
)
from ..contracts.messaging import (
    IMMUTABLE_CHANNEL_FIELDS,
    IMMUTABLE_SUBSCRIPTION_FIELDS,
    Accepted,
    ChannelId,
    ChannelObservation,
    ChannelSpec,
    CleanupObservation,
    Completed,
    Delivery,
    DeliveryToken,
    Envelope,
    LeaseObservation,
    MessagingBackend,
    MessagingCapabilities,
    PublicationUnknown,
    PublicationUnresolvable,
    PublishOutcome,
    Rejected,
    Retry,
    SettleAnswer,
    SettleConfirmed,
    SettleOutcome,
    SettleStale,
    SubscriptionId,
    SubscriptionObservation,
    SubscriptionSpec,
    Terminal,
    VerifiedChannel,
    VerifiedSubscription,
    check_immutable,
    make_channel,
    make_envelope,
    make_subscription,
    validate_control_write,
)
from ..observe import ObservationLog
from ..vtime import VirtualClock
from ._messaging_state import LEASE, RETRY, Channel, Held, Msg, Sub, new_msg

_CLOSED = "channel closed"
"""The reason recorded for every fate ``close`` decides (drops, evictions, held rejects)."""


_get_running_loop = asyncio._get_running_loop  # the C helper: None outside asyncio, no raise
_OUTCOME_TYPES = frozenset({Completed, Retry, Terminal})
_YIELD_MASK = 63
"""publish / receive / settle that need not wait still yield to the loop once every 64 calls
(before touching any state, so a cancellation there has no effect): a tight producer loop
cannot starve the other tasks, at a fraction of the cost of a checkpoint per call."""


class MemoryMessagingBackend(MessagingBackend):
    """The reference model. Arguments:

    * ``clock``: the clock every timer reads (default: the running loop's time).
    * ``core_only``: model Core NATS (no retention, no leases, client queues).
    * ``latest_per_key``: advertise and implement per-key latest-value slots (channels whose
      ``profile`` is ``"latest_per_key"`` keep the newest envelope per (kind, partition_key)).
    * ``durable_control`` / ``archive``: advertise the optional profiles (MSG-018, MSG-024).
    * ``archive_horizon_seconds``: how long an archived envelope stays replayable.
    * ``dedup_window_seconds``: the longest dedup window a channel gets (its effective window
      is ``min(spec.dedup_window_seconds, this)``).
    * ``replication_factor`` / ``persistent``: what channels may ask for (``replicas``,
      ``persistence``); more is :class:`Unsupported`.
    * ``max_payload_bytes``: a larger body is :class:`Rejected`.
    * ``mixed_retention``: advertise per-kind retention on one channel (dead letters under the
      flow's DLQ retention beside the run's messages); the model always keeps them apart.
    * ``client_queue_limit``: core-only slow-consumer bound per subscription.
    * ``log``: an observation log to record publish/deliver/settle/drop events into.
    """

    def __init__(
        self,
        clock: VirtualClock | None = None,
        core_only: bool = False,
        latest_per_key: bool = False,
        durable_control: bool = False,
        archive: bool = False,
        archive_horizon_seconds: float = 3600.0,
        dedup_window_seconds: int = 120,
        replication_factor: int = 1,
        persistent: bool = False,
        max_payload_bytes: int = 8388608,
        mixed_retention: bool = False,
        client_queue_limit: int = 64,
        log: ObservationLog | None = None,
    ) -> None:
        if max_payload_bytes < 1:
            raise ValidationError("max_payload_bytes must be >= 1", field="max_payload_bytes")
        if client_queue_limit < 1:
            raise ValidationError("client_queue_limit must be >= 1", field="client_queue_limit")
        if archive_horizon_seconds <= 0:
            raise ValidationError(
                "archive_horizon_seconds must be > 0", field="archive_horizon_seconds"
            )
        if replication_factor < 1:
            raise ValidationError("replication_factor must be >= 1", field="replication_factor")
        if dedup_window_seconds < 0:
            raise ValidationError("dedup_window_seconds must be >= 0", field="dedup_window_seconds")
        self._clock = clock
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_time: Callable[[], float] = trio.current_time
        self._subs: dict[SubscriptionId, Sub] = {}
        self._calls = 0
        self.core_only = core_only
        self.latest_per_key = latest_per_key
        self.durable_control = durable_control
        self.archive = archive
        self.archive_horizon_seconds = float(archive_horizon_seconds)
        self.dedup_window_seconds = dedup_window_seconds
        self.replication_factor = replication_factor
        self.persistent = persistent
        self.max_payload_bytes = max_payload_bytes
        self.mixed_retention = mixed_retention
        self.client_queue_limit = client_queue_limit
        self.log = log
        self._channels: dict[ChannelId, Channel] = {}
        self._archive: dict[tuple[ChannelId, str], tuple[Envelope, float]] = {}
        self._archive_order: deque[tuple[float, ChannelId, str]] = deque()
        self._versions = itertools.count(1)
        self._leases = itertools.count(1)
        self._operations: dict[str, object] = {}

    # -- time ------------------------------------------------------------------------------
    def _now(self) -> float:
        if self._clock is not None:
            return self._clock.monotonic()
        loop = _get_running_loop()
        if loop is None:  # trio (anyio supports no third loop)
            return trio.current_time()
        if loop is not self._loop:
            self._loop = loop
            self._loop_time = loop.time
        return self._loop_time()

    # -- lookups ---------------------------------------------------------------------------
    def _channel(self, channel_id: ChannelId) -> Channel:
        ch = self._channels.get(channel_id)
        if ch is None:
            raise NotFound(
                f"no channel {channel_id}", kind="channel", name=getattr(channel_id, "name", "?")
            )
        return ch

    def _sub(self, subscription: SubscriptionId) -> Sub:
        sub = self._subs.get(subscription)
        if sub is None:
            self._channel(subscription.channel)  # NotFound names the channel when it is absent
            raise NotFound(
                f"no subscription {subscription}", kind="subscription", name=subscription.name
            )
        return sub

    # -- recording -------------------------------------------------------------------------
    def _rec(
        self, event: str, ch: ChannelId, ident: str, at: float | None = None, **a: object
    ) -> None:
        log = self.log
        if log is not None:
            log.record(event, subject=ch.name, ident=ident, at=at, **a)  # type: ignore[arg-type]

    # -- lazy timers -----------------------------------------------------------------------
    def _expire_age(self, ch: Channel, now: float) -> None:
        age = ch.spec.max_age_seconds
        if age is None:
            return
        while True:
            m = ch.oldest(None)
            if m is None or m.at + age > now:
                return
            self._discard(ch, m, "max_age", at=m.at + age)

    def _due(self, sub: Sub, now: float) -> None:
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
            heapq.heappop(timers)
            if not live:
                continue
            if kind == LEASE:
                del leased[seq]
                sub.attempts[seq] = attempt
                self._after_attempt(sub, seq, attempt, due, "lease_expired")
            else:
                del sub.retry_wait[seq]
                self._queue_redelivery(sub, seq)

    def _after_attempt(self, sub: Sub, seq: int, attempt: int, at: float, why: str) -> None:
        """An attempt ended without settling: redeliver, or mark unresolved past the cap."""
        m = sub.channel.msgs.get(seq)
        if m is None:
            sub.forget(seq)
            return
        cap = sub.spec.max_deliver
        if cap != -1 and attempt >= cap:
            sub.unresolved[seq] = None
            self._rec(
                "unresolved",
                sub.channel.id,
                m.env.publication_id,
                at=at,
                seq=seq,
                subscription=sub.id.name,
                attempts=attempt,
                reason=why,
            )
        else:
            self._rec(
                "expire" if why == "lease_expired" else "retry_due",
                sub.channel.id,
                m.env.publication_id,
                at=at,
                seq=seq,
                subscription=sub.id.name,
                attempt=attempt,
            )
            self._queue_redelivery(sub, seq)

    def _queue_redelivery(self, sub: Sub, seq: int) -> None:
        if seq not in sub.redeliver_set:
            sub.redeliver_set.add(seq)
            heapq.heappush(sub.redeliver, seq)
        sub.wake()

    # -- removal ---------------------------------------------------------------------------
    def _discard(self, ch: Channel, m: Msg, reason: str, at: float | None = None) -> list[str]:
        """Remove ``m`` from the channel; record a drop for every subscription that sees it
        and had not settled it. Returns those subscriptions' names."""
        seq = m.seq
        msgs = ch.msgs
        del msgs[seq]
        if m.slot:
            # store-order queues drop their head when it leaves, and with it every entry
            # behind it that left earlier (out of order): else, when messages are settled
            # out of order (competing replicas, interest retention), they grow forever
            for order in (ch.order, ch.kind_order.get(m.kind)):
                if order and order[0] == seq:
                    order.popleft()
                    while order and order[0] not in msgs:
                        order.popleft()
            ch.count -= 1
            ch.bytes -= m.size
            ch.kind_count[m.kind] -= 1
        else:
            ch.dead_letters -= 1
        lost: list[str] = []
        kind, pkey = m.kind, m.pkey
        for sub in ch.subs.values():
            if sub.kind != kind or (sub.pstr is not None and sub.pstr != pkey):
                continue
            if seq <= sub.floor or seq in sub.settled_above:
                continue  # settled by this subscription: nothing lost
            if seq >= sub.cursor:
                sub.undelivered -= 1
            sub.forget(seq)
            sub.dropped += 1
            lost.append(sub.id.name)
        if self.log is not None:
            self._rec(
                "drop" if lost else "evict",
                ch.id,
                m.env.publication_id,
                at=at,
                seq=seq,
                reason=reason,
                subscriptions=lost,
            )
        return lost

    def _interest_done(self, ch: Channel, m: Msg) -> bool:
        """Whether every required subscription that sees ``m`` has settled it."""
        seen = False
        for sid in ch.spec.required:
            sub = ch.subs.get(sid)
            if sub is None:
                return False
            if sub.sees(m):
                if not sub.is_settled(m.seq):
                    return False
                seen = True
        return seen

    # -- publish ---------------------------------------------------------------------------
    async def publish(self, envelope: Envelope, deadline: float) -> PublishOutcome:
        self._calls += 1
        if not self._calls & _YIELD_MASK:
            await anyio.lowlevel.checkpoint()
        ch = self._channel(envelope.channel)
        pid = envelope.publication_id
        size = len(envelope.body)
        if size > self.max_payload_bytes:
            reason = f"payload {size} bytes exceeds max_payload_bytes {self.max_payload_bytes}"
            return self._refuse(ch, pid, reason)
        if envelope.kind == "dlq":
            raise ValidationError(
                "dead letters are stored by settle(Terminal), not published",
                field="kind",
                value="dlq",
            )
        if ch.paused:
            return await self._publish_held(ch, envelope, deadline)
        return self._store(ch, envelope, self._now())

    async def _publish_held(self, ch: Channel, env: Envelope, deadline: float) -> PublishOutcome:
        held = Held(env)
        ch.held.append(held)
        self._rec("held", ch.id, env.publication_id)
        with anyio.CancelScope(deadline=deadline):
            await held.done.wait()
        if held.outcome is not None:
            return held.outcome
        reason = "deadline passed before the broker answered; it may still be stored"
        self._rec("publication_unknown", ch.id, env.publication_id, reason=reason)
        return PublicationUnknown(env.publication_id, reason)

    def _store(self, ch: Channel, env: Envelope, now: float) -> PublishOutcome:
        pid = env.publication_id
        if self.core_only:
            return self._core_publish(ch, env, now)
        if ch.dedup_window > 0:
            po = ch.pub_order
            if po and po[0][0] + ch.dedup_window <= now:
                ch.expire_dedup(now)
            prior = ch.pubs.get(pid)
            if prior is not None:
                self._rec("publish", ch.id, pid, seq=prior[0], duplicate=True)
                return Accepted(pid, prior[0], True)
        spec = ch.spec
        if spec.max_age_seconds is not None:
            self._expire_age(ch, now)
        size = len(env.body)
        kind = env.kind
        if spec.max_bytes is not None and size > spec.max_bytes:
            return self._refuse(ch, pid, f"message of {size} bytes exceeds max_bytes")
        # a latest-per-key channel replaces the key's previous message
        superseded: Msg | None = None
        if ch.latest_profile and env.partition_key is not None:
            old = ch.latest.get((kind, env.partition_key))
            if old is not None:
                superseded = ch.msgs.get(old)
        per_kind = spec.per_subject_limits
        count = ch.kind_count.get(kind, 0) if per_kind else ch.count
        nbytes = ch.bytes
        if superseded is not None and (not per_kind or superseded.kind == kind):
            count -= 1
            nbytes -= superseded.size
        over_msgs = count >= spec.max_msgs
        over_bytes = spec.max_bytes is not None and nbytes + size > spec.max_bytes
        if (over_msgs or over_bytes) and spec.overflow == "reject":
            what = "maximum messages exceeded" if over_msgs else "maximum bytes exceeded"
            return self._refuse(ch, pid, what)
        if superseded is not None:
            self._discard(ch, superseded, "superseded")
        if over_msgs or over_bytes:
            while True:
                cnt = ch.kind_count.get(kind, 0) if per_kind else ch.count
                full = cnt >= spec.max_msgs
                if not full and not (
                    spec.max_bytes is not None and ch.bytes + size > spec.max_bytes
                ):
                    break
                # the count cap evicts within the kind's slot; the byte cap stream-wide
                victim = ch.oldest(kind if per_kind and full else None)
                if victim is None:
                    break
                self._discard(ch, victim, "max_msgs" if full else "max_bytes")
        seq = ch.last_seq + 1
        ch.last_seq = seq
        m = new_msg(seq, env, now, True)
        ch.msgs[seq] = m
        ch.order.append(seq)
        if per_kind:
            ko = ch.kind_order.get(kind)
            if ko is None:
                ko = ch.kind_order[kind] = deque()
            ko.append(seq)
        ch.count += 1
        ch.bytes += size
        ch.kind_count[kind] = ch.kind_count.get(kind, 0) + 1
        if ch.latest_profile and env.partition_key is not None:
            ch.latest[(kind, env.partition_key)] = seq
        if ch.dedup_window > 0:
            ch.pubs[pid] = (seq, now)
            ch.pub_order.append((now, pid))
        if self.archive:
            self._archive_put(ch.id, env, now)
        for sub in ch.subs.values():
            if sub.kind == kind and (sub.pstr is None or sub.pstr == env.partition_key):
                sub.undelivered += 1
                if sub.waiters:
                    sub.wake_one()
        if self.log is not None:
            self._rec("publish", ch.id, pid, seq=seq, duplicate=False, msg_kind=kind)
        return Accepted(pid, seq)

    def _refuse(self, ch: Channel, pid: str, reason: str) -> Rejected:
        ch.remember_refused(pid, reason)
        self._rec("reject", ch.id, pid, reason=reason)
        return Rejected(pid, reason)

    def _core_publish(self, ch: Channel, env: Envelope, now: float) -> PublishOutcome:
        ch.core_seq += 1
        seq = ch.core_seq
        m = new_msg(seq, env, now, True)
        limit = self.client_queue_limit
        delivered: list[str] = []
        for sub in ch.subs.values():
            if not sub.sees(m):
                continue
            if len(sub.core_queue) >= limit:
                sub.dropped += 1
                self._rec(
                    "drop",
                    ch.id,
                    env.publication_id,
                    seq=seq,
                    reason="slow_consumer",
                    subscriptions=[sub.id.name],
                )
                continue
            sub.core_queue.append(m)
            delivered.append(sub.id.name)
            sub.wake()
        self._rec(
            "publish",
            ch.id,
            env.publication_id,
            seq=seq,
            duplicate=False,
            core=True,
            subscriptions=delivered,
        )
        return Accepted(env.publication_id, seq)

    def _archive_put(self, cid: ChannelId, env: Envelope, now: float) -> None:
        self._archive_prune(now)
        key = (cid, env.event_id)
        self._archive[key] = (env, now)
        self._archive_order.append((now, cid, env.event_id))

    def _archive_prune(self, now: float) -> None:
        order = self._archive_order
        horizon = self.archive_horizon_seconds
        while order and order[0][0] + horizon <= now:
            at, cid, eid = order.popleft()
            entry = self._archive.get((cid, eid))
            if entry is not None and entry[1] == at:
                del self._archive[(cid, eid)]

    # -- receive ---------------------------------------------------------------------------
    async def receive(
        self, subscription: SubscriptionId, item_credit: int, byte_credit: int, deadline: float
    ) -> list[Delivery]:
        if item_credit < 1:
            raise ValidationError(
                "item_credit must be >= 1", field="item_credit", value=item_credit
            )
        if byte_credit < 1:
            raise ValidationError(
                "byte_credit must be >= 1", field="byte_credit", value=byte_credit
            )
        self._calls += 1
        if not self._calls & _YIELD_MASK:
            await anyio.lowlevel.checkpoint()
        sub = self._sub(subscription)
        if not sub.spec.competing and sub.receivers:
            raise ConflictError(
                f"{subscription} is non-competing and already has a receiver",
                resource=subscription.name,
            )
        sub.receivers += 1
        try:
            woke_at: float | None = None
            while True:
                now = self._now()
                if woke_at is not None and woke_at > now:
                    now = woke_at  # the loop says this deadline passed
                if self.core_only:
                    out = self._core_take(sub, item_credit, byte_credit, now)
                else:
                    ch = sub.channel
                    if ch.spec.max_age_seconds is not None:
                        self._expire_age(ch, now)
                    self._due(sub, now)
                    out = self._take(sub, item_credit, byte_credit, now)
                if out is not None:
                    if not out:  # this call's byte credit is too small: another may fit it
                        sub.wake_one()
                    return out
                if now >= deadline:
                    return []
                wake = deadline
                nd = sub.next_due()
                if nd is not None and nd < wake:
                    wake = nd
                woke_at = None if await sub.waiters.wait(wake) else wake
                if self._sub(subscription) is not sub:  # NotFound once the channel was closed
                    raise NotFound(
                        f"{subscription} was closed and re-created while this receive waited",
                        kind="subscription",
                        name=subscription.name,
                    )
        finally:
            sub.receivers -= 1

    def _take(
        self, sub: Sub, item_credit: int, byte_credit: int, now: float
    ) -> list[Delivery] | None:
        """Lease what is available now; None when nothing is, [] when the head is too big."""
        room = sub.spec.item_credit - len(sub.leased)
        if room <= 0:
            return None
        n = item_credit if item_credit < room else room
        budget = byte_credit if byte_credit < sub.spec.byte_credit else sub.spec.byte_credit
        ch = sub.channel
        msgs = ch.msgs
        out: list[Delivery] = []
        ack_wait = sub.spec.ack_wait_seconds
        lease_deadline = now + ack_wait
        leased = sub.leased
        sid = sub.id
        log = self.log
        blocked = False
        # redeliveries first, lowest sequence first
        red = sub.redeliver
        while red and len(out) < n:
            seq = red[0]
            if seq not in sub.redeliver_set:
                heapq.heappop(red)
                continue
            m = msgs.get(seq)
            if m is None:
                heapq.heappop(red)
                sub.redeliver_set.discard(seq)
                continue
            if m.size > budget:
                blocked = True
                break
            heapq.heappop(red)
            sub.redeliver_set.discard(seq)
            budget -= m.size
            attempt = sub.attempts.pop(seq, 0) + 1
            sub.redelivered += 1
            out.append(self._lease(sub, m, attempt, lease_deadline))
        if not blocked and len(out) < n and sub.undelivered > 0:
            cur = sub.cursor
            last = ch.last_seq
            kind = sub.kind
            pstr = sub.pstr
            timers = sub.timers
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
                lease_id = str(next(self._leases))
                leased[m.seq] = (1, lease_deadline, lease_id)
                heapq.heappush(timers, (lease_deadline, m.seq, 1, LEASE))
                out.append(
                    Delivery(
                        m.env, m.seq, 1, DeliveryToken(sid, m.seq, 1, lease_id), lease_deadline
                    )
                )
                if log is not None:
                    self._rec(
                        "deliver",
                        ch.id,
                        m.env.publication_id,
                        seq=m.seq,
                        attempt=1,
                        subscription=sid.name,
                    )
            sub.cursor = cur
            if out:
                sub.timer_added(lease_deadline)
        if out:
            return out
        return [] if blocked else None

    def _lease(self, sub: Sub, m: Msg, attempt: int, lease_deadline: float) -> Delivery:
        lease_id = str(next(self._leases))
        sub.leased[m.seq] = (attempt, lease_deadline, lease_id)
        sub.push_timer(lease_deadline, m.seq, attempt, LEASE)
        self._rec(
            "deliver",
            sub.channel.id,
            m.env.publication_id,
            seq=m.seq,
            attempt=attempt,
            subscription=sub.id.name,
        )
        return Delivery(
            m.env, m.seq, attempt, DeliveryToken(sub.id, m.seq, attempt, lease_id), lease_deadline
        )

    def _core_take(
        self, sub: Sub, item_credit: int, byte_credit: int, now: float
    ) -> list[Delivery] | None:
        q = sub.core_queue
        if not q:
            return None
        budget = min(byte_credit, sub.spec.byte_credit)
        out: list[Delivery] = []
        while q and len(out) < item_credit:
            m = q[0]
            if m.size > budget:
                break
            q.popleft()
            budget -= m.size
            out.append(Delivery(m.env, m.seq, 1, DeliveryToken(sub.id, m.seq, 1, "core"), now))
            self._rec(
                "deliver",
                sub.channel.id,
                m.env.publication_id,
                seq=m.seq,
                attempt=1,
                subscription=sub.id.name,
                core=True,
            )
        return out

    # -- leases and settlement -------------------------------------------------------------
    def _current(self, sub: Sub, token: DeliveryToken) -> tuple[int, float, str] | None:
        lease = sub.leased.get(token.sequence)
        if lease is None or lease[0] != token.attempt or lease[2] != token.lease_id:
            return None
        return lease

    def _stale_reason(self, sub: Sub, token: DeliveryToken) -> str:
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

    async def renew(self, token: DeliveryToken) -> LeaseObservation:
        sub = self._sub(token.subscription)
        if self.core_only:
            return LeaseObservation(False, None, token.attempt, "core-only: no leases")
        now = self._now()
        self._due(sub, now)
        lease = self._current(sub, token)
        if lease is None:
            return LeaseObservation(False, None, token.attempt, self._stale_reason(sub, token))
        new_deadline = now + sub.spec.ack_wait_seconds
        sub.leased[token.sequence] = (lease[0], new_deadline, lease[2])
        sub.push_timer(new_deadline, token.sequence, lease[0], LEASE)
        self._rec(
            "renew",
            sub.channel.id,
            sub.channel.msgs[token.sequence].env.publication_id,
            seq=token.sequence,
            subscription=sub.id.name,
            deadline=new_deadline,
        )
        return LeaseObservation(True, new_deadline, lease[0])

    async def settle(
        self, token: DeliveryToken, outcome: SettleOutcome, settlement_id: str
    ) -> SettleAnswer:
        if not settlement_id:
            raise ValidationError("settlement_id must be non-empty", field="settlement_id")
        if type(outcome) not in _OUTCOME_TYPES:
            raise ValidationError(f"unknown settle outcome {outcome!r}", field="outcome")
        self._calls += 1
        if not self._calls & _YIELD_MASK:
            await anyio.lowlevel.checkpoint()
        sub = self._subs.get(token.subscription) or self._sub(token.subscription)
        seq = token.sequence
        if self.core_only:
            return SettleConfirmed(seq)  # core NATS has nothing to settle
        prior = sub.settlements.get(settlement_id)
        if prior is not None:
            if prior != seq:
                raise ValidationError(
                    f"settlement_id {settlement_id!r} was used for sequence {prior}",
                    field="settlement_id",
                    value=settlement_id,
                )
            return SettleConfirmed(seq, True)
        now = self._now()
        self._due(sub, now)
        lease = sub.leased.get(seq)
        if lease is None or lease[0] != token.attempt or lease[2] != token.lease_id:
            reason = self._stale_reason(sub, token)
            self._rec(
                "settle_stale",
                sub.channel.id,
                _pid_of(sub, seq),
                seq=seq,
                subscription=sub.id.name,
                reason=reason,
            )
            return SettleStale(reason)
        ch = sub.channel
        m = ch.msgs[seq]
        pid = m.env.publication_id
        del sub.leased[seq]
        sub.remember_settlement(settlement_id, seq)
        if type(outcome) is Completed:
            self._mark_settled(ch, sub, m)
            if self.log is not None:
                self._rec(
                    "settle",
                    ch.id,
                    pid,
                    seq=seq,
                    subscription=sub.id.name,
                    outcome="completed",
                    attempt=lease[0],
                )
        elif type(outcome) is Retry:
            self._rec(
                "retry",
                ch.id,
                pid,
                seq=seq,
                subscription=sub.id.name,
                attempt=lease[0],
                delay=outcome.delay_seconds,
            )
            cap = sub.spec.max_deliver
            if outcome.delay_seconds > 0 and (cap == -1 or lease[0] < cap):
                due = now + outcome.delay_seconds
                sub.attempts[seq] = lease[0]
                sub.retry_wait[seq] = due
                sub.push_timer(due, seq, lease[0], RETRY)
            else:
                sub.attempts[seq] = lease[0]
                self._after_attempt(sub, seq, lease[0], now, "retry")
        else:
            assert isinstance(outcome, Terminal)
            sub.dead_lettered += 1
            self._mark_settled(ch, sub, m)
            self._dead_letter(ch, sub, m, outcome.reason, now)
        if sub.waiters and len(sub.leased) + 1 >= sub.spec.item_credit:
            sub.wake()  # the subscription's shared credit was exhausted: now there is room
        return SettleConfirmed(seq)

    def _mark_settled(self, ch: Channel, sub: Sub, m: Msg) -> None:
        seq = m.seq
        if sub.attempts:
            sub.attempts.pop(seq, None)
        if seq == sub.floor + 1:
            sub.floor = seq
            if sub.settled_above:
                sub.advance_floor()
            # else: gaps after the floor are skipped lazily (advance_floor on observe or on
            # the next out-of-order settle); is_settled stays exact either way
        else:
            sub.settled_above.add(seq)
            sub.advance_floor()
        if ch.spec.retention == "interest" and m.slot and self._interest_done(ch, m):
            self._discard(ch, m, "interest")

    def _dead_letter(self, ch: Channel, sub: Sub, m: Msg, reason: str, now: float) -> None:
        headers = dict(m.env.headers)
        headers.update(
            {
                "dlq-reason": reason,
                "dlq-origin-seq": str(m.seq),
                "dlq-origin-kind": m.kind,
                "dlq-consumer": sub.id.consumer,
            }
        )
        env = make_envelope(
            ch.id,
            f"{m.env.publication_id}~dlq~{sub.id.consumer}",
            body=m.env.body,
            event_id=m.env.event_id,
            kind="dlq",
            partition_key=m.env.partition_key,
            event_ts=m.env.event_ts,
            source_epoch=m.env.source_epoch,
            source_offset=m.env.source_offset,
            headers=headers,
        )
        seq = ch.last_seq + 1
        ch.last_seq = seq
        dl = new_msg(seq, env, now, False)
        ch.msgs[seq] = dl
        ch.dead_letters += 1
        self._rec(
            "dead_letter",
            ch.id,
            m.env.publication_id,
            seq=m.seq,
            dlq_seq=seq,
            subscription=sub.id.name,
            reason=reason,
        )
        for other in ch.subs.values():
            if other.sees(dl):
                other.undelivered += 1
                other.wake()

    # -- observation -----------------------------------------------------------------------
    async def observe_publication(self, envelope: Envelope) -> PublishOutcome:
        ch = self._channel(envelope.channel)
        pid = envelope.publication_id
        if self.core_only:
            return PublicationUnresolvable(pid, "core-only: no publication ledger")
        for held in ch.held:
            if held.env.publication_id == pid and not held.cancelled:
                return PublicationUnknown(pid, "held by the broker; not yet stored")
        ch.expire_dedup(self._now())
        prior = ch.pubs.get(pid)
        if prior is not None:
            return Accepted(pid, prior[0], False)
        refused = ch.refused.get(pid)
        if refused is not None:
            return Rejected(pid, refused)
        return PublicationUnresolvable(pid, "no record of this publication within the dedup window")

    async def observe_subscription(
        self, subscription: SubscriptionId
    ) -> Known[SubscriptionObservation] | Unknown:
        sub = self._sub(subscription)
        if sub.fail_reason is not None:
            return Unknown(sub.fail_reason)
        now = self._now()
        if self.core_only:
            obs = SubscriptionObservation(subscription, len(sub.core_queue), 0, 0, sub.dropped, 0)
            return Known(obs)
        self._expire_age(sub.channel, now)
        self._due(sub, now)
        sub.advance_floor()
        obs = SubscriptionObservation(
            subscription=subscription,
            pending=sub.undelivered + len(sub.redeliver_set) + len(sub.retry_wait),
            leased=len(sub.leased),
            unresolved=len(sub.unresolved),
            dropped=sub.dropped,
            redelivered=sub.redelivered,
            ack_floor=sub.floor,
            dead_lettered=sub.dead_lettered,
        )
        return Known(obs)

    async def observe_channel(self, channel_id: ChannelId) -> Known[ChannelObservation] | Unknown:
        ch = self._channel(channel_id)
        if self.core_only:
            return Known(ChannelObservation(channel_id, 0, 0, ch.core_seq + 1, ch.core_seq, 0))
        self._expire_age(ch, self._now())
        return Known(
            ChannelObservation(
                channel=channel_id,
                messages=ch.count,
                bytes=ch.bytes,
                first_sequence=ch.first_seq(),
                last_sequence=ch.last_seq,
                dead_letters=ch.dead_letters,
            )
        )

    async def observe_ack_floor(self, subscription: SubscriptionId) -> Known[int] | Unknown:
        sub = self._sub(subscription)
        if sub.fail_reason is not None:
            return Unknown(sub.fail_reason)
        if self.core_only:
            return Unknown("core-only: no acknowledgements")
        now = self._now()
        self._expire_age(sub.channel, now)
        self._due(sub, now)
        sub.advance_floor()
        return Known(sub.floor)

    # -- configuration ---------------------------------------------------------------------
    async def ensure_channel(self, spec: ChannelSpec, operation_id: str) -> VerifiedChannel:
        if not isinstance(spec, ChannelSpec):
            raise ValidationError("spec must be a ChannelSpec", field="spec")
        if spec.profile == "latest_per_key" and not self.latest_per_key:
            raise Unsupported(
                "latest_per_key channels are not offered", capability="latest_per_key"
            )
        if spec.replicas > self.replication_factor:
            raise Unsupported(
                f"replicas={spec.replicas} exceeds replication_factor {self.replication_factor}",
                capability="replicas",
            )
        if spec.persistence and not self.persistent:
            raise Unsupported("persistent channels are not offered", capability="persistence")
        effective = spec
        if spec.dedup_window_seconds > self.dedup_window_seconds:
            effective = msgspec.structs.replace(
                spec, dedup_window_seconds=self.dedup_window_seconds
            )
        ch = self._channels.get(spec.channel)
        if ch is None:
            ch = Channel(effective, float(effective.dedup_window_seconds))
            if effective.per_subject_limits:
                ch.rebuild_kind_order()
            self._channels[spec.channel] = ch
            self._rec("channel_created", spec.channel, operation_id)
            return VerifiedChannel(effective, created=True)
        current = ch.spec
        check_immutable(IMMUTABLE_CHANNEL_FIELDS, current, effective, "channel", spec.channel)
        if current == effective:
            return VerifiedChannel(current, created=False)
        ch.spec = effective
        ch.dedup_window = float(effective.dedup_window_seconds)
        if effective.per_subject_limits != current.per_subject_limits:
            ch.rebuild_kind_order()
        self._enforce_limits(ch)
        self._rec("channel_updated", spec.channel, operation_id)
        return VerifiedChannel(ch.spec, created=False, updated=True)

    def _enforce_limits(self, ch: Channel) -> None:
        """Evict down to new (smaller) limits after a reconcile."""
        spec = ch.spec
        while ch.count > 0:
            # the count cap is named when it is exceeded (as in _store), else the byte cap
            over_msgs = ch.count > spec.max_msgs and not spec.per_subject_limits
            if not over_msgs and not (spec.max_bytes is not None and ch.bytes > spec.max_bytes):
                break
            victim = ch.oldest(None)
            if victim is None:
                break
            self._discard(ch, victim, "max_msgs" if over_msgs else "max_bytes")
        if spec.per_subject_limits:
            for kind, cnt in list(ch.kind_count.items()):
                while cnt > spec.max_msgs:
                    victim = ch.oldest(kind)
                    if victim is None:
                        break
                    self._discard(ch, victim, "max_msgs")
                    cnt -= 1

    async def ensure_subscription(
        self, spec: SubscriptionSpec, operation_id: str
    ) -> VerifiedSubscription:
        if not isinstance(spec, SubscriptionSpec):
            raise ValidationError("spec must be a SubscriptionSpec", field="spec")
        ch = self._channel(spec.id.channel)
        sub = ch.subs.get(spec.id)
        if sub is None:
            sub = Sub(spec, ch)
            if not self.core_only:
                first = next(iter(ch.msgs)) if ch.msgs else ch.last_seq + 1
                sub.cursor = first
                sub.floor = first - 1
                sub.undelivered = sum(1 for m in ch.msgs.values() if sub.sees(m))
            ch.subs[spec.id] = sub
            self._subs[spec.id] = sub
            self._rec("subscription_created", ch.id, spec.id.name)
            return VerifiedSubscription(spec, created=True)
        current = sub.spec
        check_immutable(IMMUTABLE_SUBSCRIPTION_FIELDS, current, spec, "subscription", spec.id)
        if current == spec:
            return VerifiedSubscription(current, created=False)
        sub.spec = spec
        sub.wake()
        return VerifiedSubscription(spec, created=False, updated=True)

    async def close(
        self, owned: Sequence[ChannelId], expected_generation: str
    ) -> CleanupObservation:
        removed: list[ChannelId] = []
        absent: list[ChannelId] = []
        refused: list[ChannelId] = []
        for cid in dict.fromkeys(owned):
            ch = self._channels.get(cid)
            if ch is None:
                absent.append(cid)
                continue
            gen = ch.spec.generation
            if gen is not None and gen != expected_generation:
                refused.append(cid)
                continue
            del self._channels[cid]
            ch.closed = True
            for held in ch.held:
                if held.outcome is None:
                    held.outcome = self._refuse(ch, held.env.publication_id, _CLOSED)
                    held.done.set()
            ch.held = []
            dead_letters = ch.dead_letters
            discarded = self._discard_all(ch)
            for sid, sub in ch.subs.items():
                self._subs.pop(sid, None)
                sub.wake()
            self._rec(
                "channel_closed",
                cid,
                expected_generation,
                discarded=discarded,
                dead_letters=dead_letters,
            )
            removed.append(cid)
        return CleanupObservation(tuple(removed), tuple(absent), tuple(refused), ())

    def _discard_all(self, ch: Channel) -> int:
        """Give every message on a closing channel its recorded fate: timers due by now fire
        first (at their due time), then each retained message is removed with reason
        ``channel closed`` (a ``drop`` naming the subscriptions that had not settled it, else an
        ``evict``); in core-only mode each message still waiting in a client queue is a
        ``drop`` naming the subscriptions whose queue held it. Returns how many non-dead-letter
        messages were discarded."""
        if self.core_only:
            queued: dict[int, tuple[Msg, list[str]]] = {}
            for sub in ch.subs.values():
                for m in sub.core_queue:
                    entry = queued.setdefault(m.seq, (m, []))
                    entry[1].append(sub.id.name)
                sub.dropped += len(sub.core_queue)
                sub.core_queue.clear()
            for seq in sorted(queued):
                m, names = queued[seq]
                self._rec(
                    "drop",
                    ch.id,
                    m.env.publication_id,
                    seq=seq,
                    reason=_CLOSED,
                    subscriptions=names,
                )
            return len(queued)
        now = self._now()
        self._expire_age(ch, now)
        for sub in ch.subs.values():
            self._due(sub, now)
        discarded = ch.count
        for m in list(ch.msgs.values()):
            self._discard(ch, m, _CLOSED)
        return discarded

    # -- optional profiles -----------------------------------------------------------------
    async def commit_control(
        self, channel_id: ChannelId, key: str, expected_version: str | None, value: bytes
    ) -> bool:
        if not self.durable_control:
            raise Unsupported("durable control is not offered", capability="durable_control")
        value = validate_control_write(key, expected_version, value)
        ch = self._channel(channel_id)
        current = ch.controls.get(key)
        have = None if current is None else current[1]
        if have != expected_version:
            return False
        version = str(next(self._versions))
        ch.controls[key] = (value, version)
        self._rec("control_commit", channel_id, key, version=version)
        return True

    async def control_state(
        self, channel_id: ChannelId, key: str
    ) -> tuple[bytes | None, str | None]:
        if not self.durable_control:
            raise Unsupported("durable control is not offered", capability="durable_control")
        ch = self._channel(channel_id)
        current = ch.controls.get(key)
        return (None, None) if current is None else current

    async def replay(self, channel_id: ChannelId, event_id: str) -> Envelope | None:
        if not self.archive:
            raise Unsupported("archive is not offered", capability="archive")
        now = self._now()
        self._archive_prune(now)
        entry = self._archive.get((channel_id, event_id))
        if entry is None or entry[1] + self.archive_horizon_seconds <= now:
            return None
        return entry[0]

    async def capabilities(self) -> MessagingCapabilities:
        return MessagingCapabilities(
            backend="memory",
            core_only=self.core_only,
            latest_per_key=self.latest_per_key,
            durable_control=self.durable_control,
            archive=self.archive,
            archive_horizon_seconds=self.archive_horizon_seconds if self.archive else 0.0,
            mixed_retention=self.mixed_retention,
            persistent=self.persistent,
            replication_factor=self.replication_factor,
            max_payload_bytes=self.max_payload_bytes,
            dedup_window_seconds=self.dedup_window_seconds,
            client_queue_limit=self.client_queue_limit,
            publication_ledger=not self.core_only,
            stale_settle_detection=True,
            unresolved_ledger=not self.core_only,
        )

    async def channel_ids(self) -> list[ChannelId]:
        return sorted(self._channels)

    async def subscription_ids(self, channel_id: ChannelId) -> list[SubscriptionId]:
        return sorted(self._channel(channel_id).subs)

    # -- model controls (not part of the contract) -----------------------------------------
    def pause_acceptance(self, channel_id: ChannelId) -> None:
        """Hold every publication to the channel until resumed (callers' deadlines pass)."""
        self._channel(channel_id).paused = True

    def resume_acceptance(self, channel_id: ChannelId) -> list[PublishOutcome]:
        """Store every held publication (late acceptance); returns their outcomes in order."""
        ch = self._channel(channel_id)
        ch.paused = False
        held, ch.held = ch.held, []
        now = self._now()
        outcomes: list[PublishOutcome] = []
        for h in held:
            if h.cancelled:
                continue
            outcome = self._store(ch, h.env, now)
            self._rec("late_accept", ch.id, h.env.publication_id, outcome=type(outcome).__name__)
            h.outcome = outcome
            h.done.set()
            outcomes.append(outcome)
        return outcomes

    def cancel_publication(self, channel_id: ChannelId, publication_id: str) -> bool:
        """Definitely cancel a held publication. False when it was not held (it may already be
        stored)."""
        ch = self._channel(channel_id)
        found = False
        for h in ch.held:
            if h.env.publication_id == publication_id and not h.cancelled:
                h.cancelled = True
                h.outcome = Rejected(publication_id, "publication cancelled")
                h.done.set()
                found = True
        if found:
            ch.held = [h for h in ch.held if not h.cancelled]
            ch.remember_refused(publication_id, "publication cancelled")
            self._rec("cancel", ch.id, publication_id)
        return found

    def fail_observation(
        self, subscription: SubscriptionId, reason: str | None = "timeout"
    ) -> None:
        """Make observe_subscription (and observe_ack_floor) return Unknown(reason) until called
        with None."""
        self._sub(subscription).fail_reason = reason

    def stored(self, channel_id: ChannelId) -> list[Envelope]:
        """Every retained envelope (dead letters included), in sequence order."""
        return [m.env for m in self._channel(channel_id).msgs.values()]


def _pid_of(sub: Sub, seq: int) -> str:
    m = sub.channel.msgs.get(seq)
    return f"#{seq}" if m is None else m.env.publication_id


__all__ = [
    "MemoryMessagingBackend",
    "make_channel",
    "make_envelope",
    "make_subscription",
]
