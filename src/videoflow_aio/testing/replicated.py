"""A JetStream backend for a NATS cluster whose every channel is replicated: each stream gets at
least ``replicas`` copies, and ``ensure_channel`` returns once the stream's raft leader is
elected (a publish right after it finds a responder).

Used by the ``nats-cluster`` conformance provider, the NATS cluster soak and the cluster tests;
start the cluster with :class:`~videoflow_aio.testing.clusters.NatsCluster`. Needs the
``nats`` extra.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import msgspec

from ..contracts.messaging import ChannelSpec, VerifiedChannel

LEADER_WITHIN = 5.0
"""Seconds ensure_channel waits for a new stream's raft leader."""


def replicated_class(replicas: int) -> Any:
    """A JetStream backend class whose every channel gets at least ``replicas`` replicas (the
    effective spec it reports says so); given a comma-separated URL or a list, and
    ``replication_factor=replicas`` unless told otherwise."""
    from ..adapters import bridged
    from ..adapters.nats import JetStreamMessagingBackend, StreamInfo

    def leader_of(info: StreamInfo | None) -> str:
        return "" if info is None or info.cluster is None else info.cluster.leader

    @bridged  # its ensure_channel reads the stream on the client's loop, as the base's does
    class Replicated(JetStreamMessagingBackend):  # type: ignore[misc]
        def __init__(self, url: str | Sequence[str], **options: Any) -> None:
            options.setdefault("replication_factor", replicas)
            super().__init__(url, **options)

        async def ensure_channel(self, spec: ChannelSpec, operation_id: str) -> VerifiedChannel:
            if isinstance(spec, ChannelSpec) and spec.replicas < replicas:
                spec = msgspec.structs.replace(spec, replicas=replicas)
            result: VerifiedChannel = await super().ensure_channel(spec, operation_id)
            # a new R3 stream elects its raft leader after the create is answered; until
            # then a publish finds no responder: return once the channel can take one
            stream = self.names.stream(result.effective.channel)
            with anyio.move_on_after(LEADER_WITHIN):
                while not leader_of(await self._c.stream_info(stream)):  # noqa: ASYNC110
                    await anyio.sleep(0.02)
            return result

    return Replicated


def replicated_backend(urls: Sequence[str], replicas: int, **options: Any) -> Any:
    """A :func:`replicated_class` backend on ``urls``."""
    return replicated_class(replicas)(list(urls), **options)


__all__ = ["LEADER_WITHIN", "replicated_backend", "replicated_class"]
