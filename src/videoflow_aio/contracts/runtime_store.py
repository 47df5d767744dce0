"""The RuntimeStore contract: small versioned records with CAS, prefix scan, append-only logs."""

from __future__ import annotations

import abc

import msgspec


class RuntimeCapabilities(msgspec.Struct, frozen=True):
    """What a RuntimeStore guarantees.

    ``shared_across_processes``: CAS holds between processes on one host.
    ``shared_across_hosts``: CAS holds between hosts.
    ``durable``: records survive a process restart.
    ``dense_log_numbers``: ``append`` numbers are 1, 2, 3, … (otherwise only increasing).
    """

    store: str
    shared_across_processes: bool
    shared_across_hosts: bool
    durable: bool
    dense_log_numbers: bool
    max_key_bytes: int
    max_value_bytes: int


class RuntimeStore(abc.ABC):
    """Versioned records: every successful write gives the key a fresh opaque version string.

    Versions are never reused for a key, not even after delete and re-create.
    """

    @abc.abstractmethod
    async def get(self, key: str) -> tuple[bytes | None, str | None]:
        """``(value, version)``, or ``(None, None)`` when the key does not exist."""

    @abc.abstractmethod
    async def cas(self, key: str, expected_version: str | None, value: bytes) -> bool:
        """Write ``value`` if the key's version is ``expected_version`` (None: must not exist)."""

    @abc.abstractmethod
    async def delete(self, key: str, expected_version: str | None) -> bool:
        """Delete the key if its version is ``expected_version`` (None: unconditionally)."""

    @abc.abstractmethod
    async def scan(self, prefix: str) -> list[tuple[str, bytes, str]]:
        """Every ``(key, value, version)`` whose key starts with ``prefix``, in key order."""

    @abc.abstractmethod
    async def append(self, log: str, record: bytes) -> int:
        """Append ``record`` to ``log``; the returned number only grows within a log."""

    @abc.abstractmethod
    async def log_entries(self, log: str) -> list[bytes]:
        """Every record appended to ``log``, oldest first (empty for an unknown log)."""

    @abc.abstractmethod
    async def capabilities(self) -> RuntimeCapabilities:
        """What this store guarantees."""
