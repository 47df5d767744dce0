"""Core NATS: publish/subscribe with nothing retained."""

from __future__ import annotations

from ...contracts import Known, Unknown
from ...contracts.messaging import (
    Accepted,
    ChannelObservation,
    Delivery,
    DeliveryToken,
    Envelope,
    LeaseObservation,
    PublicationUnresolvable,
    PublishOutcome,
    SettleAnswer,
    SettleConfirmed,
    SettleOutcome,
    SubscriptionObservation,
)
from ._broker import Broker
from ._channel import Channel
from ._records import CLOSED, Msg, new_msg
from ._subscription import Sub


class CoreBroker(Broker):
    """A Core NATS server (``MemoryMessagingBackend(core_only=True)``).

    * No retention, no leases, no dedup: a publish is copied into the client queue of each
      subscription attached at that moment — nothing for a later one.
    * A queue already holding ``client_queue_limit`` messages drops the copy (a ``drop``
      with reason ``slow_consumer``; the subscription's ``dropped`` + 1).
    * A delivery is final: ``renew`` is ``held=False``, ``settle`` a no-op
      ``SettleConfirmed``; ``observe_ack_floor`` is ``Unknown`` and ``observe_publication``
      ``PublicationUnresolvable`` (there is no ledger to ask).
    * Sequences count publications per channel (``last_sequence``); the channel reads empty.
    """

    def attach(self, sub: Sub) -> None:
        pass  # nothing retained: a subscription sees what is published from now on

    def store(self, ch: Channel, env: Envelope, now: float) -> PublishOutcome:
        ch.last_seq += 1
        seq = ch.last_seq
        m = new_msg(seq, env, now, True)
        limit = self.config.client_queue_limit
        delivered: list[str] = []
        for sub in ch.subs.values():
            if not sub.sees(m):
                continue
            if len(sub.core_queue) >= limit:
                sub.dropped += 1
                ch.record(
                    "drop",
                    env.publication_id,
                    seq=seq,
                    reason="slow_consumer",
                    subscriptions=[sub.id.name],
                )
                continue
            sub.core_queue.append(m)
            delivered.append(sub.id.name)
            sub.wake()
        ch.record(
            "publish",
            env.publication_id,
            seq=seq,
            duplicate=False,
            core=True,
            subscriptions=delivered,
        )
        return Accepted(env.publication_id, seq)

    def take(
        self, sub: Sub, item_credit: int, byte_credit: int, now: float
    ) -> list[Delivery] | None:
        """Pop from the client queue, up to the credits (a head larger than the byte credit
        gives ``[]``)."""
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
            sub.channel.record(
                "deliver",
                m.env.publication_id,
                seq=m.seq,
                attempt=1,
                subscription=sub.id.name,
                core=True,
            )
        return out

    def renew(self, sub: Sub, token: DeliveryToken) -> LeaseObservation:
        return LeaseObservation(False, None, token.attempt, "core-only: no leases")

    def settle(
        self, sub: Sub, token: DeliveryToken, outcome: SettleOutcome, settlement_id: str
    ) -> SettleAnswer:
        return SettleConfirmed(token.sequence)  # core NATS has nothing to settle

    def discard_all(self, ch: Channel) -> int:
        """Each message still waiting in a client queue is a ``drop`` naming the
        subscriptions whose queue held it; returns how many messages."""
        queued: dict[int, tuple[Msg, list[str]]] = {}
        for sub in ch.subs.values():
            for m in sub.core_queue:
                queued.setdefault(m.seq, (m, []))[1].append(sub.id.name)
            sub.dropped += len(sub.core_queue)
            sub.core_queue.clear()
        for seq in sorted(queued):
            m, names = queued[seq]
            ch.record("drop", m.env.publication_id, seq=seq, reason=CLOSED, subscriptions=names)
        return len(queued)

    def observe_publication(self, ch: Channel, pid: str) -> PublishOutcome:
        return PublicationUnresolvable(pid, "core-only: no publication ledger")

    def observe_subscription(self, sub: Sub) -> Known[SubscriptionObservation] | Unknown:
        return Known(SubscriptionObservation(sub.id, len(sub.core_queue), 0, 0, sub.dropped, 0))

    def observe_channel(self, ch: Channel) -> Known[ChannelObservation] | Unknown:
        return Known(ChannelObservation(ch.id, 0, 0, ch.last_seq + 1, ch.last_seq, 0))

    def observe_ack_floor(self, sub: Sub) -> Known[int] | Unknown:
        return Unknown("core-only: no acknowledgements")
