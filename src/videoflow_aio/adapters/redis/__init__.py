"""Redis adapters (redis-py asyncio client; trio through a trio-asyncio bridge): RuntimeStore and
PayloadStore, and :func:`acl_rules`, the least-privilege ACL they run under."""

from __future__ import annotations

from ._acl import acl_commands, acl_rules
from .payload import RedisPayloadStore
from .runtime_store import RedisRuntimeStore

__all__ = ["RedisPayloadStore", "RedisRuntimeStore", "acl_commands", "acl_rules"]
