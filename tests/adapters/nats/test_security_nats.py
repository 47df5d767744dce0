"""The NATS backends on a secured nats-server: TLS, mTLS, user/password, token and NKey, a
dedicated JetStream account whose user has exactly the documented least-privilege permissions,
and every refusal as one typed error within the backend's timeout.

Real time, asyncio (nats-py).
"""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import anyio
import pytest

from _security_matrix import (
    REFUSED_CONNECTIONS,
    SLACK,
    expired_server_certificates,
    nats_connect,
    refused_client_certificates,
    refused_options,
)
from _security_matrix import refused as _refused
from _servers_fixtures import NATS_PREFIX, SECRETS
from videoflow_aio.adapters.nats import CoreNatsMessagingBackend, JetStreamMessagingBackend
from videoflow_aio.adapters.nats import _security as nats_security
from videoflow_aio.contracts import Known
from videoflow_aio.contracts.errors import (
    AccessDenied,
    AuthenticationFailed,
    NotFound,
    ValidationError,
)
from videoflow_aio.contracts.messaging import (
    Accepted,
    Completed,
    SettleConfirmed,
    make_channel,
    make_envelope,
    make_subscription,
)
from videoflow_aio.testing.servers import Certificates, ServerProcess

pytestmark = [pytest.mark.anyio, pytest.mark.server]

TIMEOUT = 1.0
_ids = itertools.count(1)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def app_backend(srv: ServerProcess, pki: Certificates, **kw: Any) -> JetStreamMessagingBackend:
    options: dict[str, Any] = {
        "stream_prefix": f"S{uuid.uuid4().hex[:8]}",
        "subject_prefix": NATS_PREFIX,
        "request_timeout": TIMEOUT,
        "tls": pki.client_tls(client_cert=False),
        "username": "app",
        "password": SECRETS["nats_app"],
    }
    options.update(kw)
    return JetStreamMessagingBackend(options.pop("url", srv.url), **options)


async def round_trip(b: Any) -> None:
    """Channel, subscription, publish, receive, settle, observe: the whole contract path."""
    node = f"n{next(_ids)}"
    ch = make_channel("f", "r", node, "work", retention="limits")
    await b.ensure_channel(ch, f"op-{uuid.uuid4().hex[:8]}")
    sub = make_subscription(ch.channel, "w", ack_wait_seconds=5.0)
    await b.ensure_subscription(sub, f"op-{uuid.uuid4().hex[:8]}")
    out = await b.publish(make_envelope(ch.channel, "p1"), anyio.current_time() + 2)
    assert isinstance(out, Accepted), out
    got = await b.receive(sub.id, 4, 1 << 20, anyio.current_time() + 2)
    assert len(got) == 1
    assert isinstance(await b.settle(got[0].token, Completed(), "s1"), SettleConfirmed)
    assert isinstance(await b.observe_subscription(sub.id), Known)


async def refused(b: Any) -> BaseException:
    return await _refused(b, "connect", budget=2 * TIMEOUT)  # the connect budget


# -- what works -----------------------------------------------------------------------------
async def test_least_privilege_user_in_its_own_account_runs_the_contract_over_tls(
    nats_secure_srv: ServerProcess, pki: Certificates
) -> None:
    b = app_backend(nats_secure_srv, pki)
    try:
        await round_trip(b)
    finally:
        await b.aclose()


async def test_nkey_user(nats_secure_srv: ServerProcess, pki: Certificates) -> None:
    seed = nats_secure_srv.nkey_seed_file  # type: ignore[attr-defined]
    b = app_backend(nats_secure_srv, pki, username=None, password=None, nkey_seed_file=seed)
    try:
        await round_trip(b)
    finally:
        await b.aclose()


async def test_token_and_credentials_in_the_url(
    nats_token_srv: ServerProcess, nats_secure_srv: ServerProcess, pki: Certificates
) -> None:
    tls = pki.client_tls(client_cert=False)
    core = CoreNatsMessagingBackend(
        nats_token_srv.url, tls=tls, token=SECRETS["nats_token"], request_timeout=TIMEOUT
    )
    try:
        await nats_connect(core)
    finally:
        await core.aclose()
    host_port = nats_secure_srv.url.split("://", 1)[1]
    b = app_backend(
        nats_secure_srv,
        pki,
        url=f"tls://app:{SECRETS['nats_app']}@{host_port}",
        username=None,
        password=None,
    )
    try:
        await nats_connect(b)
        assert all(SECRETS["nats_app"] not in s for s in b.servers)
    finally:
        await b.aclose()


