"""The MessagingBackend contract: one stream per pipeline node, leases, redelivery, dedup.

Structs are declared ``gc=False`` (none can be part of a reference cycle: their fields are
scalars, strings, bytes, str→str dicts and other such Structs), so millions of retained
envelopes add nothing to the cyclic collector's work.

A channel is one node's stream in one run of one flow. It carries four kinds of envelope:
``data``, ``eos`` (end of stream), ``control`` and ``dlq`` (dead letters). A subscription is a
durable cursor over one kind of one channel (optionally one partition); competing replicas
share it. Every Struct here is frozen and crosses the contract unchanged; outcomes and
answers are tagged unions so a caller must look at which one it got.

Semantics every provider must show (the conformance cases ``MSG-…`` check them):

* ``publish`` returns :class:`Accepted` (stored, or a duplicate of a stored publication id
  inside the dedup window), :class:`Rejected` (definitely not stored, with a reason),
  :class:`PublicationUnknown` (the deadline passed; it may still be stored later) or
  :class:`PublicationUnresolvable` (the provider cannot say).
* ``receive`` leases up to ``item_credit`` messages (further capped by the subscription's
  shared ``item_credit``) whose bodies fit ``byte_credit``; it waits until one is available or
  the deadline passes. A lease lasts ``ack_wait_seconds``; an expired lease redelivers with
  ``attempt + 1`` until ``max_deliver`` (-1 = unlimited), after which the message is
  *unresolved*: retained, undeliverable, counted as such — never as "nothing pending".
* ``settle`` with :class:`Completed`, :class:`Retry` or :class:`Terminal` answers
  :class:`SettleConfirmed`, :class:`SettleUnknown` or :class:`SettleStale` (the token's lease
  is no longer the current one). Settling is idempotent by ``settlement_id``.
* A subscription with ``partition=p`` sees exactly the envelopes of its kind whose
  ``partition_key == str(p)``; ``partition=None`` sees every envelope of its kind.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Annotated, Literal, Self

import msgspec

from ._base import Known, Unknown
from ._boundary import Boundary
from ._specs import (
    NonEmptyStr,
    NonNegFloat,
    NonNegInt,
    OneOf,
    PositiveFloat,
    PositiveInt,
    Token,
    check_fields,
    checked,
)
from .errors import IncompatibleProfile, ValidationError

Retention = Literal["limits", "interest"]
"""How long a channel keeps a message: ``limits`` (up to its limits) or ``interest``."""
Overflow = Literal["evict_oldest", "reject"]
"""What a full ``limits`` channel does with a new message: evict the oldest, or reject it."""
Kind = Literal["data", "eos", "control", "dlq"]
"""The kind of an envelope: ``data``, ``eos`` (end of stream), ``control``, ``dlq``."""

RETENTIONS: tuple[str, ...] = ("limits", "interest")
"""Every :data:`Retention`, in order."""
OVERFLOWS: tuple[str, ...] = ("evict_oldest", "reject")
"""Every :data:`Overflow`, in order."""
KINDS: tuple[str, ...] = ("data", "eos", "control", "dlq")
"""Every :data:`Kind`, in order."""
LATEST_PER_KEY_PROFILE = "latest_per_key"
"""A channel whose ``profile`` is this keeps only the newest envelope per (kind, partition_key)."""


RetentionName = Annotated[str, OneOf(RETENTIONS)]
OverflowName = Annotated[str, OneOf(OVERFLOWS)]
KindName = Annotated[str, OneOf(KINDS)]


# -- identities ----------------------------------------------------------------------------


@checked
class ChannelId(msgspec.Struct, frozen=True, gc=False, order=True):
    """One node's stream in one run of one flow."""

    flow_id: Token
    run_id: Token
    node: Token

    def __post_init__(self) -> None:
        check_fields(self)

    @property
    def name(self) -> str:
        """``flow.run.node``: a stable printable name (a stream name on a real engine)."""
        return f"{self.flow_id}.{self.run_id}.{self.node}"

    def __str__(self) -> str:
        return self.name


