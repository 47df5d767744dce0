"""Controls a conformance harness can really perform on a Redis payload store.

Each acts on the server behind the store's back, with raw commands, as an operator, a crash or
an eviction would: corrupt or truncate an object's bytes, delete an object, drop one obligation
or a whole obligation set, store bare bytes without metadata. Model-only controls
(``fail_reads``, ``fail_inventory``) are not offered: a real server cannot be told to fail the
next read, so cases using them are skipped with that reason. The conformance ``redis``
provider offers exactly the ``PayloadControls`` this class implements.
"""

from __future__ import annotations

import anyio

from .._trio_bridge import bridged
from ._client import glob_escape
from .payload import RedisPayloadStore


@bridged
class RedisPayloadControls:
    """The real controls for one :class:`RedisPayloadStore`."""

    def __init__(self, store: RedisPayloadStore) -> None:
        self.store = store
        self.r = store.client
        self._side = store._side  # the store's client: the same loop under trio

    async def corrupt(self, key: str) -> None:
        """Flip the first byte of the object (same length, different digest)."""
        o = self.store.obj_key(key)
        first = await self.r.getrange(o, 0, 0)
        if first:
            await self.r.setrange(o, 0, bytes([first[0] ^ 0xFF]))

    async def truncate(self, key: str, size: int) -> None:
        """Cut the object's bytes to ``size``; the metadata still names the original."""
        o = self.store.obj_key(key)
        data = await self.r.get(o)
        if data is not None:
            await self.r.set(o, bytes(data)[:size], keepttl=True)

    async def delete(self, key: str) -> None:
        """Delete the object and its metadata (not the obligation set, not the ledger)."""
        await self.r.delete(self.store.obj_key(key), self.store.meta_key(key))

    async def expire_obligation(self, key: str, obligation_id: str) -> None:
        """One obligation record vanishes (an emptied set no longer exists, as on the server)."""
        await self.r.zrem(self.store.set_key(key), obligation_id)

    async def expire_obligation_set(self, key: str) -> None:
        """The whole obligation set vanishes while the bytes remain (PAY-008)."""
        await self.r.delete(self.store.set_key(key))

    async def put_bare(self, key: str, data: bytes) -> None:
        """Bytes without metadata, as an RFC 0002 publisher writes them (one hour TTL)."""
        await self.r.set(self.store.obj_key(key), data, px=3_600_000)

    async def obligations(self, key: str) -> dict[str, float]:
        """Live obligation id → deadline, converted to the running loop's clock."""
        now = anyio.current_time()
        sec, usec = await self.r.time()
        server_ms = sec * 1000 + usec / 1000
        rows = await self.r.zrangebyscore(
            self.store.set_key(key), f"({server_ms}", "+inf", withscores=True
        )
        return {
            (m.decode() if isinstance(m, bytes) else str(m)): now + (score - server_ms) / 1000
            for m, score in rows
        }

    async def object_count(self) -> int:
        n = 0
        async for _ in self.r.scan_iter(match=f"{glob_escape(self.store.ns)}:o:*", count=1000):
            n += 1
        return n

    async def stored_bytes(self) -> int:
        return await self.store.stored_bytes()
