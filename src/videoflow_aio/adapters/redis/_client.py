"""The redis-py client every Redis adapter shares: pool, error mapping, ambiguous writes.

- ``protocol`` is explicit (redis-py 8 defaults to RESP3, which Redis < 6 rejects).
- A waiting pool (:class:`WaitingConnectionPool`): a full pool waits instead of raising.
- redis-py's own retries are off (``Retry(NoBackoff(), 0)``): a re-sent write is not the
  adapter's decision to make; writes are resolved instead (:meth:`RedisConnection.write`).
- Every redis-py exception is mapped onto ``videoflow_aio.contracts.errors`` (cause chained)
  in one place, :func:`map_exceptions`.

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
import itertools
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import anyio
from redis import exceptions as rexc
from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from ...contracts.errors import BackendUnavailable, OutcomeUnknown
from .._trio_bridge import Affinity
from .._watchdog import Watchdog

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


class ReplyLost(Exception):
    """Internal: a write was sent and its reply lost (``__cause__`` says how); its outcome is
    resolved through the request marker."""


_RID_PREFIX = uuid.uuid4().hex[:16]
_RID_COUNTER = itertools.count()


def new_request_id() -> str:
    """Unique across processes (a random per-process prefix) and cheap (a counter)."""
    return f"{_RID_PREFIX}{next(_RID_COUNTER):x}"


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
                raise rexc.ConnectionError(f"{_POOL_EXHAUSTED}.") from err
        else:
            await self._slots.acquire()
        try:
            return await super().get_connection(*args, **kwargs)  # type: ignore[no-untyped-call]
        except BaseException:
            self._slots.release()
            raise

    async def release(self, connection: Any) -> None:
        try:
            await super().release(connection)
        finally:
            self._slots.release()


def make_client(url: str, *, protocol: int, max_connections: int, timeout: float) -> Redis:
    """A redis.asyncio client on a waiting pool with retries off and ``protocol`` pinned.

    ``timeout`` bounds the wait for a pooled connection and the connect; each command's
    deadline is kept by a :class:`~videoflow_aio.adapters._watchdog.Watchdog` in
    :class:`RedisConnection` (redis-py's ``socket_timeout`` wraps every send in
    ``asyncio.wait_for``, a task per call; an anyio cancel scope per call cost about a quarter
    of CAS throughput here, ``asyncio.timeout`` about a tenth).
    """
    pool = WaitingConnectionPool.from_url(
        url,
        wait_timeout=timeout,
        max_connections=max_connections,
        protocol=protocol,
        retry=Retry(NoBackoff(), 0),
        health_check_interval=0,
        socket_connect_timeout=timeout,
    )
    return Redis(connection_pool=pool, protocol=protocol)


def unavailable(exc: BaseException, what: str) -> BackendUnavailable:
    """Map a redis-py exception raised by a read or a definite refusal."""
    return BackendUnavailable(f"redis {what} failed: {type(exc).__name__}: {exc}", backend="redis")


@contextlib.contextmanager
def map_exceptions(what: str, *, timeout: float, write: bool = False) -> Iterator[None]:
    """Map what redis-py, the socket and the deadline raise in the block onto the contract.

    - never sent (no pooled connection free in time, none could be opened):
      :class:`BackendUnavailable` with ``applied=False``;
    - refused by the server (``ResponseError``: OOM, wrong type, script error): nothing
      applied, :class:`BackendUnavailable`;
    - anything else (deadline, connection lost, protocol error): for a read
      :class:`BackendUnavailable`; for a ``write`` :class:`ReplyLost`, since the request may
      have applied and only its marker can tell.

    Cancellation passes through untouched.
    """
    try:
        yield
    except rexc.ResponseError as exc:
        raise unavailable(exc, what) from exc
    except (rexc.RedisError, OSError) as exc:  # TimeoutError is an OSError
        text = str(exc)
        if isinstance(exc, rexc.ConnectionError) and (
            _POOL_EXHAUSTED in text or _CONNECT_FAILED in text
        ):
            raise BackendUnavailable(
                f"redis {what}: not sent ({type(exc).__name__}: {exc})",
                backend="redis",
                applied=False,
            ) from exc
        if write:
            raise ReplyLost(what) from exc
        if isinstance(exc, rexc.TimeoutError | TimeoutError):
            raise BackendUnavailable(
                f"redis {what} timed out after {timeout}s", backend="redis"
            ) from exc
        raise unavailable(exc, what) from exc


class RedisConnection:
    """A client plus the namespace, deadlines and the resolution protocol for writes."""

    def __init__(
        self,
        url: str,
        *,
        namespace: str,
        timeout: float,
        protocol: int,
        max_connections: int,
        outcome_window_seconds: float,
    ) -> None:
        if protocol not in (2, 3):
            raise ValueError("protocol must be 2 or 3")
        self.url = url
        self.ns = namespace
        self.timeout = timeout
        self.window_ms = max(1, int(outcome_window_seconds * 1000))
        self.client = make_client(
            url, protocol=protocol, max_connections=max_connections, timeout=timeout
        )
        self._resolve = self.client.register_script(RESOLVE)
        self.side = Affinity()  # the stores and controls on this client share it (bridged)
        self._deadline = Watchdog(timeout)

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
        with map_exceptions(what, timeout=self.timeout):
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
        try:
            with map_exceptions(what, timeout=self.timeout, write=True):
                async with self._deadline.guard():
                    return await script(keys=keys, args=args)
        except ReplyLost as lost:
            cause = lost.__cause__ or lost
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True), anyio.move_on_after(self.timeout):
                await self._settle(rid)
            raise
        marker = await self._resolve_or_unknown(what, rid, cause)
        if marker is None:
            raise BackendUnavailable(
                f"redis {what}: reply lost ({type(cause).__name__}); resolved as not applied",
                backend="redis",
                applied=False,
            ) from cause
        return marker

    async def _settle(self, rid: str) -> bytes | None:
        try:
            with map_exceptions("resolve", timeout=self.timeout):
                result = await self._resolve(keys=[self.marker(rid)], args=[self.window_ms])
        except BackendUnavailable:
            return None
        return result if result and result != FENCED else None

    async def _resolve_or_unknown(self, what: str, rid: str, cause: BaseException) -> bytes | None:
        try:
            with map_exceptions("resolve", timeout=self.timeout), anyio.fail_after(self.timeout):
                result = await self._resolve(keys=[self.marker(rid)], args=[self.window_ms])
        except BackendUnavailable as exc:
            raise OutcomeUnknown(
                f"redis {what}: reply lost ({type(cause).__name__}: {cause}) and the read-back "
                f"failed ({exc}); it may or may not have applied",
                operation=what,
                request_id=rid,
            ) from cause
        if result is None or result is False or result == FENCED:
            return None
        return bytes(result)


def glob_escape(s: str) -> str:
    """``s`` with the glob characters of SCAN's MATCH escaped."""
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in s)
