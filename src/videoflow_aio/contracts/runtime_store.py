"""The RuntimeStore contract: small versioned records with CAS, prefix scan, append-only logs.

Besides the abstract class, this module holds the pure helpers every implementation uses to
refuse bad input the same way (:func:`check_key`, :func:`check_value`, :func:`check_log`) and
the version codec (:func:`make_version`, :func:`version_number`): a version is
``"<n>-<tag>"`` where ``n`` grows per key and ``tag`` is a short hash of the key, so a version
handed to the wrong key is recognised and refused instead of silently losing a CAS.
Callers treat versions as opaque strings; only equality is meaningful to them.
"""

from __future__ import annotations

import abc
import hashlib
from typing import Any

import msgspec

from ._boundary import Boundary
from ._specs import NonEmptyStr
from .errors import ValidationError, VideoflowError

CAS_READ_AFTER = "runtime_store.cas.read.after"
"""Fault barrier an implementation with a read-then-write window reaches after reading the
key's current version and before its decisive compare-and-write (context: ``key``,
``expected_version``, ``seen_version``). Server-side atomic CAS (etcd txn, Redis Lua)
has no such window and need not reach it."""
DELETE_READ_AFTER = "runtime_store.delete.read.after"
"""The same point as :data:`CAS_READ_AFTER`, for ``delete``."""


class RuntimeCapabilities(msgspec.Struct, frozen=True):
    """What a RuntimeStore guarantees.

    ``shared_across_processes``: CAS holds between processes on one host.
    ``shared_across_hosts``: CAS holds between hosts.
    ``durable``: records survive a process restart (a conformance harness can then reopen
    the same store with ``await h.open(reopen_of=store)``).
    ``dense_log_numbers``: ``append`` numbers are 1, 2, 3, … (otherwise only increasing).
    ``max_key_bytes`` / ``max_value_bytes``: larger keys (UTF-8) or values are refused with
    :class:`~videoflow_aio.contracts.errors.ValidationError`.
    """

    store: str
    shared_across_processes: bool
    shared_across_hosts: bool
    durable: bool
    dense_log_numbers: bool
    max_key_bytes: int
    max_value_bytes: int


class CorruptRecord(VideoflowError):
    """A stored record or log line could not be decoded (damage outside this store's
    crash-safe protocol: a hand-edited or truncated file, a foreign file in the directory)."""

    def __init__(self, message: str, *, resource: str, **fields: Any) -> None:
        super().__init__(message, resource=resource, **fields)


class RuntimeStore(Boundary, abc.ABC):
    """Versioned records: every successful write gives the key a fresh opaque version string.

    Versions are never reused for a key, not even after delete and re-create. Bad input (a key
    that is not a non-empty ``str`` within ``max_key_bytes``, a value that is not ``bytes`` or
    is over ``max_value_bytes``, a version that is malformed or belongs to another key) raises
    :class:`~videoflow_aio.contracts.errors.ValidationError` and leaves the store unchanged.
    """

    @abc.abstractmethod
    async def get(self, key: NonEmptyStr) -> tuple[bytes | None, str | None]:
        """``(value, version)``, or ``(None, None)`` when the key does not exist."""

    @abc.abstractmethod
    async def cas(self, key: NonEmptyStr, expected_version: str | None, value: bytes) -> bool:
        """Write ``value`` if the key's version is ``expected_version`` (None: must not exist).

        True when written (the key now has a version never seen before for it); False when
        the key had another version (or did not exist, or existed for ``None``).
        """

    @abc.abstractmethod
    async def delete(self, key: NonEmptyStr, expected_version: str | None) -> bool:
        """Delete the key if its version is ``expected_version`` (None: unconditionally).

        True when a live record was deleted; False when it did not exist or had another version.
        """

    @abc.abstractmethod
    async def scan(self, prefix: str) -> list[tuple[str, bytes, str]]:
        """Every ``(key, value, version)`` whose key starts with ``prefix``, in key order
        (code point order, which is UTF-8 byte order)."""

    @abc.abstractmethod
    async def append(self, log: NonEmptyStr, record: bytes) -> int:
        """Append ``record`` to ``log``; the returned number only grows within a log."""

    @abc.abstractmethod
    async def log_entries(self, log: NonEmptyStr) -> list[bytes]:
        """Every record appended to ``log``, oldest first (empty for an unknown log)."""

    @abc.abstractmethod
    async def capabilities(self) -> RuntimeCapabilities:
        """What this store guarantees."""


