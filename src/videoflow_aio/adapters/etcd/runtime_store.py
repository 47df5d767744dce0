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
- Several endpoints (a cluster): each call goes to the member that answered last; one that
  cannot answer (refused, deadline, no leader) hands the call to the next. Reads and the
  marker resolution are sent again elsewhere; a write is sent elsewhere only when the member
  it tried refused the connection (it never saw it) — once it may have arrived, its outcome
  is resolved through the marker on whichever member answers, never guessed or re-sent.
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
import functools
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, TypeVar, Unpack

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
from .._errors import ReplyLost, map_exceptions
from .._options import connection_of
from .._tasks import TaskOwner
from .._trio_bridge import Affinity, bridged
from ._channel import EtcdChannel, classify, token_expired
from .connection import DEFAULT_URL, EtcdConnection, EtcdOptions

T = TypeVar("T")

DEFAULT_MAX_REQUEST_BYTES = 1_572_864  # etcd --max-request-bytes default (1.5 MiB)
_OVERHEAD = 1024  # txn framing, marker key, compare entries
_PAGE = 500
MAX_KEY_BYTES = 4096
# What gRPC says only in its text (its status code, UNAVAILABLE, covers a lost reply too):
_CONNECT_FAILED = "failed to connect to all addresses"  # refused before sending
_TOO_LARGE_TEXTS = ("request is too large", "larger than max")  # etcd's and gRPC's size limit
# A refusal with one of these codes comes before the request is proposed: nothing applied.
# Every other code (UNAVAILABLE, DEADLINE_EXCEEDED, and UNKNOWN "context deadline exceeded",
# which etcd answers when a request timed out inside the server after a leader died) may
# come after the proposal: for a write the outcome is unknown until resolved, and a read may
# be asked of another member.
_DEFINITE_CODES = frozenset(
    {
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    }
)


async def _rpc(tasks: TaskOwner, call: Any) -> Any:
    """Await a grpc.aio call as a task ``tasks`` owns, so that a cancellation surfaces as the
    caller's own.

    grpc.aio answers a cancelled await with a fresh ``CancelledError`` that anyio's cancel
    scopes do not recognise; awaiting through :func:`asyncio.shield` keeps the original, and
    the RPC is cancelled explicitly. The task ends with the call, or on the store's
    ``aclose`` (a write's Txn is kept running instead: :meth:`EtcdRuntimeStore._txn`).
    """
    fut = tasks.spawn(_await(call), name="etcd rpc", awaited=True)
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        fut.cancel()
        raise


