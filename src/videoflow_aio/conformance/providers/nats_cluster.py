"""The ``nats-cluster`` provider: the messaging cases on a 3-node JetStream cluster, every
channel replicated three times (R3), the adapter given all three URLs.

Without ``url=`` it starts a :class:`~videoflow_aio.testing.clusters.NatsCluster` on 127.0.0.1
(once, in ``setup``; ``sync_interval=`` sets JetStream's, the server's default otherwise) and
performs, beside the ``nats`` provider's controls, the member controls, ``channel_leader`` and
``subscription_leader``
(the member leading a channel's stream, from the servers' ``/jsz``). The controls that act on
"the server" act on every member: ``pause_acceptance`` stops them all. ``restart_server`` is
not offered: a whole cluster restarted keeps the definitions of its memory-stored streams
(empty), where a single server and the model forget them. The cluster is healed after every
case.
With ``url=`` (comma-separated) it uses that cluster, without the process controls.

Backends, namespaces and the other controls (``another_client``, ``purge``, …) are the
``nats`` provider's; cases run in real time with durations scaled by ``scale`` (0.05).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import anyio
import anyio.to_thread

from ...contracts.messaging import (
    ChannelId,
    PublishOutcome,
    SubscriptionId,
)
from ...testing.clusters import NatsCluster
from ...testing.replicated import replicated_class
from .._case import Case
from .._controls import offered_controls
from .._server_provider import MAIN, Startable
from ._cluster import FORM_TIMEOUT, MEMBER_CONTROLS, ClusterControls, ClusterProvider, heal
from .nats import SERVER_PROCESS_CONTROLS, NatsControls, NatsProvider

REPLICAS = 3
"""The replicas of every channel on the cluster."""

PURGED_WITHIN = 5.0
"""Seconds the purge control waits for the stream's consumers to apply a purge."""


async def _consumers_purged(admin: Any, channel_id: ChannelId) -> None:
    stream = admin.names.stream(channel_id)
    names = (await admin.request(f"CONSUMER.NAMES.{stream}")).get("consumers") or []
    with anyio.move_on_after(PURGED_WITHIN):
        for name in names:
            while True:
                info = await admin.request(f"CONSUMER.INFO.{stream}.{name}")
                if not info.get("num_ack_pending") and not info.get("num_pending"):
                    break
                await anyio.sleep(0.01)


class NatsClusterControls(NatsControls, ClusterControls):
    """The ``nats`` provider's controls, on every member where they act on "the server", and
    the member controls with ``channel_leader``."""

    def __init__(self, provider: NatsClusterProvider, backend: Any) -> None:
        NatsControls.__init__(self, provider, backend)
        ClusterControls.__init__(self, provider.cluster(MAIN))

    async def channel_leader(self, channel_id: ChannelId) -> str:
        cluster = self._ours()
        spec = cluster.options
        assert isinstance(spec, NatsCluster)
        stream = self._backend.names.stream(channel_id)
        with anyio.fail_after(30):
            while True:  # a stream just created, or whose leader died, elects one first
                leader = await anyio.to_thread.run_sync(spec.stream_leader, cluster, stream)
                if leader is not None:
                    return leader.name
                await anyio.sleep(0.1)

    async def subscription_leader(self, subscription: SubscriptionId) -> str:
        cluster = self._ours()
        spec = cluster.options
        assert isinstance(spec, NatsCluster)
        names = self._backend.names
        stream, consumer = names.stream(subscription.channel), names.consumer(subscription)
        with anyio.fail_after(30):
            while True:  # a consumer just created, or whose leader died, elects one first
                leader = await anyio.to_thread.run_sync(
                    spec.consumer_leader, cluster, stream, consumer
                )
                if leader is not None:
                    return leader.name
                await anyio.sleep(0.1)

    async def purge(self, channel_id: ChannelId) -> None:
        """Purge the channel's stream and return once every consumer of it has applied the
        purge. On a cluster each consumer is a raft group of its own: the purge request is
        answered when the stream's leader applied it, and reaches the consumers after that
        (an ack sent in between is applied by a consumer that still holds the message). An
        administrator's purge is complete once no consumer holds or owes a purged message."""
        await super().purge(channel_id)
        await self._as_admin(lambda admin: _consumers_purged(admin, channel_id))

    async def pause_acceptance(self, channel_id: ChannelId) -> None:
        """Stop every member: publications get no answer until resumed."""
        for m in self._ours().members:
            await anyio.to_thread.run_sync(m.pause)

    async def resume_acceptance(self, channel_id: ChannelId) -> list[PublishOutcome]:
        """Continue every member and wait until the cluster has formed again (the server
        does not report held outcomes: empty)."""
        cluster = self._ours()
        for m in cluster.members:
            await anyio.to_thread.run_sync(m.resume)
        await anyio.to_thread.run_sync(cluster.wait_formed, FORM_TIMEOUT)
        return []


