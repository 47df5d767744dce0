"""The server side of the messaging model: what a broker offers, and the state it keeps
whatever client talks to it."""

from __future__ import annotations

import abc
import asyncio
import itertools
from collections.abc import Callable, Sequence

import msgspec
import trio

from ...contracts import Known, Unknown
from ...contracts.errors import NotFound, Unsupported, ValidationError
from ...contracts.messaging import (
    IMMUTABLE_CHANNEL_FIELDS,
    IMMUTABLE_SUBSCRIPTION_FIELDS,
    ChannelId,
    ChannelObservation,
    ChannelSpec,
    CleanupObservation,
    Delivery,
    DeliveryToken,
    Envelope,
    LeaseObservation,
    MessagingCapabilities,
    PublishOutcome,
    Rejected,
    SettleAnswer,
    SettleOutcome,
    SubscriptionId,
    SubscriptionObservation,
    SubscriptionSpec,
    VerifiedChannel,
    VerifiedSubscription,
    check_immutable,
)
from ...observe import ObservationLog
from ...vtime import VirtualClock
from ._channel import Channel
from ._leases import Leases
from ._profiles import Archive
from ._records import CLOSED, Held
from ._subscription import Sub

_get_running_loop = asyncio._get_running_loop  # the C helper: None outside asyncio, no raise


class BrokerConfig(msgspec.Struct, frozen=True, gc=False):
    """What a broker offers (the backend's constructor arguments, validated here):

    * ``core_only``: a Core NATS server (no retention, no leases, client queues).
    * ``latest_per_key``, ``durable_control``, ``archive``: the optional profiles;
      ``archive_horizon_seconds``: how long an archived envelope stays replayable.
    * ``dedup_window_seconds``: the longest dedup window a channel gets.
    * ``replication_factor`` / ``persistent``: what channels may ask for.
    * ``max_payload_bytes``: the largest body accepted.
    * ``mixed_retention``: advertised only (dead letters always live beside the slot).
    * ``client_queue_limit``: core-only slow-consumer bound per subscription.
    """

    core_only: bool = False
    latest_per_key: bool = False
    durable_control: bool = False
    archive: bool = False
    archive_horizon_seconds: float = 3600.0
    dedup_window_seconds: int = 120
    replication_factor: int = 1
    persistent: bool = False
    max_payload_bytes: int = 8388608
    mixed_retention: bool = False
    client_queue_limit: int = 64

    def __post_init__(self) -> None:
        if self.max_payload_bytes < 1:
            raise ValidationError("max_payload_bytes must be >= 1", field="max_payload_bytes")
        if self.client_queue_limit < 1:
            raise ValidationError("client_queue_limit must be >= 1", field="client_queue_limit")
        if self.archive_horizon_seconds <= 0:
            raise ValidationError(
                "archive_horizon_seconds must be > 0", field="archive_horizon_seconds"
            )
        if self.replication_factor < 1:
            raise ValidationError("replication_factor must be >= 1", field="replication_factor")
        if self.dedup_window_seconds < 0:
            raise ValidationError("dedup_window_seconds must be >= 0", field="dedup_window_seconds")

    def capabilities(self) -> MessagingCapabilities:
        core = self.core_only
        return MessagingCapabilities(
            backend="memory",
            core_only=core,
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
            publication_ledger=not core,
            stale_settle_detection=True,
            unresolved_ledger=not core,
        )