@checked
class SubscriptionId(msgspec.Struct, frozen=True, gc=False, order=True):
    """A durable logical subscription (``consumer``) on a channel; replicas share it."""

    channel: ChannelId
    consumer: Token

    def __post_init__(self) -> None:
        check_fields(self)

    @property
    def name(self) -> str:
        return f"{self.channel.name}/{self.consumer}"

    def __str__(self) -> str:
        return self.name


# -- configuration -------------------------------------------------------------------------


@checked
class ChannelSpec(msgspec.Struct, frozen=True, gc=False):
    """A channel's configuration. Invalid values raise ``ValidationError`` at construction.

    Immutable once created: ``retention``, ``replicas``, ``persistence``, ``profile``.
    The rest is reconciled by ``ensure_channel``.

    ``profile`` names the channel's workload class. It is stored with the channel, read back
    by ``ensure_channel`` and may not change afterwards; any non-empty name is accepted
    (``"work"`` is the convention for a stage's ordinary stream). One name changes behaviour:
    ``"latest_per_key"`` (``LATEST_PER_KEY_PROFILE``)
    keeps only the newest envelope per (kind, ``partition_key``), and needs a backend that
    offers it (``capabilities().latest_per_key``, else ``Unsupported``). Retention, limits
    and overflow are set by their own fields, never by the profile.
    """

    channel: ChannelId
    profile: NonEmptyStr
    retention: RetentionName
    required: tuple[SubscriptionId, ...] = ()
    max_msgs: PositiveInt = 10000
    max_bytes: PositiveInt | None = None
    max_age_seconds: PositiveFloat | None = None
    overflow: OverflowName = "evict_oldest"
    dedup_window_seconds: NonNegInt = 120
    replicas: PositiveInt = 1
    persistence: bool = False
    per_subject_limits: bool = False
    owner_labels: dict[str, str] = {}

    def __post_init__(self) -> None:
        check_fields(self)
        for sub in self.required:
            if sub.channel != self.channel:
                raise ValidationError(
                    f"required subscription {sub.name} is not on channel {self.channel.name}",
                    field="required",
                    value=sub.name,
                )

    @property
    def generation(self) -> str | None:
        """The owner generation label (``owner_labels['generation']``), used by ``close``."""
        return self.owner_labels.get("generation")


@checked
class SubscriptionSpec(msgspec.Struct, frozen=True, gc=False):
    """A subscription's configuration. Invalid values raise :class:`ValidationError`.

    Immutable once created: ``kind``, ``partition``, ``competing``. The rest is reconciled.
    """

    id: SubscriptionId
    competing: bool = True
    partition: NonNegInt | None = None
    ack_wait_seconds: PositiveFloat = 30.0
    max_deliver: Annotated[int, msgspec.Meta(ge=-1)] = 4
    item_credit: PositiveInt = 8
    byte_credit: PositiveInt = 67108864
    kind: KindName = "data"

    def __post_init__(self) -> None:
        check_fields(self)
        if self.max_deliver == 0:
            raise ValidationError(
                "max_deliver must be >= 1 or -1 (unlimited)",
                field="max_deliver",
                value=self.max_deliver,
            )

    @property
    def channel(self) -> ChannelId:
        return self.id.channel


# -- messages ------------------------------------------------------------------------------


@checked
class Envelope(msgspec.Struct, frozen=True, gc=False):
    """One message. ``publication_id`` is the dedup key; ``event_id`` names the event (the
    archive's key). A dead letter has ``kind='dlq'`` and the origin channel."""

    channel: ChannelId
    publication_id: NonEmptyStr
    body: bytes = b"x"
    event_id: str = ""
    kind: KindName = "data"
    partition_key: Token | None = None
    event_ts: float | None = None
    source_epoch: str | None = None
    source_offset: int | None = None
    headers: dict[str, str] = {}

    def __post_init__(self) -> None:
        check_fields(self)


