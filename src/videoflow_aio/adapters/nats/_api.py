"""A thin raw client for the JetStream JSON API (``$JS.API.…``) over one nats-py connection.

Raw requests, not nats-py's manager, because the adapter needs what the manager cannot send:
``action: "create"`` for consumers (the manager silently updates a durable), pull requests with
``max_bytes``, ``deleted_details``. Every nats-py exception is turned into one of
:class:`ApiError` (the server answered with an error), :class:`NoAnswer` (no reply before the
timeout: the outcome is unknown) or :class:`NotSent` (the request never left this client), each
with the original chained as ``__cause__``.
"""

from __future__ import annotations

from typing import Any

import msgspec
import nats.errors

from ...contracts.errors import VideoflowError
from . import _security

_json_encode = msgspec.json.Encoder().encode
_json_decode = msgspec.json.Decoder().decode

STREAM_NOT_FOUND = 10059
CONSUMER_NOT_FOUND = 10014
CONSUMER_EXISTS = 10148
STREAM_NAME_IN_USE = 10058
NO_MESSAGE_FOUND = 10037


class ApiError(VideoflowError):
    """The server answered with an error (``code``, ``err_code``, ``description``)."""

    def __init__(self, code: int, err_code: int, description: str) -> None:
        super().__init__(f"JetStream error {code}/{err_code}: {description}")
        self.code = code
        self.err_code = err_code
        self.description = description


class NoAnswer(VideoflowError):
    """No reply before the timeout (or the connection died in flight): outcome unknown."""


class NotSent(VideoflowError):
    """The request never left the client (closed connection, disconnected with no buffer)."""


class NoResponders(VideoflowError):
    """Nobody listens on the subject (no stream / JetStream disabled / consumer gone)."""


async def request(
    nc: Any, subject: str, payload: bytes, seconds: float, headers: Any = None
) -> Any:
    """``nc.request`` with nats-py's exceptions mapped (see the module docstring); a request
    the server refused (permissions) is ``AccessDenied`` instead of no answer."""
    start = _security.mark(nc)
    try:
        return await nc.request(subject, payload, timeout=seconds, headers=headers)
    except nats.errors.NoRespondersError as exc:
        raise NoResponders(f"no responders on {subject}") from exc
    except nats.errors.TimeoutError as exc:
        _security.raise_if_denied(nc, subject, start, "request")
        raise NoAnswer(f"no reply on {subject} within {seconds:.3g} s") from exc
    except (
        nats.errors.ConnectionClosedError,
        nats.errors.OutboundBufferLimitError,
        nats.errors.ConnectionDrainingError,
    ) as exc:
        _security.raise_if_denied(nc, subject, start, "request")
        raise NotSent(f"not sent ({type(exc).__name__})") from exc
    except nats.errors.Error as exc:
        _security.raise_if_denied(nc, subject, start, "request")
        raise NoAnswer(f"{type(exc).__name__}: {exc}") from exc


async def api(nc: Any, subject: str, body: dict[str, Any] | None, seconds: float) -> dict[str, Any]:
    """One JSON API call; raises :class:`ApiError` on an error reply."""
    msg = await request(nc, subject, b"" if body is None else _json_encode(body), seconds)
    try:
        data: dict[str, Any] = _json_decode(msg.data) if msg.data else {}
    except msgspec.DecodeError as exc:
        raise NoAnswer(f"undecodable reply on {subject}: {msg.data[:80]!r}") from exc
    err = data.get("error")
    if err:
        raise ApiError(
            int(err.get("code", 0)), int(err.get("err_code", 0)), str(err.get("description", ""))
        )
    return data


encode = _json_encode
decode = _json_decode
