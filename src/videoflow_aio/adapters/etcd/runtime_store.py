"""RuntimeStore on etcd v3 (aetcd's gRPC stubs, asyncio; trio through a trio-asyncio bridge).

- version = the key's ``mod_revision`` (never reused; the per-key ``version`` resets after a
  delete, so it is not used); CAS = one Txn comparing it (``create_revision == 0`` for "must
  not exist").
- ``append`` puts ``<ns>/log/<log>/<rid>``; its number is the Txn's revision: increasing,
  not dense (``dense_log_numbers=False``). ``log_entries`` reads by ``create_revision``.
- ``scan`` pages with ``limit`` at the revision of its first page (a consistent snapshot).
- Every RPC carries an explicit deadline. A write whose reply is lost is resolved by a
  request marker ``<ns>/op/<rid>`` (written in the same Txn, attached to a rotating lease):
  present → applied; absent → the resolver writes ``f`` so the lost Txn can no longer apply.
  If the resolution fails too, :class:`OutcomeUnknown`.
- Values over etcd's request limit (``--max-request-bytes``, 1.5 MiB by default) are refused
  with :class:`ValidationError` before sending.
- Under trio, every method runs whole across ``adapters._trio_bridge`` (one trio-asyncio
  loop per ``trio.run``; needs ``trio-asyncio``).
- Every gRPC error is mapped onto ``videoflow_aio.contracts.errors`` in one place,
  :meth:`EtcdRuntimeStore._errors`.
- Security (``_channel``): ``https://`` or ``tls=`` (a :class:`TLSConfig`: CA, client
  certificate for mTLS), ``username``/``password`` (etcd's auth; the token is renewed when it
  expires). A refused connection is ``AuthenticationFailed``, a key outside the user's roles
  ``AccessDenied``; :func:`~videoflow_aio.adapters.etcd.grant_prefix` sets up a user whose
  role is limited to the adapter's namespace.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterator
from functools import partial
from types import TracebackType
from typing import Any

import anyio
import grpc  # type: ignore[import-untyped]
from aetcd import rpc

from ...contracts.errors import (
    AccessDenied,
    AuthenticationFailed,
    BackendUnavailable,
    OutcomeUnknown,
    ValidationError,
)
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
from .._security import Credentials, Secret, TLSConfig, as_secret, split_url
from .._trio_bridge import Affinity, bridged
from ._channel import EtcdChannel, classify, token_expired

DEFAULT_MAX_REQUEST_BYTES = 1_572_864  # etcd --max-request-bytes default (1.5 MiB)
_OVERHEAD = 1024  # txn framing, marker key, compare entries
_PAGE = 500
MAX_KEY_BYTES = 4096
_CONNECT_FAILED = "failed to connect to all addresses"  # grpc: refused before sending
_AMBIGUOUS_CODES = (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE)


class ReplyLost(Exception):
    """Internal: a write was sent and its reply lost (``__cause__`` says how); its outcome is
    resolved through the request marker."""


async def _rpc(call: Any) -> Any:
    """Await a grpc.aio call so that a cancellation surfaces as the caller's own.

    grpc.aio answers a cancelled await with a fresh ``CancelledError`` that anyio's cancel
    scopes do not recognise; awaiting through :func:`asyncio.shield` keeps the original, and
    the RPC is cancelled explicitly.
    """
    fut = asyncio.ensure_future(call)
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        fut.cancel()
        raise


def _prefix_end(prefix: bytes) -> bytes:
    """The smallest key greater than every key starting with ``prefix`` (etcd range_end)."""
    b = bytearray(prefix)
    while b:
        if b[-1] < 0xFF:
            b[-1] += 1
            return bytes(b)
        b.pop()
    return b"\0"


def _compare(key: bytes, target: str, value: int) -> Any:
    c = rpc.Compare(key=key, result=rpc.Compare.EQUAL)
    if target == "mod":
        c.target = rpc.Compare.MOD
        c.mod_revision = value
    else:
        c.target = rpc.Compare.CREATE
        c.create_revision = value
    return c


def _put(key: bytes, value: bytes, lease: int = 0) -> Any:
    return rpc.RequestOp(request_put=rpc.PutRequest(key=key, value=value, lease=lease))


def _range(key: bytes) -> Any:
    return rpc.RequestOp(request_range=rpc.RangeRequest(key=key))


@bridged
class EtcdRuntimeStore(RuntimeStore):
    """Versioned records in etcd; see the module docstring for the guarantees."""

    def __init__(
        self,
        url: str = "http://127.0.0.1:2379",
        *,
        namespace: str = "vf",
        timeout: float = 5.0,
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        outcome_window_seconds: float = 60.0,
        tls: TLSConfig | None = None,
        username: str | None = None,
        password: str | Secret | None = None,
    ) -> None:
        url, url_user, url_password = split_url(url)
        if url_user is not None or url_password is not None:
            raise ValidationError(
                "etcd credentials go in username=/password=, not in the URL", field="url"
            )
        scheme = url.split("://", 1)[0].lower() if "://" in url else "http"
        if tls is not None and not isinstance(tls, TLSConfig):
            raise ValidationError(
                "etcd takes a TLSConfig (gRPC needs the PEM files, not an ssl.SSLContext)",
                field="tls",
                value=type(tls).__name__,
            )
        if tls is None and scheme == "https":
            tls = TLSConfig()  # the system's trust store
        if (username is None) != (password is None):
            raise ValidationError(
                "etcd authentication takes both username and password (or neither: no auth, "
                "or the client certificate's common name under --client-cert-auth)",
                field="username" if username is None else "password",
            )
        creds = Credentials(username=username, password=as_secret(password, "password"))
        hostport = url.split("//", 1)[-1].rstrip("/")
        host, _, port = hostport.rpartition(":")
        self.url = url
        self.username = username
        self._timeout = timeout
        self._max_request = max_request_bytes
        # larger values are refused up front: etcd would answer "request is too large"
        self._max_value = _max_value(max_request_bytes)
        self._window = max(2, int(outcome_window_seconds))
        self._client = EtcdChannel(
            f"{host or '127.0.0.1'}:{int(port or 2379)}",
            tls=tls,
            credentials=creds,
            timeout=timeout,
        )
        self._tls = tls is not None
        self.namespace = namespace
        self._ns = namespace.encode()
        self._k = self._ns + b"/k/"
        self._log = self._ns + b"/log/"
        self._op = self._ns + b"/op/"
        self._lease = 0
        self._lease_renew_at = 0.0
        self._lease_lock = asyncio.Lock()  # asyncio side only (binds its loop on first use)
        self._connected = False
        self._side = Affinity()  # asyncio: direct; trio: across the trio-asyncio bridge (bridged)

    # -- plumbing ----------------------------------------------------------------------------
    async def _stub(self) -> Any:
        if not self._connected:
            try:
                with anyio.fail_after(self._timeout):
                    await self._client.connect()
            except (AuthenticationFailed, AccessDenied):
                await self._client.close()
                raise
            except Exception as exc:
                await self._client.close()
                raise BackendUnavailable(
                    f"etcd connect failed: {type(exc).__name__}: {exc}",
                    backend="etcd",
                    applied=False,
                ) from exc
            self._connected = True
        return self._client.kvstub

    async def aclose(self) -> None:
        await self._client.close()
        self._connected = False

    async def __aenter__(self) -> EtcdRuntimeStore:
        await self._stub()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    @contextlib.contextmanager
    def _errors(self, what: str, *, write: bool = False) -> Iterator[None]:
        """Map the gRPC errors raised in the block onto the contract.

        - too large for the server: :class:`ValidationError` (nothing sent that could apply);
        - a ``write`` whose reply is lost (deadline, connection lost): never sent when no
          connection could be made (:class:`BackendUnavailable` ``applied=False``), otherwise
          :class:`ReplyLost`, resolved by the caller through the request marker;
        - anything else: :class:`BackendUnavailable`.

        Cancellation passes through untouched.
        """
        try:
            yield
        except grpc.aio.AioRpcError as exc:
            typed = classify(exc, what, tls=self._tls)
            if typed is not None:  # refused before applying: nothing to resolve
                raise typed from exc
            details = exc.details() or ""
            if "request is too large" in details or "larger than max" in details:
                raise ValidationError(
                    f"etcd {what}: {details}", field="value", limit=self._max_request
                ) from exc
            if write and exc.code() in _AMBIGUOUS_CODES:
                if _CONNECT_FAILED in details:  # never sent: no connection
                    raise BackendUnavailable(
                        f"etcd {what}: not sent ({details})", backend="etcd", applied=False
                    ) from exc
                raise ReplyLost(what) from exc
            raise BackendUnavailable(
                f"etcd {what} failed: {exc.code().name}: {details}", backend="etcd"
            ) from exc

    async def _call(self, what: str, method: str, request: Any) -> Any:
        """A read-only RPC (or a definite one) with the deadline; errors mapped."""
        stub = await self._stub()
        with self._errors(what):
            return await self._client.call(
                lambda: _rpc(
                    getattr(stub, method)(
                        request, timeout=self._timeout, metadata=self._client.metadata
                    )
                )
            )

    async def _marker_lease(self) -> int:
        """A lease for request markers, rotated before it could expire under a resolution."""
        now = anyio.current_time()
        if self._lease and now < self._lease_renew_at:
            return self._lease
        async with self._lease_lock:
            if self._lease and anyio.current_time() < self._lease_renew_at:
                return self._lease
            await self._stub()
            with self._errors("lease grant"):
                resp = await self._client.call(
                    lambda: _rpc(
                        self._client.leasestub.LeaseGrant(
                            rpc.LeaseGrantRequest(TTL=2 * self._window),
                            timeout=self._timeout,
                            metadata=self._client.metadata,
                        )
                    )
                )
            self._lease = int(resp.ID)
            self._lease_renew_at = anyio.current_time() + self._window
            return self._lease

    async def _write(self, what: str, rid: bytes, compare: list[Any], ops: list[Any]) -> Any:
        """Txn ``compare + [marker absent]`` → ``ops + [marker]``; resolve a lost reply.

        Returns the TxnResponse, or the marker's create revision (int) when a lost reply was
        resolved as applied.
        """
        stub = await self._stub()
        marker = self._op + rid
        lease = await self._marker_lease()
        request = rpc.TxnRequest(
            compare=[*compare, _compare(marker, "create", 0)],
            success=[*ops, _put(marker, b"c", lease)],
            failure=[],
        )
        call = asyncio.ensure_future(
            stub.Txn(request, timeout=self._timeout, metadata=self._client.metadata)
        )
        try:
            with self._errors(what, write=True):
                # shielded: a cancelled caller leaves the RPC running, so its outcome can be
                # settled
                try:
                    return await asyncio.shield(call)
                except grpc.aio.AioRpcError as exc:
                    if not token_expired(exc):
                        raise
                # the token expired: etcd refused the Txn before proposing it; the same
                # request (same marker) goes again with a fresh token
                await self._client.authenticate()
                call = asyncio.ensure_future(
                    stub.Txn(request, timeout=self._timeout, metadata=self._client.metadata)
                )
                return await asyncio.shield(call)
        except ReplyLost as lost:
            cause = lost.__cause__ or lost
        except asyncio.CancelledError:
            # settle before re-raising the caller's own cancellation: wait for the RPC (its
            # deadline bounds this), and fence the request id if that answer is lost too
            with anyio.CancelScope(shield=True):
                try:
                    await call
                except Exception:
                    with contextlib.suppress(Exception):
                        await self._resolve(marker, lease)
            raise
        try:
            applied = await self._resolve(marker, lease)
        except Exception as exc:
            raise OutcomeUnknown(
                f"etcd {what}: reply lost ({cause}) and the read-back failed ({exc}); "
                "it may or may not have applied",
                operation=what,
                request_id=rid.decode(),
            ) from cause
        if applied is None:
            raise BackendUnavailable(
                f"etcd {what}: reply lost ({type(cause).__name__}); resolved as not applied",
                backend="etcd",
                applied=False,
            ) from cause
        return applied

    async def _resolve(self, marker: bytes, lease: int) -> int | None:
        """Fence ``marker`` if absent (→ None) or return the revision that applied it."""
        stub = await self._stub()
        request = rpc.TxnRequest(
            compare=[_compare(marker, "create", 0)],
            success=[_put(marker, b"f", lease)],
            failure=[_range(marker)],
        )
        resp = await self._client.call(
            lambda: _rpc(stub.Txn(request, timeout=self._timeout, metadata=self._client.metadata))
        )
        if resp.succeeded:
            return None
        kvs = resp.responses[0].response_range.kvs
        if kvs and kvs[0].value == b"c":
            return int(kvs[0].create_revision)
        return None

    async def drop_namespace(self) -> None:
        """Delete every key under this store's namespace (records, logs, markers): for tests
        and tear-down; other stores on the same namespace lose their data too."""
        start = self._ns + b"/"
        await self._call(
            "drop_namespace",
            "DeleteRange",
            rpc.DeleteRangeRequest(key=start, range_end=_prefix_end(start)),
        )

    # -- contract ----------------------------------------------------------------------------
    async def get(self, key: str) -> tuple[bytes | None, str | None]:
        k = self._key(key)
        resp = await self._call("get", "Range", rpc.RangeRequest(key=k))
        if not resp.kvs:
            return None, None
        kv = resp.kvs[0]
        return bytes(kv.value), make_version(key_tag(key), int(kv.mod_revision))

    async def cas(self, key: str, expected_version: str | None, value: bytes) -> bool:
        k = self._key(key)
        data = check_value(value, self._max_value)
        if expected_version is None:
            cmp = _compare(k, "create", 0)
        else:
            cmp = _compare(k, "mod", version_number(key, expected_version))
        rid = uuid.uuid4().hex.encode()
        resp = await self._write("cas", rid, [cmp], [_put(k, data)])
        return True if isinstance(resp, int) else bool(resp.succeeded)

    async def delete(self, key: str, expected_version: str | None) -> bool:
        k = self._key(key)
        if expected_version is None:
            cmp = [_compare(k, "create", 0)]
            # unconditional: succeed only if it exists (create != 0) — expressed as NOT EQUAL
            cmp[0].result = rpc.Compare.NOT_EQUAL
        else:
            cmp = [_compare(k, "mod", version_number(key, expected_version))]
        rid = uuid.uuid4().hex.encode()
        delete = rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=k))
        resp = await self._write("delete", rid, cmp, [delete])
        return True if isinstance(resp, int) else bool(resp.succeeded)

    async def _range(self, what: str, limit: int, **fields: Any) -> tuple[Any, int]:
        """One ``Range`` page of at most ``limit`` entries; a page too large for gRPC's receive
        limit (4 MiB by default; values can be up to 1.5 MiB each) is retried with half the
        limit. Returns the response and the limit that worked (use it for the next page)."""
        stub = await self._stub()
        while True:
            request = rpc.RangeRequest(limit=limit, **fields)
            with self._errors(what):
                try:
                    resp = await self._client.call(partial(self._range_rpc, stub, request))
                except grpc.aio.AioRpcError as exc:
                    if exc.code() != grpc.StatusCode.RESOURCE_EXHAUSTED or limit == 1:
                        raise
                    limit = max(1, limit // 2)
                    continue
            return resp, limit

    async def _range_rpc(self, stub: Any, request: Any) -> Any:
        return await _rpc(
            stub.Range(request, timeout=self._timeout, metadata=self._client.metadata)
        )

    async def scan(self, prefix: str) -> list[tuple[str, bytes, str]]:
        start = self._k + check_prefix(prefix).encode()
        end = _prefix_end(start)
        out: list[tuple[str, bytes, str]] = []
        revision = 0
        limit = _PAGE
        cut = len(self._k)
        while True:
            resp, limit = await self._range(
                "scan", limit, key=start, range_end=end, revision=revision
            )
            revision = revision or int(resp.header.revision)
            for kv in resp.kvs:
                k = bytes(kv.key[cut:]).decode()
                out.append((k, bytes(kv.value), make_version(key_tag(k), int(kv.mod_revision))))
            if not resp.more or not resp.kvs:
                return out
            start = bytes(resp.kvs[-1].key) + b"\0"

    async def append(self, log: str, record: bytes) -> int:
        prefix = self._log_prefix(log)
        data = check_value(record, self._max_value, "record")
        rid = uuid.uuid4().hex.encode()
        resp = await self._write("append", rid, [], [_put(prefix + rid, data)])
        if isinstance(resp, int):
            return resp
        return int(resp.header.revision)

    async def log_entries(self, log: str) -> list[bytes]:
        start = self._log_prefix(log)
        end = _prefix_end(start)
        out: list[bytes] = []
        revision = 0
        min_create = 0
        limit = _PAGE
        while True:
            resp, limit = await self._range(
                "log_entries",
                limit,
                key=start,
                range_end=end,
                revision=revision,
                sort_order=rpc.RangeRequest.ASCEND,
                sort_target=rpc.RangeRequest.CREATE,
                min_create_revision=min_create,
            )
            revision = revision or int(resp.header.revision)
            out.extend(bytes(kv.value) for kv in resp.kvs)
            if not resp.more or not resp.kvs:
                return out
            min_create = int(resp.kvs[-1].create_revision) + 1

    async def capabilities(self) -> RuntimeCapabilities:
        return runtime_capabilities(self._max_request)

    # -- helpers -----------------------------------------------------------------------------
    def _key(self, key: object) -> bytes:
        return self._k + check_key(key, MAX_KEY_BYTES).encode()

    def _log_prefix(self, log: object) -> bytes:
        log = check_log(log, MAX_KEY_BYTES)
        # one level per log: a raw '/' would let log 'a' read log 'a/b'
        log = log.replace("%", "%25").replace("/", "%2F")
        return self._log + log.encode() + b"/"


def _max_value(max_request_bytes: int) -> int:
    return max_request_bytes - MAX_KEY_BYTES - _OVERHEAD


def runtime_capabilities(max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES) -> RuntimeCapabilities:
    """What an :class:`EtcdRuntimeStore` for a server with ``--max-request-bytes`` guarantees
    (etcd persists every committed write in its raft WAL: durable)."""
    return RuntimeCapabilities(
        store="etcd",
        shared_across_processes=True,
        shared_across_hosts=True,
        durable=True,
        dense_log_numbers=False,
        max_key_bytes=MAX_KEY_BYTES,
        max_value_bytes=_max_value(max_request_bytes),
    )
