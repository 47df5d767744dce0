"""What the secured-adapter tests share: the refused-connection matrix and the check that a
refusal is one typed error within the adapter's timeout."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from videoflow_aio.adapters import TLSConfig
from videoflow_aio.contracts.errors import BackendUnavailable
from videoflow_aio.testing.servers import Certificates

SLACK = 1.5
"""Scheduling slack on a loaded 2-core machine; a hang or a retry loop takes far longer."""

REFUSED_CONNECTIONS = [
    ("wrong password", "bad-credentials"),
    ("unknown user", "bad-credentials"),
    ("no credentials", "credentials-required"),
    ("untrusted server certificate", "server-certificate-untrusted"),
    ("server name mismatch", "server-certificate-mismatch"),
    ("plain client, TLS server", "tls-required"),
]
"""(case, the AuthenticationFailed reason it must give), on every engine."""


def refused_options(case: str, pki: Certificates, plain_url: str) -> dict[str, Any]:
    """The constructor options that turn a working client into ``case``'s refused one
    (``plain_url``: the TLS server's URL with the plain-text scheme)."""
    options: dict[str, dict[str, Any]] = {
        "wrong password": {"password": "not-the-password"},
        "unknown user": {"username": "nobody"},
        "no credentials": {"username": None, "password": None},
        "untrusted server certificate": {"tls": TLSConfig()},  # the system's trust store
        "server name mismatch": {
            "tls": TLSConfig(ca_file=str(pki.ca_file), server_hostname="other.example")
        },
        "plain client, TLS server": {"url": plain_url, "tls": None},
    }
    return options[case]


async def refused(target: Any, call: str = "cas", *, budget: float) -> BaseException:
    """Run one operation that must be refused (``cas``, ``get``, or ``connect``: a NATS
    backend's connection) and close ``target``; the error, checked to have come within
    ``budget`` seconds (plus :data:`SLACK`)."""
    start = anyio.current_time()
    with pytest.raises(BackendUnavailable) as info:
        if call == "cas":
            await target.cas(f"k-{uuid.uuid4().hex[:6]}", None, b"v")
        elif call == "get":
            await target.get("k")
        else:
            await nats_connect(target)
    elapsed = anyio.current_time() - start
    await target.aclose()
    assert elapsed < budget + SLACK, f"took {elapsed:.2f}s"
    return info.value


async def nats_connect(backend: Any) -> Any:
    """Make a NATS backend open its connection (JetStream keeps it in its client ``_c``)."""
    client = getattr(backend, "_c", None)
    return await (client.conn() if client is not None else backend._conn())


@contextlib.contextmanager
def refused_client_certificates(pki: Certificates) -> Iterator[list[TLSConfig]]:
    """TLS settings an mTLS server must refuse (``client-certificate-refused``): no client
    certificate, an expired one, one from another CA."""
    cert, key = pki.issue_client("expired-client", "expired", expired=True)
    foreign = Certificates.make()
    try:
        yield [
            pki.client_tls(client_cert=False),
            TLSConfig(ca_file=str(pki.ca_file), cert_file=str(cert), key_file=str(key)),
            TLSConfig(
                ca_file=str(pki.ca_file),
                cert_file=str(foreign.client_cert),
                key_file=str(foreign.client_key),
            ),
        ]
    finally:
        foreign.remove()


@contextlib.contextmanager
def expired_server_certificates() -> Iterator[Certificates]:
    """A CA whose server certificate expired a year ago (removed afterwards)."""
    stale = Certificates.make(expired_server=True)
    try:
        yield stale
    finally:
        stale.remove()
