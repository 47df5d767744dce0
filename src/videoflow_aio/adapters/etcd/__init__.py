"""etcd adapter (aetcd's asyncio gRPC client; asyncio only): RuntimeStore."""

from __future__ import annotations

from .runtime_store import EtcdRuntimeStore

__all__ = ["EtcdRuntimeStore"]