class DeliveryToken(msgspec.Struct, frozen=True, gc=False):
    """What ``settle``/``renew`` need to name one delivery (one lease) of one message.

    ``opaque`` is provider data (a reply subject on NATS); the model leaves it empty.
    """

    subscription: SubscriptionId
    sequence: NonNegInt
    attempt: NonNegInt
    lease_id: str
    opaque: str = ""


class Delivery(msgspec.Struct, frozen=True, gc=False):
    """A leased message: settle it with ``token`` before ``lease_deadline``."""

    envelope: Envelope
    sequence: int
    attempt: int
    token: DeliveryToken
    lease_deadline: float


# -- publish outcomes ----------------------------------------------------------------------


class Accepted(msgspec.Struct, frozen=True, gc=False, tag=True):
    """Stored at ``sequence``; ``duplicate`` when the publication id was already stored."""

    publication_id: str
    sequence: int
    duplicate: bool = False


class Rejected(msgspec.Struct, frozen=True, gc=False, tag=True):
    """Definitely not stored."""

    publication_id: str
    reason: str


class PublicationUnknown(msgspec.Struct, frozen=True, gc=False, tag=True):
    """The deadline passed before an answer: it may or may not be (or become) stored."""

    publication_id: str
    reason: str


class PublicationUnresolvable(msgspec.Struct, frozen=True, gc=False, tag=True):
    """The provider keeps no ledger that could say what became of the publication."""

    publication_id: str
    reason: str


PublishOutcome = Accepted | Rejected | PublicationUnknown | PublicationUnresolvable
"""What ``publish`` answers: exactly one of these, never a guess."""

# -- settle outcomes and answers -----------------------------------------------------------


class Completed(msgspec.Struct, frozen=True, gc=False, tag=True):
    """Done with the message: never redelivered to this subscription."""


@checked
class Retry(msgspec.Struct, frozen=True, gc=False, tag=True):
    """Redeliver after ``delay_seconds`` (counts toward ``max_deliver``)."""

    delay_seconds: NonNegFloat = 0.0

    def __post_init__(self) -> None:
        check_fields(self)  # finite: inf would leave the message pending forever


@checked
class Terminal(msgspec.Struct, frozen=True, gc=False, tag=True):
    """Give up: never redelivered; a dead letter (``kind='dlq'``) is stored on the origin
    channel, outside its slot."""

    reason: str = "terminal"

    def __post_init__(self) -> None:
        check_fields(self)


SettleOutcome = Completed | Retry | Terminal
"""How a consumer settles a delivery."""


class SettleConfirmed(msgspec.Struct, frozen=True, gc=False, tag=True):
    """Confirmed; ``duplicate`` when this ``settlement_id`` had already been applied."""

    sequence: int
    duplicate: bool = False


class SettleUnknown(msgspec.Struct, frozen=True, gc=False, tag=True):
    """No confirmation: the settle may or may not have been applied."""

    reason: str


class SettleStale(msgspec.Struct, frozen=True, gc=False, tag=True):
    """The token's lease is not the current one (expired, redelivered, or already settled)."""

    reason: str


SettleAnswer = SettleConfirmed | SettleUnknown | SettleStale
"""What ``settle`` answers."""

# -- observations --------------------------------------------------------------------------


class LeaseObservation(msgspec.Struct, frozen=True, gc=False):
    """What ``renew`` found: ``held`` (True) with the new ``lease_deadline``; not held
    (False), and why; or ``held=None``: no confirmation — the renewal may or may not have
    applied (its reply was lost, the consumer's leader is being elected), like
    ``SettleUnknown``. The lease is then as it was or renewed; renew again (or settle) to
    know. ``if obs.held:`` reads it as before: only a confirmed renewal counts."""

    held: bool | None
    lease_deadline: float | None = None
    attempt: int = 0
    reason: str = ""


