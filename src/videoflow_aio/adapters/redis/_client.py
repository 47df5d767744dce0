"""The redis-py client every Redis adapter shares: pool, error mapping, ambiguous writes.

- ``protocol`` is explicit (redis-py 8 defaults to RESP3, which Redis < 6 rejects).
- A waiting pool (:class:`WaitingConnectionPool`): a full pool waits instead of raising.
- redis-py's own retries are off (``Retry(NoBackoff(), 0)``): a re-sent write is not the
  adapter's decision to make; writes are resolved instead (:meth:`RedisConnection.write`).
- Every redis-py exception is mapped onto ``videoflow_aio.contracts.errors`` (cause chained)
  in one table, :func:`errors` (``adapters._errors.map_exceptions``).
- Security (``_security``): TLS from ``rediss://`` (with redis-py's ``ssl_*`` query options,
  :mod:`._url`) or ``tls=`` (a :class:`TLSConfig` or an ``ssl.SSLContext``), ACL user and
  password from arguments or the URL's user info (the URL kept and printed is stripped of
  it). A connection that cannot be opened (refused, TLS
  handshake, AUTH) fails inside the pool, before any command is sent: the refusal is
  classified there (:class:`AuthenticationFailed` with its ``reason``) and a write is known
  not to have applied. A command the ACL refuses is :class:`AccessDenied`.

Replication (``wait_replicas=N``): Redis replicates asynchronously, so a write the primary
acknowledged may not be on any replica when the primary dies — a promoted replica has lost
it. With ``wait_replicas``, each write script is followed on the same connection by
``WAIT N wait_timeout``: the call returns only once N replicas acknowledged the write; when
fewer did in time, :class:`ReplicationUnconfirmed` (an :class:`OutcomeUnknown`): the write
applied on the primary but a failover now may undo it. ``WAIT`` is no consensus: a write
that N replicas hold can still be lost if the failover promotes one that does not.

Ambiguous writes: every write script takes a request id and leaves a short-lived marker key
``<ns>:op:<rid>`` when it applies (``c``, or a result such as a log number). A write whose
reply is lost (deadline, connection error, cancellation) is resolved by one atomic read-back:
marker present → it applied; marker absent → the resolver sets it to ``f`` (fenced), so the
lost request, should it still reach the server, refuses to run. Only when that resolution
itself cannot reach the server is :class:`OutcomeUnknown` raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import itertools
import socket
import ssl
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio
from redis import exceptions as rexc
from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.connection import Connection
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from ...contracts.errors import (
    AccessDenied,
    AuthenticationFailed,
    BackendUnavailable,
    OutcomeUnknown,
    ValidationError,
)
from .._errors import NotSent, ReplyLost, map_exceptions
from .._security import (
    PROBE_SECONDS,
    Credentials,
    Secret,
    TLSConfig,
    as_secret,
    diagnose_tls,
    probe_seconds,
    split_url,
    tls_failure,
)
from .._trio_bridge import Affinity
from .._watchdog import Watchdog
from ._url import url_options

FENCED = b"f"
APPLIED = b"c"

# KEYS[1] = marker ; ARGV[1] = window ms. Returns the marker's value if the write applied,
# else fences the request id and returns false.
RESOLVE = """
local m = redis.call('GET', KEYS[1])
if m then return m end
redis.call('SET', KEYS[1], 'f', 'PX', ARGV[1])
return false
"""

_POOL_EXHAUSTED = "No connection available"
_CONNECT_FAILED = "connecting to"  # redis-py: "Error 111 connecting to host:port. …"
# what Redis answers to AUTH / HELLO … AUTH, by AuthenticationFailed reason
_AUTH_TEXTS = (
    ("without any password configured", "auth-not-enabled"),
    ("invalid username-password", "bad-credentials"),
    ("invalid password", "bad-credentials"),
    ("authentication required", "credentials-required"),
    ("already authenticated", "credentials-required"),
)
# a command (or a script's command) the ACL refused
_DENIED_TEXTS = ("no permissions to", "user executing the script can't", "NOPERM")


class ReplicationUnconfirmed(OutcomeUnknown):
    """A write applied on the primary, but fewer than ``wanted`` replicas acknowledged it
    within ``wait_timeout`` (``acked`` did): a failover now may lose it. ``reply`` is what
    the write returned on the primary."""

    acked: int
    wanted: int
    reply: Any

    def __init__(self, message: str, *, operation: str, acked: int, wanted: int, reply: Any):
        super().__init__(
            message, operation=operation, acked=acked, wanted=wanted, reply=reply, applied=True
        )


if TYPE_CHECKING:
    from .connection import RedisConnection

_RID_PREFIX = uuid.uuid4().hex[:16]
_RID_COUNTER = itertools.count()


def new_request_id() -> str:
    """Unique across processes (a random per-process prefix) and cheap (a counter)."""
    return f"{_RID_PREFIX}{next(_RID_COUNTER):x}"


_CONNECTED: contextvars.ContextVar[bool] = contextvars.ContextVar("_CONNECTED", default=True)
"""False in a write until the pool handed it a connection: a deadline or error before that
point sent nothing (True by default: anywhere else a lost reply stays ambiguous)."""


_HANDED_BACK: contextvars.ContextVar[bool] = contextvars.ContextVar("_HANDED_BACK", default=False)
"""True in a ``get_connection`` whose connect failed: redis-py releases that connection (and so
its pool slot) itself."""


class WaitingConnectionPool(ConnectionPool):
    """A connection pool that waits (up to ``wait_timeout``) for a free connection instead of
    raising once ``max_connections`` are in use — what ``BlockingConnectionPool`` does, gated
    by a semaphore whose uncontended path costs no timer (redis-py's blocking pool takes a
    condition and a timeout on every command: about a fifth of a CAS's client time here).
    """

    def __init__(self, *, wait_timeout: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.wait_timeout = wait_timeout
        self._slots = asyncio.Semaphore(self.max_connections)

    async def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        if self._slots.locked():
            try:
                async with asyncio.timeout(self.wait_timeout):
                    await self._slots.acquire()
            except TimeoutError as err:
                raise NotSent(f"{_POOL_EXHAUSTED}.") from err
        else:
            await self._slots.acquire()
        handed_back = _HANDED_BACK.set(False)
        try:
            connection = await super().get_connection(*args, **kwargs)  # type: ignore[no-untyped-call]
            _CONNECTED.set(True)
            return connection
        except (rexc.RedisError, OSError) as exc:
            self._give_back_slot()
            reason = await self._diagnose(exc)
            raise NotSent(f"{type(exc).__name__}: {exc}", security=reason) from exc
        except BaseException:
            self._give_back_slot()
            raise
        finally:
            _HANDED_BACK.reset(handed_back)

    def _give_back_slot(self) -> None:
        """The slot of a ``get_connection`` that failed, unless :meth:`release` gave it back
        already (redis-py releases a connection whose connect failed): once, never twice —
        each extra release let the pool open one more connection than ``max_connections``."""
        if not _HANDED_BACK.get():
            self._slots.release()

    async def ensure_connection(self, connection: Any) -> None:
        try:
            await super().ensure_connection(connection)  # type: ignore[no-untyped-call]
        except BaseException:
            _HANDED_BACK.set(True)  # redis-py's get_connection releases it next
            # a refused handshake (TLS) can leave the socket open in redis-py
            with contextlib.suppress(Exception):
                await connection.disconnect(nowait=True)
            raise

    async def _diagnose(self, exc: BaseException) -> str | None:
        """Why opening a connection failed, when it is a security refusal (else None)."""
        if isinstance(exc, rexc.AuthenticationError):
            text = str(exc).lower()
            return next((r for t, r in _AUTH_TEXTS if t in text), "bad-credentials")
        reason = tls_failure(exc)
        if reason is not None:
            return reason
        kw = self.connection_kwargs
        tls = kw.get("tls_context") is not None
        host, port = kw["host"], kw["port"]
        timed_out = isinstance(exc, rexc.TimeoutError | TimeoutError) or (
            "handshake is taking longer" in str(exc)
        )
        seconds = probe_seconds(self.wait_timeout)
        if tls and timed_out:
            # a plain server waits for a command end that a TLS ClientHello never sends
            return "tls-not-offered" if await _answers_plain(host, port, seconds) else None
        # a TLS server drops a plain client; TLS 1.3: a refused client certificate's alert
        # races the first command and may arrive as a reset
        return await diagnose_tls(
            host, port, kw.get("tls_context"), kw.get("server_hostname") or None, seconds
        )

    async def release(self, connection: Any) -> None:
        try:
            await super().release(connection)
        finally:
            self._slots.release()


_PROBE_SECONDS = PROBE_SECONDS


async def _answers_plain(host: str, port: int, seconds: float) -> bool:
    """True when the server at ``host:port`` answers a plain-text PING (a reply or an error)."""
    try:
        async with asyncio.timeout(seconds):
            reader, writer = await asyncio.open_connection(host, port)
            try:
                writer.write(b"PING\r\n")
                first = await reader.read(1)
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
    except (OSError, TimeoutError):
        return False
    return first in (b"+", b"-")


class TLSConnection(Connection):
    """A redis.asyncio connection over TLS with a given ``ssl.SSLContext`` (redis-py's own
    ``SSLConnection`` builds its context from file names only)."""

    def __init__(
        self, *, tls_context: ssl.SSLContext, server_hostname: str | None = None, **kw: Any
    ) -> None:
        super().__init__(**kw)
        self.tls_context = tls_context
        self.server_hostname = server_hostname

    def _connection_arguments(self) -> Mapping[str, Any]:
        kwargs = dict(super()._connection_arguments())
        kwargs["ssl"] = self.tls_context
        if self.server_hostname is not None:
            kwargs["server_hostname"] = self.server_hostname
        return kwargs

    async def _connect(self) -> None:
        # asyncio's own handshake timeout closes the socket; a cancelled handshake (redis-py
        # wraps the whole connect in a timeout) leaks it
        limit = float(self.socket_connect_timeout or 5.0)
        async with asyncio.timeout(limit + _PROBE_SECONDS):
            reader, writer = await asyncio.open_connection(
                **self._connection_arguments(), ssl_handshake_timeout=limit
            )
        self._reader, self._writer = reader, writer
        sock = writer.transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    async def disconnect(self, nowait: bool = False, **kwargs: Any) -> None:  # type: ignore[override]
        # a graceful TLS close waits for the server's close_notify (redis-py bounds the wait
        # and then leaves the socket to the garbage collector): every reply was read, so the
        # transport is aborted instead
        writer = self._writer
        if writer is not None:
            writer.transport.abort()
        await super().disconnect(nowait=True, **kwargs)


def client_settings(
    url: str,
    tls: TLSConfig | ssl.SSLContext | None,
    username: str | None,
    password: str | Secret | None,
) -> tuple[str, ssl.SSLContext | None, str | None, Credentials]:
    """``(URL without user info, TLS context, server name, credentials)`` from an adapter's
    arguments: ``rediss://`` or ``tls=`` turns TLS on; user and password come from the
    arguments or the URL (not both); redis-py's ``ssl_*`` query options become a
    :class:`TLSConfig` (:mod:`._url`), any other query option but ``db`` is refused."""
    clean, url_user, url_password = split_url(url)
    scheme = clean.split("://", 1)[0].lower()
    if scheme not in ("redis", "rediss"):
        raise ValidationError(
            "url must be redis://… or rediss://… (unix sockets are not offered)",
            field="url",
            value=clean,
        )
    for name, arg, given in (
        ("username", username, url_user),
        ("password", password, url_password),
    ):
        if arg is not None and given is not None:
            raise ValidationError(f"{name} given both as an argument and in the URL", field=name)
    creds = Credentials(
        username=username if username is not None else url_user,
        password=as_secret(password if password is not None else url_password, "password"),
    )
    clean, url_tls = url_options(clean)
    if url_tls:
        if tls is not None:
            raise ValidationError(
                "TLS given both in the URL's ssl_* options and as tls=: give one",
                field="tls",
                value=sorted(url_tls),
            )
        tls = TLSConfig(**url_tls)
    context: ssl.SSLContext | None
    hostname = None
    if isinstance(tls, ssl.SSLContext):
        context = tls
    elif isinstance(tls, TLSConfig):
        context, hostname = tls.context(), tls.server_hostname
    elif tls is None:
        context = TLSConfig().context() if scheme == "rediss" else None
    else:
        raise ValidationError(
            "tls must be a TLSConfig, an ssl.SSLContext or None", field="tls", value=type(tls)
        )
    if scheme == "rediss":
        clean = "redis" + clean[len("rediss") :]
    return clean, context, hostname, creds


def make_client(
    url: str,
    *,
    protocol: int,
    max_connections: int,
    timeout: float,
    tls: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
    credentials: Credentials | None = None,
) -> Redis:
    """A redis.asyncio client on a waiting pool with retries off and ``protocol`` pinned.

    ``timeout`` bounds the wait for a pooled connection and the connect; each command's
    deadline is kept by a :class:`~videoflow_aio.adapters._watchdog.Watchdog` in
    :class:`RedisConnection` (redis-py's ``socket_timeout`` wraps every send in
    ``asyncio.wait_for``, a task per call; an anyio cancel scope per call cost about a quarter
    of CAS throughput here, ``asyncio.timeout`` about a tenth).
    """
    extra: dict[str, Any] = {}
    if tls is not None:
        extra = {
            "connection_class": TLSConnection,
            "tls_context": tls,
            "server_hostname": server_hostname,
        }
    creds = credentials or Credentials()
    if creds.username is not None:
        extra["username"] = creds.username
    if creds.password is not None:
        extra["password"] = creds.password.reveal()
    pool = WaitingConnectionPool.from_url(
        url,
        wait_timeout=timeout,
        max_connections=max_connections,
        protocol=protocol,
        retry=Retry(NoBackoff(), 0),
        health_check_interval=0,
        # over TLS, the rest of the deadline names a handshake a plain server never answers
        # (_diagnose); a plain connect keeps all of it
        socket_connect_timeout=(
            timeout if tls is None else max(timeout / 2, timeout - probe_seconds(timeout))
        ),
        **extra,
    )
    return Redis(connection_pool=pool, protocol=protocol)


def unavailable(exc: BaseException, what: str) -> BackendUnavailable:
    """Map a redis-py exception raised by a read or a definite refusal."""
    text = str(exc)
    if isinstance(exc, rexc.NoPermissionError) or any(t in text for t in _DENIED_TEXTS):
        return AccessDenied(
            f"redis {what}: refused by the server's ACL: {text}",
            backend="redis",
            operation=what,
        )
    return BackendUnavailable(f"redis {what} failed: {type(exc).__name__}: {exc}", backend="redis")


def not_sent(exc: BaseException, what: str) -> BackendUnavailable:
    """Map a connection that could not be had (a :class:`NotSent`: nothing sent, nothing
    applied)."""
    if isinstance(exc, NotSent) and exc.security is not None:
        return AuthenticationFailed(
            f"redis {what}: the connection was refused ({exc.security}): {exc}",
            backend="redis",
            reason=exc.security,
        )
    return BackendUnavailable(f"redis {what}: not sent ({exc})", backend="redis", applied=False)


def _lost(exc: BaseException, what: str, timeout: float, write: bool) -> BaseException:
    """A failure after the command may have left: not sent when the pool or the connect
    failed (redis-py says so only in its text, matched here), else a lost reply for a write,
    a failed read otherwise."""
    text = str(exc)
    refused = isinstance(exc, rexc.ConnectionError) and (
        _POOL_EXHAUSTED in text or _CONNECT_FAILED in text
    )
    if refused or (write and not _CONNECTED.get()):  # (or the deadline passed connecting)
        return BackendUnavailable(
            f"redis {what}: not sent ({type(exc).__name__}: {exc})",
            backend="redis",
            applied=False,
        )
    if write:
        return ReplyLost(what)
    if isinstance(exc, rexc.TimeoutError | TimeoutError):
        return BackendUnavailable(f"redis {what} timed out after {timeout}s", backend="redis")
    return unavailable(exc, what)


@functools.lru_cache(maxsize=256)
def errors(what: str, *, timeout: float, write: bool = False) -> map_exceptions:
    """The error table of a Redis call site (``adapters._errors.map_exceptions``), mapping
    what redis-py, the socket and the deadline raise onto the contract:

    - never sent (no pooled connection free in time, none could be opened):
      :class:`BackendUnavailable` with ``applied=False``, or :class:`AuthenticationFailed`
      when the server or TLS refused the client;
    - refused by the server (``ResponseError``: OOM, wrong type, script error): nothing
      applied, :class:`BackendUnavailable` (:class:`AccessDenied` for the ACL);
    - anything else (deadline, connection lost, protocol error): for a read
      :class:`BackendUnavailable`; for a ``write`` :class:`ReplyLost`, since the request may
      have applied and only its marker can tell.

    Cancellation passes through untouched. One table per (call site, deadline, write): built
    once, cached.
    """
    return map_exceptions(
        {
            NotSent: lambda exc: not_sent(exc, what),
            rexc.ResponseError: lambda exc: unavailable(exc, what),
            (rexc.RedisError, OSError): lambda exc: _lost(exc, what, timeout, write),
        }
    )


class RedisClient:
    """One store's client on a :class:`~videoflow_aio.adapters.redis.RedisConnection`: its
    pool, namespace, deadlines and the resolution protocol for writes."""

    def __init__(self, connection: RedisConnection, *, namespace: str) -> None:
        self.connection = connection
        timeout = connection.timeout
        wait_timeout = connection.wait_timeout
        self.wait_replicas = connection.wait_replicas
        self.wait_ms = max(1, round(wait_timeout * 1000))
        self.url = connection.url  # never the password
        self.tls = connection.tls_context is not None
        self.username = connection.username
        self.ns = namespace
        self.timeout = timeout
        self.window_ms = max(1, int(connection.outcome_window_seconds * 1000))
        self.client = make_client(
            connection.url,
            protocol=connection.protocol,
            max_connections=connection.max_connections,
            timeout=timeout,
            tls=connection.tls_context,
            server_hostname=connection.server_hostname,
            credentials=connection.credentials,
        )
        self._resolve = self.client.register_script(RESOLVE)
        self.side = Affinity()  # the stores and controls on this client share it (bridged)
        self._deadline = Watchdog(timeout)
        self.resolutions: Counter[str] = Counter()
        """Writes whose reply was lost, by how the marker resolved them (``applied``,
        ``not_applied``, ``unknown``)."""
        self._deadline_wait = Watchdog(timeout + wait_timeout)  # a write and its WAIT

    def marker(self, rid: str) -> str:
        return f"{self.ns}:op:{rid}"

    def script(self, source: str) -> Any:
        return self.client.register_script(source)

    async def aclose(self) -> None:
        """Close the client and every pooled connection (the pool is ours: redis-py would
        leave its connections open, to be reclaimed by the garbage collector)."""
        with contextlib.suppress(rexc.RedisError, OSError):  # closing a dead connection
            await self.client.aclose(close_connection_pool=True)

    async def read(self, what: str, coro_fn: Any, *args: Any) -> Any:
        """Run a read with the deadline; failures become :class:`BackendUnavailable`."""
        with errors(what, timeout=self.timeout):
            async with self._deadline.guard():
                return await coro_fn(*args)

    async def drop_namespace(self) -> None:
        """Delete every key under ``<namespace>:`` (UNLINK in batches)."""

        async def drop() -> None:
            batch: list[Any] = []
            async for k in self.client.scan_iter(match=f"{glob_escape(self.ns)}:*", count=1000):
                batch.append(k)
                if len(batch) >= 500:
                    await self.client.unlink(*batch)
                    batch.clear()
            if batch:
                await self.client.unlink(*batch)

        await self.read("drop_namespace", drop)

    async def write(
        self, what: str, script: Any, keys: Sequence[str], args: Sequence[Any], rid: str
    ) -> Any:
        """Run a write script that honours the marker protocol; never guess its outcome.

        Returns the script's reply. On a lost reply returns the marker value when the write
        applied, raises :class:`BackendUnavailable` (``applied=False``) when it was fenced, and
        :class:`OutcomeUnknown` when the resolution failed too. On cancellation the outcome
        is settled (resolved and fenced, shielded, within the deadline) before re-raising.
        """
        connected = _CONNECTED.set(False)
        try:
            with errors(what, timeout=self.timeout, write=True):
                if self.wait_replicas:
                    async with self._deadline_wait.guard():
                        reply, acked = await self._run_and_wait(script, keys, args)
                    return self._replicated(what, reply, acked)
                async with self._deadline.guard():
                    return await script(keys=keys, args=args)
        except ReplyLost as lost:
            cause = lost.__cause__ or lost
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True), anyio.move_on_after(self.timeout):
                await self._settle(rid)
            raise
        finally:
            _CONNECTED.reset(connected)
        try:
            marker = await self._resolve_or_unknown(what, rid, cause)
        except OutcomeUnknown:
            self.resolutions["unknown"] += 1
            raise
        self.resolutions["not_applied" if marker is None else "applied"] += 1
        if marker is None:
            raise BackendUnavailable(
                f"redis {what}: reply lost ({type(cause).__name__}); resolved as not applied",
                backend="redis",
                applied=False,
            ) from cause
        if self.wait_replicas:
            return await self._replicated_marker(what, rid, marker)
        return marker

    async def _run_and_wait(
        self, script: Any, keys: Sequence[str], args: Sequence[Any]
    ) -> tuple[Any, int]:
        """The script, then ``WAIT`` on the same connection (WAIT counts the replicas that
        acknowledged this connection's writes), sent together: one round trip, written to a
        pooled connection directly (a redis-py pipeline object cost a fifth of a write's
        client time here; its pipelined scripts would also ask ``SCRIPT EXISTS`` first). An
        unknown script is loaded on ``NOSCRIPT`` — which ran nothing — and sent again."""
        for attempt in (1, 2):
            reply, acked = await self._send_pair(
                ("EVALSHA", script.sha, len(keys), *keys, *args),
                ("WAIT", self.wait_replicas, self.wait_ms),
            )
            if isinstance(reply, rexc.NoScriptError) and attempt == 1:
                script.sha = await self.client.script_load(script.script)
                continue
            if isinstance(reply, Exception):
                raise reply
            # a WAIT that failed confirmed nothing (the write itself applied)
            return reply, 0 if isinstance(acked, Exception) else int(acked)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _send_pair(self, first: tuple[Any, ...], second: tuple[Any, ...]) -> tuple[Any, Any]:
        """Both commands in one write, both replies read (an error reply is returned, not
        raised). A connection left with an unread reply is closed, never reused."""
        pool = self.client.connection_pool
        conn = await pool.get_connection()  # type: ignore[no-untyped-call]
        try:
            await conn.send_packed_command(conn.pack_commands([first, second]))
            replies = []
            for _ in range(2):
                try:
                    replies.append(await conn.read_response())
                except rexc.ResponseError as err:  # read whole: the connection stays in step
                    replies.append(err)
        except BaseException:
            await conn.disconnect(nowait=True)
            raise
        finally:
            await pool.release(conn)
        return replies[0], replies[1]

    def _replicated(self, what: str, reply: Any, acked: int) -> Any:
        if acked >= self.wait_replicas:
            return reply
        raise ReplicationUnconfirmed(
            f"redis {what}: applied on the primary, but {acked} of {self.wait_replicas} "
            f"replica(s) acknowledged it within {self.wait_ms} ms; a failover now may lose it",
            operation=what,
            acked=acked,
            wanted=self.wait_replicas,
            reply=reply,
        )

    async def _replicated_marker(self, what: str, rid: str, marker: bytes) -> bytes:
        """A lost reply resolved as applied: wait for the replicas on a connection of ours (a
        write of the marker's expiry, so WAIT covers everything up to now, that write too)."""

        async def touch_and_wait() -> tuple[Any, int]:
            async with self.client.pipeline(transaction=False) as pipe:
                pipe.pexpire(self.marker(rid), self.window_ms)
                pipe.execute_command("WAIT", self.wait_replicas, self.wait_ms)
                touched, acked = await pipe.execute()
            return touched, int(acked)

        try:
            with errors("wait", timeout=self.timeout):
                async with self._deadline_wait.guard():
                    _, acked = await touch_and_wait()
        except BackendUnavailable:
            acked = 0
        return bytes(self._replicated(what, marker, acked))

    async def _settle(self, rid: str) -> bytes | None:
        try:
            with errors("resolve", timeout=self.timeout):
                result = await self._resolve(keys=[self.marker(rid)], args=[self.window_ms])
        except BackendUnavailable:
            return None
        return result if result and result != FENCED else None

    async def _resolve_or_unknown(self, what: str, rid: str, cause: BaseException) -> bytes | None:
        try:
            with errors("resolve", timeout=self.timeout), anyio.fail_after(self.timeout):
                result = await self._resolve(keys=[self.marker(rid)], args=[self.window_ms])
        except BackendUnavailable as exc:
            raise OutcomeUnknown(
                f"redis {what}: reply lost ({type(cause).__name__}: {cause}) and the read-back "
                f"failed ({exc}); it may or may not have applied",
                operation=what,
                request_id=rid,
                # the read-back was refused (user deleted, password changed): say so
                refused=(
                    exc.reason
                    if isinstance(exc, AuthenticationFailed)
                    else exc.operation
                    if isinstance(exc, AccessDenied)
                    else None
                ),
            ) from cause
        if result is None or result is False or result == FENCED:
            return None
        return bytes(result)


def glob_escape(s: str) -> str:
    """``s`` with the glob characters of SCAN's MATCH escaped."""
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in s)
