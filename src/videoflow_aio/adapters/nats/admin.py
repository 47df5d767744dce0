"""``JetStreamAdmin``: what an operator does to a backend's streams out of band.

A separate connection acting as an administrator would with the ``nats`` CLI or a raw client:
purge a channel, delete one message, delete a subscription's consumer, list and drop a
namespace's streams, read raw stream and consumer state. The conformance provider uses it for
the administrator controls and for clean-up; tests use it to check what the server itself
says. Nothing here goes through a backend's ledgers: that is the point.

From trio it runs on the run's trio-asyncio loop like the backends (``_trio_bridge.bridged``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Unpack

from ...contracts.messaging import ChannelId, SubscriptionId
from .._trio_bridge import Affinity, bridged
from . import _api, _channels
from ._connection import on_asyncio_side
from ._names import Names
from ._wire import Purged, R, Reply
from .connection import NatsAuthOptions, NatsConnection


@bridged
class JetStreamAdmin:
    """An administrator's own client of the server at ``url`` (a
    :class:`~videoflow_aio.adapters.nats.NatsConnection` — a backend's ``connection`` — or URLs
    and the security keywords that make one), for the namespace ``stream_prefix`` /
    ``subject_prefix`` of the backends it acts on."""

    def __init__(
        self,
        url: str | Sequence[str] | NatsConnection,
        *,
        stream_prefix: str = "VF",
        subject_prefix: str = "vf",
        request_timeout: float = 5.0,
        **auth: Unpack[NatsAuthOptions],
    ) -> None:
        self.connection = NatsConnection.of(url, **auth)
        self.servers = self.connection.servers
        self.names = Names(stream_prefix, subject_prefix)
        self.request_timeout = request_timeout
        self._nc: Any = None
        self._side = Affinity()

    async def _conn(self) -> Any:
        on_asyncio_side()
        if self._nc is None or self._nc.is_closed:
            opts = {"allow_reconnect": True, "max_reconnect_attempts": -1}
            timeout = min(self.request_timeout, self.connection.connect_timeout)
            self._nc = await self.connection.connect(opts, timeout)
        return self._nc

    async def _api(self, subject: str, body: dict[str, Any] | None, into: type[R]) -> R:
        nc = await self._conn()
        return await _api.api(nc, f"$JS.API.{subject}", body, self.request_timeout, into)

    async def request(self, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """A raw JetStream API call (``$JS.API.<subject>``), the server's JSON as it is (for
        an administrator; the adapter reads typed replies); :class:`ApiError` on an error."""
        nc = await self._conn()
        return await _api.raw_api(nc, f"$JS.API.{subject}", body, self.request_timeout)

    async def purge(self, channel: ChannelId) -> int:
        """Purge the channel's messages (no advisory reaches any consumer); how many."""
        reply = await self._api(f"STREAM.PURGE.{self.names.stream(channel)}", {}, Purged)
        return reply.purged

    async def delete_message(self, channel: ChannelId, sequence: int) -> bool:
        """Delete one message of the channel by stream sequence; False when it was absent."""
        try:
            stream = self.names.stream(channel)
            await self._api(f"STREAM.MSG.DELETE.{stream}", {"seq": sequence}, Reply)
        except _api.ApiError as exc:
            if exc.err_code in (_api.NO_MESSAGE_FOUND, 10057):
                return False
            raise
        return True

    async def delete_subscription(self, subscription: SubscriptionId) -> bool:
        """Delete the subscription's consumer (on the slot or dead-letter stream)."""
        consumer = self.names.consumer(subscription)
        ch = subscription.channel
        for stream in (self.names.stream(ch), self.names.dlq_stream(ch)):
            try:
                await self._api(f"CONSUMER.DELETE.{stream}.{consumer}", None, Reply)
                return True
            except _api.ApiError as exc:
                if exc.err_code not in (_api.CONSUMER_NOT_FOUND, _api.STREAM_NOT_FOUND):
                    raise
        return False

    async def consumer_info(self, subscription: SubscriptionId) -> dict[str, Any]:
        """The server's raw consumer info of the subscription (slot stream)."""
        stream = self.names.stream(subscription.channel)
        return await self.request(f"CONSUMER.INFO.{stream}.{self.names.consumer(subscription)}")

    async def stream_info(self, channel: ChannelId) -> dict[str, Any]:
        """The server's raw stream info of the channel's slot stream."""
        return await self.request(f"STREAM.INFO.{self.names.stream(channel)}")

    async def drop_namespace(self) -> int:
        """Delete every stream of this namespace (archives included); how many."""
        return await _channels.drop_namespace(self._api, self.names.stream_prefix)

    async def aclose(self) -> None:
        nc, self._nc = self._nc, None
        if nc is not None and not nc.is_closed:
            await nc.close()


__all__ = ["JetStreamAdmin"]
