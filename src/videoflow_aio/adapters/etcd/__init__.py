"""etcd adapter (aetcd's asyncio gRPC client; trio through a trio-asyncio bridge): RuntimeStore."""

from __future__ import annotations

from .._extras import explain

try:
    from .runtime_store import EtcdRuntimeStore
except ModuleNotFoundError as _exc:  # aetcd missing: name the extra that installs it
    explain("etcd", _exc)
    raise

__all__ = ["EtcdRuntimeStore"]
