"""A thin raw client for the JetStream JSON API (``$JS.API.…``) and the adapter's error mapping.

Raw requests, not nats-py's manager, because the adapter needs what the manager cannot send:
``action: "create"`` for consumers (the manager silently updates a durable), pull requests with
``max_bytes``, ``deleted_details``, batched direct gets. Every nats-py exception is turned into
one :class:`CallFailed` — :class:`ApiError` (the server answered with an error),
:class:`NoAnswer` (no reply before the timeout: the outcome is unknown), :class:`NotSent` (the
request never left this client) or :class:`NoResponders` (nobody listens on the subject) —
with the original chained as ``__cause__`` (``NotSent``, ``NoAnswer`` — a ``ReplyLost`` — and
``CallFailed`` are the ones every adapter shares, ``adapters._errors``). The shared
:func:`map_exceptions` then maps those to the contract's errors in one table per call site.
"""

from __future__ import annotations

from typing import Any

import msgspec
import nats.errors

from ...contracts.errors import BackendUnavailable, IncompatibleProfile
from .._errors import CallFailed as CallFailed
from .._errors import ExceptionMapping as ExceptionMapping
from .._errors import NotSent as NotSent
from .._errors import ReplyLost
from .._errors import map_exceptions as map_exceptions
from . import _security, _wire
from ._wire import R

_json_encode = msgspec.json.Encoder().encode
_json_decode = msgspec.json.Decoder().decode

STREAM_NOT_FOUND = 10059
CONSUMER_NOT_FOUND = 10014
CONSUMER_EXISTS = 10148
STREAM_NAME_IN_USE = 10058
NO_MESSAGE_FOUND = 10037
INVALID_CONFIG = 10052
REPLICAS_NOT_SUPPORTED = 10074
"""``num_replicas`` > 1 on a server that is not clustered."""


class ApiError(CallFailed):
    """The server answered with an error (``code``, ``err_code``, ``description``)."""

    def __init__(self, code: int, err_code: int, description: str) -> None:
        super().__init__(f"JetStream error {code}/{err_code}: {description}")
        self.code = code
        self.err_code = err_code
        self.description = description


class NoAnswer(ReplyLost):
    """No reply before the timeout (or the connection died in flight): outcome unknown."""


class NoResponders(CallFailed):
    """Nobody listens on the subject (no stream / JetStream disabled / consumer gone)."""


def replicas_refused(exc: ApiError) -> bool:
    """The server refused a stream's replica count: by its code, or — a cluster short of
    peers answers 400 with no dedicated code — by the one text this table matches."""
    return exc.err_code == REPLICAS_NOT_SUPPORTED or (
        exc.code == 400 and "replicas" in exc.description
    )


def refused(what: str, name: str, exc: BaseException) -> IncompatibleProfile:
    """The server refused ``what``'s configuration (an :class:`ApiError`)."""
    description = exc.description if isinstance(exc, ApiError) else str(exc)
    return IncompatibleProfile(
        f"{what}: the server refused the configuration: {description}",
        resource=name,
        field="config",
        expected=None,
        actual=description,
    )


def unavailable(what: str) -> map_exceptions:
    """Map every :class:`CallFailed` to :class:`BackendUnavailable` naming ``what``."""
    return map_exceptions(
        {CallFailed: lambda exc: BackendUnavailable(f"{what}: {exc}", backend="nats")}
    )


_NOT_SENT = (
    nats.errors.ConnectionClosedError,
    nats.errors.OutboundBufferLimitError,
    nats.errors.ConnectionDrainingError,
)


def call_failed(exc: BaseException, subject: str, seconds: float) -> CallFailed:
    """The :class:`CallFailed` a nats-py exception raised by a call on ``subject`` means."""
    if isinstance(exc, nats.errors.NoRespondersError):
        return NoResponders(f"no responders on {subject}")
    if isinstance(exc, TimeoutError):  # nats-py's timeouts are TimeoutErrors too
        return NoAnswer(f"no reply on {subject} within {seconds:.3g} s")
    if isinstance(exc, _NOT_SENT):
        return NotSent(f"not sent ({type(exc).__name__})")  # closed, draining, no buffer
    return NoAnswer(f"{type(exc).__name__}: {exc}")


async def request(
    nc: Any, subject: str, payload: bytes, seconds: float, headers: Any = None
) -> Any:
    """``nc.request`` with nats-py's exceptions mapped to :class:`CallFailed` (hot path: a
    plain ``try``, the mapping only runs on failure); a request the server refused for the
    user's permissions is :class:`AccessDenied` instead of no answer."""
    start = _security.mark(nc)
    try:
        return await nc.request(subject, payload, timeout=seconds, headers=headers)
    except nats.errors.Error as exc:
        _security.raise_if_denied(nc, subject, start, "request")
        raise call_failed(exc, subject, seconds) from exc


async def publish(
    nc: Any, subject: str, payload: bytes, reply: str = "", headers: Any = None
) -> None:
    """``nc.publish`` (fire and forget) with nats-py's exceptions mapped."""
    try:
        await nc.publish(subject, payload, reply=reply, headers=headers)
    except nats.errors.Error as exc:
        raise call_failed(exc, subject, 0.0) from exc


async def flushed(nc: Any, seconds: float) -> None:
    """A round trip (the server has everything sent before: ``_security.round_trip``, as
    nats-py's ``flush`` alone can overtake commands still queued) with nats-py's exceptions,
    and a bare timeout, mapped to :class:`CallFailed`."""
    try:
        await _security.round_trip(nc, seconds)
    except (nats.errors.Error, TimeoutError) as exc:
        raise call_failed(exc, "flush", seconds) from exc


async def api(
    nc: Any, subject: str, body: dict[str, Any] | None, seconds: float, into: type[R]
) -> R:
    """One JSON API call, its reply decoded as ``into`` (``_wire``); raises :class:`ApiError`
    on an error reply, :class:`NoAnswer` on one that does not decode."""
    msg = await request(nc, subject, b"" if body is None else _json_encode(body), seconds)
    try:
        reply = _wire.decoder(into).decode(msg.data or b"{}")
    except msgspec.DecodeError as exc:
        raise NoAnswer(f"undecodable reply on {subject}: {msg.data[:80]!r}") from exc
    if reply.error is not None:
        raise api_error(reply.error)
    return reply


async def raw_api(
    nc: Any, subject: str, body: dict[str, Any] | None, seconds: float
) -> dict[str, Any]:
    """One JSON API call, its reply as the server's raw JSON object (the administrator's
    ``JetStreamAdmin.request``: a reply the adapter itself does not read)."""
    msg = await request(nc, subject, b"" if body is None else _json_encode(body), seconds)
    try:
        reply = _wire.decoder(_wire.Reply).decode(msg.data or b"{}")
        data: dict[str, Any] = _json_decode(msg.data or b"{}")
    except msgspec.DecodeError as exc:
        raise NoAnswer(f"undecodable reply on {subject}: {msg.data[:80]!r}") from exc
    if reply.error is not None:
        raise api_error(reply.error)
    return data


def api_error(err: _wire.ErrorBody) -> ApiError:
    """The :class:`ApiError` of an error reply."""
    return ApiError(err.code, err.err_code, err.description)


encode = _json_encode
