"""Publishing into a pipeline channel: frame bytes through the payload store, the send time
in a header, and idempotent retries of an ambiguous publish.

An envelope's payload reference travels in the ``vf-payload`` header (the
:class:`~videoflow_aio.contracts.payload.ImmutablePayloadRef` as JSON), the time it was sent
on the publisher's loop clock in ``vf-sent-at`` (``repr`` of the float, so it reads back
bit for bit). A publish whose outcome is :class:`PublicationUnknown` is sent again with the
same publication id: the channel's dedup window makes the retry idempotent, and a held
publication accepted late answers ``Accepted(duplicate=True)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import msgspec

from ..contracts import unchecked
from ..contracts.errors import ValidationError
from ..contracts.messaging import (
    Accepted,
    ChannelId,
    Envelope,
    MessagingBackend,
    PublicationUnknown,
    PublishOutcome,
    Rejected,
)
from ..contracts.payload import ImmutablePayloadRef, PayloadStore, RetentionContract
from ._time import Clock, Sleep, check_seconds, loop_clock

PAYLOAD_HEADER = "vf-payload"
"""The header that carries an envelope's payload reference (the ref as JSON)."""
SENT_AT_HEADER = "vf-sent-at"
"""The header that carries when an envelope was sent (``repr`` of the publisher's loop time)."""

_ref_encoder = msgspec.json.Encoder()
_ref_decoder = msgspec.json.Decoder(ImmutablePayloadRef)


def encode_ref(ref: ImmutablePayloadRef) -> str:
    """The header value that carries ``ref``."""
    return _ref_encoder.encode(ref).decode()


def decode_ref(value: str) -> ImmutablePayloadRef:
    """The ref carried by a ``vf-payload`` header; ValidationError when malformed."""
    try:
        return _ref_decoder.decode(value)
    except msgspec.DecodeError as exc:
        raise ValidationError(
            f"malformed {PAYLOAD_HEADER} header: {exc}", field=PAYLOAD_HEADER, value=value
        ) from None


def sent_at(envelope: Envelope) -> float | None:
    """When ``envelope`` was sent (its ``vf-sent-at`` header), or None without one."""
    raw = envelope.headers.get(SENT_AT_HEADER) if envelope.headers else None
    if raw is None:
        return None
    try:
        return float(raw)
    except ValueError:
        return None


@dataclass(slots=True)
class PublishCounters:
    """What a :class:`Publisher` did: accepted (first time), duplicates, ambiguous attempts
    retried, rejected, unresolvable, payload objects put."""

    accepted: int = 0
    duplicates: int = 0
    retried: int = 0
    rejected: int = 0
    unresolvable: int = 0
    payload_puts: int = 0


