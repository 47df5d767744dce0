"""One nats-py connection of a JetStream backend, and what is routed through it.

* :func:`connect` fails fast and names the cause: every seed URL is tried once within
  ``connect_timeout`` each; when all failed, :class:`BackendUnavailable` names the URLs and the
  last error (nats-py alone would keep retrying an unreachable server for as long as allowed).
  A refused client (credentials, certificates, TLS on one side only) is
  :class:`AuthenticationFailed` at the first refusal, with TLS and credentials from a
  :class:`~._security.NatsAuth` (``_security``).
* :class:`Client` holds the connection (made on first use, on the loop of that use), the pull
  inbox, the per-channel and per-subscription state, and the administrator watch:
  :class:`AuditWatch` follows the server's JetStream API audit advisories live and remembers,
  per stream, the server time of the latest purge (a purge removes leased messages without
  any advisory, so a drop count across one cannot be trusted) and since when this client has
  watched without interruption.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, overload

import anyio
import msgspec
import nats
import nats.errors
import sniffio

from ...contracts.errors import AuthenticationFailed, BackendUnavailable, Unsupported
from ...contracts.messaging import ChannelId, SubscriptionId
from ...observe import ObservationLog
from . import _api, _security
from ._api import ApiError
from ._ledger import parse_ts
from ._names import AUDIT, Names
from ._state import Bounded, ChanState, Pull, SubState
from ._wire import ConsumerInfo, MsgGet, R, Reply, StreamInfo

if TYPE_CHECKING:
    from .connection import NatsConnection

MIXED = (
    "this NATS backend was first used from asyncio: its connection lives on that loop, "
    "so it cannot be used from trio (use one backend per async library)"
)


def server_list(url: str | Sequence[str]) -> list[str]:
    """The server URLs: a list as given, or a string of one URL or several comma-separated
    (``nats://h1:4222,nats://h2:4222``, what a cluster's seed list usually looks like)."""
    if isinstance(url, str):
        return [u.strip() for u in url.split(",") if u.strip()]
    return list(url)


def loop_time() -> float:
    """The running asyncio loop's clock (under trio, the bridge loop reads trio's clock)."""
    return asyncio.get_running_loop().time()


ELECTION_POLL = 0.05
"""Seconds between asks while nobody answers for a stream or consumer that exists (no
responders: its leader is being elected, or its interest has not reached this server)."""


async def await_leader(until: float) -> bool:
    """Pause ``ELECTION_POLL`` before asking a leaderless group again; False, without a
    pause, when that would pass the loop-clock ``until``."""
    if loop_time() + ELECTION_POLL >= until:
        return False
    await asyncio.sleep(ELECTION_POLL)  # asyncio-side: nats-py's loop
    return True


def on_asyncio_side() -> None:
    """Refuse to touch nats-py outside asyncio (a backend first used from asyncio, then
    called from trio, is not bridged: its connection belongs to the asyncio loop)."""
    try:
        lib = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        lib = ""
    if lib != "asyncio":
        raise Unsupported(MIXED, capability="trio")


class _GiveUp(Exception):
    """Raised from nats-py's error callback once every seed URL failed its first attempt."""


async def connect(
    opts: dict[str, Any],
    servers: Sequence[str],
    connect_timeout: float,
    auth: _security.NatsAuth | None = None,
) -> Any:
    """``nats.connect`` that tries each of ``servers`` once (``connect_timeout`` each) and
    raises :class:`BackendUnavailable` naming the URLs and the cause when none answers, or
    :class:`AuthenticationFailed` when one refused the client (``auth``: TLS, credentials).

    ``opts['error_cb']``, if given, still sees every error; after the connection is made the
    reconnect policy in ``opts`` applies as usual.
    """
    causes: list[str] = []
    user_cb = opts.get("error_cb")
    connected = False
    auth = auth or _security.NatsAuth()
    nc = _security.new_client(auth)

    async def on_error(exc: Exception) -> None:
        _security.on_error(nc, exc, auth, connected=connected)
        if user_cb is not None:
            await user_cb(exc)
        if connected:
            return
        causes.append(f"{type(exc).__name__}: {exc}".strip().rstrip(":"))
        if len(causes) >= len(servers):
            raise _GiveUp

    budget = connect_timeout * len(servers) + 1.0
    where = ", ".join(servers)
    try:
        with anyio.fail_after(budget):
            await nc.connect(**{**opts, **auth.options(), "error_cb": on_error})
    except AuthenticationFailed:
        await _security.discard(nc)
        raise
    except Exception as exc:  # nats-py raises assorted errors (OSError, NoServersError…)
        await _security.discard(nc)
        refusal = await _security.diagnose(servers, auth, connect_timeout)
        if refusal is not None:
            raise refusal from exc
        if causes:
            cause = causes[-1]
        elif isinstance(exc, TimeoutError):
            cause = f"no answer within {budget:g} s"
        else:
            cause = f"{type(exc).__name__}: {exc}"
        raise BackendUnavailable(
            f"cannot connect to NATS at {where}: {cause}", backend="nats"
        ) from exc
    connected = True
    return nc


class _Audit(msgspec.Struct):
    subject: str = ""
    timestamp: str = ""


_audit_dec = msgspec.json.Decoder(_Audit).decode
_PURGE = b"STREAM.PURGE."
_PURGE_PREFIX = "$JS.API.STREAM.PURGE."


class AuditWatch:
    """The live watch for purges of this namespace's streams (see the module docstring)."""

    def __init__(self, stream_prefix: str) -> None:
        self.prefix = stream_prefix + "__"
        self.since: int | None = None  # server ns from which every purge was seen
        self.starting = False
        self.purges: dict[str, int] = {}
        self.sub: Any = None

    async def start(self, nc: Any) -> None:
        if self.sub is not None:
            return
        self.sub = await nc.subscribe(AUDIT, cb=self._on_audit)
        self.starting = True

    async def _on_audit(self, msg: Any) -> None:
        data = msg.data
        if _PURGE not in data:
            return
        try:
            audit = _audit_dec(data)
        except msgspec.DecodeError:
            self.since = None  # an audit we cannot read: we can no longer vouch
            return
        if audit.subject.startswith(_PURGE_PREFIX):
            stream = audit.subject[len(_PURGE_PREFIX) :]
            if stream.startswith(self.prefix):
                at = parse_ts(audit.timestamp)
                self.purges[stream] = max(self.purges.get(stream, 0), at)

    def saw_server_time(self, ts: int) -> None:
        """A reply stamped ``ts`` arrived after the watch was (re)started: it covers from there."""
        if self.starting and ts:
            self.since = ts
            self.starting = False

    def interrupted(self) -> None:
        """The connection dropped: audits meanwhile were missed."""
        self.since = None
        self.starting = self.sub is not None

    async def settle_queue(self) -> None:
        """Let the callback handle every audit already received."""
        sub = self.sub
        if sub is None:
            return
        for _ in range(1000):
            if not sub.pending_msgs:
                return
            await anyio.lowlevel.checkpoint()

    def purge_possible(self, stream: str, since: int) -> bool:
        """Whether a purge of ``stream`` may have happened after server time ``since``
        (seen one, or was not watching the whole time)."""
        if self.since is None or self.since > since:
            return True
        return self.purges.get(stream, -1) >= since


class Client:
    """A backend's connection and registries (see the module docstring)."""

    def __init__(
        self,
        connection: NatsConnection,
        names: Names,
        *,
        request_timeout: float,
        log: ObservationLog | None,
    ) -> None:
        self.connection = connection
        self.servers = connection.servers
        self.auth = connection.auth
        self.names = names
        self.request_timeout = request_timeout
        self.log = log
        self.nc: Any = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.server_max_payload = 0  # the server's max_payload, once connected
        self._lock: anyio.Lock | None = None
        self.inbox = ""
        self.inbox_sub: Any = None
        self.pulls: dict[str, Pull] = {}
        # every background task of this client: index writes (awaited on close), lease-lapse
        # nudges (cancelled on close)
        self.tasks = connection.tasks("nats client", request_timeout)
        self.pull_ids = itertools.count(1)
        self.chans: dict[ChannelId, ChanState] = {}
        self.subs: dict[SubscriptionId, SubState] = {}
        self.by_consumer: dict[tuple[str, str], SubState] = {}
        self.pubs = Bounded()  # publication id -> (outcome, first attempt time, envelope)
        self.connection_errors: list[str] = []
        self.archive_errors: list[str] = []
        self.audit = AuditWatch(names.stream_prefix)
        self.reconnects = 0
        self.lease_margin = 0.01
        self.on_pull_reply: Any = None  # set by the backend: the inbox callback
        # a fault a test control injects (``lose_reply``): the next settle or renew on each
        # of these subscriptions is sent and applied, and its confirmation lost
        self.lose_replies: set[SubscriptionId] = set()

    def ready(self) -> Any:
        """The open connection when it is usable from the running loop (the one it was made
        on: asyncio's, or the bridge's), else None (then :meth:`conn`). A plain call: the hot
        paths test it before awaiting :meth:`conn`."""
        nc = self.nc
        if nc is not None and not nc.is_closed and self.loop is asyncio._get_running_loop():
            return nc
        return None

    async def conn(self) -> Any:
        nc = self.ready()
        if nc is not None:
            return nc
        on_asyncio_side()
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            if self.nc is not None and not self.nc.is_closed:
                return self.nc
            link = self.connection
            opts: dict[str, Any] = {
                "max_reconnect_attempts": -1,
                "reconnect_time_wait": 0.2,
                "connect_timeout": link.connect_timeout,
                "allow_reconnect": True,
                "error_cb": self._on_error,
                "disconnected_cb": self._on_disconnected,
                "reconnected_cb": self._on_reconnected,
            }
            if not link.buffer_while_disconnected:
                opts["pending_size"] = 0
            nc = await link.connect(opts)
            self.inbox = nc.new_inbox()
            try:
                start = _security.mark(nc)
                self.inbox_sub = await nc.subscribe(f"{self.inbox}.*", cb=self.on_pull_reply)
                await self.audit.start(nc)
                # the server refuses a subscription only asynchronously: confirm both
                await _security.check_subscribe(
                    nc, (f"{self.inbox}.*", AUDIT), start, "subscribe", self.request_timeout
                )
            except BackendUnavailable:  # refused, or not confirmed
                with contextlib.suppress(Exception):
                    await nc.close()
                raise
            except nats.errors.Error as exc:
                with contextlib.suppress(Exception):
                    await nc.close()
                raise BackendUnavailable(
                    f"cannot subscribe on {', '.join(self.servers)}: {exc}", backend="nats"
                ) from exc
            self.nc = nc
            self.loop = asyncio.get_running_loop()
            self.server_max_payload = int(getattr(nc, "max_payload", 0) or 0)
            return nc

    async def _on_error(self, exc: Exception) -> None:
        self.connection_errors.append(f"{type(exc).__name__}: {exc}")
        del self.connection_errors[:-32]
        if isinstance(exc, nats.errors.SlowConsumerError) and exc.sub is self.audit.sub:
            self.audit.interrupted()

    async def _on_disconnected(self) -> None:
        self.audit.interrupted()

    async def _on_reconnected(self) -> None:
        """The server may have restarted and forgotten recent consumer state: delivery
        sequences it hands out may repeat, so this client's delivery records no longer prove
        anything about the delivery window they covered."""
        self.reconnects += 1
        self.audit.interrupted()
        for st in self.subs.values():
            st.deliveries.clear()
            st.void_give_backs()

    async def aclose(self) -> None:
        """Close the connection after its background tasks: nudges cancelled, index writes
        awaited (``_tasks``); an unexpected error of one is raised after the close."""
        nc, self.nc = self.nc, None
        for st in self.subs.values():
            st.cancel_nudges()  # no nudge runs after close
        try:
            await self.tasks.aclose()
        finally:
            if nc is not None:
                with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
                    with anyio.move_on_after(self.request_timeout):
                        await nc.drain()
                    if not nc.is_closed:
                        await nc.close()

    @overload
    async def api(self, subject: str, body: dict[str, Any] | None = None) -> Reply: ...

    @overload
    async def api(self, subject: str, body: dict[str, Any] | None, into: type[R]) -> R: ...

    async def api(
        self, subject: str, body: dict[str, Any] | None = None, into: type[Reply] = Reply
    ) -> Reply:
        """A JetStream API call (``$JS.API.<subject>``), its reply decoded as ``into``
        (``_wire``); :class:`CallFailed` on failure."""
        nc = await self.conn()
        reply = await _api.api(nc, f"$JS.API.{subject}", body, self.request_timeout, into)
        self.audit.saw_server_time(parse_ts(reply.ts))
        return reply

    async def stream_info(self, name: str, body: dict[str, Any] | None = None) -> StreamInfo | None:
        """``STREAM.INFO`` or None when the stream does not exist."""
        try:
            return await self.api(f"STREAM.INFO.{name}", body, StreamInfo)
        except ApiError as exc:
            if exc.err_code == _api.STREAM_NOT_FOUND:
                return None
            raise

    async def consumer_info(self, stream: str, consumer: str) -> ConsumerInfo | None:
        """``CONSUMER.INFO`` or None when the consumer (or its stream) does not exist."""
        try:
            return await self.api(f"CONSUMER.INFO.{stream}.{consumer}", None, ConsumerInfo)
        except ApiError as exc:
            if exc.err_code in (_api.CONSUMER_NOT_FOUND, _api.STREAM_NOT_FOUND):
                return None
            raise

    async def retained(self, stream: str, seq: int) -> bool:
        """Whether ``stream`` still holds message ``seq`` (``CallFailed`` when it cannot
        tell)."""
        try:
            await self.api(f"STREAM.MSG.GET.{stream}", {"seq": seq}, MsgGet)
        except ApiError as exc:
            if exc.err_code == _api.NO_MESSAGE_FOUND:
                return False
            raise
        return True

    def forget_channel(self, ch: ChannelId) -> None:
        self.chans.pop(ch, None)
        for sid in [s for s in self.subs if s.channel == ch]:
            self.forget_sub(sid)

    def forget_sub(self, sid: SubscriptionId) -> None:
        st = self.subs.pop(sid, None)
        if st is not None:
            st.cancel_nudges()
            self.by_consumer.pop((st.stream, st.consumer), None)

    def record(self, kind: str, subject: str, ident: str, **attrs: Any) -> None:
        """An event in the caller's observation log, if one was given."""
        if self.log is not None:
            self.log.record(kind, subject=subject, ident=ident, **attrs)
