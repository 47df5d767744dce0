"""``CoreNatsMessagingBackend``: the ``core_only`` profile on Core NATS (no JetStream).

No retention and no leases: a message reaches only the subscriptions attached when it is
published, through a bounded client queue (``client_queue_limit`` messages); past it the client
drops the message and counts it as a slow-consumer drop. ``publish`` is confirmed by a flush
(the server has the message and routed it), so ``Accepted`` means "handed to the server", not
"stored". Channels are local to this client (Core NATS has no server-side object for them);
competing replicas share a subscription through a queue group named after it.
"""

from __future__ import annotations

import contextlib
import itertools
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Unpack

import anyio
import anyio.lowlevel
import nats
import nats.errors

from ...contracts import Known, Unknown
from ...contracts.errors import (
    AccessDenied,
    BackendUnavailable,
    NotFound,
    Unsupported,
    ValidationError,
)
from ...contracts.messaging import (
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
    SubscriptionId,
    SubscriptionObservation,
    SubscriptionSpec,
    Terminal,
    VerifiedChannel,
    VerifiedSubscription,
    check_immutable,
)
from .._trio_bridge import Affinity, bridged
from . import _api, _security
from ._api import CallFailed, NotSent
from ._connection import loop_time, on_asyncio_side
from ._names import Names
from .connection import DEFAULT_URL, NatsAuthOptions, NatsConnection


@dataclass
class _CoreSub:
    spec: SubscriptionSpec
    nsub: Any = None
    queue: deque[Any] = field(default_factory=deque)
    dropped: int = 0
    arrived: anyio.Event | None = None

    def receiver(self, limit: int) -> Any:
        """The subscription callback: the client queue, bounded, drops counted. It never
        awaits: a message leaves nats-py's pending queue and enters this one in one step."""

        async def deliver(msg: Any) -> None:
            if len(self.queue) >= limit:
                self.dropped += 1
            else:
                self.queue.append(msg)
            ev = self.arrived
            if ev is not None:
                self.arrived = None
                ev.set()

        return deliver


@dataclass
class _CoreChan:
    spec: ChannelSpec
    seq: int = 0