class Publisher:
    """Publishes to one channel with relative timeouts.

    ``payload`` and ``readers``: bytes given as ``data`` are put into the payload store under
    ``<channel>/<publication id>`` with one obligation per reader (the consumer names that
    will read them), ``obligation_seconds`` long; the object expires ``ttl_seconds`` after
    the put at the latest in a store that expires objects under obligation. ``timeout``:
    seconds each publish attempt may wait; ``max_attempts`` bounds the retries of an
    ambiguous publish (None: until the outcome is known).
    """

    def __init__(
        self,
        backend: MessagingBackend,
        channel: ChannelId,
        *,
        timeout: float = 5.0,
        payload: PayloadStore | None = None,
        readers: Sequence[str] = (),
        ttl_seconds: float = 3600.0,
        obligation_seconds: float = 600.0,
        max_attempts: int | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.backend = backend
        self.channel = channel
        self.timeout = check_seconds(timeout, "timeout", positive=True)
        self.payload = payload
        self.contract = RetentionContract(
            ttl_seconds=check_seconds(ttl_seconds, "ttl_seconds", positive=True),
            obligations=tuple(readers),
            obligation_seconds=check_seconds(obligation_seconds, "obligation_seconds"),
        )
        if max_attempts is not None and (
            isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1
        ):
            raise ValidationError(
                "max_attempts must be >= 1 or None", field="max_attempts", value=max_attempts
            )
        self.max_attempts = max_attempts
        self.counters = PublishCounters()
        self._publish = unchecked(backend.publish)
        self._clock = clock
        self._sleep: Sleep | None = None

    def _now(self) -> Clock:
        clock = self._clock
        if clock is None:
            clock, self._sleep = loop_clock()
            self._clock = clock
        return clock

    async def send(
        self,
        publication_id: str,
        body: bytes = b"",
        *,
        event_id: str | None = None,
        event_ts: float | None = None,
        data: bytes | None = None,
        partition_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        kind: str = "data",
    ) -> PublishOutcome:
        """Publish one envelope (putting ``data`` first); the outcome once it is known.

        Answers ``Accepted``, ``Rejected`` or ``PublicationUnresolvable``;
        ``PublicationUnknown`` only when ``max_attempts`` ran out. Payload errors
        (``PayloadBackpressure``, ``ConflictError``) propagate with nothing published.
        """
        now = self._clock or self._now()
        hdrs = dict(headers) if headers else {}
        if data is not None:
            if self.payload is None:
                raise ValidationError(
                    "data given but this publisher has no payload store", field="data"
                )
            key = f"{self.channel.name}/{publication_id}"
            ref = await self.payload.put(data, key, self.contract)
            self.counters.payload_puts += 1
            hdrs[PAYLOAD_HEADER] = encode_ref(ref)
        hdrs[SENT_AT_HEADER] = repr(now())
        env = Envelope(
            self.channel,
            publication_id,
            body,
            publication_id if event_id is None else event_id,
            kind,
            partition_key,
            event_ts,
            None,
            None,
            hdrs,
        )
        # the first attempt inline (this runs for every message); retries in publish().
        # ``env`` was checked as it was built, the deadline is the loop clock's float plus
        # the checked timeout: nothing is left for the boundary to check
        deadline = now() + self.timeout
        outcome = await self._publish(env, deadline)
        if type(outcome) is PublicationUnknown:
            return await self._retry(env, deadline, outcome)
        return self._count(outcome)

    async def publish(self, envelope: Envelope) -> PublishOutcome:
        """Publish ``envelope`` as it is, retrying an ambiguous outcome with the same id."""
        now = self._clock or self._now()
        deadline = now() + self.timeout
        outcome = await self.backend.publish(envelope, deadline)
        if type(outcome) is PublicationUnknown:
            return await self._retry(envelope, deadline, outcome)
        return self._count(outcome)

    async def _retry(
        self, envelope: Envelope, deadline: float, outcome: PublishOutcome
    ) -> PublishOutcome:
        """Publish again after an ambiguous attempt (whose deadline was ``deadline``) until
        the outcome is known or ``max_attempts`` ran out."""
        now = self._now()
        attempts = 1
        while type(outcome) is PublicationUnknown:
            if self.max_attempts is not None and attempts >= self.max_attempts:
                return outcome
            self.counters.retried += 1
            if now() < deadline:  # answered early: retry no faster than once per timeout
                sleep = self._sleep or loop_clock()[1]
                await sleep(deadline - now())
            attempts += 1
            deadline = now() + self.timeout
            outcome = await self.backend.publish(envelope, deadline)
        return self._count(outcome)

    def _count(self, outcome: PublishOutcome) -> PublishOutcome:
        counters = self.counters
        if type(outcome) is Accepted:
            if outcome.duplicate:
                counters.duplicates += 1
            else:
                counters.accepted += 1
        elif type(outcome) is Rejected:
            counters.rejected += 1
        else:
            counters.unresolvable += 1
        return outcome


__all__ = [
    "PAYLOAD_HEADER",
    "SENT_AT_HEADER",
    "PublishCounters",
    "Publisher",
    "decode_ref",
    "encode_ref",
    "sent_at",
]
