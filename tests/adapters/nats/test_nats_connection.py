"""``NatsConnection``: one definition of URLs, credentials and TLS that every NATS class takes."""

from __future__ import annotations

import anyio
import pytest

from _nats_helpers import prefix
from videoflow_aio.adapters import Secret
from videoflow_aio.adapters.nats import (
    CoreNatsMessagingBackend,
    JetStreamAdmin,
    JetStreamMessagingBackend,
    NatsConnection,
)
from videoflow_aio.contracts.errors import ValidationError
from videoflow_aio.contracts.messaging import Accepted, make_channel, make_envelope
from videoflow_aio.testing.servers import ServerProcess


def test_a_url_and_keywords_make_the_same_connection_a_backend_exposes() -> None:
    b = JetStreamMessagingBackend("nats://127.0.0.1:1,nats://127.0.0.1:2", token="t0k")
    conn = b.connection
    assert conn.servers == ["nats://127.0.0.1:1", "nats://127.0.0.1:2"] == b.servers
    assert conn.auth.configured
    assert "t0k" not in repr(conn)
    assert JetStreamAdmin(conn).connection is conn
    assert CoreNatsMessagingBackend(conn).connection is conn


def test_keywords_beside_a_connection_are_refused() -> None:
    conn = NatsConnection("nats://127.0.0.1:1")
    for kw in ({"token": Secret("x")}, {"connect_timeout": 9.0}, {"connect_options": {"a": 1}}):
        with pytest.raises(ValidationError, match="set on the NatsConnection"):
            JetStreamMessagingBackend(conn, **kw)  # type: ignore[arg-type]


def test_bad_settings_are_typed_errors() -> None:
    with pytest.raises(ValidationError, match="connect_timeout"):
        NatsConnection(connect_timeout=0)
    with pytest.raises(ValidationError):
        NatsConnection(connect_options={"servers": ["x"]})
    with pytest.raises(TypeError, match="passwd"):
        NatsConnection(passwd="x")  # type: ignore[call-arg]


@pytest.mark.anyio
@pytest.mark.server
@pytest.mark.vtime(False)
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_one_connection_serves_two_backends_and_an_admin(nats_srv: ServerProcess) -> None:
    conn = NatsConnection(nats_srv.url)
    sp, subp = prefix()
    a = JetStreamMessagingBackend(conn, stream_prefix=sp, subject_prefix=subp)
    b = JetStreamMessagingBackend(conn, stream_prefix=sp, subject_prefix=subp)
    ch = make_channel("f", "r", "c", "work", retention="limits")
    await a.ensure_channel(ch, "op-1")
    out = await a.publish(make_envelope(ch.channel, "p1"), anyio.current_time() + 5)
    assert isinstance(out, Accepted)
    await a.aclose()  # closes a's client only
    seen = await b.observe_channel(ch.channel)
    assert seen.value.messages == 1  # type: ignore[union-attr]
    admin = JetStreamAdmin(b.connection, stream_prefix=sp, subject_prefix=subp)
    try:
        assert await admin.purge(ch.channel) == 1
    finally:
        await admin.aclose()
        await b.drop_namespace()
        await b.aclose()