class _CaseState(threading.local):
    """The ``nats`` provider's per-case bookkeeping, one per thread: with
    ``parallel_backends`` an asyncio case and a trio case run at once, each in its thread."""

    def __init__(self) -> None:
        self.case: Case | None = None
        self.made: dict[int, tuple[bool, dict[str, Any]]] = {}
        self.peers: list[Any] = []
        self.backends: list[Any] = []


class NatsClusterProvider(ClusterProvider, NatsProvider):
    """Runs the messaging cases on a 3-node JetStream cluster, channels R3; its asyncio and
    trio runs side by side (an R3 stream elects a raft leader when created: every case costs
    more here), a case that pauses or kills members alone."""

    name = "nats-cluster"
    extra = "nats"
    # creating an R3 stream elects its raft leader: on a loaded 2-core machine that took
    # over 1 s (MSG-001's ensure_channel got no reply in a parallel run)
    request_timeout_floor = 4.0
    # each URL gets this long in turn: a paused member accepts the TCP connection and never
    # answers, so the next member is tried only after it (nats-py's default, as users get)
    connect_timeout = 2.0
    parallel_backends = True
    exclusive_controls = MEMBER_CONTROLS | SERVER_PROCESS_CONTROLS

    def __init__(
        self, url: str | None = None, scale: float = 0.05, sync_interval: str | None = None
    ) -> None:
        self._state = _CaseState()
        NatsProvider.__init__(self, url, scale)
        self.sync_interval = sync_interval

    # the nats provider keeps these on the instance: per thread here
    _case = property(lambda self: self._state.case, lambda self, v: setattr(self._state, "case", v))
    _made = property(lambda self: self._state.made, lambda self, v: setattr(self._state, "made", v))
    _peers = property(
        lambda self: self._state.peers, lambda self, v: setattr(self._state, "peers", v)
    )
    case_backends = property(
        lambda self: self._state.backends, lambda self, v: setattr(self._state, "backends", v)
    )

    def server_options(self) -> Mapping[str, Startable]:
        return {MAIN: NatsCluster(sync_interval=self.sync_interval)}

    def controls(self, contract: str) -> frozenset[str] | None:
        # restart_server is not offered: a whole cluster restarted keeps the definitions of
        # its memory-stored streams (in the meta raft log; their messages are gone), where a
        # single server — and the model — forget them (MSG-062)
        offered = offered_controls(contract, NatsClusterControls) - {"restart_server"}
        if self.owns_clusters():
            return offered
        leaders = {"channel_leader", "subscription_leader"}
        return offered - SERVER_PROCESS_CONTROLS - MEMBER_CONTROLS - leaders

    def controls_for(self, backend: Any) -> NatsClusterControls:
        return NatsClusterControls(self, backend)

    def harness(self, case: Case) -> Any:
        return NatsProvider.harness(self, case)  # its case bookkeeping; _resume heals

    def _resume(self) -> None:
        """After every case (and at close): every member running, unpaused, formed."""
        for cluster in self.clusters():
            heal(cluster)

    def jetstream_class(self) -> Any:
        return replicated_class(REPLICAS)


__all__ = ["NatsClusterControls", "NatsClusterProvider"]