# -- input checks shared by every implementation ---------------------------------------------


def check_key(key: object, max_key_bytes: int, field: str = "key") -> str:
    """``key`` if it is a non-empty ``str`` of at most ``max_key_bytes`` UTF-8 bytes;
    otherwise :class:`ValidationError` naming ``field``."""
    if not isinstance(key, str):
        raise ValidationError(
            f"{field} must be str, not {type(key).__name__}", field=field, value=key
        )
    if not key:
        raise ValidationError(f"{field} must not be empty", field=field, value=key)
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ValidationError(f"{field} is not valid Unicode: {exc}", field=field) from None
    if size > max_key_bytes:
        raise ValidationError(
            f"{field} is {size} bytes, over the limit of {max_key_bytes}",
            field=field,
            value=key[:64],
            size=size,
            limit=max_key_bytes,
        )
    return key


def check_log(log: object, max_key_bytes: int) -> str:
    """``log`` checked like a key (field ``log``)."""
    return check_key(log, max_key_bytes, "log")


def check_value(value: object, max_value_bytes: int, field: str = "value") -> bytes:
    """``value`` if it is ``bytes`` of at most ``max_value_bytes``, else ValidationError."""
    if not isinstance(value, bytes):
        raise ValidationError(
            f"{field} must be bytes, not {type(value).__name__}",
            field=field,
            value=type(value).__name__,
        )
    if len(value) > max_value_bytes:
        raise ValidationError(
            f"{field} is {len(value)} bytes, over the limit of {max_value_bytes}",
            field=field,
            size=len(value),
            limit=max_value_bytes,
        )
    return value


def check_prefix(prefix: object) -> str:
    """``prefix`` if it is a ``str`` (the empty prefix selects every key)."""
    if not isinstance(prefix, str):
        raise ValidationError(
            f"prefix must be str, not {type(prefix).__name__}", field="prefix", value=prefix
        )
    return prefix


# -- versions --------------------------------------------------------------------------------


def key_tag(key: str) -> str:
    """The short key hash that ties a version to its key (8 hex digits)."""
    return hashlib.blake2b(key.encode("utf-8"), digest_size=4).hexdigest()


def make_version(tag: str, n: int) -> str:
    """The version string for write number ``n`` of the key whose :func:`key_tag` is ``tag``."""
    return f"{n}-{tag}"


def version_number(key: str, version: object, tag: str | None = None) -> int:
    """The write number inside ``version``, checked to belong to ``key``.

    Raises :class:`ValidationError` (field ``expected_version``) when ``version`` is not a
    string this codec produced, or was produced for another key.
    """
    if not isinstance(version, str):
        raise ValidationError(
            f"expected_version must be str or None, not {type(version).__name__}",
            field="expected_version",
            value=version,
        )
    n_text, sep, got_tag = version.partition("-")
    if not sep or not n_text.isdigit() or not n_text.isascii() or len(got_tag) != 8:
        raise ValidationError(
            f"expected_version {version!r} is not a version of this store",
            field="expected_version",
            value=version,
        )
    if got_tag != (tag if tag is not None else key_tag(key)):
        raise ValidationError(
            f"expected_version {version!r} belongs to another key, not {key!r}",
            field="expected_version",
            value=version,
            key=key,
        )
    return int(n_text)


__all__ = [
    "CAS_READ_AFTER",
    "DELETE_READ_AFTER",
    "CorruptRecord",
    "RuntimeCapabilities",
    "RuntimeStore",
    "check_key",
    "check_log",
    "check_prefix",
    "check_value",
    "key_tag",
    "make_version",
    "version_number",
]
