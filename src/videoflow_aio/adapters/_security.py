"""What every adapter shares to reach a secured server: TLS settings, credentials, and the
classification of a refused handshake.

- :class:`Secret` holds a password, token or key passphrase; its ``repr``/``str`` never show
  the value (``.reveal()`` does, for the one call that hands it to a client library).
- :class:`TLSConfig` names PEM files (CA bundle, client certificate and key); it builds an
  ``ssl.SSLContext`` (Redis, NATS) or hands the PEM bytes to gRPC (etcd). Server verification
  is on unless ``verify=False`` is said explicitly.
- :class:`Credentials` bundles a user name, a password, a token, a NATS NKey seed file or
  ``.creds`` file; ``Credentials.from_env`` / ``TLSConfig.from_env`` read them from
  environment variables (or files they name), never from a command line.
- Local files are checked when an adapter is built: a CA, certificate or key file, an NKey
  seed file or a ``.creds`` file that cannot be read or parsed, or a certificate whose key
  does not match, is a :class:`ValidationError` there (``TLSConfig.context``,
  :func:`check_nkey_seed_file`, :func:`check_creds_file`) — never an
  ``AuthenticationFailed`` or ``BackendUnavailable`` later, which invite a retry. Messages
  name the file, never its content.
- :func:`tls_failure` names the reason of a failed TLS handshake from the exception chain
  (``AuthenticationFailed.reason``); :func:`split_url` takes the user info out of a URL so no
  URL kept or printed by an adapter carries a password.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from ..contracts.errors import ValidationError

_MASK = "Secret('********')"


class Secret:
    """A secret string that never prints: ``repr``, ``str`` and formatting show a mask.

    Equality compares in constant time; ``reveal()`` returns the value. Not picklable (a
    pickled secret ends up in files and queues nobody audits).
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if isinstance(value, Secret):
            value = value.reveal()
        if not isinstance(value, str):
            raise ValidationError("a secret must be a str", field="secret", value="<redacted>")
        self._value = value

    def reveal(self) -> str:
        """The secret itself: pass it straight to the client library, never to a message."""
        return self._value

    def __repr__(self) -> str:
        return _MASK

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return _MASK

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return hmac.compare_digest(self._value.encode(), other._value.encode())

    __hash__ = None  # type: ignore[assignment]

    def __bool__(self) -> bool:
        return bool(self._value)

    def __reduce__(self) -> Any:
        raise TypeError("a Secret is not pickled")

    def __copy__(self) -> Secret:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Secret:
        return self

    @classmethod
    def from_file(cls, path: str | Path) -> Secret:
        """The file's content without its trailing newline (a secret mounted as a file)."""
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise ValidationError(
                f"cannot read the secret file {str(path)!r}: {exc.strerror}",
                field="secret_file",
                value=str(path),
            ) from None
        return cls(text.rstrip("\r\n"))


def as_secret(value: str | Secret | None, name: str) -> Secret | None:
    """``value`` as a :class:`Secret` (None stays None; an empty string is refused)."""
    if value is None:
        return None
    if isinstance(value, Secret):
        return value
    if not isinstance(value, str) or not value:
        raise ValidationError(f"{name} must be a non-empty str or Secret", field=name)
    return Secret(value)


def _env(environ: Mapping[str, str], prefix: str, name: str) -> str | None:
    value = environ.get(f"{prefix}{name}")
    return value or None


def _env_secret(environ: Mapping[str, str], prefix: str, name: str) -> Secret | None:
    """``<prefix><name>`` or the file named by ``<prefix><name>_FILE``."""
    path = _env(environ, prefix, f"{name}_FILE")
    if path is not None:
        return Secret.from_file(path)
    value = _env(environ, prefix, name)
    return None if value is None else Secret(value)


def _check_file(path: str | Path | None, name: str) -> str | None:
    if path is None:
        return None
    text = os.fspath(path)
    if not text:
        raise ValidationError(f"{name} must name a file", field=name, value=text)
    return text


