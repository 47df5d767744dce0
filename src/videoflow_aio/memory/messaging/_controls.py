"""Model controls: fault injection on the model, not part of the contract a runtime codes
against. A conformance case that uses one declares it in ``controls=``."""

from __future__ import annotations

from ...contracts.messaging import ChannelId, Envelope, PublishOutcome, SubscriptionId
from ._broker import Broker


class ModelControls:
    """The controls of :class:`~videoflow_aio.memory.messaging.MemoryMessagingBackend`:
    ambiguous acceptance (pause, resume, cancel), failed observation, and a look at what is
    stored."""

    _broker: Broker

    def pause_acceptance(self, channel_id: ChannelId) -> None:
        """Hold every publication to the channel until resumed (callers' deadlines pass and
        they get ``PublicationUnknown``)."""
        self._broker.channel(channel_id).paused = True

    def resume_acceptance(self, channel_id: ChannelId) -> list[PublishOutcome]:
        """Store every held publication (late acceptance); returns their outcomes in order. A
        publisher still waiting receives the real outcome."""
        broker = self._broker
        return broker.resume(broker.channel(channel_id))

    def cancel_publication(self, channel_id: ChannelId, publication_id: str) -> bool:
        """Definitely cancel a held publication. False when it was not held (it may already be
        stored)."""
        broker = self._broker
        return broker.cancel(broker.channel(channel_id), publication_id)

    def fail_observation(
        self, subscription: SubscriptionId, reason: str | None = "timeout"
    ) -> None:
        """Make observe_subscription (and observe_ack_floor) return Unknown(reason) until called
        with None."""
        self._broker.sub(subscription).fail_reason = reason

    def stored(self, channel_id: ChannelId) -> list[Envelope]:
        """Every retained envelope (dead letters included), in sequence order."""
        return [m.env for m in self._broker.channel(channel_id).msgs.values()]
