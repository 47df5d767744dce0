"""A JetStream-like broker: channels retain messages, subscriptions lease them."""

from __future__ import annotations

from ...contracts import Known, Unknown
from ...contracts.errors import ValidationError
from ...contracts.messaging import (
    Accepted,
    ChannelObservation,
    Completed,
    Delivery,
    DeliveryToken,
    Envelope,
    LeaseObservation,
    PublishOutcome,
    Retry,
    SettleAnswer,
    SettleConfirmed,
    SettleOutcome,
    SubscriptionObservation,
    Terminal,
)
from ._broker import Broker
from ._channel import Channel, dead_letter_envelope
from ._observe import channel_observation, publication_outcome, subscription_observation
from ._records import CLOSED, Msg
from ._subscription import Sub


class StreamBroker(Broker):
    """A JetStream-like server.

    * **publish**: a publication id seen within the channel's dedup window is a duplicate
      (the original sequence, stored once); otherwise the channel admits it (evicting, or
      refusing with a reason) and appends it; the archive keeps a copy when offered.
    * **receive** leases (see :class:`~._leases.Leases`); **settle** ends the lease:
      ``Completed`` settles it for the subscription, ``Retry`` redelivers it, ``Terminal``
      settles it and stores a dead letter beside the slot. Settle is idempotent by
      ``settlement_id``; a token that is not the current lease is ``SettleStale``.
    * Before anything reads or settles a subscription or reads a channel, due timers fire and
      messages past ``max_age_seconds`` leave, each recorded at its due time.
    """

    def attach(self, sub: Sub) -> None:
        sub.start_at_head()

    def catch_up(self, sub: Sub, now: float) -> None:
        """Fire what is due at ``now`` for ``sub``: max-age removals, lease expiries, retries."""
        if sub.channel.spec.max_age_seconds is not None:
            sub.channel.expire_age(now)
        self.leases.fire_due(sub, now)

    # -- publish ---------------------------------------------------------------------------
    def store(self, ch: Channel, env: Envelope, now: float) -> PublishOutcome:
        pid = env.publication_id
        seq = ch.duplicate_of(pid, now)
        if seq is not None:
            ch.record("publish", pid, seq=seq, duplicate=True)
            return Accepted(pid, seq, True)
        if ch.spec.max_age_seconds is not None:
            ch.expire_age(now)
        refusal = ch.admit(env)
        if refusal is not None:
            return self.refuse(ch, pid, refusal)
        m = ch.append(env, now)
        if self.archive is not None:
            self.archive.put(ch.id, env, now)
        if ch.log is not None:
            ch.record("publish", pid, seq=m.seq, duplicate=False, msg_kind=m.kind)
        return Accepted(pid, m.seq)

    # -- receive and settle ----------------------------------------------------------------
    def take(
        self, sub: Sub, item_credit: int, byte_credit: int, now: float
    ) -> list[Delivery] | None:
        if sub.channel.spec.max_age_seconds is not None:  # catch_up(), inlined: every receive
            sub.channel.expire_age(now)
        leases = self.leases
        leases.fire_due(sub, now)
        return leases.take(sub, item_credit, byte_credit, now)

    def renew(self, sub: Sub, token: DeliveryToken) -> LeaseObservation:
        now = self.now()
        if sub.channel.spec.max_age_seconds is not None:  # aged out under the lease: not held
            sub.channel.expire_age(now)
        return self.leases.renew(sub, token, now)

    def settle(
        self, sub: Sub, token: DeliveryToken, outcome: SettleOutcome, settlement_id: str
    ) -> SettleAnswer:
        seq = token.sequence
        prior = sub.settlements.get(settlement_id)
        if prior is not None:
            if prior != seq:
                raise ValidationError(
                    f"settlement_id {settlement_id!r} was used for sequence {prior}",
                    field="settlement_id",
                    value=settlement_id,
                )
            return SettleConfirmed(seq, True)
        now = self.now()
        leases = self.leases
        # max-age removals first, as every read does: a message aged out under its lease is
        # Stale (and a drop) whether or not anything looked at the subscription meanwhile
        if sub.channel.spec.max_age_seconds is not None:
            sub.channel.expire_age(now)
        leases.fire_due(sub, now)
        lease = sub.leased.get(seq)
        if lease is None or lease[0] != token.attempt or lease[2] != token.lease_id:
            return leases.stale_settle(sub, token)  # not the current lease
        del sub.leased[seq]  # the lease ends, whatever the outcome
        attempt = lease[0]
        m = sub.channel.msgs[seq]
        sub.settlements.remember(settlement_id, seq)
        if type(outcome) is Completed:
            self._complete(sub, m, attempt)
        elif type(outcome) is Retry:
            leases.retry(sub, m, attempt, outcome.delay_seconds, now)
        else:
            assert isinstance(outcome, Terminal)
            self._dead_letter(sub, m, outcome.reason, now)
        if sub.waiters and len(sub.leased) + 1 >= sub.spec.item_credit:
            sub.wake()  # the subscription's shared credit was exhausted: now there is room
        return SettleConfirmed(seq)

    def _complete(self, sub: Sub, m: Msg, attempt: int) -> None:
        """``Completed``: settled for ``sub`` (under interest retention ``m`` may leave)."""
        ch = sub.channel
        sub.mark_settled(m.seq)
        if ch.interest:
            ch.interest_settled(m)
        if ch.log is not None:
            ch.record(
                "settle",
                m.env.publication_id,
                seq=m.seq,
                subscription=sub.id.name,
                outcome="completed",
                attempt=attempt,
            )

    def _dead_letter(self, sub: Sub, m: Msg, reason: str, now: float) -> None:
        """``Terminal(reason)``: settled for ``sub``, never redelivered; a dead letter is
        stored on the origin channel, outside its slot."""
        ch = sub.channel
        sub.dead_lettered += 1
        sub.mark_settled(m.seq)
        if ch.interest:
            ch.interest_settled(m)
        env = dead_letter_envelope(m, ch.id, sub.id.consumer, reason)
        dl = ch.append_dead_letter(env, now)
        ch.record(
            "dead_letter",
            m.env.publication_id,
            seq=m.seq,
            dlq_seq=dl.seq,
            subscription=sub.id.name,
            reason=reason,
        )

    # -- close -----------------------------------------------------------------------------
    def discard_all(self, ch: Channel) -> int:
        """Timers due by now fire first (at their due time); then every retained message is
        removed with reason ``channel closed`` (a ``drop`` naming the subscriptions that had
        not settled it, else an ``evict``)."""
        now = self.now()
        ch.expire_age(now)
        for sub in ch.subs.values():
            self.leases.fire_due(sub, now)
        discarded = ch.count
        for m in list(ch.msgs.values()):
            ch.discard(m, CLOSED)
        return discarded

    # -- observation -----------------------------------------------------------------------
    def observe_publication(self, ch: Channel, pid: str) -> PublishOutcome:
        return publication_outcome(ch, pid, self.now())

    def observe_subscription(self, sub: Sub) -> Known[SubscriptionObservation] | Unknown:
        self.catch_up(sub, self.now())
        return Known(subscription_observation(sub))

    def observe_channel(self, ch: Channel) -> Known[ChannelObservation] | Unknown:
        ch.expire_age(self.now())
        return Known(channel_observation(ch))

    def observe_ack_floor(self, sub: Sub) -> Known[int] | Unknown:
        self.catch_up(sub, self.now())
        sub.advance_floor()
        return Known(sub.floor)
