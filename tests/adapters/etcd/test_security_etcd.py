"""EtcdRuntimeStore on a secured etcd: TLS with a CA, mTLS (also as the user, by the
certificate's common name), user/password with a role limited to the adapter's namespace set
up through the client API, tokens renewed when they expire, and every refusal as one typed
error within the adapter's timeout.

Real time, asyncio (grpc.aio).
"""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import pytest

from _security_matrix import (
    REFUSED_CONNECTIONS,
    expired_server_certificates,
    refused_client_certificates,
    refused_options,
)
from _security_matrix import refused as _refused
from _servers_fixtures import (
    ETCD_CN_NAMESPACE,
    ETCD_NAMESPACE,
    ETCD_TOKEN_TTL,
    SECRETS,
    need_binary,
)
from videoflow_aio.adapters import TLSConfig
from videoflow_aio.adapters.etcd import EtcdRuntimeStore, grant_prefix, revoke_prefix
from videoflow_aio.contracts.errors import (
    AccessDenied,
    AuthenticationFailed,
    ValidationError,
)
from videoflow_aio.testing.servers import Certificates, EtcdServer, ServerProcess

pytestmark = [pytest.mark.anyio, pytest.mark.server]

TIMEOUT = 2.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def app_store(srv: ServerProcess, pki: Certificates, **kw: Any) -> EtcdRuntimeStore:
    options: dict[str, Any] = {
        "namespace": ETCD_NAMESPACE,
        "timeout": TIMEOUT,
        "tls": pki.client_tls(client_cert=False),
        "username": "app",
        "password": SECRETS["etcd_app"],
    }
    options.update(kw)
    return EtcdRuntimeStore(options.pop("url", srv.url), **options)


async def refused(store: EtcdRuntimeStore, call: str = "cas") -> BaseException:
    return await _refused(store, call, budget=TIMEOUT)


# -- what works -----------------------------------------------------------------------------
async def test_password_user_with_a_prefix_role_over_tls(
    etcd_tls_srv: ServerProcess, pki: Certificates
) -> None:
    async with app_store(etcd_tls_srv, pki) as store:
        key = f"a-{uuid.uuid4().hex[:6]}"
        assert await store.cas(key, None, b"1")
        value, ver = await store.get(key)
        assert value == b"1"
        assert await store.cas(key, ver, b"2")
        assert key in [k for k, _v, _ver in await store.scan("")]
        n = await store.append("log", b"r1")
        assert n > 0 and (await store.log_entries("log"))[-1] == b"r1"
        await store.drop_namespace()


async def test_mtls_with_password_and_with_the_certificate_as_the_user(
    etcd_mtls_srv: ServerProcess, pki: Certificates
) -> None:
    async with app_store(etcd_mtls_srv, pki, tls=pki.client_tls()) as store:
        assert await store.cas(f"m-{uuid.uuid4().hex[:6]}", None, b"1")
        await store.drop_namespace()
    # no password: etcd takes the user from the certificate's common name (CLIENT_NAME)
    cn = EtcdRuntimeStore(
        etcd_mtls_srv.url, namespace=ETCD_CN_NAMESPACE, timeout=TIMEOUT, tls=pki.client_tls()
    )
    async with cn:
        assert await cn.cas("c", None, b"1")
        await cn.drop_namespace()
    # …and that user's role is limited to its namespace too
    err = await refused(
        EtcdRuntimeStore(
            etcd_mtls_srv.url, namespace=ETCD_NAMESPACE, timeout=TIMEOUT, tls=pki.client_tls()
        )
    )
    assert isinstance(err, AccessDenied)


async def test_an_expired_token_is_renewed_and_the_write_applies_once(
    etcd_tls_srv: ServerProcess, pki: Certificates
) -> None:
    async with app_store(etcd_tls_srv, pki) as store:
        first = store._client.metadata
        assert await store.cas("t", None, b"1")
        _, ver = await store.get("t")
        await anyio.sleep(ETCD_TOKEN_TTL + 2)  # the server forgets the token
        assert await store.cas("t", ver, b"2")
        assert store._client.metadata != first  # a new token was fetched
        value, _ = await store.get("t")
        assert value == b"2"
        await store.drop_namespace()