async def test_mtls(nats_mtls_srv: ServerProcess, pki: Certificates) -> None:
    ok = CoreNatsMessagingBackend(nats_mtls_srv.url, tls=pki.client_tls(), request_timeout=TIMEOUT)
    try:
        await nats_connect(ok)
    finally:
        await ok.aclose()
    with refused_client_certificates(pki) as refusals:
        for tls in refusals:
            err = await refused(
                CoreNatsMessagingBackend(nats_mtls_srv.url, tls=tls, request_timeout=TIMEOUT)
            )
            assert isinstance(err, AuthenticationFailed), err
            assert err.reason == "client-certificate-refused"


async def test_a_refusal_seen_only_as_a_lost_connection_is_still_named(
    nats_mtls_srv: ServerProcess, pki: Certificates, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under load, a TLS 1.3 server's refusal of the client certificate races the CONNECT
    and nats-py sees only ``Connection lost``: the adapter's own handshake (after ``INFO``)
    names the refusal; a real reset against an accepted certificate stays unavailable."""

    async def lost(self: Any, *args: Any, **kwargs: Any) -> None:
        raise ConnectionResetError("Connection lost")

    monkeypatch.setattr(nats_security._Client, "connect", lost)
    with refused_client_certificates(pki) as refusals:
        for tls in refusals:
            err = await refused(
                CoreNatsMessagingBackend(nats_mtls_srv.url, tls=tls, request_timeout=TIMEOUT)
            )
            assert isinstance(err, AuthenticationFailed), err
            assert err.reason == "client-certificate-refused"
    ok = CoreNatsMessagingBackend(nats_mtls_srv.url, tls=pki.client_tls(), request_timeout=TIMEOUT)
    err = await refused(ok)
    assert not isinstance(err, AuthenticationFailed), err


async def test_accounts_do_not_see_each_others_streams(
    nats_secure_srv: ServerProcess, pki: Certificates
) -> None:
    app = app_backend(nats_secure_srv, pki, stream_prefix="SHARED")
    other = app_backend(
        nats_secure_srv, pki, stream_prefix="SHARED", username="other",
        password=SECRETS["nats_other"],
    )  # fmt: skip
    try:
        ch = make_channel("f", "r", "iso", "work", retention="limits")
        await app.ensure_channel(ch, "op-iso")
        await app.publish(make_envelope(ch.channel, "p1"), anyio.current_time() + 2)
        with pytest.raises(NotFound):  # the same stream name, in another account: absent
            await other.observe_channel(ch.channel)
    finally:
        await app.aclose()
        await other.aclose()


def test_two_ways_to_authenticate_are_refused() -> None:
    with pytest.raises(ValidationError, match="one way"):
        JetStreamMessagingBackend("nats://127.0.0.1:1", username="a", password="b", token="c")
    with pytest.raises(ValidationError, match="both in the URL"):
        JetStreamMessagingBackend("nats://a:b@127.0.0.1:1", token="c")
    with pytest.raises(ValidationError, match="go together"):
        JetStreamMessagingBackend("nats://127.0.0.1:1", username="a")


# -- the failure matrix ----------------------------------------------------------------------
@pytest.mark.parametrize(("case", "reason"), REFUSED_CONNECTIONS)
async def test_refused_connections_are_one_typed_error_within_the_timeout(
    nats_secure_srv: ServerProcess, pki: Certificates, case: str, reason: str
) -> None:
    options = refused_options(case, pki, nats_secure_srv.url.replace("tls://", "nats://"))
    err = await refused(app_backend(nats_secure_srv, pki, **options))
    assert isinstance(err, AuthenticationFailed), err
    assert err.reason == reason and err.applied is False


async def test_wrong_token(nats_token_srv: ServerProcess, pki: Certificates) -> None:
    b = CoreNatsMessagingBackend(
        nats_token_srv.url, tls=pki.client_tls(client_cert=False), token="not-the-token",
        request_timeout=TIMEOUT,
    )  # fmt: skip
    err = await refused(b)
    assert isinstance(err, AuthenticationFailed) and err.reason == "bad-credentials"


async def test_tls_client_on_a_plain_server_sends_nothing(
    nats_srv: ServerProcess, pki: Certificates
) -> None:
    """nats-py would send CONNECT (the password) in clear: the backend refuses first."""
    err = await refused(app_backend(nats_srv, pki))
    assert isinstance(err, AuthenticationFailed) and err.reason == "tls-not-offered"


@pytest.mark.parametrize(
    ("key", "instead"),
    [("tls", "tls="), ("user", "username="), ("password", "password="), ("token", "token=")],
)
async def test_security_options_in_connect_options_are_refused(
    nats_srv: ServerProcess, pki: Certificates, key: str, instead: str
) -> None:
    """``connect_options={"tls": ctx}`` (the nats-py way) would bypass the guard of ``tls=``:
    CONNECT, the password, went out in clear to a plain server. Refused before connecting."""
    value: Any = pki.client_tls(client_cert=False).context() if key == "tls" else "secret"
    with pytest.raises(ValidationError, match=f"pass it as {instead}") as err:
        JetStreamMessagingBackend(
            nats_srv.url, username="app", password="pw", connect_options={key: value}
        )
    assert err.value.field == "connect_options"
    assert "secret" not in str(err.value) and "pw" not in str(err.value)


async def test_expired_server_certificate() -> None:
    from _servers_fixtures import need_binary
    from videoflow_aio.testing.servers import NatsServer

    need_binary("nats-server")
    with expired_server_certificates() as stale, NatsServer(tls=stale, jetstream=False) as srv:
        b = CoreNatsMessagingBackend(
            srv.url, tls=stale.client_tls(client_cert=False), request_timeout=TIMEOUT
        )
        err = await refused(b)
    assert isinstance(err, AuthenticationFailed) and err.reason == "server-certificate-expired"


async def test_subject_outside_the_permissions_is_access_denied(
    nats_secure_srv: ServerProcess, pki: Certificates
) -> None:
    """A publish the server refuses gets no acknowledgement: the backend reports the
    refusal, not an unknown outcome, within the publish deadline."""
    # app may use the JetStream API (a stream on "elsewhere.>" in its own account is made),
    # but may publish only on its own prefix
    denied = app_backend(nats_secure_srv, pki, subject_prefix="elsewhere")
    try:
        ch = make_channel("f", "r", "deny", "work", retention="limits")
        await denied.ensure_channel(ch, "op-deny")  # JetStream API: allowed
        start = anyio.current_time()
        with pytest.raises(AccessDenied) as info:
            await denied.publish(make_envelope(ch.channel, "p1"), anyio.current_time() + TIMEOUT)
        assert anyio.current_time() - start < TIMEOUT + SLACK
        assert info.value.resource.startswith("elsewhere.")
        seen = await denied.observe_channel(ch.channel)
        assert isinstance(seen, Known) and seen.value.messages == 0  # nothing stored
    finally:
        await denied.aclose()


async def test_permission_withdrawn_mid_run_is_access_denied_and_nothing_stored(
    pki: Certificates, tmp_path: Any
) -> None:
    """The operator reloads the server with the publish permission gone (SIGHUP): the next
    publish of the running backend is refused, typed, and nothing is stored."""
    import os
    import signal

    from _servers_fixtures import nats_accounts, nats_seed, need_binary
    from videoflow_aio.testing.servers import NatsServer

    need_binary("nats-server")
    accounts = nats_accounts(nats_seed(str(tmp_path / "user.nk")))
    with NatsServer(tls=pki, config=accounts) as srv:
        b = app_backend(srv, pki)
        try:
            ch = make_channel("f", "r", "mid", "work", retention="limits")
            await b.ensure_channel(ch, "op-mid")
            deadline = anyio.current_time() + 2
            assert isinstance(await b.publish(make_envelope(ch.channel, "p1"), deadline), Accepted)
            conf = srv.dir / "server.conf"
            text = conf.read_text().replace(f'"{NATS_PREFIX}.>", ', "")
            assert text != conf.read_text()
            conf.write_text(text)
            os.kill(srv.pid, signal.SIGHUP)
            await anyio.sleep(0.5)  # the reload applies to live connections
            with pytest.raises(AccessDenied):
                await b.publish(make_envelope(ch.channel, "p2"), anyio.current_time() + TIMEOUT)
            seen = await b.observe_channel(ch.channel)
            assert isinstance(seen, Known) and seen.value.messages == 1  # p1 only
        finally:
            await b.aclose()


async def test_creds_file_in_operator_mode(pki: Certificates, tmp_path: Any) -> None:
    from _nats_jwt import operator_setup
    from _servers_fixtures import need_binary
    from videoflow_aio.testing.servers import NatsServer

    need_binary("nats-server")
    conf, creds = operator_setup(tmp_path)
    with NatsServer(tls=pki, jetstream=False, config=conf) as srv:
        tls = pki.client_tls(client_cert=False)
        ok = CoreNatsMessagingBackend(
            srv.url, tls=tls, creds_file=str(creds), request_timeout=TIMEOUT
        )
        try:
            await nats_connect(ok)
        finally:
            await ok.aclose()
        # a .creds of another (untrusted) operator is refused
        (tmp_path / "other").mkdir()
        _, stranger = operator_setup(tmp_path / "other")
        err = await refused(
            CoreNatsMessagingBackend(
                srv.url, tls=tls, creds_file=str(stranger), request_timeout=TIMEOUT
            )
        )
        assert isinstance(err, AuthenticationFailed) and err.reason == "bad-credentials"


async def test_core_publish_and_subscribe_refused_are_access_denied(
    nats_secure_srv: ServerProcess, pki: Certificates
) -> None:
    """Core NATS confirms a publish by a flush: a refused one must not come back Accepted.
    ``app`` has the JetStream permissions only: it may publish on its prefix but not
    subscribe to it, and may not publish elsewhere."""
    tls = pki.client_tls(client_cert=False)

    def core(prefix: str) -> CoreNatsMessagingBackend:
        return CoreNatsMessagingBackend(
            nats_secure_srv.url, subject_prefix=prefix, tls=tls, username="app",
            password=SECRETS["nats_app"], request_timeout=TIMEOUT,
        )  # fmt: skip

    mine, elsewhere = core(f"{NATS_PREFIX}.core"), core("elsewhere")
    try:
        for b in (mine, elsewhere):
            ch = make_channel("f", "r", "c", "work", retention="limits")
            await b.ensure_channel(ch, "op-core")
        sub = make_subscription(ch.channel, "w")
        with pytest.raises(AccessDenied) as info:
            await mine.ensure_subscription(sub, "op-core-sub")
        assert info.value.operation == "subscribe"
        with pytest.raises(AccessDenied) as info:
            await elsewhere.publish(make_envelope(ch.channel, "p1"), anyio.current_time() + 5)
        assert info.value.operation == "publish"
    finally:
        await mine.aclose()
        await elsewhere.aclose()


async def test_settle_evidence_refused_is_access_denied_not_stale(pki: Certificates) -> None:
    """A settle is confirmed by the server's ack metric; a user who may not subscribe to
    metrics would see every settle as stale. The refused subscription is reported instead."""
    from _servers_fixtures import need_binary
    from videoflow_aio.adapters.nats import jetstream_permissions, permissions_config
    from videoflow_aio.testing.servers import NatsServer

    need_binary("nats-server")
    perms = jetstream_permissions(NATS_PREFIX)
    perms["subscribe"]["allow"].remove("$JS.EVENT.METRIC.>")
    conf = (
        "accounts { A { jetstream: enabled, users: ["
        f'{{user: app, password: "{SECRETS["nats_app"]}", '
        f"permissions: {permissions_config(perms)}}}] }} }}\n"
    )
    with NatsServer(tls=pki, config=conf) as srv:
        b = app_backend(srv, pki)
        try:
            ch = make_channel("f", "r", "ev", "work", retention="limits")
            await b.ensure_channel(ch, "op-ev")
            sub = make_subscription(ch.channel, "w", ack_wait_seconds=5.0)
            await b.ensure_subscription(sub, "op-ev-sub")
            await b.publish(make_envelope(ch.channel, "p1"), anyio.current_time() + 5)
            got = await b.receive(sub.id, 1, 1 << 20, anyio.current_time() + 5)
            with pytest.raises(AccessDenied) as info:
                await b.settle(got[0].token, Completed(), "s1")
            assert "$JS.EVENT.METRIC" in info.value.resource.upper()
        finally:
            await b.aclose()