class ChannelObservation(msgspec.Struct, frozen=True, gc=False):
    """The channel's retained range. Empty: ``first_sequence == last_sequence + 1``.

    ``messages``/``bytes`` count the slot (data, eos, control; ``bytes`` at least the bodies,
    an engine may add its per-message overhead); ``dead_letters`` the dlq envelopes kept
    beside it.
    """

    channel: ChannelId
    messages: int
    bytes: int
    first_sequence: int
    last_sequence: int
    dead_letters: int = 0


class SubscriptionObservation(msgspec.Struct, frozen=True, gc=False):
    """One subscription's state. ``unresolved`` messages (past ``max_deliver``) are retained
    and undeliverable: they are counted here, never folded into ``pending == 0``.

    ``pending``: matching messages not yet leased (including ones waiting for redelivery);
    ``leased``: held under a live lease; ``dropped``: evicted/superseded before this
    subscription settled them (or slow-consumer drops in core-only mode); ``redelivered``:
    deliveries with attempt > 1; ``dead_lettered``: settled Terminal.
    """

    subscription: SubscriptionId
    pending: int
    leased: int
    unresolved: int
    dropped: int
    redelivered: int
    ack_floor: int = 0
    dead_lettered: int = 0


class CleanupObservation(msgspec.Struct, frozen=True, gc=False):
    """What ``close`` did: ``removed`` confirmed gone, ``absent`` did not exist, ``refused``
    belong to another generation (left alone), ``unconfirmed`` may still exist."""

    removed: tuple[ChannelId, ...] = ()
    absent: tuple[ChannelId, ...] = ()
    refused: tuple[ChannelId, ...] = ()
    unconfirmed: tuple[ChannelId, ...] = ()


class VerifiedChannel(msgspec.Struct, frozen=True, gc=False):
    """The channel's effective configuration as read back after ``ensure_channel``."""

    effective: ChannelSpec
    created: bool
    updated: bool = False


class VerifiedSubscription(msgspec.Struct, frozen=True, gc=False):
    """The subscription's effective configuration as read back after ``ensure_subscription``."""

    effective: SubscriptionSpec
    created: bool
    updated: bool = False


class MessagingCapabilities(msgspec.Struct, frozen=True, gc=False):
    """What a provider offers. Profiles: ``durable_control`` (MSG-018), ``archive`` (MSG-024),
    ``latest_per_key``, ``core_only`` (no retention or leases). Guarantees:
    ``publication_ledger`` (``observe_publication`` can answer), ``stale_settle_detection``
    (a settle on a superseded lease is answered :class:`SettleStale`), ``unresolved_ledger``
    (unresolved messages are counted), ``interest_required_only`` (on an ``interest`` channel
    only the ``required`` subscriptions hold a message; another subscription loses it as a
    drop), ``cumulative_redelivered`` (``redelivered`` counts every redelivery, also of
    messages settled since).
    """

    backend: str
    core_only: bool = False
    latest_per_key: bool = False
    durable_control: bool = False
    archive: bool = False
    archive_horizon_seconds: float = 0.0
    mixed_retention: bool = False
    persistent: bool = False
    replication_factor: int = 1
    max_payload_bytes: int = 8388608
    dedup_window_seconds: int = 120
    client_queue_limit: int = 64
    publication_ledger: bool = True
    stale_settle_detection: bool = True
    unresolved_ledger: bool = True
    interest_required_only: bool = True
    cumulative_redelivered: bool = True

    def profiles(self) -> frozenset[str]:
        """The optional profile names offered (as conformance ``needs=`` spell them)."""
        names = ("core_only", "latest_per_key", "durable_control", "archive", "mixed_retention")
        return frozenset(n for n in names if getattr(self, n))


# -- constructors (pure) -------------------------------------------------------------------


