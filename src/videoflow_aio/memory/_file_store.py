"""The blocking core of :class:`~videoflow_aio.memory.runtime_store.FileRuntimeStore`.

Every method here does file I/O and is meant to run in a worker thread. Layout under root::

    kv/<name>.json     one record per key: {"key": ..., "n": <write counter>, "value": b64|null}
    kv/<name>.tmp      the next version being written (at most one per key; orphans ignored)
    locks/<name>.lock  flock'ed around every write of a key; never renamed or deleted
    logs/<name>.log    one line per record: "<crc32 hex> <base64>\\n"; flock'ed on itself

``<name>`` is the key's UTF-8 bytes with every byte outside ``[a-z0-9_-]`` written as ``%xx``
(lower-case hex), so the encoding is injective, never contains ``/`` or a dot, and is safe on
case-insensitive file systems. Names whose encoding would exceed 200 characters are
``=<sha256 hex>`` instead (``=`` never appears in an encoded name); the record inside still
holds the whole key, and scan reads it from there.

Writes: flock the key's lock file (a fresh ``open`` per operation, so two threads of one
process exclude each other too — unlike ``lockf``), read the record, compare, write
``<name>.tmp``, fsync it, ``os.replace`` it over ``<name>.json``, fsync the directory, unlock.
A reader (no lock) sees the old or the new file, never a torn one. Delete writes a tombstone
(``value: null``) that keeps the counter, so a re-created key continues from it.
"""

from __future__ import annotations

import binascii
import fcntl
import hashlib
import os
import zlib
from urllib.parse import unquote_to_bytes

import msgspec

from ..contracts.errors import BackendUnavailable, OutcomeUnknown
from ..contracts.runtime_store import CorruptRecord

MAX_NAME = 200  # NAME_MAX (255) minus room for the suffixes
_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789_-")
_TABLE = [chr(b) if b in _SAFE else f"%{b:02x}" for b in range(256)]
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_DIR = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _O_CLOEXEC


class Record(msgspec.Struct, frozen=True):
    """One key's file: the whole key, its write counter, and its value (None: deleted)."""

    key: str
    n: int
    value: bytes | None


_encode_record = msgspec.json.Encoder().encode
_decode_record = msgspec.json.Decoder(Record).decode


def escape(text: str) -> str:
    """The injective file-name encoding of ``text`` (no length limit, no hashing)."""
    return "".join([_TABLE[b] for b in text.encode("utf-8")])


def file_name(key: str) -> str:
    """The file stem for ``key``: :func:`escape`, or ``=<sha256>`` when that is too long."""
    name = escape(key)
    if len(name) > MAX_NAME:
        return "=" + hashlib.sha256(key.encode("utf-8")).hexdigest()
    return name


def unescape(name: str) -> str:
    """Inverse of :func:`escape`."""
    return unquote_to_bytes(name).decode("utf-8")


def encode_line(record: bytes) -> bytes:
    return b"%08x " % zlib.crc32(record) + binascii.b2a_base64(record)


