"""Redis adapters (redis-py asyncio client; trio through a trio-asyncio bridge): RuntimeStore and
PayloadStore."""

from __future__ import annotations

from ._client import ReplicationUnconfirmed
from .payload import RedisPayloadStore
from .runtime_store import RedisRuntimeStore

__all__ = ["RedisPayloadStore", "RedisRuntimeStore", "ReplicationUnconfirmed"]
