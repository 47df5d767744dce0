"""What observing a stream broker reports: built from the state as it is *now* (the caller
has fired due timers first), never guessed. A failed read is the caller's ``Unknown``."""

from __future__ import annotations

from ...contracts.messaging import (
    Accepted,
    ChannelObservation,
    PublicationUnknown,
    PublicationUnresolvable,
    PublishOutcome,
    Rejected,
    SubscriptionObservation,
)
from ._channel import Channel
from ._subscription import Sub


def subscription_observation(sub: Sub) -> SubscriptionObservation:
    """Pending (new, awaiting redelivery or in a retry delay), leased, unresolved, dropped,
    redelivered, ack floor and dead-lettered counts of ``sub``."""
    sub.advance_floor()
    return SubscriptionObservation(
        subscription=sub.id,
        pending=sub.pending(),
        leased=len(sub.leased),
        unresolved=len(sub.unresolved),
        dropped=sub.dropped,
        redelivered=sub.redelivered,
        ack_floor=sub.floor,
        dead_lettered=sub.dead_lettered,
    )


def channel_observation(ch: Channel) -> ChannelObservation:
    """The slot's messages and bytes, its sequence range (empty: ``first = last + 1``) and
    the dead letters beside it."""
    return ChannelObservation(
        channel=ch.id,
        messages=ch.count,
        bytes=ch.bytes,
        first_sequence=ch.first_seq(),
        last_sequence=ch.last_seq,
        dead_letters=ch.dead_letters,
    )


def publication_outcome(ch: Channel, pid: str, now: float) -> PublishOutcome:
    """What the broker can say of publication ``pid`` now: ``PublicationUnknown`` while it is
    held, ``Accepted`` once stored (within the dedup window), ``Rejected`` once refused or
    cancelled, else ``PublicationUnresolvable``."""
    for held in ch.held:
        if held.env.publication_id == pid and not held.cancelled:
            return PublicationUnknown(pid, "held by the broker; not yet stored")
    seq = ch.duplicate_of(pid, now)
    if seq is not None:
        return Accepted(pid, seq, False)
    refused = ch.refused.get(pid)
    if refused is not None:
        return Rejected(pid, refused)
    return PublicationUnresolvable(pid, "no record of this publication within the dedup window")