def make_channel(
    flow_id: str,
    run_id: str,
    node: str,
    profile: str,
    retention: Retention,
    required: Sequence[SubscriptionId] = (),
    max_msgs: int = 10000,
    max_bytes: int | None = None,
    max_age_seconds: float | None = None,
    overflow: Overflow = "evict_oldest",
    dedup_window_seconds: int = 120,
    replicas: int = 1,
    persistence: bool = False,
    per_subject_limits: bool = False,
    owner_labels: Mapping[str, str] | None = None,
) -> ChannelSpec:
    """A [`ChannelSpec`][videoflow_aio.contracts.messaging.ChannelSpec] for channel
    ``flow_id.run_id.node``; bad values raise ``ValidationError`` naming the field.

    ``profile`` is the channel's workload class (``"work"`` by convention;
    ``"latest_per_key"`` keeps only the newest envelope per key — see ``ChannelSpec``).
    """
    return ChannelSpec(
        channel=ChannelId(flow_id, run_id, node),
        profile=profile,
        retention=retention,
        required=tuple(required),
        max_msgs=max_msgs,
        max_bytes=max_bytes,
        max_age_seconds=max_age_seconds,
        overflow=overflow,
        dedup_window_seconds=dedup_window_seconds,
        replicas=replicas,
        persistence=persistence,
        per_subject_limits=per_subject_limits,
        owner_labels=dict(owner_labels or {}),
    )


def make_envelope(
    channel: ChannelId,
    publication_id: str,
    body: bytes = b"x",
    event_id: str | None = None,
    kind: Kind = "data",
    partition_key: str | None = None,
    event_ts: float | None = None,
    source_epoch: str | None = None,
    source_offset: int | None = None,
    headers: Mapping[str, str] | None = None,
) -> Envelope:
    """An envelope; ``event_id`` defaults to ``publication_id``."""
    return Envelope(
        channel=channel,
        publication_id=publication_id,
        body=body,
        event_id=publication_id if event_id is None else event_id,
        kind=kind,
        partition_key=partition_key,
        event_ts=event_ts,
        source_epoch=source_epoch,
        source_offset=source_offset,
        headers=dict(headers or {}),
    )


def make_subscription(
    channel: ChannelId,
    consumer: str,
    competing: bool = True,
    partition: int | None = None,
    ack_wait_seconds: float = 30.0,
    max_deliver: int = 4,
    item_credit: int = 8,
    byte_credit: int = 67108864,
    kind: Kind = "data",
) -> SubscriptionSpec:
    """A [`SubscriptionSpec`][videoflow_aio.contracts.messaging.SubscriptionSpec] for
    ``consumer`` on ``channel``; bad values raise ``ValidationError`` naming the field."""
    return SubscriptionSpec(
        id=SubscriptionId(channel, consumer),
        competing=competing,
        partition=partition,
        ack_wait_seconds=ack_wait_seconds,
        max_deliver=max_deliver,
        item_credit=item_credit,
        byte_credit=byte_credit,
        kind=kind,
    )


def matches(spec: SubscriptionSpec, envelope: Envelope) -> bool:
    """Whether ``spec`` sees ``envelope``: same kind, and same partition when it has one."""
    if envelope.kind != spec.kind:
        return False
    return spec.partition is None or envelope.partition_key == str(spec.partition)


IMMUTABLE_CHANNEL_FIELDS = ("retention", "replicas", "persistence", "profile")
"""Channel fields ``ensure_channel`` may not change on an existing channel."""
IMMUTABLE_SUBSCRIPTION_FIELDS = ("kind", "partition", "competing")
"""Subscription fields ``ensure_subscription`` may not change on an existing subscription."""


def check_immutable(
    fields: tuple[str, ...],
    current: object,
    wanted: object,
    what: str,
    ident: ChannelId | SubscriptionId,
) -> None:
    """IncompatibleProfile for the first of ``fields`` that ``wanted`` would change."""
    for name in fields:
        have, want = getattr(current, name), getattr(wanted, name)
        if have != want:
            raise IncompatibleProfile(
                f"{what} {ident} has {name}={have!r}, asked for {want!r}",
                resource=ident.name,
                field=name,
                expected=want,
                actual=have,
            )


