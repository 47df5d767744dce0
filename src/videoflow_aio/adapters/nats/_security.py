"""TLS and authentication for the NATS backends, and NATS's refusals as typed errors.

- :class:`NatsAuth` turns the backends' ``tls=``, ``username=``/``password=``, ``token=``,
  ``nkey_seed_file=`` and ``creds_file=`` (or a URL's user info, taken out of the URL) into
  nats-py connect options; its ``repr`` shows no secret.
- ``_connection.connect`` opens the connection with :func:`new_client` and :func:`on_error`.
  nats-py retries a refused connection forever and reports each refusal to ``error_cb``
  only; :func:`on_error` classifies it (wrong credentials, TLS certificates, TLS on one side
  only) and stops the connect with :class:`AuthenticationFailed` at the first one.
- TLS is enforced: nats-py upgrades only when the server asks for TLS, so a TLS client on a
  plain server would send its CONNECT — credentials included — in clear. :class:`_Client`
  refuses to write CONNECT without TLS when TLS was asked for (``"tls-not-offered"``).
- The server reports a denied publish or subscribe asynchronously
  (``-ERR 'Permissions Violation for Publish to "…"'``) and drops the message: nothing
  answers. :class:`Denials` keeps those reports per connection; a request or pull that got no
  answer asks :func:`raise_if_denied` whether its subject was refused meanwhile and raises
  :class:`AccessDenied` instead of reporting an unknown outcome or an empty fetch. A refusal
  while reconnecting (credentials revoked) is kept too and raised the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict, Unpack

import anyio
import nats
import nats.errors
from nats.aio.client import Client

from ...contracts.errors import (
    AccessDenied,
    AuthenticationFailed,
    BackendUnavailable,
    ValidationError,
)
from .._options import check_known
from .._security import (
    Credentials,
    Secret,
    TLSConfig,
    as_secret,
    check_creds_file,
    check_nkey_seed_file,
    diagnose_tls,
    probe_seconds,
    split_url,
    tls_failure,
)

_DENIAL = re.compile(r"permissions violation for (publish|subscription) to \"?([^\"']+)\"?", re.I)
_AUTH_TEXTS = (
    "authorization violation",
    "authentication expired",
    "authentication revoked",
    "user authentication",
)
ATTR = "_videoflow_denials"


class NatsAuthOptions(TypedDict, total=False):
    """The security keywords of every NATS class: ``tls`` (a :class:`TLSConfig` or an
    ``ssl.SSLContext``; ``tls://`` URLs imply it) and one way of authenticating —
    ``username``/``password``, ``token``, ``nkey_seed_file`` or ``creds_file`` (or the URL's
    user info, taken out of it)."""

    tls: TLSConfig | ssl.SSLContext | None
    username: str | None
    password: str | Secret | None
    token: str | Secret | None
    nkey_seed_file: str | None
    creds_file: str | None


@dataclass(frozen=True)
class NatsAuth:
    """How a NATS backend proves who it is and whom it trusts (no secret in ``repr``)."""

    tls: ssl.SSLContext | None = None
    tls_hostname: str | None = None
    credentials: Credentials = field(default_factory=Credentials)

    @classmethod
    def from_args(
        cls, servers: Sequence[str], **auth: Unpack[NatsAuthOptions]
    ) -> tuple[list[str], NatsAuth]:
        """``(server URLs without user info, auth)``; the URL's user info counts as given
        (``user:password@`` or ``token@``); two ways of authenticating are refused."""
        check_known(auth, NatsAuthOptions.__annotations__)
        tls = auth.get("tls")
        username, password, token = auth.get("username"), auth.get("password"), auth.get("token")
        nkey_seed_file, creds_file = auth.get("nkey_seed_file"), auth.get("creds_file")
        clean, url_user, url_pw, url_token = _url_credentials(servers)
        if any(v is not None for v in (url_user, url_pw, url_token)) and any(
            v is not None for v in (username, password, token)
        ):
            raise ValidationError("credentials given both in the URL and as arguments", field="url")
        creds = Credentials(
            username=username if username is not None else url_user,
            password=as_secret(password if password is not None else url_pw, "password"),
            token=as_secret(token if token is not None else url_token, "token"),
            nkey_seed_file=nkey_seed_file,
            creds_file=creds_file,
        )
        _check_one_way(creds)
        if creds.nkey_seed_file is not None:
            check_nkey_seed_file(creds.nkey_seed_file)
        if creds.creds_file is not None:
            check_creds_file(creds.creds_file)
        context, hostname = _tls_context(tls, clean)
        return clean, cls(tls=context, tls_hostname=hostname, credentials=creds)

    @property
    def configured(self) -> bool:
        """True when the client presents any credentials."""
        return bool(self.credentials)

    def options(self) -> dict[str, Any]:
        """The nats-py ``connect`` options (secrets revealed here only)."""
        c = self.credentials
        out: dict[str, Any] = {}
        if self.tls is not None:
            out["tls"] = self.tls
        if self.tls_hostname is not None:
            out["tls_hostname"] = self.tls_hostname
        if c.username is not None and c.password is not None:
            out["user"] = c.username
            out["password"] = c.password.reveal()
        if c.token is not None:
            out["token"] = c.token.reveal()
        if c.nkey_seed_file is not None:
            out["nkeys_seed"] = c.nkey_seed_file
        if c.creds_file is not None:
            out["user_credentials"] = c.creds_file
        return out


class Denials:
    """What the server refused on one connection: subjects (publish or subscribe, numbered in
    the order reported: ``mark`` is the number of the next one) and the last authentication
    refusal while reconnecting."""

    def __init__(self) -> None:
        self.subjects: dict[str, tuple[str, int]] = {}
        self.mark = 0
        self.fatal: AuthenticationFailed | None = None

    def record(self, exc: BaseException) -> bool:
        """Keep a permission violation; True when ``exc`` was one."""
        m = _DENIAL.search(str(exc))
        if m is None:
            return False
        kind = "publish" if m.group(1).lower() == "publish" else "subscribe"
        # nats-py lowercases the server's error line: subjects are compared lowercased
        self.subjects[m.group(2).lower()] = (kind, self.mark)
        self.mark += 1
        if len(self.subjects) > 1024:
            del self.subjects[next(iter(self.subjects))]
        return True

    def since(self, subject: str, mark: int) -> str | None:
        """``"publish"``/``"subscribe"`` when ``subject`` was refused since ``mark``."""
        got = self.subjects.get(subject.lower())
        if got is None or got[1] < mark:
            return None
        return got[0]


def mark(nc: Any) -> int:
    """Where ``nc``'s refusals stand now (pass it to :func:`raise_if_denied` later)."""
    denials: Denials | None = getattr(nc, ATTR, None)
    return 0 if denials is None else denials.mark


def raise_if_denied(nc: Any, subject: str, start: int, what: str) -> None:
    """Raise :class:`AccessDenied` when the server refused ``subject`` since the
    :func:`mark` ``start`` on ``nc`` (or :class:`AuthenticationFailed` when it has refused
    the connection itself while reconnecting)."""
    denials: Denials | None = getattr(nc, ATTR, None)
    if denials is None:
        return
    kind = denials.since(subject, start)
    if kind is not None:
        raise AccessDenied(
            f"nats {what}: the server refused to let this user {kind} to {subject!r} "
            "(Permissions Violation); nothing was delivered",
            backend="nats",
            operation=what,
            resource=subject,
        )
    if denials.fatal is not None:
        raise denials.fatal


def classify(exc: BaseException, auth: NatsAuth) -> AuthenticationFailed | None:
    """The typed refusal a connect error stands for (None when it is not one)."""
    text = str(exc).lower()
    if isinstance(exc, nats.errors.AuthorizationError) or any(t in text for t in _AUTH_TEXTS):
        reason = "bad-credentials" if auth.configured else "credentials-required"
        return AuthenticationFailed(
            f"nats: the server refused the client ({reason}): {exc}",
            backend="nats",
            reason=reason,
        )
    found = tls_failure(exc)
    if found is None:
        return None
    # without TLS asked for, nats-py upgraded on its own (the server demanded it)
    reason = "tls-required" if auth.tls is None else found
    return AuthenticationFailed(
        f"nats: TLS failed ({reason}): {type(exc).__name__}: {exc}", backend="nats", reason=reason
    )


async def diagnose(
    servers: Sequence[str], auth: NatsAuth, connect_timeout: float
) -> AuthenticationFailed | None:
    """The TLS refusal behind a failed connect that nats-py saw only as a lost connection (a
    TLS 1.3 server refuses a client certificate after the handshake; its alert races the
    CONNECT and may arrive as a reset): a handshake of our own to each server, after its
    ``INFO`` line. None when TLS was not asked for or the probe finds nothing wrong."""
    if auth.tls is None:
        return None
    for url in servers:
        parts = urllib.parse.urlsplit(url if "://" in url else f"nats://{url}")
        if parts.hostname is None:
            continue
        reason = await diagnose_tls(
            parts.hostname,
            parts.port or 4222,
            auth.tls,
            auth.tls_hostname,
            probe_seconds(connect_timeout),
            greeting_first=True,
        )
        if reason is not None:
            return AuthenticationFailed(
                f"nats: TLS failed ({reason}): the server at {parts.hostname}:{parts.port} "
                "refused the handshake",
                backend="nats",
                reason=reason,
            )
    return None


class _Client(Client):  # type: ignore[misc]
    """nats-py's client, refusing to send CONNECT in clear when TLS was asked for."""

    videoflow_require_tls = False

    def _connect_command(self) -> bytes:
        info = self._server_info or {}
        if self.videoflow_require_tls and not (
            info.get("tls_required") or self.options.get("tls_handshake_first")
        ):
            raise AuthenticationFailed(
                "nats: TLS was asked for but the server does not offer it; nothing was sent "
                "(tls-not-offered)",
                backend="nats",
                reason="tls-not-offered",
            )
        command: bytes = super()._connect_command()
        return command


def new_client(auth: NatsAuth) -> Any:
    """A nats-py client that refuses CONNECT in clear when ``auth`` asks for TLS, carrying
    its :class:`Denials` (connect it with ``auth.options()`` and :func:`on_error`)."""
    nc = _Client()
    nc.videoflow_require_tls = auth.tls is not None
    setattr(nc, ATTR, Denials())
    return nc


def on_error(nc: Any, exc: BaseException, auth: NatsAuth, *, connected: bool) -> None:
    """What the connection's error callback does first with ``exc``: while connecting, a
    refusal ends the connect (:class:`AuthenticationFailed` raised out of nats-py's retry
    loop); once connected, a refusal while reconnecting is kept for the next call, and a
    permission violation is kept for the call it answers."""
    typed = classify(exc, auth)
    denials: Denials = getattr(nc, ATTR)
    if typed is not None:
        if not connected:
            raise typed
        denials.fatal = typed
    else:
        denials.record(exc)


async def discard(nc: Any) -> None:
    """Close a connection that never completed. Its socket is aborted first: a TLS
    transport's graceful close would wait for the server's close_notify."""
    transport = getattr(nc, "_transport", None)
    for name in ("_io_writer", "_bare_io_writer"):
        writer = getattr(transport, name, None)
        if writer is not None:
            with contextlib.suppress(Exception):
                writer.transport.abort()
    if not nc.is_connected:  # no reader or flusher started: nothing else to stop (nats-py's
        return  # close would wait for the pending-data flush of a handshake that failed)
    with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
        with anyio.move_on_after(1.0):
            await nc.close()


async def round_trip(nc: Any, seconds: float) -> None:
    """Every command written so far has reached the server and been answered (PING/PONG).

    Two nats-py behaviours are worked around (its private ``_flush_pending``/``_send_ping``;
    plain ``flush`` where they are missing):

    - ``flush`` writes its PING straight to the socket, ahead of commands still queued for
      its flusher task, so its PONG can come back before a just-sent SUB or PUB was even
      written — and before the server's refusal of it: the queue is written out first;
    - a ``flush`` that times out cancels its PONG future but leaves it queued; the late PONG
      then fails in the connection's read loop (``InvalidStateError``): the future here is
      never cancelled, only no longer waited for.

    Raises ``nats.errors.FlushTimeoutError`` (a ``TimeoutError``) when no PONG came within
    ``seconds``, and nats-py's errors for a closed connection.
    """
    pending = getattr(nc, "_flush_pending", None)
    send_ping = getattr(nc, "_send_ping", None)
    if pending is None or send_ping is None:
        await nc.flush(timeout=seconds)
        return
    if nc.is_closed:
        raise nats.errors.ConnectionClosedError
    pong: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    try:
        async with asyncio.timeout(seconds):
            await pending(force_flush=True)
            await send_ping(pong)
            await asyncio.shield(pong)
    except TimeoutError as exc:
        raise nats.errors.FlushTimeoutError from exc


async def check_subscribe(
    nc: Any,
    subjects: Sequence[str],
    start: int,
    what: str,
    seconds: float,
    *,
    strict: bool = True,
) -> None:
    """One round trip after subscribing to ``subjects`` (``start``: the :func:`mark` taken
    before): :class:`AccessDenied` when the server refused one (it says so only
    asynchronously, before its answer to the round trip); :class:`BackendUnavailable` when
    the round trip fails (``strict``; else the caller goes on unconfirmed, as without this
    check), since then nobody knows whether the subscriptions stand."""
    try:
        await round_trip(nc, seconds)
    except (nats.errors.Error, TimeoutError) as exc:
        for subject in subjects:
            raise_if_denied(nc, subject, start, what)
        if not strict:
            return
        raise BackendUnavailable(
            f"nats {what} to {', '.join(subjects)}: not confirmed within {seconds:g} s "
            f"({type(exc).__name__})",
            backend="nats",
        ) from exc
    for subject in subjects:
        raise_if_denied(nc, subject, start, what)


__all__ = [
    "SECURITY_OPTIONS",
    "Denials",
    "NatsAuth",
    "NatsAuthOptions",
    "check_connect_options",
    "check_subscribe",
    "classify",
    "discard",
    "mark",
    "new_client",
    "on_error",
    "raise_if_denied",
    "round_trip",
]


def _url_credentials(
    servers: Sequence[str],
) -> tuple[list[str], str | None, str | None, str | None]:
    """``(URLs without user info, user, password, token)`` from the URLs' user info
    (``user:password@`` or ``token@``; the last URL with any wins)."""
    clean: list[str] = []
    user: str | None = None
    pw: str | None = None
    for url in servers:
        plain, u, p = split_url(url)
        clean.append(plain)
        if u is not None or p is not None:
            user, pw = u, p
    if user is not None and pw is None:  # nats://TOKEN@host
        return clean, None, None, user
    return clean, user, pw, None


def _check_one_way(creds: Credentials) -> None:
    """One way of authenticating at most, and a username only with its password."""
    kinds = [
        k
        for k, on in (
            ("username/password", creds.username is not None or creds.password is not None),
            ("token", creds.token is not None),
            ("nkey_seed_file", creds.nkey_seed_file is not None),
            ("creds_file", creds.creds_file is not None),
        )
        if on
    ]
    if len(kinds) > 1:
        raise ValidationError(
            f"one way to authenticate, not {' and '.join(kinds)}", field="credentials"
        )
    if (creds.username is None) != (creds.password is None):
        raise ValidationError(
            "username and password go together",
            field="username" if creds.username is None else "password",
        )


SECURITY_OPTIONS: dict[str, str] = {
    "tls": "tls=",
    "tls_hostname": "tls=TLSConfig(server_hostname=...)",
    "user": "username=",
    "password": "password=",
    "token": "token=",
    "nkeys_seed": "nkey_seed_file=",
    "nkeys_seed_str": "nkey_seed_file=",
    "user_credentials": "creds_file=",
    "user_jwt_cb": "creds_file=",
    "signature_cb": "nkey_seed_file= or creds_file=",
    "servers": "the url argument",
}
"""nats-py ``connect`` options that decide whom the client trusts or what it sends in CONNECT,
and the backend argument that takes each: given through ``connect_options`` they would bypass
the checks of :class:`NatsAuth` (``tls`` there would not stop CONNECT, the password, going out
in clear to a server that offers no TLS)."""


def check_connect_options(options: Mapping[str, Any]) -> None:
    """``ValidationError`` naming the first security option in ``connect_options`` and the
    backend argument to use instead."""
    for key in options:
        instead = SECURITY_OPTIONS.get(key)
        if instead is not None:
            raise ValidationError(
                f"connect_options[{key!r}] is refused: pass it as {instead} (the backend then "
                "refuses to send credentials in clear)",
                field="connect_options",
                value=key,
            )


def _tls_context(
    tls: TLSConfig | ssl.SSLContext | None, urls: list[str]
) -> tuple[ssl.SSLContext | None, str | None]:
    """The client's TLS context and the host name it checks (``tls://`` alone asks for TLS
    with the system's trust store)."""
    if isinstance(tls, TLSConfig):
        return tls.context(), tls.server_hostname
    if not (isinstance(tls, ssl.SSLContext) or tls is None):
        raise ValidationError("tls must be a TLSConfig, an ssl.SSLContext or None", field="tls")
    if tls is None and any(u.lower().startswith("tls://") for u in urls):
        return TLSConfig().context(), None
    return tls, None
