"""The blocking core of :class:`~videoflow_aio.memory.runtime_store.FileRuntimeStore`.

Every method here does file I/O and is meant to run in a worker thread. Layout under root::

    store.json         {"format": 2, "next": N, "crc": ...}: the next version number not yet
                       handed to any process (outside kv/, so losing kv/ cannot reset it)
    store.lock         flock'ed while store.json is created or advanced
    upgrade.json       only while a root of the previous format is being adopted (below)
    kv/<name>.json     one record per live key: {"key", "n", "value": b64, "crc"}
    kv/<name>.tmp      the next version being written (at most one per key)
    locks/<name>.lock  flock'ed around every write of a key; removed with the key
    logs/<name>.log    one line per record: "<crc32 hex> <base64>\\n"; flock'ed on itself

``<name>`` is the key's UTF-8 bytes with every byte outside ``[a-z0-9_-]`` written as ``%xx``
(lower-case hex), so the encoding is injective, never contains ``/`` or a dot, and is safe on
case-insensitive file systems. Names whose encoding would exceed 200 characters are
``=<sha256 hex>`` instead (``=`` never appears in an encoded name); the record inside holds the
whole key, and scan reads it from there.

Versions: every write takes a number from a block this store object reserved in
``store.json`` (:data:`BLOCK` at a time, under ``store.lock``, made durable before any number of
it is used), so a number is never handed out twice in the life of the store — not after a
delete, not after a record file or the whole ``kv/`` folder is lost. A record carries a CRC32
of its key, number and value; a damaged one raises
:class:`~videoflow_aio.contracts.runtime_store.CorruptRecord`, never a wrong value.

Writes: flock the key's lock file (a fresh ``open`` per operation, so two threads of one
process exclude each other too — unlike ``lockf``; after the flock the path is checked to
still name the locked file, since compaction and delete remove lock files), read the record,
compare, write ``<name>.tmp``, fsync it, ``os.replace`` it over ``<name>.json``, fsync the
directory, unlock. A reader (no lock) sees the old or the new file, never a torn one. Delete
removes the record and then its lock file (still holding it). A write that fails removes its
``.tmp``.

A root of the previous format (no ``store.json``; per-key counters, tombstones with a null
value, no checksums; logs as now) is adopted at open, under ``store.lock``: every record is
read and checked first (anything else in ``kv/`` refuses the root, unchanged); the next number
— above every number found, tombstones' included — is made durable in ``upgrade.json``; each
live record is rewritten with its number and a checksum, each tombstone removed; then
``store.json`` is written and ``upgrade.json`` removed. Each step is atomic and the numbers
are durable before anything changes, so an adoption killed at any point is finished by the
next open. Versions of the old store keep their numbers (a client's version still compares
equal) and none is handed out again. Records with checksums but no ``store.json`` and no
``upgrade.json`` are a current store that lost its counter: refused, as is a root with logs
but no records (it cannot be told apart from one).

Compaction (:meth:`FileStoreCore.compact`, run at open and on demand) removes what crashes
leave: ``.tmp`` files nobody is writing, lock files of keys with no record, torn last lines of
logs, and empty logs. Each step is atomic and done under the lock of what it removes, so a
compaction killed at any point leaves a valid store, and the next one finishes the job.

Read-only roots (a backup, a snapshot, a replica mounted read-only; or no write permission):
when ``store.lock`` cannot be opened for writing (EROFS, EACCES, EPERM), the store opens
read-only — ``store.json`` is checked, nothing is compacted or locked, reads work as usual,
and every write (cas, delete, append, compact) raises
:class:`~videoflow_aio.contracts.errors.AccessDenied` with nothing changed.
"""

from __future__ import annotations

import binascii
import contextlib
import errno
import fcntl
import hashlib
import os
import threading
import zlib
from typing import Annotated
from urllib.parse import unquote_to_bytes

import msgspec

from ..contracts.errors import AccessDenied, BackendUnavailable, OutcomeUnknown
from ..contracts.runtime_store import CorruptRecord

