"""A loopback TCP forwarder whose link can be cut: bytes sent after :meth:`Link.cut` are
discarded, as a network partition loses them (the connections stay open, so neither side
notices at once). anyio, so it runs under asyncio and trio."""

from __future__ import annotations

import contextlib
from types import TracebackType

import anyio
import anyio.abc
from anyio.abc import SocketAttribute

from .servers import HOST


class Link:
    """``async with Link(target_port) as link``: forwards ``HOST:link.port`` to
    ``HOST:target_port`` until the block ends; ``link.cut()`` drops everything from then on."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self.is_cut = False
        self.dropped = 0  # bytes discarded since the cut
        self._tg: anyio.abc.TaskGroup | None = None
        self._listener: anyio.abc.Listener[anyio.abc.SocketStream] | None = None

    def cut(self) -> None:
        """From now on, deliver nothing in either direction."""
        self.is_cut = True

    async def __aenter__(self) -> Link:
        self._listener = await anyio.create_tcp_listener(local_host=HOST, local_port=0)
        self.port = int(self._listener.extra(SocketAttribute.local_port))
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        self._tg.start_soon(self._listener.serve, self._handle)
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._tg is not None and self._listener is not None
        self._tg.cancel_scope.cancel()
        try:
            await self._tg.__aexit__(et, ev, tb)
        finally:
            await self._listener.aclose()

    async def _handle(self, client: anyio.abc.SocketStream) -> None:
        server = await anyio.connect_tcp(HOST, self.target_port)
        async with client, server, anyio.create_task_group() as tg:
            tg.start_soon(self._pump, client, server)
            tg.start_soon(self._pump, server, client)

    async def _pump(self, src: anyio.abc.SocketStream, dst: anyio.abc.SocketStream) -> None:
        with contextlib.suppress(anyio.EndOfStream, anyio.BrokenResourceError, OSError):
            async for chunk in src:
                if self.is_cut:
                    self.dropped += len(chunk)
                else:
                    await dst.send(chunk)
