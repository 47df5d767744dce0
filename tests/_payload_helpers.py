"""Helpers shared by the payload tests."""

from __future__ import annotations

from videoflow_aio.contracts.payload import RetentionContract
from videoflow_aio.memory.payload import MemoryPayloadStore
from videoflow_aio.observe import ObservationLog


def contract(*obligations: str, ttl: float = 600.0, hold: float = 300.0) -> RetentionContract:
    return RetentionContract(ttl_seconds=ttl, obligations=obligations, obligation_seconds=hold)


def frame(n: int, size: int = 1024) -> bytes:
    return bytes((n * 31 + i) % 251 for i in range(size))


def store(**options: object) -> tuple[MemoryPayloadStore, ObservationLog]:
    log = ObservationLog()
    return MemoryPayloadStore(log=log, **options), log  # type: ignore[arg-type]


def kinds(log: ObservationLog, key: str) -> list[str]:
    return [e.kind for e in log.events(subject=key)]
