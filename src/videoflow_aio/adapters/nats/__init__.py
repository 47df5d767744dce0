"""NATS adapters for the messaging contract (nats-py; trio through a trio-asyncio bridge).

* :class:`NatsConnection` — the server URL(s), credentials and TLS every class below takes
  (:class:`NatsAuthOptions`: the security keywords, defined once).
* :class:`JetStreamMessagingBackend` — channels as JetStream streams, subscriptions as durable
  pull consumers, with client-side ledgers where the server is silent (see ``docs/nats.md``).
* :class:`CoreNatsMessagingBackend` — the ``core_only`` profile on Core NATS: no retention,
  no leases, bounded client queues with slow-consumer drops reported.
* :class:`JetStreamAdmin` — an administrator's own connection: purge, delete a message or a
  subscription's consumer, read the server's raw state (out of band, as the ``nats`` CLI).
* :func:`jetstream_permissions` / :func:`core_permissions` — the least-privilege permissions
  a backend's user needs (``docs/security.md``).
"""

from __future__ import annotations

from .._extras import explain
from ._permissions import (
    core_permissions,
    jetstream_permissions,
    merge_permissions,
    permissions_config,
)

try:
    from ._wire import StreamInfo
    from .admin import JetStreamAdmin
    from .connection import NatsAuthOptions, NatsConnection
    from .core import CoreNatsMessagingBackend
    from .jetstream import JetStreamMessagingBackend
except ModuleNotFoundError as _exc:  # nats-py missing: name the extra that installs it
    explain("nats", _exc)
    raise

__all__ = [
    "CoreNatsMessagingBackend",
    "JetStreamAdmin",
    "JetStreamMessagingBackend",
    "NatsAuthOptions",
    "NatsConnection",
    "StreamInfo",
    "core_permissions",
    "jetstream_permissions",
    "merge_permissions",
    "permissions_config",
]
