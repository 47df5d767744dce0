"""etcd adapter (aetcd's asyncio gRPC client; trio through a trio-asyncio bridge): RuntimeStore."""

from __future__ import annotations

from .runtime_store import EtcdRuntimeStore

__all__ = ["EtcdRuntimeStore"]
