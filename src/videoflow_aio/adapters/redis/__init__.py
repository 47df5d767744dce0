"""Redis adapters (redis-py asyncio client; asyncio only): RuntimeStore and PayloadStore."""

from __future__ import annotations

from .payload import RedisPayloadStore
from .runtime_store import RedisRuntimeStore

__all__ = ["RedisPayloadStore", "RedisRuntimeStore"]