@dataclass(frozen=True)
class TLSConfig:
    """TLS towards a server: whom to trust, and the client's own certificate for mTLS.

    - ``ca_file``: PEM bundle of the CAs that sign the server's certificate (None: the
      system's trust store);
    - ``cert_file`` / ``key_file``: the client's certificate chain and key (both or neither);
      ``key_password`` when the key is encrypted;
    - ``verify``: check the server's certificate and name (default; False is for a test
      against a throwaway certificate only, and says so in ``repr``);
    - ``server_hostname``: the name to check in the server's certificate when it differs from
      the host in the URL.

    Holds no secret but ``key_password`` (a :class:`Secret`); ``repr`` shows file paths only.
    """

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    key_password: Secret | None = None
    verify: bool = True
    server_hostname: str | None = None

    def __post_init__(self) -> None:
        for name in ("ca_file", "cert_file", "key_file"):
            object.__setattr__(self, name, _check_file(getattr(self, name), name))
        object.__setattr__(self, "key_password", as_secret(self.key_password, "key_password"))
        if (self.cert_file is None) != (self.key_file is None):
            raise ValidationError(
                "cert_file and key_file go together (a client certificate needs its key)",
                field="cert_file" if self.cert_file is None else "key_file",
            )

    @property
    def client_certificate(self) -> bool:
        """True when the client presents a certificate (mTLS)."""
        return self.cert_file is not None

    def context(self) -> ssl.SSLContext:
        """An ``ssl.SSLContext`` for a client (TLS 1.2 or later); raises
        :class:`ValidationError` when a file cannot be read or does not hold PEM, when the
        key does not match the certificate, or when the key is encrypted and no
        ``key_password`` is given (never an interactive prompt)."""
        password: Any = _no_key_password
        if self.key_password is not None:
            password = self.key_password.reveal()
        try:
            ctx = ssl.create_default_context(cafile=self.ca_file)
            if not self.verify:
                ctx.check_hostname = False
                ctx.verify_mode = ssl.CERT_NONE
            if self.cert_file is not None:
                ctx.load_cert_chain(self.cert_file, self.key_file, password=password)
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise ValidationError(
                f"cannot load the TLS files ({type(exc).__name__}: {_strerror(exc)})",
                field="tls",
                value=repr(self),
            ) from None
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        return ctx

    def pem(self) -> tuple[bytes | None, bytes | None, bytes | None]:
        """``(root CAs, client key, client chain)`` as PEM bytes, for gRPC's channel
        credentials (None where not configured)."""

        def read(path: str | None, name: str) -> bytes | None:
            if path is None:
                return None
            try:
                return Path(path).read_bytes()
            except OSError as exc:
                raise ValidationError(
                    f"cannot read {name} {path!r}: {exc.strerror}", field=name, value=path
                ) from None

        return (
            read(self.ca_file, "ca_file"),
            read(self.key_file, "key_file"),
            read(self.cert_file, "cert_file"),
        )

    @classmethod
    def from_env(cls, prefix: str, environ: Mapping[str, str] | None = None) -> TLSConfig | None:
        """From ``<prefix>TLS_CA_FILE``, ``TLS_CERT_FILE``, ``TLS_KEY_FILE``,
        ``TLS_KEY_PASSWORD(_FILE)``, ``TLS_SERVER_HOSTNAME``; None when none is set (and
        ``<prefix>TLS`` is not ``1``: TLS with the system's trust store)."""
        env = os.environ if environ is None else environ
        values = {
            "ca_file": _env(env, prefix, "TLS_CA_FILE"),
            "cert_file": _env(env, prefix, "TLS_CERT_FILE"),
            "key_file": _env(env, prefix, "TLS_KEY_FILE"),
            "key_password": _env_secret(env, prefix, "TLS_KEY_PASSWORD"),
            "server_hostname": _env(env, prefix, "TLS_SERVER_HOSTNAME"),
        }
        if all(v is None for v in values.values()) and _env(env, prefix, "TLS") != "1":
            return None
        return cls(**values)  # type: ignore[arg-type]


def _strerror(exc: BaseException) -> str:
    return str(getattr(exc, "strerror", None) or getattr(exc, "reason", None) or exc)


def _no_key_password() -> str:
    raise ValidationError(
        "the client key file is encrypted: give TLSConfig(key_password=…)",
        field="tls.key_password",
    )


def _read_local(path: str, name: str) -> bytes:
    """The bytes of the local file ``path`` (the ``name`` option), or ValidationError."""
    try:
        with open(path, "rb") as f:
            return f.read(1 << 20)
    except OSError as exc:
        raise ValidationError(
            f"cannot read {name} {path!r}: {exc.strerror or exc}", field=name, value=path
        ) from None


def _seed_ok(seed: bytes) -> bool:
    import nkeys

    try:
        pair = nkeys.from_seed(bytearray(seed))
    except Exception:  # nkeys raises its own errors, and binascii/ValueError on garbage
        return False
    pair.wipe()
    return True


def check_nkey_seed_file(path: str) -> None:
    """Raise :class:`ValidationError` unless ``path`` is a readable file holding an NKey
    seed (read the way nats-py reads it: the whole file, stripped)."""
    if not _seed_ok(_read_local(path, "nkey_seed_file").strip()):
        raise ValidationError(
            f"nkey_seed_file {path!r} holds no NKey seed (an 'S…' seed on its own)",
            field="nkey_seed_file",
            value=path,
        )