@bridged
class CoreNatsMessagingBackend(MessagingBackend):
    """The messaging contract's ``core_only`` profile on plain NATS at ``url`` (a
    :class:`~videoflow_aio.adapters.nats.NatsConnection`, or URLs and the security keywords
    that make one; least privilege: :func:`~videoflow_aio.adapters.nats.core_permissions`).
    Its client never buffers while disconnected."""

    def __init__(
        self,
        url: str | Sequence[str] | NatsConnection = DEFAULT_URL,
        *,
        subject_prefix: str = "vf",
        client_queue_limit: int = 64,
        max_payload_bytes: int = 8388608,
        request_timeout: float = 5.0,
        **auth: Unpack[NatsAuthOptions],
    ) -> None:
        if client_queue_limit < 1:
            raise ValidationError("client_queue_limit must be >= 1", field="client_queue_limit")
        if max_payload_bytes < 1:
            raise ValidationError("max_payload_bytes must be >= 1", field="max_payload_bytes")
        self.connection = NatsConnection.of(url, **auth)
        self.servers = self.connection.servers
        self.names = Names("VF", subject_prefix)
        self.client_queue_limit = client_queue_limit
        self.max_payload_bytes = max_payload_bytes
        self.request_timeout = float(request_timeout)
        self._nc: Any = None
        self._chans: dict[ChannelId, _CoreChan] = {}
        self._subs: dict[SubscriptionId, _CoreSub] = {}
        self._by_sid: dict[int, _CoreSub] = {}
        self._seq = itertools.count(1)
        self._side = Affinity()  # asyncio: direct; trio: across the trio-asyncio bridge

    async def _conn(self) -> Any:
        on_asyncio_side()
        if self._nc is not None and not self._nc.is_closed:
            return self._nc
        opts: dict[str, Any] = {
            "pending_size": 0,
            "connect_timeout": self.request_timeout,
            "max_reconnect_attempts": -1,
            "reconnect_time_wait": 0.2,
            "error_cb": self._on_error,
        }
        timeout = min(self.request_timeout, self.connection.connect_timeout)
        self._nc = await self.connection.connect(opts, timeout)
        return self._nc

    async def _on_error(self, exc: Exception) -> None:
        if isinstance(exc, nats.errors.SlowConsumerError):
            sub = self._by_sid.get(exc.sid)
            if sub is not None:
                sub.dropped += 1

    @property
    def namespace(self) -> str:
        """The subject prefix (Core NATS keeps nothing on the server to drop)."""
        return self.names.subject_prefix

    async def drop_namespace(self) -> int:
        """Nothing to delete: Core NATS keeps nothing on the server."""
        return 0

    @property
    def connected(self) -> bool:
        """False while the connection is down (nats-py reconnecting); True otherwise, also
        before the first call opened it."""
        return self._nc is None or bool(self._nc.is_connected)

    @property
    def reconnects(self) -> int:
        """How many times the connection was re-established (0 before the first call)."""
        return 0 if self._nc is None else int(self._nc.stats["reconnects"])

    @property
    def max_payload(self) -> int:
        server = int(getattr(self._nc, "max_payload", 0) or 0) if self._nc is not None else 0
        return min(self.max_payload_bytes, server) if server else self.max_payload_bytes

    async def aclose(self) -> None:
        nc, self._nc = self._nc, None
        if nc is not None:
            with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                await nc.close()

    def _chan(self, ch: ChannelId) -> _CoreChan:
        c = self._chans.get(ch)
        if c is None:
            raise NotFound(f"no channel {ch}", kind="channel", name=ch.name)
        return c

    def _sub(self, sid: SubscriptionId) -> _CoreSub:
        self._chan(sid.channel)
        s = self._subs.get(sid)
        if s is None:
            raise NotFound(f"no subscription {sid}", kind="subscription", name=sid.name)
        return s

    # -- configuration -------------------------------------------------------------------------
    async def ensure_channel(self, spec: ChannelSpec, operation_id: str) -> VerifiedChannel:
        if not isinstance(spec, ChannelSpec):
            raise ValidationError("spec must be a ChannelSpec", field="spec")
        if spec.persistence:
            raise Unsupported("core NATS keeps nothing", capability="persistence")
        await self._conn()
        cur = self._chans.get(spec.channel)
        if cur is None:
            self._chans[spec.channel] = _CoreChan(spec)
            return VerifiedChannel(spec, created=True)
        check_immutable(IMMUTABLE_CHANNEL_FIELDS, cur.spec, spec, "channel", spec.channel)
        if cur.spec == spec:
            return VerifiedChannel(spec, created=False)
        cur.spec = spec
        return VerifiedChannel(spec, created=False, updated=True)

    async def ensure_subscription(
        self, spec: SubscriptionSpec, operation_id: str
    ) -> VerifiedSubscription:
        if not isinstance(spec, SubscriptionSpec):
            raise ValidationError("spec must be a SubscriptionSpec", field="spec")
        self._chan(spec.channel)
        cur = self._subs.get(spec.id)
        if cur is not None:
            check_immutable(IMMUTABLE_SUBSCRIPTION_FIELDS, cur.spec, spec, "subscription", spec.id)
            if cur.spec == spec:
                return VerifiedSubscription(spec, created=False)
            cur.spec = spec
            return VerifiedSubscription(spec, created=False, updated=True)
        nc = await self._conn()
        subject = self.names.filter(spec.channel, spec.kind, spec.partition)
        queue = self.names.consumer(spec.id) if spec.competing else ""
        sub = _CoreSub(spec)
        start = _security.mark(nc)
        try:
            try:
                sub.nsub = await nc.subscribe(
                    subject,
                    queue=queue,
                    cb=sub.receiver(self.client_queue_limit),
                    pending_msgs_limit=1 << 20,
                    pending_bytes_limit=0,
                )
            except nats.errors.Error as exc:
                raise _api.call_failed(exc, subject, 0.0) from exc
            # attached means the server has it: a publication from another connection after
            # this returns reaches the subscription (the SUB alone may still be in flight)
            await _api.flushed(nc, self.request_timeout)
            _security.raise_if_denied(nc, subject, start, "subscribe")  # refused asynchronously
        except (CallFailed, AccessDenied) as exc:
            if sub.nsub is not None:
                with contextlib.suppress(Exception):
                    await sub.nsub.unsubscribe()
            if isinstance(exc, AccessDenied):
                raise
            raise BackendUnavailable(f"cannot subscribe {spec.id}: {exc}", backend="nats") from exc
        self._subs[spec.id] = sub
        self._by_sid[sub.nsub._id] = sub
        return VerifiedSubscription(spec, created=True)

    # -- publish / receive -----------------------------------------------------------------------
    async def publish(self, envelope: Envelope, deadline: float) -> PublishOutcome:
        pid = envelope.publication_id
        if envelope.kind == "dlq":
            raise ValidationError("dead letters are not published", field="kind", value="dlq")
        ch = self._chan(envelope.channel)
        nc = await self._conn()
        size = len(envelope.body)
        if size > self.max_payload:
            return Rejected(
                pid, f"payload {size} bytes exceeds max_payload_bytes {self.max_payload}"
            )
        now = loop_time()
        if deadline <= now:
            return Rejected(pid, "deadline passed before the publication was sent")
        subject = self.names.subject(envelope.channel, envelope.kind, envelope.partition_key)
        hdrs = {"Vf-Pid": pid}
        if envelope.event_id != pid:
            hdrs["Vf-Event"] = envelope.event_id
        start = _security.mark(nc)
        try:
            await _api.publish(nc, subject, envelope.body, headers=hdrs)
            await _api.flushed(nc, max(deadline - now, 0.001))
        except NotSent as exc:
            return Rejected(pid, str(exc))
        except CallFailed as exc:
            _security.raise_if_denied(nc, subject, start, "publish")
            return PublicationUnknown(pid, f"no flush confirmation before the deadline: {exc}")
        # the server drops a refused publish and says so before its answer to the round trip
        _security.raise_if_denied(nc, subject, start, "publish")
        ch.seq += 1
        return Accepted(pid, ch.seq)

    async def receive(
        self, subscription: SubscriptionId, item_credit: int, byte_credit: int, deadline: float
    ) -> list[Delivery]:
        if item_credit < 1:
            raise ValidationError("item_credit must be >= 1", field="item_credit")
        if byte_credit < 1:
            raise ValidationError("byte_credit must be >= 1", field="byte_credit")
        sub = self._sub(subscription)
        budget = min(byte_credit, sub.spec.byte_credit)
        await self._settled_queue(sub, deadline)
        if not sub.queue:
            with anyio.CancelScope(deadline=deadline):
                while not sub.queue:
                    ev = sub.arrived = anyio.Event()
                    await ev.wait()
        out: list[Delivery] = []
        q = sub.queue
        while q and len(out) < item_credit and len(q[0].data) <= budget:
            msg = q.popleft()
            budget -= len(msg.data)
            out.append(self._delivery(sub, msg))
        return out

    async def _settled_queue(self, sub: _CoreSub, deadline: float) -> None:
        """Wait (until ``deadline`` at the latest) until what the server routed to this
        connection so far has gone through the subscription's callback into its queue (or
        been counted as dropped). The server routes asynchronously, even to the publishing
        connection itself, but in order with its answers: once a round trip after a message
        returned (a publish's flush, an observation's), the message is in nats-py's pending
        queue. A count of this client's own publications would not do: the server may route
        any of them to another member of a competing subscription's queue group."""
        with anyio.CancelScope(deadline=deadline):
            while sub.nsub.pending_msgs:
                ev = sub.arrived = anyio.Event()
                await ev.wait()

    def _delivery(self, sub: _CoreSub, msg: Any) -> Delivery:
        seq = next(self._seq)
        ch = sub.spec.channel
        kind, pk = self.names.kind_of(ch, msg.subject)
        hdrs = msg.headers or {}
        pid = hdrs.get("Vf-Pid", f"#{seq}")
        env = Envelope(ch, pid, bytes(msg.data), hdrs.get("Vf-Event", pid), kind, pk)
        now = loop_time()
        return Delivery(env, seq, 1, DeliveryToken(sub.spec.id, seq, 1, "core"), now)

    async def renew(self, token: DeliveryToken) -> LeaseObservation:
        self._sub(token.subscription)
        return LeaseObservation(False, None, token.attempt, "core-only: no leases")

    async def settle(
        self, token: DeliveryToken, outcome: SettleOutcome, settlement_id: str
    ) -> SettleAnswer:
        if not settlement_id:
            raise ValidationError("settlement_id must be non-empty", field="settlement_id")
        if not isinstance(outcome, (Completed, Retry, Terminal)):
            raise ValidationError(f"unknown settle outcome {outcome!r}", field="outcome")
        self._sub(token.subscription)
        return SettleConfirmed(token.sequence)  # core NATS has nothing to settle

    # -- observation -------------------------------------------------------------------------------
    async def observe_publication(self, envelope: Envelope) -> PublishOutcome:
        self._chan(envelope.channel)
        return PublicationUnresolvable(envelope.publication_id, "core-only: no publication ledger")

    async def observe_subscription(
        self, subscription: SubscriptionId
    ) -> Known[SubscriptionObservation] | Unknown:
        sub = self._sub(subscription)
        try:  # a round trip, so what the server routed to us before now has been counted
            await _api.flushed(await self._conn(), self.request_timeout)
        except CallFailed as exc:
            return Unknown(f"cannot confirm the client queue is current: {exc}")
        await self._settled_queue(sub, loop_time() + self.request_timeout)
        queued = len(sub.queue)
        return Known(SubscriptionObservation(subscription, queued, 0, 0, sub.dropped, 0))

    async def observe_channel(self, channel_id: ChannelId) -> Known[ChannelObservation] | Unknown:
        ch = self._chan(channel_id)
        return Known(ChannelObservation(channel_id, 0, 0, ch.seq + 1, ch.seq, 0))

    async def observe_ack_floor(self, subscription: SubscriptionId) -> Known[int] | Unknown:
        self._sub(subscription)
        return Unknown("core-only: no acknowledgements")

    # -- lifecycle ---------------------------------------------------------------------------------
    async def close(
        self, owned: Sequence[ChannelId], expected_generation: str
    ) -> CleanupObservation:
        removed: list[ChannelId] = []
        absent: list[ChannelId] = []
        refused: list[ChannelId] = []
        for cid in dict.fromkeys(owned):
            ch = self._chans.get(cid)
            if ch is None:
                absent.append(cid)
                continue
            gen = ch.spec.generation
            if gen is not None and gen != expected_generation:
                refused.append(cid)
                continue
            for sid in [s for s in self._subs if s.channel == cid]:
                sub = self._subs.pop(sid)
                self._by_sid.pop(sub.nsub._id, None)
                with contextlib.suppress(Exception):
                    await sub.nsub.unsubscribe()
            del self._chans[cid]
            removed.append(cid)
        return CleanupObservation(tuple(removed), tuple(absent), tuple(refused), ())

    async def channel_ids(self) -> list[ChannelId]:
        return sorted(self._chans)

    async def subscription_ids(self, channel_id: ChannelId) -> list[SubscriptionId]:
        self._chan(channel_id)
        return sorted(s for s in self._subs if s.channel == channel_id)

    async def commit_control(
        self, channel_id: ChannelId, key: str, expected_version: str | None, value: bytes
    ) -> bool:
        raise Unsupported("durable control is not offered", capability="durable_control")

    async def control_state(
        self, channel_id: ChannelId, key: str
    ) -> tuple[bytes | None, str | None]:
        raise Unsupported("durable control is not offered", capability="durable_control")

    async def replay(self, channel_id: ChannelId, event_id: str) -> Envelope | None:
        raise Unsupported("archive is not offered", capability="archive")

    async def capabilities(self) -> MessagingCapabilities:
        return MessagingCapabilities(
            backend="nats-core",
            core_only=True,
            max_payload_bytes=self.max_payload,
            client_queue_limit=self.client_queue_limit,
            publication_ledger=False,
            stale_settle_detection=False,
            unresolved_ledger=False,
        )


__all__ = ["CoreNatsMessagingBackend"]