def decode_line(line: bytes, where: str) -> bytes:
    try:
        crc = int(line[:8], 16)
        if line[8:9] != b" ":
            raise ValueError("no separator")
        record = binascii.a2b_base64(line[9:])
    except (ValueError, binascii.Error) as exc:
        raise CorruptRecord(f"undecodable log line in {where}: {exc}", resource=where) from None
    if zlib.crc32(record) != crc:
        raise CorruptRecord(f"log line with a bad checksum in {where}", resource=where)
    return record


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _fsync_dir(path: str) -> None:
    fd = os.open(path, _O_DIR)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FileStoreCore:
    """Blocking operations on one store directory. Thread-safe; process-safe on one host."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.kv = os.path.join(root, "kv")
        self.locks = os.path.join(root, "locks")
        self.logs = os.path.join(root, "logs")
        self._ready = False
        # log path -> (inode, offset after the last complete line counted, lines counted)
        self._log_marks: dict[str, tuple[int, int, int]] = {}

    # -- setup -----------------------------------------------------------------------------
    def _ensure(self) -> None:
        if self._ready:
            return
        created = False
        for path in (self.root, self.kv, self.locks, self.logs):
            if not os.path.isdir(path):
                os.makedirs(path, exist_ok=True)
                created = True
        if created:
            _fsync_dir(self.root)
            _fsync_dir(os.path.dirname(os.path.abspath(self.root)))
        self._ready = True

    def _lock(self, name: str) -> int:
        fd = os.open(
            os.path.join(self.locks, name + ".lock"), os.O_RDWR | os.O_CREAT | _O_CLOEXEC, 0o644
        )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        return fd

    # -- records ---------------------------------------------------------------------------
    def _read(self, path: str, key: str | None) -> Record | None:
        try:
            with open(path, "rb", buffering=0) as f:
                data = f.readall()
        except FileNotFoundError:
            return None
        try:
            rec = _decode_record(data)
        except msgspec.DecodeError as exc:
            raise CorruptRecord(f"undecodable record file {path}: {exc}", resource=path) from None
        if key is not None and rec.key != key:
            raise CorruptRecord(
                f"record file {path} holds key {rec.key!r}, not {key!r}", resource=path
            )
        return rec

    def _write(self, name: str, path: str, rec: Record, operation: str) -> None:
        tmp = os.path.join(self.kv, name + ".tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _O_CLOEXEC, 0o644)
            try:
                _write_all(fd, _encode_record(rec))
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except OSError as exc:  # nothing visible changed
            raise BackendUnavailable(
                f"file store {self.root}: {operation} failed before commit: {exc}", backend="file"
            ) from exc
        try:
            _fsync_dir(self.kv)
        except OSError as exc:  # the new record is visible but may not survive a power cut
            raise OutcomeUnknown(
                f"file store {self.root}: {operation} written but not made durable: {exc}",
                operation=operation,
            ) from exc

    def get(self, key: str) -> tuple[bytes | None, int | None]:
        """``(value, n)`` of the live record, or ``(None, None)``."""
        self._ensure()
        rec = self._read(os.path.join(self.kv, file_name(key) + ".json"), key)
        if rec is None or rec.value is None:
            return None, None
        return rec.value, rec.n

    def current(self, key: str) -> int | None:
        """The live record's counter, or None (no lock: for barrier context only)."""
        return self.get(key)[1]

    def cas(self, key: str, expected: int | None, value: bytes) -> int | None:
        """Write ``value`` if the live counter is ``expected`` (None: no live record).
        Returns the new counter, or None when the comparison failed."""
        self._ensure()
        name = file_name(key)
        path = os.path.join(self.kv, name + ".json")
        lock = self._lock(name)
        try:
            rec = self._read(path, key)
            live = None if rec is None or rec.value is None else rec.n
            if live != expected:
                return None
            n = (0 if rec is None else rec.n) + 1
            self._write(name, path, Record(key, n, value), "cas")
            return n
        finally:
            os.close(lock)  # closing the only descriptor releases the flock

    def delete(self, key: str, expected: int | None) -> bool:
        """Tombstone the live record if its counter is ``expected`` (None: any)."""
        self._ensure()
        name = file_name(key)
        path = os.path.join(self.kv, name + ".json")
        lock = self._lock(name)
        try:
            rec = self._read(path, key)
            if rec is None or rec.value is None:
                return False
            if expected is not None and rec.n != expected:
                return False
            self._write(name, path, Record(key, rec.n, None), "delete")
            return True
        finally:
            os.close(lock)

    def scan(self, prefix: str) -> list[tuple[str, bytes, int]]:
        """Live ``(key, value, n)`` with ``key.startswith(prefix)``, in key order."""
        self._ensure()
        stem_prefix = escape(prefix)
        found: list[tuple[str, bytes, int]] = []
        with os.scandir(self.kv) as entries:
            names = [e.name for e in entries if e.name.endswith(".json")]
        for fname in names:
            stem = fname[:-5]
            if not (stem.startswith("=") or stem.startswith(stem_prefix)):
                continue
            rec = self._read(os.path.join(self.kv, fname), None)
            if rec is None or rec.value is None or not rec.key.startswith(prefix):
                continue
            if file_name(rec.key) != stem:
                raise CorruptRecord(
                    f"record file {fname} holds key {rec.key!r} of another file",
                    resource=os.path.join(self.kv, fname),
                )
            found.append((rec.key, rec.value, rec.n))
        found.sort(key=lambda item: item[0])
        return found

    # -- logs ------------------------------------------------------------------------------
    def _count_lines(self, path: str, fd: int, ino: int, size: int) -> tuple[int, int]:
        """(complete lines, offset just after the last one); reads only what is new."""
        mark = self._log_marks.get(path)
        if mark is not None and mark[0] == ino and mark[1] <= size:
            offset, count = mark[1], mark[2]
        else:
            offset, count = 0, 0
        if offset < size:
            data = os.pread(fd, size - offset, offset)
            last = data.rfind(b"\n")
            if last >= 0:
                count += data.count(b"\n", 0, last + 1)
                offset += last + 1
        return count, offset

    def append(self, log: str, record: bytes) -> int:
        """Append one line (cutting a torn last line first); returns its 1-based number."""
        self._ensure()
        path = os.path.join(self.logs, file_name(log) + ".log")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | _O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            st = os.fstat(fd)
            count, end = self._count_lines(path, fd, st.st_ino, st.st_size)
            line = encode_line(record)
            try:
                if end < st.st_size:
                    os.ftruncate(fd, end)  # a torn line left by a writer that died
                _write_all(fd, line)
            except OSError as exc:
                raise BackendUnavailable(
                    f"file store {self.root}: append to {log!r} failed: {exc}", backend="file"
                ) from exc
            try:
                os.fsync(fd)
                if end == 0:
                    _fsync_dir(self.logs)  # the log file itself may be new
            except OSError as exc:
                raise OutcomeUnknown(
                    f"file store {self.root}: append to {log!r} not made durable: {exc}",
                    operation="append",
                ) from exc
            self._log_marks[path] = (st.st_ino, end + len(line), count + 1)
            return count + 1
        finally:
            os.close(fd)

    def log_entries(self, log: str) -> list[bytes]:
        """Every complete line of ``log``, decoded; a torn last line is ignored."""
        self._ensure()
        path = os.path.join(self.logs, file_name(log) + ".log")
        try:
            with open(path, "rb", buffering=0) as f:
                data = f.readall()
        except FileNotFoundError:
            return []
        lines = data.split(b"\n")
        lines.pop()  # after the last newline: empty, or a torn line
        return [decode_line(line, path) for line in lines]