def validate_control_write(key: object, expected_version: object, value: object) -> bytes:
    """Check ``commit_control``'s arguments; the value to store. :class:`ValidationError`
    names the first bad field: ``key`` (a non-empty str), ``expected_version`` (a str or
    None), ``value`` (bytes)."""
    if not isinstance(key, str) or not key:
        raise ValidationError("key must be a non-empty str", field="key", value=key)
    if expected_version is not None and not isinstance(expected_version, str):
        raise ValidationError(
            "expected_version must be a str or None",
            field="expected_version",
            value=type(expected_version).__name__,
        )
    if not isinstance(value, bytes):
        raise ValidationError("value must be bytes", field="value", value=type(value).__name__)
    return value


# -- the contract --------------------------------------------------------------------------


class MessagingBackend(Boundary, abc.ABC):
    """A JetStream-like broker (or Core NATS when ``capabilities().core_only``).

    Unknown channels and subscriptions raise [`NotFound`][videoflow_aio.contracts.NotFound];
    invalid arguments raise [`ValidationError`][videoflow_aio.contracts.ValidationError]. A
    refused call changes nothing. Optional profiles raise
    [`Unsupported`][videoflow_aio.contracts.Unsupported] when not offered.

    A backend is an async context manager: ``async with Backend(...) as b:`` returns the
    backend itself and calls ``aclose()`` on the way out, whatever happened inside.
    Two different things are closed here, and the names keep them apart:

    * ``close(owned, expected_generation)`` **deletes channels** on the broker
      (their messages, subscriptions and leases), for every client of that broker;
    * ``aclose()`` **closes this client** (its connection); every channel,
      subscription and message on the broker stays as it was.
    """

    @abc.abstractmethod
    async def publish(self, envelope: Envelope, deadline: float) -> PublishOutcome:
        """Publish with a monotonic ``deadline``; on expiry the outcome is
        :class:`PublicationUnknown`, never a guess. A body over the payload limit, or a full
        ``reject`` channel, is :class:`Rejected` with that reason and nothing stored."""

    @abc.abstractmethod
    async def receive(
        self,
        subscription: SubscriptionId,
        item_credit: PositiveInt,
        byte_credit: PositiveInt,
        deadline: float,
    ) -> list[Delivery]:
        """Lease up to ``item_credit`` matching messages whose bodies fit ``byte_credit``.
        Waits until at least one is available or ``deadline`` passes (then ``[]``).
        Redeliveries come before new messages."""

    @abc.abstractmethod
    async def renew(self, token: DeliveryToken) -> LeaseObservation:
        """Extend the lease by ``ack_wait_seconds`` from now, if ``token`` still holds it:
        ``held`` True (renewed), False (not held: why in ``reason``) or None (no
        confirmation: it may have applied; the lease is not known lost)."""

    @abc.abstractmethod
    async def settle(
        self, token: DeliveryToken, outcome: SettleOutcome, settlement_id: NonEmptyStr
    ) -> SettleAnswer:
        """Settle one delivery; idempotent by ``settlement_id``."""

    @abc.abstractmethod
    async def observe_publication(self, envelope: Envelope) -> PublishOutcome:
        """What the backend can say now about ``envelope.publication_id``:
        Accepted (stored), PublicationUnknown (still held / in flight), Rejected (definitely
        not stored), or PublicationUnresolvable when it keeps no ledger."""

    @abc.abstractmethod
    async def observe_subscription(
        self, subscription: SubscriptionId
    ) -> Known[SubscriptionObservation] | Unknown:
        """The subscription's counts, or ``Unknown(reason)`` when they cannot be read."""

    @abc.abstractmethod
    async def observe_channel(self, channel_id: ChannelId) -> Known[ChannelObservation] | Unknown:
        """The channel's retained range; ``Unknown`` when it cannot be read."""

    @abc.abstractmethod
    async def observe_ack_floor(self, subscription: SubscriptionId) -> Known[int] | Unknown:
        """The highest stream sequence at or below which every visible message is settled
        for ``subscription`` (0 when none). Evicted messages count as settled; unresolved
        ones do not."""

    @abc.abstractmethod
    async def ensure_channel(self, spec: ChannelSpec, operation_id: NonEmptyStr) -> VerifiedChannel:
        """Create or reconcile the channel and read back its effective configuration.
        An immutable mismatch (retention, replicas, persistence, profile) raises
        IncompatibleProfile; "already exists" is never accepted without inspection."""

    @abc.abstractmethod
    async def ensure_subscription(
        self, spec: SubscriptionSpec, operation_id: NonEmptyStr
    ) -> VerifiedSubscription:
        """Create or reconcile the subscription and read back its effective configuration.
        An immutable mismatch (kind, partition, competing) raises IncompatibleProfile."""

    @abc.abstractmethod
    async def close(
        self, owned: Sequence[ChannelId], expected_generation: str
    ) -> CleanupObservation:
        """Delete channels on the broker: exactly those of ``owned`` whose generation label
        (``owner_labels["generation"]``), if any, is ``expected_generation``, with their
        messages, subscriptions and leases. Another generation's channel is ``refused``, a
        missing one ``absent``; what could not be confirmed gone is ``unconfirmed``. The
        connection stays open (that is ``aclose()``)."""

    @abc.abstractmethod
    async def commit_control(
        self, channel_id: ChannelId, key: NonEmptyStr, expected_version: str | None, value: bytes
    ) -> bool:
        """Durable-control profile: write ``value`` under ``key`` if its version is
        ``expected_version`` (None: must not exist). False when the version moved on."""

    @abc.abstractmethod
    async def control_state(
        self, channel_id: ChannelId, key: NonEmptyStr
    ) -> tuple[bytes | None, str | None]:
        """Durable-control profile: ``(value, version)`` or ``(None, None)``."""

    @abc.abstractmethod
    async def replay(self, channel_id: ChannelId, event_id: str) -> Envelope | None:
        """Archive profile: the archived envelope for ``event_id`` while within the archive
        horizon; None once expired (or never archived). Outlives ``close``."""

    @abc.abstractmethod
    async def capabilities(self) -> MessagingCapabilities:
        """What this provider offers."""

    @abc.abstractmethod
    async def channel_ids(self) -> list[ChannelId]:
        """Every existing channel, sorted."""

    @abc.abstractmethod
    async def subscription_ids(self, channel_id: ChannelId) -> list[SubscriptionId]:
        """The logical subscriptions bound on a channel, sorted — the inventory a teardown or
        a replacement worker reads."""

    async def aclose(self) -> None:
        """Close this client: its connection and whatever else it holds. Nothing on the
        broker changes (deleting channels is ``close()``). Calling it again does
        nothing. The in-memory model holds no connection."""

    async def __aenter__(self) -> Self:
        """The backend itself."""
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """``aclose()``, whatever happened in the block (its exception propagates)."""
        await self.aclose()


__all__ = [
    "IMMUTABLE_CHANNEL_FIELDS",
    "IMMUTABLE_SUBSCRIPTION_FIELDS",
    "KINDS",
    "LATEST_PER_KEY_PROFILE",
    "OVERFLOWS",
    "RETENTIONS",
    "Accepted",
    "ChannelId",
    "ChannelObservation",
    "ChannelSpec",
    "CleanupObservation",
    "Completed",
    "Delivery",
    "DeliveryToken",
    "Envelope",
    "Kind",
    "LeaseObservation",
    "MessagingBackend",
    "MessagingCapabilities",
    "Overflow",
    "PublicationUnknown",
    "PublicationUnresolvable",
    "PublishOutcome",
    "Rejected",
    "Retention",
    "Retry",
    "SettleAnswer",
    "SettleConfirmed",
    "SettleOutcome",
    "SettleStale",
    "SettleUnknown",
    "SubscriptionId",
    "SubscriptionObservation",
    "SubscriptionSpec",
    "Terminal",
    "VerifiedChannel",
    "VerifiedSubscription",
    "check_immutable",
    "make_channel",
    "make_envelope",
    "make_subscription",
    "matches",
    "validate_control_write",
]
