"""Model controls: fault injection on the model, not part of the contract a runtime codes
against. A conformance case that uses one declares it in ``controls=``."""

from __future__ import annotations

import copy
from typing import Self

from ...contracts import checked_control
from ...contracts.messaging import ChannelId, Envelope, PublishOutcome, SubscriptionId
from . import _outside
from ._broker import Broker


class ModelControls:
    """The controls of :class:`~videoflow_aio.memory.messaging.MemoryMessagingBackend`:
    ambiguous acceptance (pause, resume, cancel), failed observation, a look at what is
    stored, another client, and what happens from outside the clients (an administrator's
    purge and deletes, a server restart: see ``_outside``)."""

    _broker: Broker
    _calls: int

    @checked_control
    def pause_acceptance(self, channel_id: ChannelId) -> None:
        """Hold every publication to the channel until resumed (callers' deadlines pass and
        they get ``PublicationUnknown``)."""
        self._broker.channel(channel_id).paused = True

    @checked_control
    def resume_acceptance(self, channel_id: ChannelId) -> list[PublishOutcome]:
        """Store every held publication (late acceptance); returns their outcomes in order. A
        publisher still waiting receives the real outcome."""
        broker = self._broker
        return broker.resume(broker.channel(channel_id))

    @checked_control
    def cancel_publication(self, channel_id: ChannelId, publication_id: str) -> bool:
        """Definitely cancel a held publication. False when it was not held (it may already be
        stored)."""
        broker = self._broker
        return broker.cancel(broker.channel(channel_id), publication_id)

    @checked_control
    def fail_observation(
        self, subscription: SubscriptionId, reason: str | None = "timeout"
    ) -> None:
        """Make observe_subscription (and observe_ack_floor) return Unknown(reason) until called
        with None."""
        self._broker.sub(subscription).fail_reason = reason

    @checked_control
    def lose_reply(self, subscription: SubscriptionId) -> None:
        """The next settle or renew on the subscription is applied as usual, and answered
        ``SettleUnknown`` / ``LeaseObservation(held=None)`` (its reply was lost)."""
        self._broker.sub(subscription).lose_reply = True

    @checked_control
    def stored(self, channel_id: ChannelId) -> list[Envelope]:
        """Every retained envelope (dead letters included), in sequence order."""
        return [m.env for m in self._broker.channel(channel_id).msgs.values()]

    def another_client(self) -> Self:
        """Another client of the same broker: a new backend instance (its own call counter)
        sharing every channel and subscription — another process of the pipeline."""
        peer = copy.copy(self)  # a shallow copy: the same broker
        peer._calls = 0
        return peer

    def restart_server(self) -> None:
        """The broker crashes and restarts on the same store (``_outside.restart``: channels
        with ``persistence`` keep everything, the others are gone, held publications are
        lost)."""
        _outside.restart(self._broker)

    @checked_control
    def purge(self, channel_id: ChannelId) -> None:
        """An administrator removes every message of the channel (dead letters stay): a drop
        for each subscription that had not settled one; a lease on one ends."""
        broker = self._broker
        _outside.purge(broker, broker.channel(channel_id))

    @checked_control
    def delete_message(self, channel_id: ChannelId, sequence: int) -> None:
        """An administrator removes one message of the channel (nothing when it is not
        there): a drop for each subscription that had not settled it; a lease on it ends."""
        broker = self._broker
        _outside.delete_message(broker, broker.channel(channel_id), sequence)

    @checked_control
    def delete_subscription(self, subscription: SubscriptionId) -> None:
        """An administrator deletes the subscription: ``NotFound`` until ensured again, then
        a new one with nothing of the old."""
        broker = self._broker
        _outside.delete_subscription(broker, broker.sub(subscription))
