"""``MemoryMessagingBackend``: the client side of the messaging model — the contract, over a
broker it owns."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import anyio.lowlevel

from ... import faults
from ...contracts import Known, Unknown
from ...contracts.errors import ConflictError, NotFound, Unsupported, ValidationError
from ...contracts.messaging import (
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
    PublishOutcome,
    Retry,
    SettleAnswer,
    SettleOutcome,
    SettleUnknown,
    SubscriptionId,
    SubscriptionObservation,
    SubscriptionSpec,
    Terminal,
    VerifiedChannel,
    VerifiedSubscription,
    validate_control_write,
)
from ...observe import ObservationLog
from ...vtime import VirtualClock
from ._broker import Broker, BrokerConfig
from ._channel import Channel
from ._controls import ModelControls
from ._core import CoreBroker
from ._stream import StreamBroker
from ._subscription import Sub

_OUTCOME_TYPES = frozenset({Completed, Retry, Terminal})
LOST = "no confirmation: the reply was lost"
_faults_active = faults.active
_YIELD_MASK = 63
"""publish / receive / settle that need not wait still yield to the loop once every 64 calls
(before touching any state, so a cancellation there has no effect): a tight producer loop
cannot starve the other tasks, at a fraction of the cost of a checkpoint per call."""


class MemoryMessagingBackend(ModelControls, MessagingBackend):
    """The reference model of the messaging contract. Arguments:

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

    The backend is the client: it checks arguments, waits (a publish held by a paused
    channel until its deadline, a receive until a message, a timer or its deadline) and asks
    its broker — :class:`~._stream.StreamBroker`, or :class:`~._core.CoreBroker` when
    ``core_only`` — for everything else. Calls that need not wait do not checkpoint, except
    for one yield every 64 calls.
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
        config = BrokerConfig(
            core_only=core_only,
            latest_per_key=latest_per_key,
            durable_control=durable_control,
            archive=archive,
            archive_horizon_seconds=float(archive_horizon_seconds),
            dedup_window_seconds=dedup_window_seconds,
            replication_factor=replication_factor,
            persistent=persistent,
            max_payload_bytes=max_payload_bytes,
            mixed_retention=mixed_retention,
            client_queue_limit=client_queue_limit,
        )
        broker_class = CoreBroker if core_only else StreamBroker
        self._broker: Broker = broker_class(config, clock, log)
        self._calls = 0

    @property
    def config(self) -> BrokerConfig:
        """What the broker offers (the constructor's arguments)."""
        return self._broker.config

    @property
    def core_only(self) -> bool:
        return self._broker.config.core_only

    @property
    def log(self) -> ObservationLog | None:
        return self._broker.log

    # -- publish ---------------------------------------------------------------------------
    async def publish(self, envelope: Envelope, deadline: float) -> PublishOutcome:
        self._calls += 1
        if not self._calls & _YIELD_MASK:
            await anyio.lowlevel.checkpoint()
        broker = self._broker
        ch = broker.channels.get(envelope.channel) or broker.channel(envelope.channel)
        size = len(envelope.body)
        limit = broker.config.max_payload_bytes
        if size > limit:
            reason = f"payload {size} bytes exceeds max_payload_bytes {limit}"
            return broker.refuse(ch, envelope.publication_id, reason)
        if envelope.kind == "dlq":
            raise ValidationError(
                "dead letters are stored by settle(Terminal), not published",
                field="kind",
                value="dlq",
            )
        if ch.paused:
            return await self._publish_held(ch, envelope, deadline)
        outcome = broker.store(ch, envelope, broker.now())
        if _faults_active():  # stored, then the reply is lost (a crash here) or late
            await faults.reach("messaging.publish.after", publication_id=envelope.publication_id)
        return outcome

    async def _publish_held(self, ch: Channel, env: Envelope, deadline: float) -> PublishOutcome:
        """Wait for the broker to answer a held publication, or for the deadline: then the
        outcome is unknown (it may still be stored)."""
        held = self._broker.hold(ch, env)
        with anyio.CancelScope(deadline=deadline):
            await held.done.wait()
        if held.outcome is not None:
            return held.outcome
        reason = "deadline passed before the broker answered; it may still be stored"
        ch.record("publication_unknown", env.publication_id, reason=reason)
        return PublicationUnknown(env.publication_id, reason)

    # -- receive ---------------------------------------------------------------------------
    async def receive(
        self, subscription: SubscriptionId, item_credit: int, byte_credit: int, deadline: float
    ) -> list[Delivery]:
        if item_credit < 1 or byte_credit < 1:
            _check_credits(item_credit, byte_credit)
        self._calls += 1
        if not self._calls & _YIELD_MASK:
            await anyio.lowlevel.checkpoint()
        broker = self._broker
        sub = broker.subs.get(subscription) or broker.sub(subscription)
        if not sub.spec.competing and sub.receivers:
            raise ConflictError(
                f"{subscription} is non-competing and already has a receiver",
                resource=subscription.name,
            )
        sub.receivers += 1
        try:
            woke_at: float | None = None
            while True:
                now = broker.now()
                if woke_at is not None and woke_at > now:
                    now = woke_at  # the loop says this deadline passed
                out = broker.take(sub, item_credit, byte_credit, now)
                if out is not None:
                    if not out:  # this call's byte credit is too small: another may fit it
                        sub.wake_one()
                    return out
                if now >= deadline:
                    return []
                woke_at = await _wait(sub, deadline)
                if broker.sub(subscription) is not sub:  # NotFound once the channel was closed
                    raise NotFound(
                        f"{subscription} was closed and re-created while this receive waited",
                        kind="subscription",
                        name=subscription.name,
                    )
        finally:
            sub.receivers -= 1

    # -- leases and settlement -------------------------------------------------------------
    async def renew(self, token: DeliveryToken) -> LeaseObservation:
        broker = self._broker
        sub = broker.sub(token.subscription)
        observed = broker.renew(sub, token)
        if sub.lose_reply:  # the lose_reply control
            sub.lose_reply = False
            return LeaseObservation(None, None, token.attempt, LOST)
        return observed

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
        broker = self._broker
        sub = broker.subs.get(token.subscription) or broker.sub(token.subscription)
        if _faults_active():  # the settle never arrives (a crash here) or arrives late
            await faults.reach("messaging.settle.before", settlement_id=settlement_id)
        answer = broker.settle(sub, token, outcome, settlement_id)
        if _faults_active():  # applied, then the reply is lost (a crash here) or late
            await faults.reach("messaging.settle.after", settlement_id=settlement_id)
        if sub.lose_reply:  # the lose_reply control
            sub.lose_reply = False
            return SettleUnknown(LOST)
        return answer

    # -- observation -----------------------------------------------------------------------
    async def observe_publication(self, envelope: Envelope) -> PublishOutcome:
        broker = self._broker
        return broker.observe_publication(broker.channel(envelope.channel), envelope.publication_id)

    async def observe_subscription(
        self, subscription: SubscriptionId
    ) -> Known[SubscriptionObservation] | Unknown:
        sub = self._broker.sub(subscription)
        if sub.fail_reason is not None:
            return Unknown(sub.fail_reason)
        return self._broker.observe_subscription(sub)

    async def observe_channel(self, channel_id: ChannelId) -> Known[ChannelObservation] | Unknown:
        broker = self._broker
        return broker.observe_channel(broker.channel(channel_id))

    async def observe_ack_floor(self, subscription: SubscriptionId) -> Known[int] | Unknown:
        sub = self._broker.sub(subscription)
        if sub.fail_reason is not None:
            return Unknown(sub.fail_reason)
        return self._broker.observe_ack_floor(sub)

    # -- configuration ---------------------------------------------------------------------
    async def ensure_channel(self, spec: ChannelSpec, operation_id: str) -> VerifiedChannel:
        if not isinstance(spec, ChannelSpec):
            raise ValidationError("spec must be a ChannelSpec", field="spec")
        return self._broker.ensure_channel(spec, operation_id)

    async def ensure_subscription(
        self, spec: SubscriptionSpec, operation_id: str
    ) -> VerifiedSubscription:
        if not isinstance(spec, SubscriptionSpec):
            raise ValidationError("spec must be a SubscriptionSpec", field="spec")
        return self._broker.ensure_subscription(spec, operation_id)

    async def close(
        self, owned: Sequence[ChannelId], expected_generation: str
    ) -> CleanupObservation:
        return self._broker.close(owned, expected_generation)

    # -- optional profiles -----------------------------------------------------------------
    async def commit_control(
        self, channel_id: ChannelId, key: str, expected_version: str | None, value: bytes
    ) -> bool:
        broker = self._broker
        if not broker.config.durable_control:
            raise Unsupported("durable control is not offered", capability="durable_control")
        value = validate_control_write(key, expected_version, value)
        ch = broker.channel(channel_id)
        version = ch.controls.commit(key, expected_version, value, broker.versions)
        if version is None:
            return False
        ch.record("control_commit", key, version=version)
        return True

    async def control_state(
        self, channel_id: ChannelId, key: str
    ) -> tuple[bytes | None, str | None]:
        broker = self._broker
        if not broker.config.durable_control:
            raise Unsupported("durable control is not offered", capability="durable_control")
        return broker.channel(channel_id).controls.state(key)

    async def replay(self, channel_id: ChannelId, event_id: str) -> Envelope | None:
        broker = self._broker
        if broker.archive is None:
            raise Unsupported("archive is not offered", capability="archive")
        return broker.archive.get(channel_id, event_id, broker.now())

    # -- what is offered and what exists ---------------------------------------------------
    async def capabilities(self) -> MessagingCapabilities:
        return self._broker.config.capabilities()

    async def channel_ids(self) -> list[ChannelId]:
        return sorted(self._broker.channels)

    async def subscription_ids(self, channel_id: ChannelId) -> list[SubscriptionId]:
        return sorted(self._broker.channel(channel_id).subs)


def _check_credits(item_credit: int, byte_credit: int) -> None:
    if item_credit < 1:
        raise ValidationError("item_credit must be >= 1", field="item_credit", value=item_credit)
    if byte_credit < 1:
        raise ValidationError("byte_credit must be >= 1", field="byte_credit", value=byte_credit)


async def _wait(sub: Sub, deadline: float) -> float | None:
    """Wait until ``sub`` has something for this receive (a new message, room under its
    credit, a timer due: see ``Sub.wake_one``/``wake``/``timer_added``), its next timer is
    due, or ``deadline``. Returns the time the loop says passed when a timer woke it, else
    None."""
    wake = deadline
    nd = sub.next_due()
    if nd is not None and nd < wake:
        wake = nd
    return None if await sub.waiters.wait(wake) else wake


__all__ = ["MemoryMessagingBackend"]
