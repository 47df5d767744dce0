"""etcd adapter (aetcd's asyncio gRPC stubs; trio through a trio-asyncio bridge): RuntimeStore on
an :class:`EtcdConnection` (endpoints, credentials, TLS: :class:`EtcdOptions`, defined once),
and the authentication set-up through the client API (:func:`enable_auth`,
:func:`grant_prefix`: a user whose role is limited to one store namespace)."""

from __future__ import annotations

from .._extras import explain

try:
    from ._admin import enable_auth, grant_prefix, prefix_range, revoke_prefix
    from .connection import EtcdConnection, EtcdOptions
    from .runtime_store import EtcdRuntimeStore
except ModuleNotFoundError as _exc:  # aetcd missing: name the extra that installs it
    explain("etcd", _exc)
    raise

__all__ = [
    "EtcdConnection",
    "EtcdOptions",
    "EtcdRuntimeStore",
    "enable_auth",
    "grant_prefix",
    "prefix_range",
    "revoke_prefix",
]