def check_creds_file(path: str) -> None:
    """Raise :class:`ValidationError` unless ``path`` is a readable NATS ``.creds`` file: a
    user JWT on the line after ``BEGIN NATS USER JWT`` and a decodable NKey seed on the line
    after ``BEGIN USER NKEY SEED`` (where nats-py looks for them)."""
    lines = _read_local(path, "creds_file").splitlines()

    def after(marker: bytes) -> bytes | None:
        for i, line in enumerate(lines[:-1]):
            if marker in line:
                return lines[i + 1].strip()
        return None

    jwt = after(b"BEGIN NATS USER JWT")
    seed = after(b"BEGIN USER NKEY SEED")
    problem = None
    if jwt is None or jwt.count(b".") != 2 or not all(jwt.split(b".")):
        problem = "no user JWT after a 'BEGIN NATS USER JWT' line"
    elif seed is None or not _seed_ok(seed):
        problem = "no NKey seed after a 'BEGIN USER NKEY SEED' line"
    if problem is not None:
        raise ValidationError(
            f"creds_file {path!r} is not a NATS .creds file: {problem}",
            field="creds_file",
            value=path,
        )


@dataclass(frozen=True)
class Credentials:
    """Who the client is. Each adapter takes what its engine knows (Redis and etcd: user name
    and password; NATS: any one of user/password, ``token``, ``nkey_seed_file``,
    ``creds_file``) and refuses the rest with :class:`ValidationError`.

    Secrets are :class:`Secret` (given as ``str``, they are wrapped); ``repr`` masks them.
    """

    username: str | None = None
    password: Secret | None = None
    token: Secret | None = None
    nkey_seed_file: str | None = None
    creds_file: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "password", as_secret(self.password, "password"))
        object.__setattr__(self, "token", as_secret(self.token, "token"))
        for name in ("nkey_seed_file", "creds_file"):
            object.__setattr__(self, name, _check_file(getattr(self, name), name))
        if self.username is not None and (not isinstance(self.username, str) or not self.username):
            raise ValidationError("username must be a non-empty str", field="username")

    def __bool__(self) -> bool:
        return any(getattr(self, f.name) is not None for f in fields(self))

    def given(self) -> list[str]:
        """The names of the fields that are set."""
        return [f.name for f in fields(self) if getattr(self, f.name) is not None]

    def only(self, allowed: tuple[str, ...], backend: str) -> Credentials:
        """``self``, or :class:`ValidationError` naming a field ``backend`` cannot use."""
        extra = [name for name in self.given() if name not in allowed]
        if extra:
            raise ValidationError(
                f"{backend} takes no {', '.join(extra)} (it authenticates with "
                f"{', '.join(allowed)})",
                field=extra[0],
            )
        return self

    @classmethod
    def from_env(cls, prefix: str, environ: Mapping[str, str] | None = None) -> Credentials | None:
        """From ``<prefix>USERNAME``, ``PASSWORD`` / ``PASSWORD_FILE``, ``TOKEN`` /
        ``TOKEN_FILE``, ``NKEY_SEED_FILE``, ``CREDS_FILE``; None when none is set."""
        env = os.environ if environ is None else environ
        creds = cls(
            username=_env(env, prefix, "USERNAME"),
            password=_env_secret(env, prefix, "PASSWORD"),
            token=_env_secret(env, prefix, "TOKEN"),
            nkey_seed_file=_env(env, prefix, "NKEY_SEED_FILE"),
            creds_file=_env(env, prefix, "CREDS_FILE"),
        )
        return creds if creds else None


def merge_credentials(
    credentials: Credentials | None,
    *,
    username: str | None = None,
    password: str | Secret | None = None,
    from_url: tuple[str | None, str | None] = (None, None),
) -> Credentials:
    """One :class:`Credentials` from an adapter's ``credentials=``, its ``username=`` /
    ``password=`` and the user info of its URL; the same field given twice is refused."""
    base = credentials or Credentials()
    if not isinstance(base, Credentials):
        raise ValidationError("credentials must be a Credentials", field="credentials")
    out: dict[str, Any] = {f.name: getattr(base, f.name) for f in fields(base)}
    for name, value in (("username", username), ("password", password)):
        for source, given in (("argument", value), ("URL", from_url[name == "password"])):
            if given is None:
                continue
            if out[name] is not None:
                raise ValidationError(
                    f"{name} given twice (in credentials= and as {source})", field=name
                )
            out[name] = given
    return Credentials(**out)


