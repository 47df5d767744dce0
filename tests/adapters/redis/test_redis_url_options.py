"""redis-py style URL options (issue 26, item 2): ``rediss://…?ssl_ca_certs=CA.pem`` and the
other ``ssl_*`` options become the adapter's TLSConfig; any option the adapters do not take is
a ValidationError at construction, never an untyped error on first use.

The mapped options run against the secured redis-servers (TLS; mTLS for the client
certificate); real time, asyncio (redis-py is asyncio).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from urllib.parse import quote

import pytest

from _servers_fixtures import REDIS_NAMESPACES, SECRETS, need_binary
from videoflow_aio.adapters.redis import RedisPayloadStore, RedisRuntimeStore
from videoflow_aio.adapters.redis._url import url_options
from videoflow_aio.contracts.errors import AuthenticationFailed, BackendUnavailable, ValidationError
from videoflow_aio.testing.servers import Certificates, RedisServer, ServerProcess

TIMEOUT = 2.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _url(srv: ServerProcess, query: str, *, user: bool = True) -> str:
    host_port = srv.url.split("://", 1)[1]
    auth = f"app:{quote(SECRETS['redis_app'], safe='')}@" if user else ""
    return f"rediss://{auth}{host_port}/0?{query}"


def _ns() -> str:
    return f"{REDIS_NAMESPACES[0]}:u{uuid.uuid4().hex[:8]}"


async def _round_trip(url: str) -> None:
    async with RedisRuntimeStore(url, namespace=_ns(), timeout=TIMEOUT) as store:
        assert await store.cas("k", None, b"v")
        value, _ = await store.get("k")
        assert value == b"v"
        await store.drop_namespace()


@pytest.mark.anyio
@pytest.mark.server
async def test_ssl_ca_certs_in_the_url_verifies_the_server(
    redis_secure_srv: ServerProcess, pki: Certificates
) -> None:
    await _round_trip(_url(redis_secure_srv, f"ssl_ca_certs={quote(str(pki.ca_file))}"))
    await _round_trip(
        _url(
            redis_secure_srv,
            f"ssl_ca_certs={quote(str(pki.ca_file))}&ssl_cert_reqs=required"
            "&ssl_check_hostname=true",
        )
    )


@pytest.mark.anyio
@pytest.mark.server
async def test_ssl_cert_reqs_none_in_the_url_checks_nothing(
    redis_secure_srv: ServerProcess,
) -> None:
    await _round_trip(_url(redis_secure_srv, "ssl_cert_reqs=none"))


@pytest.mark.anyio
@pytest.mark.server
async def test_without_the_ca_the_server_is_untrusted(redis_secure_srv: ServerProcess) -> None:
    store = RedisRuntimeStore(
        _url(redis_secure_srv, "ssl_cert_reqs=required"), namespace=_ns(), timeout=TIMEOUT
    )
    with pytest.raises(AuthenticationFailed) as err:
        async with store:
            await store.get("k")
    assert err.value.reason == "server-certificate-untrusted"


@pytest.fixture(scope="module")
def redis_mtls_url_srv(pki: Certificates) -> Iterator[ServerProcess]:
    need_binary("redis-server")
    srv = RedisServer(tls=pki, tls_client_auth=True).start()
    yield srv
    srv.stop()


@pytest.mark.anyio
@pytest.mark.server
async def test_ssl_certfile_and_keyfile_in_the_url_present_the_client_certificate(
    redis_mtls_url_srv: ServerProcess, pki: Certificates
) -> None:
    ca = quote(str(pki.ca_file))
    cert, key = quote(str(pki.client_cert)), quote(str(pki.client_key))
    srv = redis_mtls_url_srv
    await _round_trip(
        _url(srv, f"ssl_ca_certs={ca}&ssl_certfile={cert}&ssl_keyfile={key}", user=False)
    )
    store = RedisRuntimeStore(
        _url(srv, f"ssl_ca_certs={ca}", user=False), namespace=_ns(), timeout=TIMEOUT
    )
    with pytest.raises(AuthenticationFailed) as err:
        async with store:
            await store.get("k")
    assert err.value.reason == "client-certificate-refused"


REFUSED = [
    ("redis://h:1/0?ssl_ca_certs=/ca.pem", "needs a rediss://"),
    ("rediss://h:1/0?ssl_ca_path=/etc/ssl", "not offered"),
    ("rediss://h:1/0?ssl_ciphers=ALL", "not offered"),
    ("rediss://h:1/0?ssl_min_version=3", "not offered"),
    ("rediss://h:1/0?ssl_cert_reqs=sometimes", "none, optional or required"),
    ("rediss://h:1/0?ssl_check_hostname=false", "ssl_check_hostname=false"),
    ("rediss://h:1/0?ssl_check_hostname=maybe", "true or false"),
    ("rediss://h:1/0?ssl_certfile=/c.pem", "cert_file and key_file go together"),
    ("rediss://h:1/0?ssl_ca_certs=", "must name a file"),
    ("rediss://h:1/0?ssl_ca_certs=/nonexistent/ca.pem", "cannot load the TLS files"),
    ("redis://h:1/0?socket_timeout=5", "use timeout="),
    ("redis://h:1/0?max_connections=5", "use max_connections="),
    ("redis://h:1/0?protocol=2", "use protocol="),
    ("redis://h:1/0?password=hunter2", "use password="),
    ("redis://h:1/0?ssl=true", "use a rediss:// URL"),
    ("redis://h:1/0?decode_responses=true", "unknown url option"),
    ("redis://h:1/zero", "must be an int"),
    ("redis://h:1?db=x", "must be an int"),
    ("redis://h:1/0?db=1", "both as the path"),
    ("redis://h:1/0?db=1&db=2", "both as the path"),
    ("redis://h:1?db=1&db=2", "given twice"),
    ("redis://h:1/0?oops", "malformed"),
]


@pytest.mark.parametrize(("url", "says"), REFUSED)
@pytest.mark.parametrize("store", [RedisRuntimeStore, RedisPayloadStore])
def test_url_options_not_taken_are_refused_at_construction(
    url: str, says: str, store: type[RedisRuntimeStore] | type[RedisPayloadStore]
) -> None:
    with pytest.raises(ValidationError, match=says) as err:
        if store is RedisPayloadStore:
            RedisPayloadStore(url, tier="durable")
        else:
            RedisRuntimeStore(url)
    assert "hunter2" not in f"{err.value} {err.value.fields}"


def test_ssl_options_and_tls_argument_together_are_refused(pki: Certificates) -> None:
    with pytest.raises(ValidationError, match="both in the URL"):
        RedisRuntimeStore(
            f"rediss://h:1/0?ssl_ca_certs={quote(str(pki.ca_file))}", tls=pki.client_tls()
        )


def test_url_options_map_onto_tls_config() -> None:
    clean, tls = url_options(
        "rediss://h:1/3?ssl_ca_certs=%2Fca.pem&ssl_certfile=%2Fc.pem&ssl_keyfile=%2Fk.pem"
        "&ssl_password=pw&ssl_cert_reqs=optional&ssl_check_hostname=true"
    )
    assert clean == "rediss://h:1/3"
    assert tls == {
        "ca_file": "/ca.pem",
        "cert_file": "/c.pem",
        "key_file": "/k.pem",
        "key_password": "pw",
        "verify": True,
    }
    assert url_options("rediss://h:1?db=2&ssl_cert_reqs=CERT_NONE") == (
        "rediss://h:1/2",
        {"verify": False},
    )
    assert url_options("redis://h:1/") == ("redis://h:1", {})


@pytest.mark.anyio
async def test_a_plain_url_with_a_database_still_reaches_it() -> None:
    """``/N`` keeps selecting the database (the query is gone, the path stays)."""
    store = RedisRuntimeStore("redis://127.0.0.1:1/5", timeout=0.5)
    assert store._conn.url == "redis://127.0.0.1:1/5"
    assert store._conn.client.connection_pool.connection_kwargs["db"] == 5
    with pytest.raises(BackendUnavailable):
        async with store:
            await store.get("k")
