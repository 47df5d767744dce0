"""The gRPC channel of the etcd adapter: plain or TLS (CA, client certificate), and etcd's
user/password authentication, with every refusal classified.

aetcd 1.0 opens only insecure channels (its ``Client`` has user/password but no TLS), so the
adapter opens the channel itself with aetcd's generated stubs:

- TLS: ``grpc.ssl_channel_credentials`` from the PEM files of a
  :class:`~videoflow_aio.adapters.TLSConfig` (gRPC takes no ``ssl.SSLContext``);
  ``server_hostname`` becomes ``grpc.ssl_target_name_override``. An unverified server
  (``verify=False``) is not offered: gRPC's Python API cannot skip verification.
- Authentication: ``Auth.Authenticate(name, password)`` gives a token that every call carries
  as the ``token`` metadata. etcd's simple tokens expire (``--auth-token-ttl``, 300 s by
  default); a call refused with "invalid auth token" is re-authenticated once and sent again —
  etcd checks the token before proposing the request, so the refused call did not apply.
- With ``--client-cert-auth`` and no password, etcd takes the user from the client
  certificate's common name (mTLS as authentication).

:func:`classify` maps a gRPC error onto ``AuthenticationFailed`` / ``AccessDenied`` (None when
it is neither); the texts are etcd 3.4's and grpcio's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc  # type: ignore[import-untyped]
from aetcd import rpc

from ...contracts.errors import (
    AccessDenied,
    AuthenticationFailed,
    BackendUnavailable,
    ValidationError,
)
from .._security import Credentials, TLSConfig, diagnose_tls, probe_seconds

T = TypeVar("T")

TOKEN_EXPIRED = "invalid auth token"
# etcd 3.4 (server/etcdserver/api/v3rpc/rpctypes) and grpcio texts → AuthenticationFailed reason
_AUTH_TEXTS = (
    ("authentication failed, invalid user id or password", "bad-credentials"),
    ("user name is empty", "credentials-required"),
    ("user name not found", "bad-credentials"),
    ("authentication is not enabled", "auth-not-enabled"),
    (TOKEN_EXPIRED, "bad-credentials"),
    ("certificate_verify_failed", "server-certificate-untrusted"),
    ("certificate verify failed", "server-certificate-untrusted"),
    ("certificate has expired", "server-certificate-expired"),
    ("certificate_expired", "client-certificate-refused"),
    ("certificate_required", "client-certificate-refused"),
    ("unknown_ca", "client-certificate-refused"),
    ("bad_certificate", "client-certificate-refused"),
    ("hostname verification check failed", "server-certificate-mismatch"),
    ("wrong_version_number", "tls-not-offered"),
)


def classify(exc: grpc.aio.AioRpcError, what: str, *, tls: bool) -> Exception | None:
    """The typed refusal ``exc`` stands for, or None when it is not a security refusal."""
    details = exc.details() or ""
    low = details.lower()
    code = exc.code()
    if code == grpc.StatusCode.PERMISSION_DENIED:
        return AccessDenied(
            f"etcd {what}: refused by the user's roles ({details})",
            backend="etcd",
            operation=what,
        )
    for text, reason in _AUTH_TEXTS:
        if text in low:
            if reason == "server-certificate-untrusted" and "expired" in low:
                reason = "server-certificate-expired"
            return AuthenticationFailed(
                f"etcd {what}: refused ({reason}): {details}", backend="etcd", reason=reason
            )
    if code == grpc.StatusCode.UNAVAILABLE and tls and "tls handshake failed" in low:
        return AuthenticationFailed(
            f"etcd {what}: refused (tls-handshake-failed): {details}",
            backend="etcd",
            reason="tls-handshake-failed",
        )
    return None


def token_expired(exc: BaseException) -> bool:
    """True for etcd's refusal of an expired (or revoked) auth token."""
    return (
        isinstance(exc, grpc.aio.AioRpcError)
        and exc.code() == grpc.StatusCode.UNAUTHENTICATED
        and TOKEN_EXPIRED in (exc.details() or "")
    )


