"""The ``nats-cluster`` provider: the messaging cases on a 3-node JetStream cluster, every
channel replicated three times (R3), the adapter given all three URLs.

Without ``url=`` it starts a :class:`~videoflow_aio.testing.clusters.NatsCluster` on 127.0.0.1
(once, in ``setup``; ``sync_interval: always``, so an acknowledged publish is on disk on the
members that stored it) and performs the member controls on it, plus ``channel_leader`` (the
member leading a channel's stream, from the servers' ``/jsz``); the cluster is healed after
every case. With ``url=`` (comma-separated) it uses that cluster, without member controls.

Every ``h.open()`` gets its own stream and subject prefix; its streams are deleted when the
case ends (on a connection of the provider's own, in a worker thread). ``h.open(core_only=True)``
gives a :class:`~videoflow_aio.adapters.nats.CoreNatsMessagingBackend` on the cluster. Cases
run in real time with durations scaled by ``scale`` (0.05, as the ``nats`` provider).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import anyio.to_thread
import msgspec

from ...contracts.messaging import ChannelId, ChannelSpec, MessagingCapabilities, VerifiedChannel
from ...testing.clusters import NatsCluster
from .._capabilities import CapabilityStruct
from .._case import Case
from .._harness import Skip
from .._provider import register_provider
from .._server_provider import MAIN, Startable
from ._cluster import ClusterControls, ClusterProvider
from .nats import _CORE_OPTIONS, _JS_OPTIONS

REPLICAS = 3
_count = itertools.count(1)


def replicated_backend(urls: list[str], replicas: int, **options: Any) -> Any:
    """A JetStream backend whose every channel gets at least ``replicas`` replicas (the
    effective spec it reports says so)."""
    from ...adapters.nats import JetStreamMessagingBackend

    class Replicated(JetStreamMessagingBackend):  # type: ignore[misc]
        async def ensure_channel(self, spec: ChannelSpec, operation_id: str) -> VerifiedChannel:
            if isinstance(spec, ChannelSpec) and spec.replicas < replicas:
                spec = msgspec.structs.replace(spec, replicas=replicas)
            result: VerifiedChannel = await super().ensure_channel(spec, operation_id)
            return result

    return Replicated(urls, replication_factor=replicas, **options)


class NatsClusterControls(ClusterControls):
    """Member controls, and the leader of one channel's stream."""

    def __init__(self, cluster: Any, backend: Any) -> None:
        super().__init__(cluster)
        self._backend = backend

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


class NatsClusterProvider(ClusterProvider):
    """Runs the messaging cases on a 3-node JetStream cluster, channels R3."""

    name = "nats-cluster"
    client_modules = ("nats",)
    extra = "nats"

    def __init__(
        self, url: str | None = None, scale: float = 0.05, sync_interval: str | None = None
    ) -> None:
        super().__init__(urls={MAIN: url}, scale=scale)
        self.sync_interval = sync_interval
        self._namespaces: dict[int, str] = {}  # id(backend) -> its stream prefix

    def contracts(self) -> frozenset[str]:
        return frozenset({"messaging"})

    def server_options(self) -> Mapping[str, Startable]:
        return {MAIN: NatsCluster(sync_interval=self.sync_interval)}

    def offered(self, contract: str) -> Sequence[CapabilityStruct]:
        return [
            MessagingCapabilities(
                backend="nats-jetstream", latest_per_key=True, durable_control=True, archive=True
            ),
            MessagingCapabilities(backend="nats-core", core_only=True),
        ]

    def controls(self, contract: str) -> frozenset[str] | None:
        members = self.member_controls()
        return members | {"channel_leader"} if members else members

    def controls_for(self, backend: Any) -> NatsClusterControls:
        return NatsClusterControls(self.cluster(MAIN), backend)

    def namespace_for(self, case: Case) -> str:
        return f"K{case.id.replace('-', '')}x{next(_count)}x{uuid.uuid4().hex[:6]}"

    async def open_backend(self, case: Case, namespace: str, options: dict[str, Any]) -> Any:
        from ...adapters.nats import CoreNatsMessagingBackend

        core = bool(options.pop("core_only", False))
        allowed = _CORE_OPTIONS if core else _JS_OPTIONS
        extra = sorted(k for k in options if k not in allowed)
        if extra:
            raise Skip(f"the nats-cluster provider cannot honour {extra} (model-only options)")
        urls = self.url().split(",")
        backend: Any
        if core:
            backend = CoreNatsMessagingBackend(urls, subject_prefix=namespace.lower(), **options)
        else:
            backend = replicated_backend(
                urls,
                REPLICAS,
                stream_prefix=namespace,
                subject_prefix=namespace.lower(),
                request_timeout=max(1.0, 20 * self.scale),
                **options,
            )
        self._namespaces[id(backend)] = namespace
        with contextlib.suppress(AttributeError):  # a read-only property where the adapter has one
            backend.namespace = namespace
        return backend

    async def discard(self, backend: Any) -> None:
        """Close the backend, then delete the namespace's streams on a connection of the
        provider's own (a plain asyncio loop in a worker thread: under asyncio and trio)."""
        with contextlib.suppress(Exception):
            await backend.aclose()
        urls, prefix = self.url().split(","), self._namespaces.pop(id(backend), None)
        if prefix is None:
            return
        with contextlib.suppress(Exception):
            await anyio.to_thread.run_sync(_drop_streams, urls, prefix)


def _drop_streams(urls: list[str], prefix: str) -> None:
    async def drop() -> None:
        import nats

        nc = await nats.connect(servers=urls, connect_timeout=2, max_reconnect_attempts=2)
        try:
            js = nc.jetstream()
            for name in await js.streams_info():
                if name.config.name and name.config.name.startswith(prefix):
                    with contextlib.suppress(Exception):
                        await js.delete_stream(name.config.name)
        finally:
            await nc.close()

    with asyncio.Runner(loop_factory=asyncio.SelectorEventLoop) as runner:
        runner.run(drop())


register_provider("nats-cluster", NatsClusterProvider)
