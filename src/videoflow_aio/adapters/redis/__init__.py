"""Redis adapters (redis-py asyncio client; trio through a trio-asyncio bridge): RuntimeStore and
PayloadStore on a :class:`RedisConnection` (the URL, credentials, TLS and connection keywords —
:class:`RedisOptions` — defined once), :class:`RedisPayloadControls` (what a test harness can
really do to a payload store's server behind its back), and :func:`acl_rules`, the
least-privilege ACL they run under."""

from __future__ import annotations

from .._extras import explain
from ._acl import acl_commands, acl_rules

try:
    from ._client import ReplicationUnconfirmed
    from ._payload_controls import RedisPayloadControls
    from .connection import RedisConnection, RedisOptions
    from .payload import RedisPayloadStore
    from .runtime_store import RedisRuntimeStore
except ModuleNotFoundError as _exc:  # redis-py missing: name the extra that installs it
    explain("redis", _exc)
    raise

__all__ = [
    "RedisConnection",
    "RedisOptions",
    "RedisPayloadControls",
    "RedisPayloadStore",
    "RedisRuntimeStore",
    "ReplicationUnconfirmed",
    "acl_commands",
    "acl_rules",
]
