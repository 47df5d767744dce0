"""RuntimeStore implementations that need no server: an in-memory one for models, and a
file-directory one that survives a process restart on a single host (the local engine's
default), each with compare-and-swap semantics.

Both give versions ``"<n>-<tag>"`` (see :mod:`videoflow_aio.contracts.runtime_store`): in the
model ``n`` is a per-key write counter that survives delete, in the file store a number unique
in the whole store; either way a version is never reused for a key.

Fault barriers (see :mod:`videoflow_aio.faults`), reached only when armed:

``runtime_store.cas.read.after``
    a CAS has read the key's current version (context ``key``, ``expected_version``,
    ``seen_version``) and has not yet compared-and-written; the comparison that decides is
    made afterwards, against the record as it is then.
``runtime_store.delete.read.after``
    the same for ``delete``.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from typing import Any, TypeVar

import anyio.to_thread

from .. import faults
from ..contracts.errors import AccessDenied, BackendUnavailable, ValidationError
from ..contracts.runtime_store import (
    CAS_READ_AFTER,
    DELETE_READ_AFTER,
    RuntimeCapabilities,
    RuntimeStore,
    check_key,
    check_log,
    check_prefix,
    check_value,
    key_tag,
    make_version,
    version_number,
)
from ._file_store import Compaction, FileStoreCore

MAX_KEY_BYTES = 1024
"""The longest key or log name the models take, in UTF-8 bytes."""
MAX_VALUE_BYTES = 1 << 20
"""The largest value or log record the models take, in bytes."""


_T = TypeVar("_T")


def _expected_number(key: str, expected_version: str | None) -> int | None:
    return None if expected_version is None else version_number(key, expected_version)


class MemoryRuntimeStore(RuntimeStore):
    """The reference model: a dict of records, per-key write counters kept across delete,
    and lists as logs (numbers 1, 2, 3, …). Each operation is atomic and, unless a barrier is
    armed, completes without yielding to the event loop."""

    def __init__(self) -> None:
        self._records: dict[str, tuple[bytes, str]] = {}  # key -> (value, version)
        self._counters: dict[str, tuple[int, str]] = {}  # key -> (last n, tag), kept on delete
        self._logs: dict[str, list[bytes]] = {}

    async def get(self, key: str) -> tuple[bytes | None, str | None]:
        check_key(key, MAX_KEY_BYTES)
        rec = self._records.get(key)
        if rec is None:
            return None, None
        return rec

    def _check_version(self, key: str, version: str | None) -> None:
        if version is not None:
            counter = self._counters.get(key)
            version_number(key, version, None if counter is None else counter[1])

    async def cas(self, key: str, expected_version: str | None, value: bytes) -> bool:
        check_key(key, MAX_KEY_BYTES)
        check_value(value, MAX_VALUE_BYTES)
        rec = self._records.get(key)
        if rec is None or rec[1] != expected_version:
            self._check_version(key, expected_version)
        if faults.barriers().armed(CAS_READ_AFTER):
            await faults.reach(
                CAS_READ_AFTER,
                key=key,
                expected_version=expected_version,
                seen_version=None if rec is None else rec[1],
            )
            rec = self._records.get(key)
        if rec is None:
            if expected_version is not None:
                return False
        elif rec[1] != expected_version:
            return False
        counter = self._counters.get(key)
        if counter is None:
            n, tag = 1, key_tag(key)
        else:
            n, tag = counter[0] + 1, counter[1]
        self._counters[key] = (n, tag)
        self._records[key] = (value, make_version(tag, n))
        return True

    async def delete(self, key: str, expected_version: str | None) -> bool:
        check_key(key, MAX_KEY_BYTES)
        rec = self._records.get(key)
        if rec is None or rec[1] != expected_version:
            self._check_version(key, expected_version)
        if faults.barriers().armed(DELETE_READ_AFTER):
            await faults.reach(
                DELETE_READ_AFTER,
                key=key,
                expected_version=expected_version,
                seen_version=None if rec is None else rec[1],
            )
            rec = self._records.get(key)
        if rec is None or (expected_version is not None and rec[1] != expected_version):
            return False
        del self._records[key]
        return True

    async def scan(self, prefix: str) -> list[tuple[str, bytes, str]]:
        check_prefix(prefix)
        records = self._records
        return [(k, *records[k]) for k in sorted(k for k in records if k.startswith(prefix))]

    async def append(self, log: str, record: bytes) -> int:
        check_log(log, MAX_KEY_BYTES)
        check_value(record, MAX_VALUE_BYTES, "record")
        entries = self._logs.get(log)
        if entries is None:
            entries = self._logs[log] = []
        entries.append(record)
        return len(entries)

    async def log_entries(self, log: str) -> list[bytes]:
        check_log(log, MAX_KEY_BYTES)
        return list(self._logs.get(log, ()))

    async def capabilities(self) -> RuntimeCapabilities:
        return RuntimeCapabilities(
            store="memory",
            shared_across_processes=False,
            shared_across_hosts=False,
            durable=False,
            dense_log_numbers=True,
            max_key_bytes=MAX_KEY_BYTES,
            max_value_bytes=MAX_VALUE_BYTES,
        )


def _read_only(root: str, func: Callable[..., Any], exc: OSError) -> AccessDenied | None:
    """A write that failed because the file system became read-only (``EROFS``) after the
    store was opened: AccessDenied, as on a root opened read-only (nothing was written)."""
    if exc.errno != errno.EROFS:
        return None
    return AccessDenied(
        f"file store {root} is read-only ({os.strerror(exc.errno)}): "
        f"{func.__name__} refused, nothing changed",
        backend="file",
        operation=func.__name__,
        resource=root,
    )


class FileRuntimeStore(RuntimeStore):
    """One JSON file per live key under ``root`` (``kv/<key>.json``, slashes encoded), with an
    fcntl lock per key for compare-and-swap across the processes of one host. Durable across
    process restarts; not shared across hosts.

    Versions are ``"<n>-<tag>"`` with ``n`` unique in the whole store (drawn from blocks
    reserved in ``root/store.json``), so no version is ever handed out twice — not after a
    delete, nor after a record file or the ``kv/`` folder is lost. Every record carries a
    CRC32: damage is :class:`~videoflow_aio.contracts.runtime_store.CorruptRecord`, never a
    wrong value.

    Several instances (in one process or many) may open the same ``root``; every blocking
    file operation runs in an anyio worker thread. Opening (the first call) compacts the store
    unless ``compact_at_open=False``: orphan ``.tmp`` files, lock files of absent keys, torn
    log tails and empty logs left by crashed writers are removed; :meth:`compact` does the same
    on demand. The on-disk protocol is described in :mod:`videoflow_aio.memory._file_store`
    and ``docs/runtime-store.md``. OS errors surface as
    :class:`~videoflow_aio.contracts.errors.BackendUnavailable` (nothing changed) or
    :class:`~videoflow_aio.contracts.errors.OutcomeUnknown` (written, durability unknown).

    A root that may only be read (a read-only file system, no write permission) opens
    read-only: ``get``, ``scan`` and ``log_entries`` work, every write raises
    :class:`~videoflow_aio.contracts.errors.AccessDenied` and changes nothing.
    """

    def __init__(self, root: str | os.PathLike[str], *, compact_at_open: bool = True) -> None:
        self.root = os.fspath(root)
        if not self.root:
            raise ValidationError("root must name a directory, got ''", field="root", value=root)
        self._core = FileStoreCore(self.root, compact_at_open=compact_at_open)

    async def compact(self) -> Compaction:
        """Remove what crashed writers left behind (crash-safe; other writers may run)."""
        return await self._run(self._core.compact)

    async def _run(self, func: Callable[..., _T], *args: Any) -> _T:
        try:
            return await anyio.to_thread.run_sync(func, *args)
        except OSError as exc:
            raise _read_only(self.root, func, exc) or BackendUnavailable(
                f"file store {self.root}: {exc}", backend="file"
            ) from exc
        except BackendUnavailable as exc:
            cause = exc.__cause__
            if isinstance(exc, AccessDenied) or not isinstance(cause, OSError):
                raise
            raise _read_only(self.root, func, cause) or exc from cause

    async def get(self, key: str) -> tuple[bytes | None, str | None]:
        check_key(key, MAX_KEY_BYTES)
        value, n = await self._run(self._core.get, key)
        if n is None:
            return None, None
        return value, make_version(key_tag(key), n)

    async def cas(self, key: str, expected_version: str | None, value: bytes) -> bool:
        check_key(key, MAX_KEY_BYTES)
        check_value(value, MAX_VALUE_BYTES)
        expected = _expected_number(key, expected_version)
        if faults.barriers().armed(CAS_READ_AFTER):
            seen = await self._run(self._core.current, key)
            await faults.reach(
                CAS_READ_AFTER,
                key=key,
                expected_version=expected_version,
                seen_version=None if seen is None else make_version(key_tag(key), seen),
            )
        return await self._run(self._core.cas, key, expected, value) is not None

    async def delete(self, key: str, expected_version: str | None) -> bool:
        check_key(key, MAX_KEY_BYTES)
        expected = _expected_number(key, expected_version)
        if faults.barriers().armed(DELETE_READ_AFTER):
            seen = await self._run(self._core.current, key)
            await faults.reach(
                DELETE_READ_AFTER,
                key=key,
                expected_version=expected_version,
                seen_version=None if seen is None else make_version(key_tag(key), seen),
            )
        return await self._run(self._core.delete, key, expected)

    async def scan(self, prefix: str) -> list[tuple[str, bytes, str]]:
        check_prefix(prefix)
        found = await self._run(self._core.scan, prefix)
        return [(k, v, make_version(key_tag(k), n)) for k, v, n in found]

    async def append(self, log: str, record: bytes) -> int:
        check_log(log, MAX_KEY_BYTES)
        check_value(record, MAX_VALUE_BYTES, "record")
        return await self._run(self._core.append, log, record)

    async def log_entries(self, log: str) -> list[bytes]:
        check_log(log, MAX_KEY_BYTES)
        return await self._run(self._core.log_entries, log)

    async def capabilities(self) -> RuntimeCapabilities:
        return RuntimeCapabilities(
            store="file",
            shared_across_processes=True,
            shared_across_hosts=False,
            durable=True,
            dense_log_numbers=True,
            max_key_bytes=MAX_KEY_BYTES,
            max_value_bytes=MAX_VALUE_BYTES,
        )


__all__ = [
    "CAS_READ_AFTER",
    "DELETE_READ_AFTER",
    "MAX_KEY_BYTES",
    "MAX_VALUE_BYTES",
    "Compaction",
    "FileRuntimeStore",
    "MemoryRuntimeStore",
]
