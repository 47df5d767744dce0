"""Typed JetStream API replies: the msgspec Structs the adapter decodes each reply into.

Only the fields the adapter reads are declared (msgspec skips the rest while decoding, which is
why a typed decode is faster than a ``dict`` one); every field has the default the server
means by leaving it out (JetStream omits empty and zero fields). An error reply decodes into
any of them with ``error`` set (:class:`ErrorBody`; ``_api.api`` raises it as ``ApiError``).
Configurations the adapter *sends* stay plain dicts (``_channels.stream_config``,
``_subscriptions.consumer_config``); what it reads back is typed here.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

import msgspec

R = TypeVar("R", bound="Reply")


class ErrorBody(msgspec.Struct):
    """An API error: HTTP-like ``code``, JetStream's ``err_code`` (the constants in ``_api``)."""

    code: int = 0
    err_code: int = 0
    description: str = ""


class Reply(msgspec.Struct, kw_only=True):
    """What every API reply may carry: an error, and the server's time (``ts``, RFC 3339)."""

    error: ErrorBody | None = None
    ts: str = ""


class PubAck(Reply, kw_only=True):
    """The answer to a publish on a stream's subject (``seq`` 0 with ``error`` on a refusal)."""

    stream: str = ""
    seq: int = 0
    duplicate: bool = False


class StreamConfig(msgspec.Struct, kw_only=True):
    """A stream's configuration as the server reports it."""

    name: str = ""
    retention: str = "limits"
    storage: str = ""
    num_replicas: int = 1
    max_msgs: int = -1
    max_bytes: int = -1
    max_age: int = 0
    max_msgs_per_subject: int = -1
    discard: str = "old"
    metadata: dict[str, str] | None = None

    @property
    def meta(self) -> dict[str, str]:
        return self.metadata or {}


class StreamState(msgspec.Struct, kw_only=True):
    messages: int = 0
    bytes: int = 0
    first_seq: int = 0
    last_seq: int = 0
    num_deleted: int = 0
    deleted: list[int] | None = None  # with ``deleted_details``
    subjects: dict[str, int] | None = None  # with ``subjects_filter``


class ClusterInfo(msgspec.Struct, kw_only=True):
    """Where a replicated stream lives: its raft leader (``""`` while one is elected)."""

    leader: str = ""


class StreamInfo(Reply, kw_only=True):
    """``STREAM.INFO`` / ``STREAM.CREATE`` / ``STREAM.UPDATE``."""

    config: StreamConfig = msgspec.field(default_factory=StreamConfig)
    state: StreamState = msgspec.field(default_factory=StreamState)
    created: str = ""
    cluster: ClusterInfo | None = None


class ConsumerConfig(msgspec.Struct, kw_only=True):
    """A consumer's configuration as the server reports it."""

    durable_name: str = ""
    ack_wait: int = 30_000_000_000
    max_deliver: int = -1
    max_ack_pending: int = 1000
    deliver_policy: str = "all"
    opt_start_seq: int | None = None
    sample_freq: str = ""
    metadata: dict[str, str] | None = None

    @property
    def meta(self) -> dict[str, str]:
        return self.metadata or {}


class SequenceInfo(msgspec.Struct):
    consumer_seq: int = 0
    stream_seq: int = 0


class ConsumerInfo(Reply, kw_only=True):
    """``CONSUMER.INFO`` / ``CONSUMER.CREATE`` (and each entry of ``CONSUMER.LIST``)."""

    name: str = ""
    config: ConsumerConfig = msgspec.field(default_factory=ConsumerConfig)
    created: str = ""
    delivered: SequenceInfo = msgspec.field(default_factory=SequenceInfo)
    ack_floor: SequenceInfo = msgspec.field(default_factory=SequenceInfo)
    num_pending: int = 0
    num_ack_pending: int = 0
    num_redelivered: int = 0


class StreamNames(Reply, kw_only=True):
    """A page of ``STREAM.NAMES``."""

    streams: list[str] | None = None
    total: int = 0


class ConsumerList(Reply, kw_only=True):
    """A page of ``CONSUMER.LIST``."""

    consumers: list[ConsumerInfo] | None = None
    total: int = 0


class StoredMessage(msgspec.Struct, kw_only=True):
    """A message read by ``STREAM.MSG.GET`` (``data`` and ``hdrs`` base64)."""

    subject: str = ""
    seq: int = 0
    data: str | None = None
    hdrs: str | None = None


class MsgGet(Reply, kw_only=True):
    message: StoredMessage = msgspec.field(default_factory=StoredMessage)


class Purged(Reply, kw_only=True):
    """``STREAM.PURGE``."""

    purged: int = 0


class Advisory(msgspec.Struct, kw_only=True):
    """A consumer advisory (max deliveries, message terminated, …) as the ledgers read it."""

    stream_seq: int = 0
    timestamp: str = ""
    reason: str = ""
    consumer: str = ""


class Api(Protocol):
    """A JetStream API call: ``$JS.API.<subject>`` with ``body``, the reply decoded as ``into``
    (``Client.api``, ``JetStreamAdmin``'s own)."""

    async def __call__(self, subject: str, body: dict[str, Any] | None, into: type[R]) -> R: ...


_decoders: dict[type[Any], msgspec.json.Decoder[Any]] = {}


def decoder(into: type[R]) -> msgspec.json.Decoder[R]:
    """The (cached) JSON decoder of reply type ``into``."""
    dec = _decoders.get(into)
    if dec is None:
        dec = _decoders[into] = msgspec.json.Decoder(into)
    return dec


decode_pub_ack = msgspec.json.Decoder(PubAck).decode
decode_advisory = msgspec.json.Decoder(Advisory).decode
