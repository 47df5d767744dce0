"""Helpers for the RuntimeStore tests: open either store, snapshot a store's whole state."""

from __future__ import annotations

from pathlib import Path

from videoflow_aio.contracts.runtime_store import RuntimeStore
from videoflow_aio.memory.runtime_store import FileRuntimeStore, MemoryRuntimeStore

KINDS = ("memory", "file")


def open_store(kind: str, root: Path) -> RuntimeStore:
    if kind == "memory":
        return MemoryRuntimeStore()
    return FileRuntimeStore(str(root / "store"))


async def snapshot(store: RuntimeStore, logs: tuple[str, ...] = ()) -> tuple[object, ...]:
    """Every record and the named logs, comparable with ==."""
    return (await store.scan(""), *[await store.log_entries(log) for log in logs])
