"""etcd adapter (aetcd's asyncio gRPC stubs; trio through a trio-asyncio bridge): RuntimeStore,
and the authentication set-up through the client API (:func:`enable_auth`,
:func:`grant_prefix`: a user whose role is limited to one store namespace)."""

from __future__ import annotations

from ._admin import enable_auth, grant_prefix, prefix_range, revoke_prefix
from .runtime_store import EtcdRuntimeStore

__all__ = ["EtcdRuntimeStore", "enable_auth", "grant_prefix", "prefix_range", "revoke_prefix"]
