"""RuntimeStore on Redis: CAS in Lua with versions from one store-wide counter.

redis-py's client is asyncio; under trio every method runs whole across
``adapters._trio_bridge`` (a trio-asyncio loop per ``trio.run``; needs ``trio-asyncio``).
Standalone Redis only: a write script touches the record, the counter, the index and its
request marker (on Cluster they would need one hash slot).
"""

from __future__ import annotations

from collections import Counter
from types import TracebackType
from typing import Any, Unpack

from ...contracts.errors import BackendUnavailable, ValidationError
from ...contracts.runtime_store import (
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
from .._options import connection_of
from .._trio_bridge import bridged
from . import _rts_lua
from ._client import RedisClient, new_request_id
from .connection import DEFAULT_URL, RedisConnection, RedisOptions

_PAGE = 500
_PAGE_BYTES = 4 << 20  # a scan page stops after the value that reaches this many bytes
MAX_KEY_BYTES = 4096
MAX_VALUE_BYTES = 16 * 1024 * 1024  # Redis takes 512 MiB; a runtime record should not


def _fenced(what: str) -> BackendUnavailable:
    return BackendUnavailable(
        f"redis {what}: request id was fenced by an earlier resolution; not applied",
        backend="redis",
        applied=False,
    )


@bridged
class RedisRuntimeStore(RuntimeStore):
    """Versioned records in Redis hashes; ``scan`` pages through a lexicographic index.

    A write whose reply is lost is resolved through its request marker (see ``_client``):
    it returns the true outcome, raises ``BackendUnavailable(applied=False)`` when it was
    fenced before applying, or ``OutcomeUnknown`` when even the read-back failed.

    ``wait_replicas=N`` (with ``wait_timeout`` seconds): a write returns only once N replicas
    acknowledged it (``WAIT``), else :class:`ReplicationUnconfirmed` — applied on the primary,
    not yet safe from a failover. 0 (default): acknowledged by the primary alone.

    Security: ``tls`` (a :class:`~videoflow_aio.adapters.TLSConfig` or ``ssl.SSLContext``, also
    implied by ``rediss://``), ``username``/``password`` (the ACL user, also from the URL);
    :func:`~videoflow_aio.adapters.redis.acl_rules` gives the least-privilege ACL for it.
    A refused connection is ``AuthenticationFailed``, a refused command ``AccessDenied``.
    """

    def __init__(
        self,
        url: str | RedisConnection = DEFAULT_URL,
        *,
        namespace: str = "vf",
        **options: Unpack[RedisOptions],
    ) -> None:
        self._conn = RedisClient(connection_of(RedisConnection, url, options), namespace=namespace)
        self._side = self._conn.side
        ns = namespace
        self._hash = f"{ns}:rs:k:"
        self._log = f"{ns}:rs:log:"
        try:
            scripts = [
                _rts_lua.render(src, ns=ns, window_ms=self._conn.window_ms)
                for src in (_rts_lua.CAS, _rts_lua.DELETE, _rts_lua.APPEND, _rts_lua.SCAN)
            ]
        except ValueError as exc:
            raise ValidationError(str(exc), field="namespace", value=ns) from None
        self._cas, self._delete, self._append, self._scan = map(self._conn.script, scripts)

    @property
    def client(self) -> Any:
        """The underlying ``redis.asyncio.Redis`` (for tests and benchmarks)."""
        return self._conn.client

    @property
    def namespace(self) -> str:
        """The key prefix of every record, log and marker of this store."""
        return self._conn.ns

    @property
    def resolutions(self) -> Counter[str]:
        """Writes whose reply was lost, by how they were resolved (``applied``,
        ``not_applied``, ``unknown``)."""
        return self._conn.resolutions

    async def aclose(self) -> None:
        await self._conn.aclose()

    async def drop_namespace(self) -> None:
        """Delete every key under this store's namespace (records, logs, markers): for tests
        and tear-down; other stores on the same namespace lose their data too."""
        await self._conn.drop_namespace()

    async def __aenter__(self) -> RedisRuntimeStore:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def get(self, key: str) -> tuple[bytes | None, str | None]:
        check_key(key, MAX_KEY_BYTES)
        value, ver = await self._conn.read(
            "get", self._conn.client.hmget, self._hash + key, "v", "ver"
        )
        if value is None or ver is None:
            return None, None
        return bytes(value), make_version(key_tag(key), int(ver))

    async def cas(self, key: str, expected_version: str | None, value: bytes) -> bool:
        check_key(key, MAX_KEY_BYTES)
        data = check_value(value, MAX_VALUE_BYTES)
        expected = None if expected_version is None else version_number(key, expected_version)
        rid = new_request_id()
        reply = await self._conn.write(
            "cas", self._cas, (), (key, "" if expected is None else expected, data, rid), rid
        )
        if isinstance(reply, bytes):  # resolved after a lost reply: it applied
            return True
        if reply == -1:
            raise _fenced("cas")
        return int(reply) != 0

    async def delete(self, key: str, expected_version: str | None) -> bool:
        check_key(key, MAX_KEY_BYTES)
        expected = None if expected_version is None else version_number(key, expected_version)
        rid = new_request_id()
        reply = await self._conn.write(
            "delete", self._delete, (), (key, "" if expected is None else expected, rid), rid
        )
        if isinstance(reply, bytes):
            return True
        if reply == -1:
            raise _fenced("delete")
        return int(reply) != 0

    async def scan(self, prefix: str) -> list[tuple[str, bytes, str]]:
        p = check_prefix(prefix).encode()
        low: bytes = b"[" + p if p else b"-"
        high: bytes = b"(" + p + b"\xff" if p else b"+"
        out: list[tuple[str, bytes, str]] = []
        while True:
            page = await self._conn.read("scan", self._scan, (), (low, high, _PAGE, _PAGE_BYTES))
            *flat, more, last = page
            for i in range(0, len(flat), 3):
                k = bytes(flat[i]).decode()
                out.append((k, bytes(flat[i + 1]), make_version(key_tag(k), int(flat[i + 2]))))
            if not int(more):
                return out
            low = b"(" + bytes(last)

    async def append(self, log: str, record: bytes) -> int:
        check_log(log, MAX_KEY_BYTES)
        data = check_value(record, MAX_VALUE_BYTES, "record")
        rid = new_request_id()
        reply = await self._conn.write("append", self._append, (), (log, data, rid), rid)
        n = int(reply)
        if n == -1:
            raise _fenced("append")
        return n

    async def log_entries(self, log: str) -> list[bytes]:
        check_log(log, MAX_KEY_BYTES)
        out: list[bytes] = []
        start = 0
        while True:
            chunk = await self._conn.read(
                "log_entries", self._conn.client.lrange, self._log + log, start, start + _PAGE - 1
            )
            out.extend(bytes(r) for r in chunk)
            if len(chunk) < _PAGE:
                return out
            start += _PAGE

    async def capabilities(self) -> RuntimeCapabilities:
        """``durable`` only when the server runs AOF with ``appendfsync always``."""
        durable = False
        try:
            cfg = await self._conn.read(
                "config", self._conn.client.config_get, "appendonly", "appendfsync"
            )
            conf = {_s(k): _s(v) for k, v in dict(cfg).items()}
            durable = conf.get("appendonly") == "yes" and conf.get("appendfsync") == "always"
        except BackendUnavailable:  # CONFIG disabled on managed servers: promise nothing
            durable = False
        return runtime_capabilities(durable=durable)


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def runtime_capabilities(*, durable: bool) -> RuntimeCapabilities:
    """What a :class:`RedisRuntimeStore` guarantees; ``durable`` when its server runs AOF with
    ``appendfsync always`` (``capabilities()`` reads that from the server)."""
    return RuntimeCapabilities(
        store="redis",
        shared_across_processes=True,
        shared_across_hosts=True,
        durable=durable,
        dense_log_numbers=True,
        max_key_bytes=MAX_KEY_BYTES,
        max_value_bytes=MAX_VALUE_BYTES,
    )


__all__ = ["RedisRuntimeStore", "runtime_capabilities"]
