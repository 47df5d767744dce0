"""``JetStreamMessagingBackend``: the messaging contract on NATS JetStream (nats-py, asyncio).

A channel is a stream (subjects per kind under the node's prefix, see ``_names``), a
subscription a durable pull consumer filtered to one kind (and partition). Where JetStream is
silent or permissive, the adapter keeps ledgers — on the server where other clients need
them — rather than report a guess:

* unresolved messages (past ``max_deliver``, which the server reports as nothing pending) and
  messages deleted while leased come from consumer advisories captured durably by the
  channel's ``__adv`` stream;
* drops of messages removed without an advisory are decided in stream order against an
  accounting record every client shares (``__acct``), with subjects from the index records
  the adapter's publishers write (``__idx``); what cannot be decided is ``Unknown``
  (``_ledger``);
* a settle or renewal is confirmed only by the server's own evidence that it applied to a
  pending delivery (``_settle``); a token this client knows is superseded or expired is
  ``SettleStale`` without being sent (the server would accept it);
* a pull that returns nothing is never read as "no messages" (``_pull``);
* a publish whose deadline passes is ``PublicationUnknown``, a failed read ``Unknown``.

The work is split by concern: ``_client`` (connection), ``_channels``, ``_subscriptions``,
``_publish``, ``_pull``, ``_settle``, ``_observe``, ``_ledger`` (pure arithmetic), ``_profiles``.
nats-py is asyncio-only: called from trio, every public coroutine method runs on the run's
trio-asyncio loop (``adapters._trio_bridge.bridged``), where the connection, its subscriptions
and the advisory followers live.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Unpack

from ...contracts import Known, Unknown
from ...contracts.errors import Unsupported, ValidationError
from ...contracts.messaging import (
    LATEST_PER_KEY_PROFILE,
    ChannelId,
    ChannelObservation,
    ChannelSpec,
    CleanupObservation,
    Delivery,
    DeliveryToken,
    Envelope,
    LeaseObservation,
    MessagingBackend,
    MessagingCapabilities,
    PublishOutcome,
    SettleAnswer,
    SettleOutcome,
    SubscriptionId,
    SubscriptionObservation,
    SubscriptionSpec,
    VerifiedChannel,
    VerifiedSubscription,
    validate_control_write,
)
from ...observe import ObservationLog
from .._trio_bridge import Affinity, bridged
from . import _channels, _observe, _profiles, _publish, _pull, _settle, _subscriptions
from ._connection import Client
from ._names import Names
from .connection import CONNECT_TIMEOUT, DEFAULT_URL, NatsAuthOptions, NatsConnection


@bridged
class JetStreamMessagingBackend(MessagingBackend):
    """The messaging contract on a NATS JetStream server (or cluster) at ``url``.

    * ``url``: a :class:`~videoflow_aio.adapters.nats.NatsConnection`, or what makes one:
      one or more server URLs (``nats://h1:4222,nats://h2:4222`` or a list) with
      ``connect_timeout``, ``buffer_while_disconnected``, ``connect_options`` and the
      security keywords (:class:`~videoflow_aio.adapters.nats.NatsAuthOptions`), all
      described on :class:`~videoflow_aio.adapters.nats.NatsConnection`.
    * ``stream_prefix`` / ``subject_prefix``: the namespace of streams and subjects.
    * ``request_timeout``: seconds to wait for the server's answer to management calls,
      observations, settles and renewals (publish and receive use their deadlines).
    * ``max_payload_bytes``: the largest body accepted (further capped by the server's
      ``max_payload``); a larger one is ``Rejected`` before anything is sent.
    * ``dedup_window_seconds``: the longest dedup window a channel gets (0: no dedup).
    * ``latest_per_key``: offer ``latest_per_key`` channels (``max_msgs_per_subject=1``).
    * ``durable_control``: offer versioned control records (``commit_control``).
    * ``archive`` / ``archive_horizon_seconds``: copy every accepted publication to an archive
      stream that outlives ``close`` and expires after the horizon (``replay``).
    * ``replication_factor``: the most replicas a channel may ask for (the cluster's size).
    * ``log``: an observation log for what the contract's answers cannot carry (a settle the
      server lost and the adapter re-applied: ``settle_forgotten``).
    * security: a refused connection is ``AuthenticationFailed``; a subject the user may not
      use ``AccessDenied`` (``adapters.nats._security``; least privilege:
      :func:`jetstream_permissions`).
    """

    def __init__(
        self,
        url: str | Sequence[str] | NatsConnection = DEFAULT_URL,
        *,
        stream_prefix: str = "VF",
        subject_prefix: str = "vf",
        request_timeout: float = 5.0,
        connect_timeout: float = CONNECT_TIMEOUT,
        max_payload_bytes: int = 8388608,
        dedup_window_seconds: int = 120,
        latest_per_key: bool = False,
        durable_control: bool = False,
        archive: bool = False,
        archive_horizon_seconds: float = 3600.0,
        replication_factor: int = 1,
        buffer_while_disconnected: bool = False,
        connect_options: dict[str, Any] | None = None,
        log: ObservationLog | None = None,
        **auth: Unpack[NatsAuthOptions],
    ) -> None:
        for name, value in (
            ("request_timeout", request_timeout),
            ("archive_horizon_seconds", archive_horizon_seconds),
        ):
            if value <= 0:
                raise ValidationError(f"{name} must be > 0", field=name, value=value)
        for name, value, low in (
            ("max_payload_bytes", max_payload_bytes, 1),
            ("dedup_window_seconds", dedup_window_seconds, 0),
            ("replication_factor", replication_factor, 1),
        ):
            if value < low:
                raise ValidationError(f"{name} must be >= {low}", field=name, value=value)
        connection = NatsConnection.of(
            url,
            connect_timeout=connect_timeout,
            buffer_while_disconnected=buffer_while_disconnected,
            connect_options=connect_options,
            **auth,
        )
        self.names = Names(stream_prefix, subject_prefix)
        self.request_timeout = float(request_timeout)
        self.max_payload_bytes = max_payload_bytes
        self.dedup_window_seconds = dedup_window_seconds
        self.latest_per_key = latest_per_key
        self.durable_control = durable_control
        self.archive = archive
        self.archive_horizon_seconds = float(archive_horizon_seconds)
        self.replication_factor = replication_factor
        self._c = Client(connection, self.names, request_timeout=self.request_timeout, log=log)
        self._c.on_pull_reply = _pull.on_reply(self._c)
        self._side = Affinity()  # asyncio: direct; trio: across the trio-asyncio bridge

    # -- what the client itself saw -----------------------------------------------------------
    @property
    def connection(self) -> NatsConnection:
        """The connection this backend was made on (hand it to an admin or another client)."""
        return self._c.connection

    @property
    def servers(self) -> list[str]:
        return self._c.servers

    @property
    def connected(self) -> bool:
        """False while the connection is down (nats-py reconnecting); True otherwise, also
        before the first call opened it."""
        nc = self._c.nc
        return nc is None or bool(nc.is_connected)

    @property
    def reconnects(self) -> int:
        """How many times the connection was re-established (0 before the first call)."""
        nc = self._c.nc
        return 0 if nc is None else int(nc.stats["reconnects"])

    @property
    def connection_errors(self) -> list[str]:
        """The last connection errors nats-py reported (newest last)."""
        return self._c.connection_errors

    @property
    def archive_errors(self) -> list[str]:
        """Archive copies that failed (the publications stayed ``Accepted``)."""
        return self._c.archive_errors

    @property
    def background_errors(self) -> list[str]:
        """Errors of this client's background tasks (index writes, lease-lapse nudges), newest
        last; each was also logged (``videoflow_aio.adapters``). A lost index write leaves its
        sequences unattributable, never wrong; an unexpected error is raised by ``aclose``."""
        return self._c.tasks.errors

    @property
    def max_payload(self) -> int:
        server = self._c.server_max_payload
        return min(self.max_payload_bytes, server) if server else self.max_payload_bytes

    @property
    def namespace(self) -> str:
        """The stream prefix: what :meth:`drop_namespace` removes (and another client of the
        same namespace is opened with)."""
        return self.names.stream_prefix

    async def drop_namespace(self) -> int:
        """Delete every stream of this backend's namespace (archives too); how many."""
        return await _channels.drop_namespace(self._c.api, self.names.stream_prefix)

    async def aclose(self) -> None:
        if self._c.nc is not None:
            await _publish.flush_all(self._c)  # the index records still pending
        await self._c.aclose()

    # -- configuration -------------------------------------------------------------------------
    async def ensure_channel(self, spec: ChannelSpec, operation_id: str) -> VerifiedChannel:
        if isinstance(spec, ChannelSpec):
            if spec.profile == LATEST_PER_KEY_PROFILE and not self.latest_per_key:
                raise Unsupported(
                    "latest_per_key channels are not offered", capability="latest_per_key"
                )
            if spec.replicas > self.replication_factor:
                raise Unsupported(
                    f"replicas={spec.replicas} exceeds replication_factor "
                    f"{self.replication_factor}",
                    capability="replicas",
                )
            horizon = self.archive_horizon_seconds if self.archive else None
            side = _channels.side_configs(self._c, spec, self.durable_control, horizon)
        else:
            side = []
        return await _channels.ensure_channel(
            self._c,
            spec,
            operation_id,
            dedup_limit=self.dedup_window_seconds,
            side=side,
            sample=_subscriptions.SAMPLE,
        )

    async def ensure_subscription(
        self, spec: SubscriptionSpec, operation_id: str
    ) -> VerifiedSubscription:
        return await _subscriptions.ensure_subscription(self._c, spec, operation_id)

    async def close(
        self, owned: Sequence[ChannelId], expected_generation: str
    ) -> CleanupObservation:
        return await _channels.close(self._c, owned, expected_generation)

    async def channel_ids(self) -> list[ChannelId]:
        return await _channels.channel_ids(self._c)

    async def subscription_ids(self, channel_id: ChannelId) -> list[SubscriptionId]:
        return await _subscriptions.subscription_ids(self._c, channel_id)

    # -- messages ----------------------------------------------------------------------------
    async def publish(self, envelope: Envelope, deadline: float) -> PublishOutcome:
        return await _publish.publish(self._c, envelope, deadline, self.max_payload, self.archive)

    async def observe_publication(self, envelope: Envelope) -> PublishOutcome:
        return await _publish.observe_publication(self._c, envelope)

    async def receive(
        self, subscription: SubscriptionId, item_credit: int, byte_credit: int, deadline: float
    ) -> list[Delivery]:
        return await _pull.receive(self._c, subscription, item_credit, byte_credit, deadline)

    async def settle(
        self, token: DeliveryToken, outcome: SettleOutcome, settlement_id: str
    ) -> SettleAnswer:
        return await _settle.settle(self._c, token, outcome, settlement_id)

    async def renew(self, token: DeliveryToken) -> LeaseObservation:
        return await _settle.renew(self._c, token)

    # -- observation -------------------------------------------------------------------------
    async def observe_subscription(
        self, subscription: SubscriptionId
    ) -> Known[SubscriptionObservation] | Unknown:
        return await _observe.observe_subscription(self._c, subscription)

    async def observe_ack_floor(self, subscription: SubscriptionId) -> Known[int] | Unknown:
        return await _observe.observe_ack_floor(self._c, subscription)

    async def observe_channel(self, channel_id: ChannelId) -> Known[ChannelObservation] | Unknown:
        return await _observe.observe_channel(self._c, channel_id)

    # -- optional profiles -----------------------------------------------------------------------
    async def commit_control(
        self, channel_id: ChannelId, key: str, expected_version: str | None, value: bytes
    ) -> bool:
        if not self.durable_control:
            raise Unsupported("durable control is not offered", capability="durable_control")
        value = validate_control_write(key, expected_version, value)
        await _channels.chan(self._c, channel_id)
        nc = await self._c.conn()
        return await _profiles.commit(
            nc, self.names, channel_id, key, expected_version, value, self.request_timeout
        )

    async def control_state(
        self, channel_id: ChannelId, key: str
    ) -> tuple[bytes | None, str | None]:
        if not self.durable_control:
            raise Unsupported("durable control is not offered", capability="durable_control")
        await _channels.chan(self._c, channel_id)
        m, body = await _profiles.last(
            self._c.api,
            _profiles.ctl_stream(self.names, channel_id),
            _profiles.ctl_subject(self.names, channel_id, key),
        )
        return (None, None) if m is None else (body, str(m.seq))

    async def replay(self, channel_id: ChannelId, event_id: str) -> Envelope | None:
        """The archived envelope for ``event_id`` (works after ``close``); None once the server
        expired it (past the horizon) or it was never archived."""
        if not self.archive:
            raise Unsupported("archive is not offered", capability="archive")
        return await _profiles.replay(self._c.api, self.names, channel_id, event_id)

    async def capabilities(self) -> MessagingCapabilities:
        return MessagingCapabilities(
            backend="nats-jetstream",
            latest_per_key=self.latest_per_key,
            durable_control=self.durable_control,
            archive=self.archive,
            archive_horizon_seconds=self.archive_horizon_seconds if self.archive else 0.0,
            persistent=True,
            replication_factor=self.replication_factor,
            max_payload_bytes=self.max_payload,
            dedup_window_seconds=self.dedup_window_seconds,
            publication_ledger=True,
            stale_settle_detection=True,
            unresolved_ledger=True,
            # JetStream: every consumer matching a message holds it on an interest stream;
            # num_redelivered counts messages redelivered and not settled yet
            interest_required_only=False,
            cumulative_redelivered=False,
        )


__all__ = ["JetStreamMessagingBackend"]