def channel_credentials(tls: TLSConfig) -> Any:
    """gRPC channel credentials from ``tls``'s PEM files."""
    if not tls.verify:
        raise ValidationError(
            "etcd over gRPC cannot skip server verification (TLSConfig(verify=False))",
            field="tls.verify",
            value=False,
        )
    if tls.key_password is not None:
        raise ValidationError(
            "etcd over gRPC takes no encrypted client key (key_password)",
            field="tls.key_password",
        )
    tls.context()  # the files parse and the key matches its certificate, or ValidationError
    root, key, chain = tls.pem()
    return grpc.ssl_channel_credentials(
        root_certificates=root, private_key=key, certificate_chain=chain
    )


class EtcdChannel:
    """One gRPC channel with the KV, Lease and Auth stubs and the auth token metadata."""

    def __init__(
        self,
        target: str,
        *,
        tls: TLSConfig | None,
        credentials: Credentials,
        timeout: float,
        options: dict[str, Any] | None = None,
    ) -> None:
        self.target = target
        self.tls = tls
        self.username = credentials.username
        self._password = credentials.password
        self.timeout = timeout
        self._options = dict(options or {})
        if tls is not None and tls.server_hostname:
            self._options["grpc.ssl_target_name_override"] = tls.server_hostname
        self._creds = None if tls is None else channel_credentials(tls)
        self.channel: Any = None
        self.kvstub: Any = None
        self.leasestub: Any = None
        self.authstub: Any = None
        self.metadata: tuple[tuple[str, str], ...] | None = None

    async def connect(self) -> None:
        """Open the channel and, with a password, authenticate (raises the typed errors)."""
        opts = list(self._options.items())
        if self._creds is None:
            self.channel = grpc.aio.insecure_channel(self.target, options=opts)
        else:
            self.channel = grpc.aio.secure_channel(self.target, self._creds, options=opts)
        self.kvstub = rpc.KVStub(self.channel)
        self.leasestub = rpc.LeaseStub(self.channel)
        self.authstub = rpc.AuthStub(self.channel)
        await self._ready()
        if self._password is not None:
            await self.authenticate()

    async def _ready(self) -> None:
        """Wait for the channel's first connection; a failed one is named (gRPC's own texts
        do not tell a TLS mismatch from a dead server) by a handshake of our own."""
        state = self.channel.get_state(try_to_connect=True)
        while state != grpc.ChannelConnectivity.READY:
            if state in (
                grpc.ChannelConnectivity.TRANSIENT_FAILURE,
                grpc.ChannelConnectivity.SHUTDOWN,
            ):
                host, _, port = self.target.rpartition(":")
                context = None if self.tls is None else self.tls.context()
                hostname = None if self.tls is None else self.tls.server_hostname
                seconds = probe_seconds(self.timeout)
                reason = await diagnose_tls(host, int(port), context, hostname, seconds)
                if reason is not None:
                    raise AuthenticationFailed(
                        f"etcd at {self.target}: the connection was refused ({reason})",
                        backend="etcd",
                        reason=reason,
                    )
                raise BackendUnavailable(
                    f"etcd at {self.target}: cannot connect", backend="etcd", applied=False
                )
            await self.channel.wait_for_state_change(state)
            state = self.channel.get_state(try_to_connect=True)

    async def authenticate(self) -> None:
        """A fresh token for the user (``AuthenticationFailed`` when refused)."""
        request = rpc.AuthenticateRequest(
            name=self.username or "", password=self._password.reveal() if self._password else ""
        )
        try:
            resp = await self.authstub.Authenticate(request, timeout=self.timeout)
        except grpc.aio.AioRpcError as exc:
            typed = classify(exc, "authenticate", tls=self.tls is not None)
            if typed is not None:
                raise typed from exc
            raise
        self.metadata = (("token", resp.token),)

    async def call(self, make: Callable[[], Awaitable[T]]) -> T:
        """``await make()``; once more after re-authenticating when the token expired."""
        try:
            return await make()
        except grpc.aio.AioRpcError as exc:
            if self._password is None or not token_expired(exc):
                raise
        await self.authenticate()
        return await make()

    async def close(self) -> None:
        if self.channel is not None:
            with contextlib.suppress(Exception):
                await self.channel.close()
        self.channel = None


__all__ = ["EtcdChannel", "channel_credentials", "classify", "token_expired"]