MAX_NAME = 200  # NAME_MAX (255) minus room for the suffixes
FORMAT = 2
"""On-disk format: 2 = store-wide version numbers and checksummed records."""
BLOCK = 256
"""Version numbers a store object reserves at a time (two fsyncs per block)."""
_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789_-")
_TABLE = [chr(b) if b in _SAFE else f"%{b:02x}" for b in range(256)]
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_DIR = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _O_CLOEXEC
_READ_ONLY = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
"""What opening ``store.lock`` for writing fails with on a root this process may only read."""


class Record(msgspec.Struct, frozen=True):
    """One live key's file: the whole key, its version number, its value and their CRC32."""

    key: str
    n: Annotated[int, msgspec.Meta(ge=1)]
    value: bytes
    crc: str


class LegacyRecord(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A record of the previous format: a per-key counter, no checksum, ``value`` None for a
    tombstone (a deleted key keeping its counter)."""

    key: str
    n: Annotated[int, msgspec.Meta(ge=1)]
    value: bytes | None


class Header(msgspec.Struct, frozen=True):
    """``store.json``: the format and the next version number no process has reserved."""

    format: int
    next: Annotated[int, msgspec.Meta(ge=1)]
    crc: str


class Compaction(msgspec.Struct, frozen=True):
    """What one compaction pass removed. ``busy``: items left alone because a writer held
    them at that moment (the next pass looks again)."""

    temp_files: int = 0
    lock_files: int = 0
    torn_tails: int = 0
    empty_logs: int = 0
    busy: int = 0


_encode = msgspec.json.Encoder().encode
_decode_record = msgspec.json.Decoder(Record).decode
_decode_header = msgspec.json.Decoder(Header).decode
_decode_legacy = msgspec.json.Decoder(LegacyRecord).decode


def record_crc(key: str, n: int, value: bytes) -> str:
    """The checksum a record carries: CRC32 of its key, number and value."""
    crc = zlib.crc32(b"\0%d\0" % n, zlib.crc32(key.encode("utf-8")))
    return f"{zlib.crc32(value, crc):08x}"


def make_record(key: str, n: int, value: bytes) -> Record:
    return Record(key, n, value, record_crc(key, n, value))


def _header_crc(fmt: int, nxt: int) -> str:
    return f"{zlib.crc32(b'videoflow-file-store %d %d' % (fmt, nxt)):08x}"


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
    """The record of one log line, exactly as :func:`encode_line` writes it (8 lower-case
    hex digits of its CRC32, a space, canonical base64); anything else is CorruptRecord."""
    try:
        if len(line) < 9 or line[8:9] != b" ":
            raise ValueError("no separator")
        record = binascii.a2b_base64(line[9:], strict_mode=True) if line[9:] else b""
    except (ValueError, binascii.Error) as exc:
        raise CorruptRecord(f"undecodable log line in {where}: {exc}", resource=where) from None
    if line[:8] != b"%08x" % zlib.crc32(record):  # not int(..., 16): it reads "+d0e 9b1" too
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


def _same_file(fd: int, path: str) -> bool:
    """Whether ``path`` still names the file open as ``fd`` (it may have been removed)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (st.st_ino, st.st_dev) == (own.st_ino, own.st_dev)


def _unlink_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


class FileStoreCore:
    """Blocking operations on one store directory. Thread-safe; process-safe on one host."""

    def __init__(self, root: str, *, compact_at_open: bool = True, block: int = BLOCK) -> None:
        self.root = root
        self.kv = os.path.join(root, "kv")
        self.locks = os.path.join(root, "locks")
        self.logs = os.path.join(root, "logs")
        self.header = os.path.join(root, "store.json")
        self.upgrade = os.path.join(root, "upgrade.json")
        self.compact_at_open = compact_at_open
        self.block = block
        self.opened: Compaction | None = None
        """What the compaction at open removed (None until opened, or when not compacting)."""
        self.read_only: str | None = None
        """Why the store is read-only (set at open when ``store.lock`` cannot be opened for
        writing: a read-only file system or no write permission), else None."""
        self._ready = False
        self._opening = threading.Lock()
        self._numbers = threading.Lock()
        self._next = self._end = 0  # the reserved block not yet used: [next, end)
        # log path -> (inode, offset after the last complete line counted, lines counted)
        self._log_marks: dict[str, tuple[int, int, int]] = {}

    # -- setup and version numbers ---------------------------------------------------------
    def _ensure(self) -> None:
        if self._ready:
            return
        with self._opening:
            if self._ready:
                return
            self._open()
            if self.compact_at_open and self.read_only is None:
                self.opened = self._compact()
            self._ready = True

    def _writable(self, operation: str) -> None:
        """Refuse a write on a read-only store: :class:`AccessDenied`, nothing changed."""
        self._ensure()
        if self.read_only is not None:
            raise AccessDenied(
                f"file store {self.root} is read-only ({self.read_only}): {operation} refused, "
                "nothing changed",
                backend="file",
                operation=operation,
                resource=self.root,
            )

    def _root_lock(self) -> int:
        fd = os.open(
            os.path.join(self.root, "store.lock"), os.O_RDWR | os.O_CREAT | _O_CLOEXEC, 0o644
        )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _open(self) -> None:
        if not os.path.isdir(self.root):
            os.makedirs(self.root, exist_ok=True)
            _fsync_dir(os.path.dirname(os.path.abspath(self.root)))
        try:
            lock = self._root_lock()
        except OSError as exc:
            if exc.errno not in _READ_ONLY:
                raise
            self._open_read_only(exc)
            return
        try:
            _unlink_quietly(self.header + ".tmp")  # an advance that died before its rename
            _unlink_quietly(self.upgrade + ".tmp")
            if os.path.exists(self.header):
                self._read_header()
                _unlink_quietly(self.upgrade)  # an adoption that died after its last step
            elif os.path.exists(self.upgrade) or any(
                os.path.isdir(sub) and os.listdir(sub) for sub in (self.kv, self.logs)
            ):
                self._adopt()
            else:
                self._write_header(1)
            created = False
            for path in (self.kv, self.locks, self.logs):
                if not os.path.isdir(path):
                    os.makedirs(path, exist_ok=True)
                    created = True
            if created:
                _fsync_dir(self.root)
        finally:
            os.close(lock)

    def _open_read_only(self, exc: OSError) -> None:
        """Open a root this process may only read: ``get``, ``scan`` and ``log_entries``
        serve it as it is (no lock, no compaction: a reader needs neither); every write is
        refused. A root of the previous format cannot be adopted without writing: refused."""
        reason = os.strerror(exc.errno or 0) if exc.errno else str(exc)
        if os.path.exists(self.header):
            self._read_header()
        elif os.path.exists(self.upgrade) or any(
            os.path.isdir(sub) and os.listdir(sub) for sub in (self.kv, self.logs)
        ):
            raise AccessDenied(
                f"file store {self.root} is read-only ({reason}) and holds data but no "
                "store.json (a root of the previous format, adopted only by a writable open)",
                backend="file",
                operation="open",
                resource=self.root,
            )
        self.read_only = reason

    def _read_header(self, path: str | None = None) -> Header:
        path = path or self.header
        try:
            with open(path, "rb", buffering=0) as f:
                data = f.readall()
            header = _decode_header(data)
        except FileNotFoundError:
            raise CorruptRecord(
                f"file store {self.root} lost its {os.path.basename(path)}", resource=path
            ) from None
        except msgspec.DecodeError as exc:
            raise CorruptRecord(f"undecodable {path}: {exc}", resource=path) from None
        if header.format != FORMAT or header.crc != _header_crc(header.format, header.next):
            raise CorruptRecord(f"{path} is damaged or of another format", resource=path)
        return header

    def _write_header(self, nxt: int, path: str | None = None) -> None:
        """Atomically make ``nxt`` the next unreserved number; durable before returning."""
        path = path or self.header
        tmp = path + ".tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _O_CLOEXEC, 0o644)
            try:
                _write_all(fd, _encode(Header(FORMAT, nxt, _header_crc(FORMAT, nxt))))
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
            _fsync_dir(self.root)
        except OSError as exc:  # no number of the block is used: nothing can be reissued
            _unlink_quietly(tmp)
            raise BackendUnavailable(
                f"file store {self.root}: cannot reserve version numbers: {exc}", backend="file"
            ) from exc

    # -- adopting a root of the previous format --------------------------------------------
    def _adopt(self) -> None:
        """Turn a root of the previous format into a current one (see the module docstring);
        under the root lock, with no ``store.json``. Refuses anything else, unchanged."""
        resuming = os.path.exists(self.upgrade)
        found = self._legacy_records()
        if not resuming and not any(legacy for _, _, legacy in found):
            raise CorruptRecord(
                f"file store {self.root} holds data but no store.json, and no record of the "
                "format before store.json (its version counter was lost): refusing to hand "
                "out versions that may have been used",
                resource=self.header,
            )
        nxt = max((rec.n for _, rec, _ in found), default=0) + 1
        if resuming:
            nxt = max(nxt, self._read_header(self.upgrade).next)
        else:
            self._write_header(nxt, self.upgrade)  # durable before anything changes
        removed = False
        for name, rec, legacy in found:
            if not legacy:
                continue
            path = os.path.join(self.kv, name + ".json")
            if rec.value is None:  # a tombstone: its number is kept by nxt
                self._remove(path, "upgrade")
                removed = True
            else:
                self._write(name, path, make_record(rec.key, rec.n, rec.value), "upgrade")
        if removed:
            self._made_durable("upgrade")
        self._write_header(nxt)
        _unlink_quietly(self.upgrade)

    def _legacy_records(self) -> list[tuple[str, Record | LegacyRecord, bool]]:
        """Every record file of ``kv/`` as ``(name, record, of the previous format)``, each
        checked (checksum, or the old format's fields; the key of its file name)."""
        try:
            with os.scandir(self.kv) as entries:
                names = sorted(e.name[:-5] for e in entries if e.name.endswith(".json"))
        except FileNotFoundError:
            return []
        found: list[tuple[str, Record | LegacyRecord, bool]] = []
        for name in names:
            path = os.path.join(self.kv, name + ".json")
            with open(path, "rb", buffering=0) as f:
                data = f.readall()
            rec: Record | LegacyRecord
            try:
                rec = _decode_legacy(data)
                legacy = True
            except msgspec.DecodeError:
                current = self._read(path, None)
                if current is None:
                    continue
                rec, legacy = current, False
            if file_name(rec.key) != name:
                raise CorruptRecord(
                    f"record file {path} holds key {rec.key!r} of another file", resource=path
                )
            found.append((name, rec, legacy))
        return found

    def _number(self) -> int:
        """A version number never handed out before in this store."""
        with self._numbers:
            if self._next >= self._end:
                lock = self._root_lock()
                try:
                    start = self._read_header().next
                    self._write_header(start + self.block)
                finally:
                    os.close(lock)
                self._next, self._end = start, start + self.block
            n = self._next
            self._next += 1
            return n

    # -- key locks -------------------------------------------------------------------------
    def _lock_path(self, name: str) -> str:
        return os.path.join(self.locks, name + ".lock")

    def _lock(self, name: str) -> int:
        """flock the key's lock file, waiting for it."""
        fd = self._flock(self._lock_path(name), wait=True)
        assert fd is not None  # waiting never gives up
        return fd

    def _try_lock(self, name: str) -> int | None:
        """flock the key's lock file if nobody holds it, else None."""
        return self._flock(self._lock_path(name), wait=False)

    @staticmethod
    def _flock(path: str, wait: bool) -> int | None:
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | _O_CLOEXEC, 0o644)
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    return None
                if _same_file(fd, path):
                    return fd
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # removed while we waited for it: lock the file there now

    def _drop_lock(self, name: str) -> None:
        """Remove the key's lock file; only while holding it (waiters then retry)."""
        _unlink_quietly(self._lock_path(name))

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
        try:
            intact = rec.crc == record_crc(rec.key, rec.n, rec.value)
        except UnicodeEncodeError:  # a key no store would write
            intact = False
        if not intact:
            raise CorruptRecord(f"record file {path} fails its checksum", resource=path)
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
                _write_all(fd, _encode(rec))
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, path)
        except OSError as exc:  # nothing visible changed; the space the .tmp held is given back
            _unlink_quietly(tmp)
            raise BackendUnavailable(
                f"file store {self.root}: {operation} failed before commit: {exc}", backend="file"
            ) from exc
        self._made_durable(operation)

    def _remove(self, path: str, operation: str) -> None:
        """Unlink a record file; an OS error is BackendUnavailable (nothing changed)."""
        try:
            os.unlink(path)
        except OSError as exc:
            raise BackendUnavailable(
                f"file store {self.root}: {operation} failed: {exc}", backend="file"
            ) from exc

    def _made_durable(self, operation: str) -> None:
        try:
            _fsync_dir(self.kv)
        except OSError as exc:  # the change is visible but may not survive a power cut
            raise OutcomeUnknown(
                f"file store {self.root}: {operation} done but not made durable: {exc}",
                operation=operation,
            ) from exc

    def get(self, key: str) -> tuple[bytes | None, int | None]:
        """``(value, n)`` of the live record, or ``(None, None)``."""
        self._ensure()
        rec = self._read(os.path.join(self.kv, file_name(key) + ".json"), key)
        if rec is None:
            return None, None
        return rec.value, rec.n

    def current(self, key: str) -> int | None:
        """The live record's number, or None (no lock: for barrier context only)."""
        return self.get(key)[1]

    def cas(self, key: str, expected: int | None, value: bytes) -> int | None:
        """Write ``value`` if the live number is ``expected`` (None: no live record).
        Returns the new number, or None when the comparison failed."""
        self._writable("cas")
        name = file_name(key)
        path = os.path.join(self.kv, name + ".json")
        lock = self._lock(name)
        try:
            rec = self._read(path, key)
            if (None if rec is None else rec.n) != expected:
                if rec is None:
                    self._drop_lock(name)  # nothing to guard: leave no lock file behind
                return None
            try:
                n = self._number()
                self._write(name, path, make_record(key, n, value), "cas")
            except BackendUnavailable:
                if rec is None:
                    self._drop_lock(name)  # nothing was written: nothing to guard
                raise
            return n
        finally:
            os.close(lock)  # closing the only descriptor releases the flock

    def delete(self, key: str, expected: int | None) -> bool:
        """Remove the live record if its number is ``expected`` (None: any)."""
        self._writable("delete")
        name = file_name(key)
        path = os.path.join(self.kv, name + ".json")
        lock = self._lock(name)
        try:
            rec = self._read(path, key)
            if rec is None:
                self._drop_lock(name)
                return False
            if expected is not None and rec.n != expected:
                return False
            self._remove(path, "delete")
            self._made_durable("delete")
            self._drop_lock(name)
            return True
        finally:
            os.close(lock)

    def scan(self, prefix: str) -> list[tuple[str, bytes, int]]:
        """Live ``(key, value, n)`` with ``key.startswith(prefix)``, in key order."""
        self._ensure()
        stem_prefix = escape(prefix)
        found: list[tuple[str, bytes, int]] = []
        try:
            with os.scandir(self.kv) as entries:
                names = [e.name for e in entries if e.name.endswith(".json")]
        except FileNotFoundError:
            if self.read_only is None:
                raise
            return found  # an empty read-only root: no kv/ was ever made
        for fname in names:
            stem = fname[:-5]
            if not (stem.startswith("=") or stem.startswith(stem_prefix)):
                continue
            rec = self._read(os.path.join(self.kv, fname), None)
            if rec is None or not rec.key.startswith(prefix):
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
        """(complete lines, offset just after the last one); reads only what is new, and
        checks every line it counts (a damaged line is CorruptRecord, never a number)."""
        mark = self._log_marks.get(path)
        if mark is not None and mark[0] == ino and mark[1] <= size:
            offset, count = mark[1], mark[2]
        else:
            offset, count = 0, 0
        if offset < size:
            data = os.pread(fd, size - offset, offset)
            last = data.rfind(b"\n")
            if last >= 0:
                lines = data[:last].split(b"\n")
                for line in lines:
                    decode_line(line, path)
                count += len(lines)
                offset += last + 1
        return count, offset

    def _open_log(self, path: str, flags: int) -> int | None:
        """The log open and flock'ed, checked to be the file at ``path`` now."""
        while True:
            try:
                fd = os.open(path, flags | _O_CLOEXEC, 0o644)
            except FileNotFoundError:
                return None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                if _same_file(fd, path):
                    return fd
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)  # compaction removed it (it was empty) while we waited

    def append(self, log: str, record: bytes) -> int:
        """Append one line (cutting a torn last line first); returns its 1-based number."""
        self._writable("append")
        path = os.path.join(self.logs, file_name(log) + ".log")
        fd = self._open_log(path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        assert fd is not None
        try:
            st = os.fstat(fd)
            count, end = self._count_lines(path, fd, st.st_ino, st.st_size)
            line = encode_line(record)
            try:
                if end < st.st_size:
                    os.ftruncate(fd, end)  # a torn line left by a writer that died
                _write_all(fd, line)
            except OSError as exc:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, end)  # give back what a partial write took
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

    # -- compaction ------------------------------------------------------------------------
    def compact(self) -> Compaction:
        """Remove what crashes leave behind; see the module docstring. Safe beside other
        writers of the same root (what one of them holds is skipped and counted ``busy``).
        Refused with :class:`AccessDenied` on a read-only store."""
        self._writable("compact")
        return self._compact()

    def _compact(self) -> Compaction:
        temp = locks = torn = empty = busy = 0
        with os.scandir(self.kv) as entries:
            temps = [e.name[:-4] for e in entries if e.name.endswith(".tmp")]
        for name in temps:
            fd = self._try_lock(name)
            if fd is None:
                busy += 1
                continue
            try:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(self.kv, name + ".tmp"))
                    temp += 1
                if not os.path.exists(os.path.join(self.kv, name + ".json")):
                    self._drop_lock(name)
            finally:
                os.close(fd)
        with os.scandir(self.locks) as entries:
            stems = [e.name[:-5] for e in entries if e.name.endswith(".lock")]
        for name in stems:
            if os.path.exists(os.path.join(self.kv, name + ".json")):
                continue
            fd = self._try_lock(name)
            if fd is None:
                busy += 1
                continue
            try:
                if not os.path.exists(os.path.join(self.kv, name + ".json")):
                    self._drop_lock(name)
                    locks += 1
            finally:
                os.close(fd)
        with os.scandir(self.logs) as entries:
            logs = [e.path for e in entries if e.name.endswith(".log")]
        for path in logs:
            cut, gone, was_busy = self._compact_log(path)
            torn += cut
            empty += gone
            busy += was_busy
        return Compaction(temp, locks, torn, empty, busy)

    def _compact_log(self, path: str) -> tuple[int, int, int]:
        """(torn tail cut, empty log removed, busy) for one log."""
        try:
            fd = os.open(path, os.O_RDWR | _O_CLOEXEC)
        except FileNotFoundError:
            return 0, 0, 0
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return 0, 0, 1
            if not _same_file(fd, path):
                return 0, 0, 0
            size = os.fstat(fd).st_size
            end = 0
            if size:
                tail = os.pread(fd, min(size, 1 << 16), max(0, size - (1 << 16)))
                last = tail.rfind(b"\n")
                if last < 0 and size > len(tail):  # a torn line longer than the window
                    end = self._last_newline(fd, size)
                else:
                    end = 0 if last < 0 else size - len(tail) + last + 1
            if end == 0:
                os.unlink(path)  # nothing complete in it: an unknown log reads the same
                return 0, 1, 0
            if end < size:
                os.ftruncate(fd, end)
                os.fsync(fd)
                return 1, 0, 0
            return 0, 0, 0
        finally:
            os.close(fd)

    @staticmethod
    def _last_newline(fd: int, size: int) -> int:
        """Offset just after the last newline of the file (0 if none), reading backwards."""
        pos = size
        while pos > 0:
            start = max(0, pos - (1 << 16))
            chunk = os.pread(fd, pos - start, start)
            last = chunk.rfind(b"\n")
            if last >= 0:
                return start + last + 1
            pos = start
        return 0