class Broker(abc.ABC):
    """The state of one broker, apart from any client: every channel (its messages, dedup
    ledger, held publications, control records), every subscription (cursor, ack floor,
    leases, timers), the archive, and the counters that keep lease ids and control versions
    fresh. Events go to ``log``; time is ``clock`` when given, else the running loop's.

    A backend (the client) turns contract calls into the operations below: lookups and
    configuration here, and what differs between a JetStream-like server
    (:class:`~._stream.StreamBroker`) and Core NATS (:class:`~._core.CoreBroker`) in the
    abstract methods. None of them waits: waiting (for a deadline, for a message) is the
    client's. It is apart from the client so that several clients can share one broker.
    """

    def __init__(
        self, config: BrokerConfig, clock: VirtualClock | None, log: ObservationLog | None
    ) -> None:
        self.config = config
        self.log = log
        self.channels: dict[ChannelId, Channel] = {}
        self.subs: dict[SubscriptionId, Sub] = {}
        self.archive = Archive(config.archive_horizon_seconds) if config.archive else None
        self.leases = Leases()
        self.versions = itertools.count(1)
        self._clock = clock
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_time: Callable[[], float] = trio.current_time
        if clock is not None:  # read on every call: the clock's own method, one call deep
            self.now = clock.monotonic  # type: ignore[method-assign]

    def now(self) -> float:
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
    def channel(self, channel_id: ChannelId) -> Channel:
        ch = self.channels.get(channel_id)
        if ch is None:
            raise NotFound(
                f"no channel {channel_id}", kind="channel", name=getattr(channel_id, "name", "?")
            )
        return ch

    def sub(self, subscription: SubscriptionId) -> Sub:
        sub = self.subs.get(subscription)
        if sub is None:
            self.channel(subscription.channel)  # NotFound names the channel when it is absent
            raise NotFound(
                f"no subscription {subscription}", kind="subscription", name=subscription.name
            )
        return sub

    # -- publications ----------------------------------------------------------------------
    def refuse(self, ch: Channel, pid: str, reason: str) -> Rejected:
        ch.refused.remember(pid, reason)
        ch.record("reject", pid, reason=reason)
        return Rejected(pid, reason)

    def hold(self, ch: Channel, env: Envelope) -> Held:
        """Hold a publication to a paused channel until it is resumed, cancelled or closed."""
        held = Held(env)
        ch.held.append(held)
        ch.record("held", env.publication_id)
        return held

    def resume(self, ch: Channel) -> list[PublishOutcome]:
        """Store every held, uncancelled publication now (late), in order; their outcomes."""
        ch.paused = False
        held, ch.held = ch.held, []
        now = self.now()
        outcomes: list[PublishOutcome] = []
        for h in held:
            if h.cancelled:
                continue
            outcome = self.store(ch, h.env, now)
            ch.record("late_accept", h.env.publication_id, outcome=type(outcome).__name__)
            h.outcome = outcome
            h.done.set()
            outcomes.append(outcome)
        return outcomes

    def cancel(self, ch: Channel, publication_id: str) -> bool:
        """Definitely cancel a held publication; False when it was not held."""
        found = False
        for h in ch.held:
            if h.env.publication_id == publication_id and not h.cancelled:
                h.cancelled = True
                h.outcome = Rejected(publication_id, "publication cancelled")
                h.done.set()
                found = True
        if found:
            ch.held = [h for h in ch.held if not h.cancelled]
            ch.refused.remember(publication_id, "publication cancelled")
            ch.record("cancel", publication_id)
        return found

    # -- configuration ---------------------------------------------------------------------
    def ensure_channel(self, spec: ChannelSpec, operation_id: str) -> VerifiedChannel:
        """Create the channel, or read it back: the same spec is unchanged, a mutable change
        is applied (a smaller limit evicts), an immutable one raises ``IncompatibleProfile``."""
        effective = self._offered(spec)
        ch = self.channels.get(spec.channel)
        if ch is None:
            ch = Channel(effective, float(effective.dedup_window_seconds), self.log)
            self.channels[spec.channel] = ch
            ch.record("channel_created", operation_id)
            return VerifiedChannel(effective, created=True)
        current = ch.spec
        check_immutable(IMMUTABLE_CHANNEL_FIELDS, current, effective, "channel", spec.channel)
        if current == effective:
            return VerifiedChannel(current, created=False)
        ch.reconfigure(effective)
        ch.record("channel_updated", operation_id)
        return VerifiedChannel(ch.spec, created=False, updated=True)

    def _offered(self, spec: ChannelSpec) -> ChannelSpec:
        """``spec`` as this broker can offer it (the dedup window clamped), or Unsupported."""
        config = self.config
        if spec.profile == "latest_per_key" and not config.latest_per_key:
            raise Unsupported(
                "latest_per_key channels are not offered", capability="latest_per_key"
            )
        if spec.replicas > config.replication_factor:
            raise Unsupported(
                f"replicas={spec.replicas} exceeds replication_factor {config.replication_factor}",
                capability="replicas",
            )
        if spec.persistence and not config.persistent:
            raise Unsupported("persistent channels are not offered", capability="persistence")
        if spec.dedup_window_seconds > config.dedup_window_seconds:
            return msgspec.structs.replace(spec, dedup_window_seconds=config.dedup_window_seconds)
        return spec

    def ensure_subscription(
        self, spec: SubscriptionSpec, operation_id: str
    ) -> VerifiedSubscription:
        """Create the subscription, or read it back as :meth:`ensure_channel` does."""
        ch = self.channel(spec.id.channel)
        sub = ch.subs.get(spec.id)
        if sub is None:
            sub = Sub(spec, ch)
            self.attach(sub)
            ch.subs[spec.id] = sub
            self.subs[spec.id] = sub
            ch.record("subscription_created", spec.id.name)
            return VerifiedSubscription(spec, created=True)
        current = sub.spec
        check_immutable(IMMUTABLE_SUBSCRIPTION_FIELDS, current, spec, "subscription", spec.id)
        if current == spec:
            return VerifiedSubscription(current, created=False)
        sub.spec = spec
        sub.wake()
        return VerifiedSubscription(spec, created=False, updated=True)

    def close(self, owned: Sequence[ChannelId], expected_generation: str) -> CleanupObservation:
        """Remove exactly the owned channels of ``expected_generation`` (or of none)."""
        removed: list[ChannelId] = []
        absent: list[ChannelId] = []
        refused: list[ChannelId] = []
        for cid in dict.fromkeys(owned):
            ch = self.channels.get(cid)
            if ch is None:
                absent.append(cid)
            elif ch.spec.generation not in (None, expected_generation):
                refused.append(cid)
            else:
                self._remove(ch, expected_generation)
                removed.append(cid)
        return CleanupObservation(tuple(removed), tuple(absent), tuple(refused), ())

    def _remove(self, ch: Channel, generation: str) -> None:
        """Remove ``ch``, giving everything in it a recorded fate: held publications are
        refused, every message is discarded, waiting receivers wake (to ``NotFound``)."""
        del self.channels[ch.id]
        for held in ch.held:
            if held.outcome is None:
                held.outcome = self.refuse(ch, held.env.publication_id, CLOSED)
                held.done.set()
        ch.held = []
        dead_letters = ch.dead_letters
        discarded = self.discard_all(ch)
        for sid, sub in ch.subs.items():
            self.subs.pop(sid, None)
            sub.wake()
        ch.record("channel_closed", generation, discarded=discarded, dead_letters=dead_letters)

    # -- what differs between a stream server and Core NATS --------------------------------
    @abc.abstractmethod
    def attach(self, sub: Sub) -> None:
        """Set a new subscription's starting point."""

    @abc.abstractmethod
    def store(self, ch: Channel, env: Envelope, now: float) -> PublishOutcome:
        """Accept (or refuse) a publication now."""

    @abc.abstractmethod
    def take(
        self, sub: Sub, item_credit: int, byte_credit: int, now: float
    ) -> list[Delivery] | None:
        """Deliver what is available now: None when nothing is, ``[]`` when the next message
        is larger than the byte credit."""

    @abc.abstractmethod
    def renew(self, sub: Sub, token: DeliveryToken) -> LeaseObservation: ...

    @abc.abstractmethod
    def settle(
        self, sub: Sub, token: DeliveryToken, outcome: SettleOutcome, settlement_id: str
    ) -> SettleAnswer: ...

    @abc.abstractmethod
    def discard_all(self, ch: Channel) -> int:
        """Give every message of a closing channel its fate; how many (dead letters apart)."""

    @abc.abstractmethod
    def observe_publication(self, ch: Channel, pid: str) -> PublishOutcome: ...

    @abc.abstractmethod
    def observe_subscription(self, sub: Sub) -> Known[SubscriptionObservation] | Unknown: ...

    @abc.abstractmethod
    def observe_channel(self, ch: Channel) -> Known[ChannelObservation] | Unknown: ...

    @abc.abstractmethod
    def observe_ack_floor(self, sub: Sub) -> Known[int] | Unknown: ...
