"""Redis adapters (redis-py asyncio client; trio through a trio-asyncio bridge): RuntimeStore and
PayloadStore, and :func:`acl_rules`, the least-privilege ACL they run under."""

from __future__ import annotations

from .._extras import explain
from ._acl import acl_commands, acl_rules

try:
    from ._client import ReplicationUnconfirmed
    from .payload import RedisPayloadStore
    from .runtime_store import RedisRuntimeStore
except ModuleNotFoundError as _exc:  # redis-py missing: name the extra that installs it
    explain("redis", _exc)
    raise

__all__ = [
    "RedisPayloadStore",
    "RedisRuntimeStore",
    "ReplicationUnconfirmed",
    "acl_commands",
    "acl_rules",
]