async def test_bad_arguments_are_refused() -> None:
    import ssl

    with pytest.raises(ValidationError, match="not in the URL"):
        EtcdRuntimeStore("https://app:pw@127.0.0.1:2379")
    with pytest.raises(ValidationError, match="both username and password"):
        EtcdRuntimeStore("https://127.0.0.1:2379", username="app")
    with pytest.raises(ValidationError, match="TLSConfig"):
        EtcdRuntimeStore("https://127.0.0.1:2379", tls=ssl.create_default_context())  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="cannot skip"):
        EtcdRuntimeStore("https://127.0.0.1:2379", tls=TLSConfig(verify=False))


# -- the failure matrix ----------------------------------------------------------------------
@pytest.mark.parametrize(("case", "reason"), REFUSED_CONNECTIONS)
async def test_refused_connections_are_one_typed_error_within_the_timeout(
    etcd_tls_srv: ServerProcess, pki: Certificates, case: str, reason: str
) -> None:
    srv = etcd_tls_srv
    options = refused_options(case, pki, srv.url.replace("https://", "http://"))
    for call in ("cas", "get"):
        err = await refused(app_store(srv, pki, **options), call)
        assert isinstance(err, AuthenticationFailed), err
        assert err.reason == reason and err.applied is False


async def test_credentials_for_a_server_without_auth(
    etcd_srv: ServerProcess, pki: Certificates
) -> None:
    err = await refused(app_store(etcd_srv, pki, tls=None))
    assert isinstance(err, AuthenticationFailed) and err.reason == "auth-not-enabled"


async def test_tls_client_on_a_plain_server(etcd_srv: ServerProcess, pki: Certificates) -> None:
    url = etcd_srv.url.replace("http://", "https://")
    err = await refused(app_store(etcd_srv, pki, url=url, username=None, password=None))
    assert isinstance(err, AuthenticationFailed) and err.reason == "tls-not-offered"


async def test_client_certificates_refused(etcd_mtls_srv: ServerProcess, pki: Certificates) -> None:
    with refused_client_certificates(pki) as refusals:
        for tls in refusals:
            err = await refused(app_store(etcd_mtls_srv, pki, tls=tls))
            assert isinstance(err, AuthenticationFailed), err
            assert err.reason == "client-certificate-refused"


async def test_expired_server_certificate(pki: Certificates) -> None:
    need_binary("etcd")
    with expired_server_certificates() as stale, EtcdServer(tls=stale) as srv:
        store = EtcdRuntimeStore(
            srv.url, namespace="x", timeout=TIMEOUT, tls=stale.client_tls(client_cert=False)
        )
        err = await refused(store)
    assert isinstance(err, AuthenticationFailed) and err.reason == "server-certificate-expired"


async def test_keys_outside_the_role_are_access_denied(
    etcd_tls_srv: ServerProcess, pki: Certificates
) -> None:
    for call in ("cas", "get"):
        err = await refused(app_store(etcd_tls_srv, pki, namespace="elsewhere"), call)
        assert isinstance(err, AccessDenied) and err.operation == call


# -- a role changed under a running adapter --------------------------------------------------
async def test_permission_withdrawn_mid_run_is_access_denied_and_nothing_applied(
    etcd_tls_srv: ServerProcess, pki: Certificates
) -> None:
    tls = pki.client_tls(client_cert=False)
    name, password = f"mid-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex
    namespace = f"mid{uuid.uuid4().hex[:6]}"
    root = SECRETS["etcd_root"]
    role = await grant_prefix(
        etcd_tls_srv.url,
        username=name,
        password=password,
        namespace=namespace,
        root_password=root,
        tls=tls,
    )
    store = app_store(etcd_tls_srv, pki, username=name, password=password, namespace=namespace)
    admin = app_store(etcd_tls_srv, pki, username="root", password=root, namespace=namespace)
    try:
        assert await store.cas("a", None, b"1")
        _, ver = await store.get("a")
        await revoke_prefix(
            etcd_tls_srv.url, role=role, namespace=namespace, root_password=root, tls=tls
        )
        with pytest.raises(AccessDenied):
            await store.cas("a", ver, b"2")
        with pytest.raises(AccessDenied):
            await store.append("log", b"x")
        with pytest.raises(AccessDenied):
            await store.get("a")
        assert (await admin.get("a"))[0] == b"1"  # the refused write did not apply
        assert await admin.log_entries("log") == []
    finally:
        await admin.drop_namespace()
        await admin.aclose()
        await store.aclose()