async def _await(call: Any) -> Any:
    return await call


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
    """Versioned records in etcd; see the module docstring for the guarantees.

    ``url`` is an :class:`~videoflow_aio.adapters.etcd.EtcdConnection`, or what makes one: one
    endpoint, or several comma-separated, with the keywords of
    :class:`~videoflow_aio.adapters.etcd.EtcdOptions` (``endpoints=``, a list of
    ``http://host:port``, names the members of a cluster explicitly). With several, every call
    goes to the member that answered last and fails over to the others when it cannot answer.
    """

    def __init__(
        self,
        url: str | EtcdConnection = DEFAULT_URL,
        *,
        namespace: str = "vf",
        max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
        outcome_window_seconds: float = 60.0,
        **options: Unpack[EtcdOptions],
    ) -> None:
        connection = connection_of(EtcdConnection, url, options)
        self.connection = connection
        self.url = connection.url
        self.username = connection.username
        timeout = self._timeout = connection.timeout
        self._max_request = max_request_bytes
        # larger values are refused up front: etcd would answer "request is too large"
        self._max_value = _max_value(max_request_bytes)
        self._window = max(2, int(outcome_window_seconds))
        self._endpoints = connection.open()
        self._tasks = TaskOwner("etcd store", timeout)  # every RPC in flight
        self._tls = connection.tls is not None
        self.namespace = namespace
        self._ns = namespace.encode()
        self._k = self._ns + b"/k/"
        self._log = self._ns + b"/log/"
        self._op = self._ns + b"/op/"
        self._lease = 0
        self._lease_renew_at = 0.0
        self._lease_lock = asyncio.Lock()  # asyncio side only (binds its loop on first use)
        self._side = Affinity()  # asyncio: direct; trio: across the trio-asyncio bridge (bridged)
        self.resolutions: Counter[str] = Counter()
        """Writes whose reply was lost, by how the marker resolved them: ``applied``,
        ``not_applied``, ``unknown`` (the read-back failed too: OutcomeUnknown)."""

    @property
    def _client(self) -> EtcdChannel:
        """The channel of the member that answered last (with one endpoint, the only one)."""
        return self._endpoints.current()

    @property
    def endpoints(self) -> list[str]:
        """Every endpoint this store may use, ``host:port``, in the order given."""
        return [self._endpoints.describe(i) for i in range(len(self._endpoints))]

    # -- plumbing ----------------------------------------------------------------------------
    async def aclose(self) -> None:
        """Close the channels after the RPC tasks: reads cancelled, writes awaited (at most
        ``timeout``; ``adapters._tasks``)."""
        try:
            await self._tasks.aclose()
        finally:
            await self._endpoints.aclose()

    async def __aenter__(self) -> EtcdRuntimeStore:
        await self._endpoints.client(self._endpoints.order()[0])
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def _errors(self, what: str, *, write: bool = False) -> map_exceptions:
        """The error table of an etcd call site: gRPC's errors onto the contract.

        - a refusal of the client (TLS, credentials, roles): ``_channel.classify``;
        - too large for the server: :class:`ValidationError` (nothing sent that could apply);
        - a ``write`` whose reply is lost (deadline, connection lost): never sent when no
          connection could be made (:class:`BackendUnavailable` ``applied=False``), otherwise
          :class:`ReplyLost`, resolved by the caller through the request marker;
        - anything else: :class:`BackendUnavailable`.

        Cancellation passes through untouched.
        """
        return map_exceptions(
            {grpc.aio.AioRpcError: lambda exc: self._grpc_error(exc, what, write)}
        )

    def _grpc_error(self, exc: BaseException, what: str, write: bool) -> BaseException:
        assert isinstance(exc, grpc.aio.AioRpcError)
        typed = classify(exc, what, tls=self._tls)
        if typed is not None:  # refused before applying: nothing to resolve
            return typed
        details = exc.details() or ""
        if any(text in details for text in _TOO_LARGE_TEXTS):
            return ValidationError(
                f"etcd {what}: {details}", field="value", limit=self._max_request
            )
        if write and exc.code() not in _DEFINITE_CODES:
            if _CONNECT_FAILED in details:  # never sent: no connection
                return BackendUnavailable(
                    f"etcd {what}: not sent ({details})", backend="etcd", applied=False
                )
            return ReplyLost(what)
        return BackendUnavailable(
            f"etcd {what} failed: {exc.code().name}: {details}", backend="etcd"
        )

    async def _failover(self, what: str, attempt: Callable[[EtcdChannel], Awaitable[T]]) -> T:
        """``attempt(client)`` on the endpoint that answered last, then on each other one while
        they cannot answer (refused, deadline passed, no leader): only for calls that are safe
        to send again — reads, and the idempotent request-marker resolution. Other errors are
        mapped (:meth:`_errors`); when no endpoint answered, :class:`BackendUnavailable`."""
        failures: list[str] = []
        for i in self._endpoints.order():
            try:
                client = await self._endpoints.client(i)
                with self._errors(what):
                    try:  # once more with a fresh token if it expired
                        result = await client.call(functools.partial(attempt, client))
                    except grpc.aio.AioRpcError as exc:
                        if exc.code() in _DEFINITE_CODES:
                            raise
                        failures.append(f"{self._endpoints.describe(i)}: {exc.code().name}")
                        self._endpoints.failed(i)
                        continue
            except BackendUnavailable as exc:
                if _refused(exc) or exc.applied is not False:
                    raise
                failures.append(str(exc))  # could not connect: try the next
                self._endpoints.failed(i)
                continue
            self._endpoints.answered(i)
            return result
        raise BackendUnavailable(
            f"etcd {what}: no endpoint answered ({'; '.join(failures)})", backend="etcd"
        )

    async def _call(self, what: str, method: str, request: Any) -> Any:
        """A read-only RPC (or a definite one) with the deadline, failing over; errors mapped."""

        async def attempt(client: EtcdChannel) -> Any:
            call = getattr(client.kvstub, method)
            return await _rpc(
                self._tasks, call(request, timeout=self._timeout, metadata=client.metadata)
            )

        return await self._failover(what, attempt)

    async def _marker_lease(self) -> int:
        """A lease for request markers, rotated before it could expire under a resolution."""
        now = anyio.current_time()
        if self._lease and now < self._lease_renew_at:
            return self._lease
        async with self._lease_lock:
            if self._lease and anyio.current_time() < self._lease_renew_at:
                return self._lease

            async def grant(client: EtcdChannel) -> Any:
                request = rpc.LeaseGrantRequest(TTL=2 * self._window)
                return await _rpc(
                    self._tasks,
                    client.leasestub.LeaseGrant(
                        request, timeout=self._timeout, metadata=client.metadata
                    ),
                )

            resp = await self._failover("lease grant", grant)
            self._lease = int(resp.ID)
            self._lease_renew_at = anyio.current_time() + self._window
            return self._lease

    async def _write(self, what: str, rid: bytes, compare: list[Any], ops: list[Any]) -> Any:
        """Txn ``compare + [marker absent]`` → ``ops + [marker]``; resolve a lost reply.

        Sent to one endpoint at a time: a member that refused the connection never saw it, so
        the next is tried; once a member may have received it, it is never sent again — a lost
        reply is resolved through the marker, on whichever member answers.

        Returns the TxnResponse, or the marker's create revision (int) when a lost reply was
        resolved as applied.
        """
        marker = self._op + rid
        try:
            lease = await self._marker_lease()
        except BackendUnavailable as exc:
            if _refused(exc):
                raise
            raise BackendUnavailable(
                f"etcd {what}: not sent ({exc})", backend="etcd", applied=False
            ) from exc
        request = rpc.TxnRequest(
            compare=[*compare, _compare(marker, "create", 0)],
            success=[*ops, _put(marker, b"c", lease)],
            failure=[],
        )
        not_sent: list[str] = []
        for i in self._endpoints.order():
            try:
                return await self._send_txn(i, what, request, marker, lease)
            except BackendUnavailable as exc:
                if _refused(exc) or exc.applied is not False:
                    raise
                not_sent.append(str(exc))
                self._endpoints.failed(i)
            except ReplyLost as lost:
                self._endpoints.failed(i)
                cause = lost.__cause__ or lost
                break
        else:
            raise BackendUnavailable(
                f"etcd {what}: not sent, no endpoint reachable ({'; '.join(not_sent)})",
                backend="etcd",
                applied=False,
            )
        try:
            applied = await self._resolve(marker, lease)
        except Exception as exc:
            self.resolutions["unknown"] += 1
            raise OutcomeUnknown(
                f"etcd {what}: reply lost ({cause}) and the read-back failed ({exc}); "
                "it may or may not have applied",
                operation=what,
                request_id=rid.decode(),
            ) from cause
        self.resolutions["not_applied" if applied is None else "applied"] += 1
        if applied is None:
            raise BackendUnavailable(
                f"etcd {what}: reply lost ({type(cause).__name__}); resolved as not applied",
                backend="etcd",
                applied=False,
            ) from cause
        return applied

    async def _send_txn(self, i: int, what: str, request: Any, marker: bytes, lease: int) -> Any:
        """The write's Txn on endpoint ``i``; its errors mapped with ``write=True``."""
        client = await self._endpoints.client(i)
        call = self._txn(client, request)
        try:
            with self._errors(what, write=True):
                # shielded: a cancelled caller leaves the RPC running, so its outcome can be
                # settled
                try:
                    resp = await asyncio.shield(call)
                except grpc.aio.AioRpcError as exc:
                    if not token_expired(exc):
                        raise
                    # the token expired: etcd refused the Txn before proposing it; the same
                    # request (same marker) goes again with a fresh token
                    await client.authenticate()
                    call = self._txn(client, request)
                    resp = await asyncio.shield(call)
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
        self._endpoints.answered(i)
        return resp

    def _txn(self, client: EtcdChannel, request: Any) -> asyncio.Task[Any]:
        """A write's Txn RPC as a task the store keeps (``aclose`` awaits it: its outcome may be
        settled by a caller that was cancelled meanwhile)."""
        txn = client.kvstub.Txn(request, timeout=self._timeout, metadata=client.metadata)
        return self._tasks.spawn(_await(txn), name="etcd txn", keep=True, awaited=True)

    async def _resolve(self, marker: bytes, lease: int) -> int | None:
        """Fence ``marker`` if absent (→ None) or return the revision that applied it; on
        any member that answers (the resolution is idempotent: a fence whose reply was lost
        is found as ``f`` by the next try)."""
        request = rpc.TxnRequest(
            compare=[_compare(marker, "create", 0)],
            success=[_put(marker, b"f", lease)],
            failure=[_range(marker)],
        )

        async def attempt(client: EtcdChannel) -> Any:
            return await _rpc(
                self._tasks,
                client.kvstub.Txn(request, timeout=self._timeout, metadata=client.metadata),
            )

        resp = await self._failover("resolve", attempt)
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
        while True:
            request = rpc.RangeRequest(limit=limit, **fields)

            async def attempt(
                client: EtcdChannel, request: Any = request, limit: int = limit
            ) -> Any:
                call = client.kvstub.Range(request, timeout=self._timeout, metadata=client.metadata)
                try:
                    return await _rpc(self._tasks, call)
                except grpc.aio.AioRpcError as exc:
                    if exc.code() != grpc.StatusCode.RESOURCE_EXHAUSTED or limit == 1:
                        raise
                    return None  # too large a page: halve it

            resp = await self._failover(what, attempt)
            if resp is not None:
                return resp, limit
            limit = max(1, limit // 2)

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


def _refused(exc: BaseException) -> bool:
    """A refusal of the client (credentials, TLS, roles): no other member would say
    otherwise, so it is raised as is instead of trying the next endpoint."""
    return isinstance(exc, (AuthenticationFailed, AccessDenied))


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


__all__ = ["EtcdRuntimeStore", "runtime_capabilities"]