def split_url(url: str) -> tuple[str, str | None, str | None]:
    """``(url without user info, user name, password)``: the URL an adapter keeps and prints
    never carries a password."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, None, None
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    clean = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    user = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password else None
    return clean, user, password


def _chain(exc: BaseException | None) -> list[BaseException]:
    out: list[BaseException] = []
    while exc is not None and exc not in out:
        out.append(exc)
        exc = exc.__cause__ or exc.__context__
    return out


# OpenSSL alert names the server sends when it refuses the client's certificate
_CLIENT_CERT_ALERTS = (
    "CERTIFICATE_REQUIRED",
    "UNKNOWN_CA",
    "BAD_CERTIFICATE",
    "CERTIFICATE_UNKNOWN",
    "CERTIFICATE_EXPIRED",
    "CERTIFICATE_REVOKED",
    "ACCESS_DENIED",
)
# what the client's TLS stack says when the other end does not speak TLS
_NOT_TLS = (
    "WRONG_VERSION_NUMBER",
    "RECORD_LAYER_FAILURE",
    "PACKET_LENGTH_TOO_LONG",
    "HTTP_REQUEST",
)


def tls_failure(exc: BaseException | None) -> str | None:
    """The :class:`~videoflow_aio.contracts.errors.AuthenticationFailed` reason of the TLS
    error in ``exc``'s chain, or None when the chain holds no TLS error."""
    for err in _chain(exc):
        if isinstance(err, ssl.SSLCertVerificationError):
            message = str(getattr(err, "verify_message", "") or err).lower()
            if "expired" in message or getattr(err, "verify_code", 0) == 10:
                return "server-certificate-expired"
            if "hostname" in message or "ip address mismatch" in message:
                return "server-certificate-mismatch"
            return "server-certificate-untrusted"
        if isinstance(err, ssl.SSLError):
            text = f"{getattr(err, 'reason', '') or ''} {err}".upper()
            if any(alert in text for alert in _CLIENT_CERT_ALERTS):
                return "client-certificate-refused"
            if any(marker in text for marker in _NOT_TLS):
                return "tls-not-offered"
            return "tls-handshake-failed"
    return None


PROBE_SECONDS = 0.5
"""How long one diagnosis probe may take (a refused connection is named within the adapter's
timeout: adapters leave this much of it for :func:`diagnose_tls`)."""


def probe_seconds(timeout: float) -> float:
    """The time one diagnosis probe may take for an adapter with ``timeout`` (a quarter of
    it, at least :data:`PROBE_SECONDS`: a loaded machine handshakes slowly)."""
    return max(PROBE_SECONDS, timeout / 4)


async def diagnose_tls(
    host: str,
    port: int,
    context: ssl.SSLContext | None,
    server_hostname: str | None = None,
    seconds: float = PROBE_SECONDS,
    *,
    greeting_first: bool = False,
) -> str | None:
    """Name a connection failure by a TLS handshake of our own (asyncio only), taking at most
    ``2 * seconds``. ``greeting_first``: the server sends one line in clear before the
    handshake (NATS' ``INFO``), read first.

    Without ``context`` (a plain client): ``"tls-required"`` when the port completes a TLS
    handshake. With it: the :func:`tls_failure` reason of the handshake, including the
    alert a server sends after a TLS 1.3 handshake when it refuses the client's certificate
    (read while sending nothing, so no reset hides it); ``"tls-not-offered"`` when the other
    end drops the ClientHello. None when the probe finds nothing wrong with TLS.
    """
    probe = context
    if probe is None:
        probe = ssl.create_default_context()
        probe.check_hostname = False
        probe.verify_mode = ssl.CERT_NONE
    handshaken = False
    try:
        async with asyncio.timeout(2 * seconds):  # the handshake times out first
            reader, writer = await _tls_connection(
                host, port, probe, server_hostname or host, seconds, greeting_first
            )
            handshaken = True
            try:
                if context is None:
                    return "tls-required"
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(seconds / 2):
                        await reader.read(1)
            finally:
                writer.transport.abort()
    except ssl.SSLError as exc:
        return tls_failure(exc) if context is not None else None
    except (ConnectionResetError, asyncio.IncompleteReadError, BrokenPipeError):
        return "tls-not-offered" if context is not None and not handshaken else None
    except (OSError, TimeoutError):
        return None
    return None


async def _tls_connection(
    host: str,
    port: int,
    context: ssl.SSLContext,
    server_hostname: str,
    seconds: float,
    greeting_first: bool,
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    if not greeting_first:
        return await asyncio.open_connection(
            host, port, ssl=context, server_hostname=server_hostname, ssl_handshake_timeout=seconds
        )
    reader, writer = await asyncio.open_connection(host, port)
    try:
        await reader.readline()
        await writer.start_tls(
            context, server_hostname=server_hostname, ssl_handshake_timeout=seconds
        )
    except BaseException:
        writer.transport.abort()
        raise
    return reader, writer


__all__ = [
    "PROBE_SECONDS",
    "Credentials",
    "Secret",
    "TLSConfig",
    "as_secret",
    "check_creds_file",
    "check_nkey_seed_file",
    "diagnose_tls",
    "merge_credentials",
    "probe_seconds",
    "split_url",
    "tls_failure",
]
