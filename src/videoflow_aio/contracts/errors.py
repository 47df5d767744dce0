"""One error hierarchy for every contract. Errors carry fields, not only text.

Adapters map third-party exceptions onto these (with the cause chained); no foreign
exception type escapes a contract method.
"""

from __future__ import annotations

from typing import Any


class VideoflowError(Exception):
    """Base of every error raised through a contract."""

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        self.fields: dict[str, Any] = fields
        for name, value in fields.items():
            setattr(self, name, value)


class ValidationError(VideoflowError, ValueError):
    """Bad input: the call was refused before touching any state."""

    field: str
    value: Any

    def __init__(self, message: str, *, field: str, value: Any = None, **fields: Any) -> None:
        super().__init__(message, field=field, value=value, **fields)


class NotFound(VideoflowError, LookupError):
    """The named resource (channel, subscription, claim, key, …) does not exist."""

    kind: str
    name: str

    def __init__(self, message: str, *, kind: str, name: str, **fields: Any) -> None:
        super().__init__(message, kind=kind, name=name, **fields)


class ConflictError(VideoflowError):
    """A compare-and-swap lost: the resource moved on from the version the caller named."""

    resource: str
    expected: Any
    actual: Any

    def __init__(
        self,
        message: str,
        *,
        resource: str,
        expected: Any = None,
        actual: Any = None,
        **fields: Any,
    ) -> None:
        super().__init__(message, resource=resource, expected=expected, actual=actual, **fields)


class IncompatibleProfile(VideoflowError):
    """An existing resource's immutable configuration differs from the one asked for."""

    resource: str
    field: str
    expected: Any
    actual: Any

    def __init__(
        self, message: str, *, resource: str, field: str, expected: Any, actual: Any, **fields: Any
    ) -> None:
        super().__init__(
            message, resource=resource, field=field, expected=expected, actual=actual, **fields
        )


class Unsupported(VideoflowError):
    """The backend does not offer this capability or profile."""

    capability: str

    def __init__(self, message: str, *, capability: str, **fields: Any) -> None:
        super().__init__(message, capability=capability, **fields)


class OutcomeUnknown(VideoflowError):
    """The request may or may not have taken effect (reply lost, deadline passed, cancelled)."""

    operation: str

    def __init__(self, message: str, *, operation: str, **fields: Any) -> None:
        super().__init__(message, operation=operation, **fields)


class BackendUnavailable(VideoflowError):
    """The backend could not be reached or answered with a failure; nothing is known —
    unless ``applied`` says so: ``False`` when the request is known not to have applied
    (never sent, or refused before it could apply), ``None`` (the default) when unknown."""

    backend: str
    applied: bool | None = None

    def __init__(self, message: str, *, backend: str, **fields: Any) -> None:
        super().__init__(message, backend=backend, **fields)


class AuthenticationFailed(BackendUnavailable):
    """The server and the client could not establish who the other is; nothing was sent.

    ``reason`` says which check failed, so a caller can tell a wrong password from a
    certificate problem without parsing text: ``"bad-credentials"`` (wrong password, unknown
    user or token: servers do not say which), ``"credentials-required"`` (none given, the
    server wants some), ``"auth-not-enabled"`` (credentials given, the server has no
    authentication), ``"server-certificate-untrusted"`` / ``"server-certificate-expired"`` /
    ``"server-certificate-mismatch"`` (the client refused the server's certificate),
    ``"client-certificate-refused"`` (the server refused the client's certificate, or wanted
    one), ``"tls-required"`` (a plain client on a TLS port), ``"tls-not-offered"`` (a TLS client
    on a plain port). Retrying does not help. Never carries a secret.
    """

    reason: str
    applied: bool

    def __init__(self, message: str, *, backend: str, reason: str, **fields: Any) -> None:
        fields.setdefault("applied", False)
        super().__init__(message, backend=backend, reason=reason, **fields)


class AccessDenied(BackendUnavailable):
    """The server knows the client but refused this operation (ACL, role, subject permission;
    for the file store: a root that may only be read); the operation did not apply.

    ``operation`` is what was refused; ``resource`` the key, prefix or subject when the server
    says (else ``""``). Raised on the operation that was refused, also when a permission is
    withdrawn while the adapter runs. Never carries a secret.
    """

    operation: str
    resource: str
    applied: bool

    def __init__(
        self, message: str, *, backend: str, operation: str, resource: str = "", **fields: Any
    ) -> None:
        fields.setdefault("applied", False)
        super().__init__(message, backend=backend, operation=operation, resource=resource, **fields)


__all__ = [
    "AccessDenied",
    "AuthenticationFailed",
    "BackendUnavailable",
    "ConflictError",
    "IncompatibleProfile",
    "NotFound",
    "OutcomeUnknown",
    "Unsupported",
    "ValidationError",
    "VideoflowError",
]
