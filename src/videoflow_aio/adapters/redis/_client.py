"""The redis-py client every Redis adapter shares: pool, error mapping, ambiguous writes.

- ``protocol`` is explicit (redis-py 8 defaults to RESP3, which Redis < 6 rejects).
- A waiting pool (:class:`WaitingConnectionPool`): a full pool waits instead of raising.
- redis-py's own retries are off (``Retry(NoBackoff(), 0)``): a re-sent write is not the
  adapter's decision to make; writes are resolved instead (:meth:`RedisConnection.write`).
- Every redis-py exception is mapped onto ``videoflow_aio.contracts.errors`` (cause chained)
  in one place, :func:`map_exceptions`.

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
import itertools
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import anyio
from redis import exceptions as rexc
from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from ...contracts.errors import BackendUnavailable, OutcomeUnknown, ValidationError
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
        wait_replicas: int = 0,
        wait_timeout: float = 1.0,
    ) -> None:
        if protocol not in (2, 3):
            raise ValueError("protocol must be 2 or 3")
        if (
            isinstance(wait_replicas, bool)
            or not isinstance(wait_replicas, int)
            or wait_replicas < 0
        ):
            raise ValidationError(
                "wait_replicas must be an int >= 0", field="wait_replicas", value=wait_replicas
            )
        if not isinstance(wait_timeout, int | float) or not wait_timeout > 0:
            raise ValidationError(
                "wait_timeout must be > 0 seconds (WAIT 0 would block forever)",
                field="wait_timeout",
                value=wait_timeout,
            )
        self.wait_replicas = wait_replicas
        self.wait_ms = max(1, round(wait_timeout * 1000))
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
            with map_exceptions("wait", timeout=self.timeout):
                async with self._deadline_wait.guard():
                    _, acked = await touch_and_wait()
        except BackendUnavailable:
            acked = 0
        return bytes(self._replicated(what, marker, acked))

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
