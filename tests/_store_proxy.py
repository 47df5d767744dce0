"""A loopback TCP proxy that can hold traffic, to cut replies (or requests) of real servers.

``hold("down")`` stops forwarding server → client bytes (replies) on the connections open now
(``existing_only=True``) or on every connection, new ones included; ``hold("up")`` does the
same for client → server bytes (requests). Held bytes are buffered and delivered, in order,
on ``release()``. asyncio only (the adapters under test are asyncio-only).
"""

from __future__ import annotations

import asyncio
import contextlib


class _Conn:
    def __init__(self) -> None:
        self.gates = {"up": asyncio.Event(), "down": asyncio.Event()}
        for g in self.gates.values():
            g.set()
        self.tasks: list[asyncio.Task[None]] = []


class HoldingProxy:
    """Forward 127.0.0.1:<port> to 127.0.0.1:<target_port>, with gates per direction."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self.conns: list[_Conn] = []
        self._hold_new: set[str] = set()
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> HoldingProxy:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()
        assert self._server is not None
        self._server.close()
        for c in self.conns:
            for t in c.tasks:
                t.cancel()
        for c in self.conns:
            for t in c.tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await t

    def hold(self, direction: str, *, existing_only: bool = True) -> None:
        for c in self.conns:
            c.gates[direction].clear()
        if not existing_only:
            self._hold_new.add(direction)

    def release(self) -> None:
        self._hold_new.clear()
        for c in self.conns:
            for g in c.gates.values():
                g.set()

    def release_later(self, delay: float) -> None:
        asyncio.get_running_loop().call_later(delay, self.release)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_r, up_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        conn = _Conn()
        for d in self._hold_new:
            conn.gates[d].clear()
        self.conns.append(conn)
        conn.tasks = [
            asyncio.ensure_future(self._pump(reader, up_w, conn.gates["up"])),
            asyncio.ensure_future(self._pump(up_r, writer, conn.gates["down"])),
        ]

    @staticmethod
    async def _pump(
        src: asyncio.StreamReader, dst: asyncio.StreamWriter, gate: asyncio.Event
    ) -> None:
        try:
            while True:
                data = await src.read(65536)
                await gate.wait()
                if not data:
                    break
                dst.write(data)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                dst.close()
