"""Redis adapters on a secured redis-server: TLS (``rediss://``, an ``ssl.SSLContext``), mTLS,
ACL users with exactly the documented least-privilege rules, and every refusal as one typed
error within the adapter's timeout.

Real time, asyncio (redis-py is asyncio); the secured conformance run is in
tests/conformance/test_conformance.py.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest
import redis.asyncio as aredis

from _security_matrix import (
    REFUSED_CONNECTIONS,
    expired_server_certificates,
    refused_client_certificates,
    refused_options,
)
from _security_matrix import refused as _refused
from _servers_fixtures import REDIS_NAMESPACES, SECRETS, need_binary
from videoflow_aio.adapters import Secret, TLSConfig
from videoflow_aio.adapters.redis import RedisPayloadStore, RedisRuntimeStore, acl_rules
from videoflow_aio.contracts.errors import (
    AccessDenied,
    AuthenticationFailed,
    OutcomeUnknown,
    ValidationError,
)
from videoflow_aio.contracts.payload import PayloadBytes, RetentionContract
from videoflow_aio.testing.servers import Certificates, RedisServer, ServerProcess

pytestmark = [pytest.mark.anyio, pytest.mark.server]

TIMEOUT = 2.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _ns() -> str:
    return f"{REDIS_NAMESPACES[0]}:t{uuid.uuid4().hex[:8]}"


def app_store(srv: ServerProcess, pki: Certificates, **kw: Any) -> RedisRuntimeStore:
    options: dict[str, Any] = {
        "namespace": _ns(),
        "timeout": TIMEOUT,
        "tls": pki.client_tls(client_cert=False),
        "username": "app",
        "password": SECRETS["redis_app"],
    }
    options.update(kw)
    return RedisRuntimeStore(options.pop("url", srv.url), **options)


@pytest.fixture
async def admin(redis_secure_srv: ServerProcess, pki: Certificates) -> AsyncIterator[aredis.Redis]:
    """A raw redis-py client as ``admin`` (changes ACLs under a running adapter)."""
    r = aredis.Redis(
        host="127.0.0.1",
        port=redis_secure_srv.port,
        ssl=True,
        ssl_ca_certs=str(pki.ca_file),
        username="admin",
        password=SECRETS["redis_admin"],
        protocol=3,
    )
    yield r
    await r.aclose()


async def refused(store: Any, call: str = "cas") -> BaseException:
    return await _refused(store, call, budget=TIMEOUT)


# -- what works -----------------------------------------------------------------------------
async def test_least_privilege_user_runs_the_runtime_store_over_tls(
    redis_secure_srv: ServerProcess, pki: Certificates
) -> None:
    async with app_store(redis_secure_srv, pki) as store:
        assert await store.cas("a", None, b"1")
        value, ver = await store.get("a")
        assert value == b"1"
        assert await store.cas("a", ver, b"2")
        assert [k for k, _v, _ver in await store.scan("")] == ["a"]
        assert await store.append("log", b"r1") == 1
        assert await store.log_entries("log") == [b"r1"]
        _, ver = await store.get("a")
        assert await store.delete("a", ver)
        # CONFIG is not granted: durability cannot be read, so it is not promised
        assert not (await store.capabilities()).durable
        await store.drop_namespace()


async def test_least_privilege_user_runs_the_payload_store_over_tls(
    redis_secure_srv: ServerProcess, pki: Certificates
) -> None:
    store = RedisPayloadStore(
        redis_secure_srv.url,
        namespace=f"{REDIS_NAMESPACES[1]}:t{uuid.uuid4().hex[:8]}",
        timeout=TIMEOUT,
        tls=pki.client_tls(client_cert=False),
        username="app",
        password=Secret(SECRETS["redis_app"]),
    )
    async with store:  # ensure_policy: CONFIG refused, the check is skipped
        contract = RetentionContract(ttl_seconds=60, obligation_seconds=30, obligations=("r",))
        ref = await store.put(b"frame", "k1", contract)
        got = await store.read(ref)
        assert isinstance(got, PayloadBytes) and got.data == b"frame"
        receipt = await store.acquire_obligation(ref, "r2", anyio.current_time() + 10)
        assert receipt.obligation_id == "r2"
        assert (await store.release_obligation(ref, "r", "done")).outcome == "released"
        assert (await store.release_obligation(ref, "r2", "done")).outcome == "reclaimed"
        assert await store.stored_bytes() == 0
        await store.drop_namespace()


async def test_an_ssl_context_and_credentials_in_the_url(
    redis_secure_srv: ServerProcess, pki: Certificates
) -> None:
    host_port = redis_secure_srv.url.split("://", 1)[1]
    url = f"rediss://app:{SECRETS['redis_app']}@{host_port}"
    store = RedisRuntimeStore(url, namespace=_ns(), timeout=TIMEOUT, tls=pki.context())
    async with store:
        assert await store.cas("a", None, b"1")
        await store.drop_namespace()
    # the URL the store keeps and shows has no password
    assert SECRETS["redis_app"] not in store._conn.url
    assert store._conn.url == f"redis://{host_port}"


async def test_the_same_field_twice_is_refused(redis_secure_srv: ServerProcess) -> None:
    host_port = redis_secure_srv.url.split("://", 1)[1]
    with pytest.raises(ValidationError, match="password given both"):
        RedisRuntimeStore(f"rediss://app:x@{host_port}", password="y")
    with pytest.raises(ValidationError, match="url must be"):
        RedisRuntimeStore(f"unix://app:x@{host_port}")


# -- mTLS ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def redis_mtls_srv(pki: Certificates) -> Iterator[ServerProcess]:
    need_binary("redis-server")
    srv = RedisServer(tls=pki, tls_client_auth=True).start()
    yield srv
    srv.stop()


async def test_mtls_client_certificate_is_required_and_checked(
    redis_mtls_srv: ServerProcess, pki: Certificates
) -> None:
    def store(tls: TLSConfig) -> RedisRuntimeStore:
        return RedisRuntimeStore(redis_mtls_srv.url, namespace=_ns(), timeout=TIMEOUT, tls=tls)

    async with store(pki.client_tls()) as ok:
        assert await ok.cas("a", None, b"1")
        await ok.drop_namespace()
    with refused_client_certificates(pki) as refusals:
        for tls in refusals:
            err = await refused(store(tls))
            assert isinstance(err, AuthenticationFailed), err
            assert err.reason == "client-certificate-refused"


# -- the failure matrix ----------------------------------------------------------------------
@pytest.mark.parametrize(("case", "reason"), REFUSED_CONNECTIONS)
async def test_refused_connections_are_one_typed_error_within_the_timeout(
    redis_secure_srv: ServerProcess, pki: Certificates, case: str, reason: str
) -> None:
    srv = redis_secure_srv
    options = refused_options(case, pki, srv.url.replace("rediss://", "redis://"))
    for call in ("cas", "get"):  # a write and a read alike: nothing sent
        err = await refused(app_store(srv, pki, **options), call)
        assert isinstance(err, AuthenticationFailed), err
        assert err.reason == reason
        assert err.applied is False


async def test_tls_client_on_the_plain_port_is_named(
    redis_secure_srv: ServerProcess, pki: Certificates
) -> None:
    assert redis_secure_srv.plain_url is not None
    err = await refused(app_store(redis_secure_srv, pki, url=redis_secure_srv.plain_url))
    assert isinstance(err, AuthenticationFailed) and err.reason == "tls-not-offered"


async def test_expired_server_certificate(pki: Certificates) -> None:
    need_binary("redis-server")
    with expired_server_certificates() as stale, RedisServer(tls=stale) as srv:
        store = RedisRuntimeStore(
            srv.url, namespace=_ns(), timeout=TIMEOUT, tls=stale.client_tls(client_cert=False)
        )
        err = await refused(store)
    assert isinstance(err, AuthenticationFailed) and err.reason == "server-certificate-expired"


async def test_keys_outside_the_granted_namespace_are_access_denied(
    redis_secure_srv: ServerProcess, pki: Certificates
) -> None:
    for call in ("cas", "get"):
        err = await refused(app_store(redis_secure_srv, pki, namespace="elsewhere"), call)
        assert isinstance(err, AccessDenied), err
        assert err.operation == call and err.applied is False


async def test_payload_read_and_inventory_raise_a_refusal_instead_of_transient(
    redis_secure_srv: ServerProcess, pki: Certificates, admin: aredis.Redis
) -> None:
    """A refusal is not a TransientFailure / Unknown: retrying cannot cure it. (SCAN lists
    names outside the granted keys, so inventory is refused once there is an object to read.)"""
    from videoflow_aio.contracts.payload import ImmutablePayloadRef

    await admin.set("elsewhere:o:k", b"x", px=60_000)
    store = RedisPayloadStore(
        redis_secure_srv.url,
        namespace="elsewhere",
        timeout=TIMEOUT,
        tls=pki.client_tls(client_cert=False),
        username="app",
        password=SECRETS["redis_app"],
    )
    try:
        with pytest.raises(AccessDenied):
            await store.read(ImmutablePayloadRef("k", 1, "sha256:00", "1", "redis"))
        with pytest.raises(AccessDenied):
            await store.inventory()
    finally:
        await store.aclose()
    wrong = RedisPayloadStore(
        redis_secure_srv.url,
        namespace=REDIS_NAMESPACES[1],
        timeout=TIMEOUT,
        tls=pki.client_tls(client_cert=False),
        username="app",
        password="wrong",
    )
    try:
        with pytest.raises(AuthenticationFailed):
            await wrong.read(ImmutablePayloadRef("k", 1, "sha256:00", "1", "redis"))
    finally:
        await wrong.aclose()


# -- an ACL changed under a running adapter --------------------------------------------------
async def _acl(admin: aredis.Redis, *args: str) -> Any:
    return await admin.execute_command(*args)  # type: ignore[no-untyped-call]


async def _user_with_rules(admin: aredis.Redis, name: str, password: str, rules: str) -> None:
    await _acl(admin, "ACL", "SETUSER", name, "reset", "on", f">{password}", *rules.split())


@pytest.mark.parametrize("revoke", ["resetkeys", "-evalsha", "-hmget"])
async def test_permission_withdrawn_mid_run_is_access_denied_and_nothing_applied(
    redis_secure_srv: ServerProcess, pki: Certificates, admin: aredis.Redis, revoke: str
) -> None:
    name, password = f"mid-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex
    await _user_with_rules(admin, name, password, acl_rules(REDIS_NAMESPACES))
    store = app_store(redis_secure_srv, pki, username=name, password=password)
    try:
        assert await store.cas("a", None, b"1")
        _, ver = await store.get("a")
        await _acl(admin, "ACL", "SETUSER", name, revoke)
        if revoke != "-hmget":  # writes run as scripts: EVALSHA or the keys refused
            with pytest.raises(AccessDenied):
                await store.cas("a", ver, b"2")
        with pytest.raises(AccessDenied) if revoke != "-evalsha" else contextlib.nullcontext():
            await store.get("a")
        raw = await admin.hmget(f"{store.namespace}:rs:k:a", "v")
        assert raw == [b"1"]  # the refused write did not apply
    finally:
        await _acl(admin, "ACL", "DELUSER", name)
        await store.aclose()


async def test_user_deleted_mid_run_is_authentication_failed(
    redis_secure_srv: ServerProcess, pki: Certificates, admin: aredis.Redis
) -> None:
    name, password = f"gone-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex
    await _user_with_rules(admin, name, password, acl_rules(REDIS_NAMESPACES))
    store = app_store(redis_secure_srv, pki, username=name, password=password)
    try:
        assert await store.cas("a", None, b"1")
        await _acl(admin, "ACL", "DELUSER", name)  # its connections are closed too
        # A write sent on a connection the server is closing has lost its reply, and the
        # resolution cannot authenticate: its outcome is unknown and says why. Any later
        # operation is refused before sending.
        try:
            await store.cas("k", None, b"v")
        except OutcomeUnknown as exc:
            assert exc.fields["refused"] == "bad-credentials"
        except AuthenticationFailed as exc:
            assert exc.reason == "bad-credentials"
        else:
            pytest.fail("a write by a deleted user was reported as done")
        err = await refused(store)
        assert isinstance(err, AuthenticationFailed) and err.reason == "bad-credentials"
        assert await admin.exists(f"{store.namespace}:rs:k:k") == 0
    finally:
        await store.aclose()


async def test_a_command_withdrawn_mid_run_leaves_no_half_write(
    redis_secure_srv: ServerProcess, pki: Certificates, admin: aredis.Redis
) -> None:
    """Redis checks a script's commands as they run and keeps the writes before a refused
    one; the adapter's scripts ask for every command first (``_acl.guard``). Without that,
    a re-put with ``SET`` withdrawn would delete the object it replaces, and a CAS with
    ``HSET`` withdrawn would bump the version counter."""
    name, password = f"half-{uuid.uuid4().hex[:6]}", uuid.uuid4().hex
    await _user_with_rules(admin, name, password, acl_rules(REDIS_NAMESPACES))
    ns = f"{REDIS_NAMESPACES[1]}:h{uuid.uuid4().hex[:6]}"
    common: dict[str, Any] = {
        "namespace": ns,
        "timeout": TIMEOUT,
        "tls": pki.client_tls(client_cert=False),
        "username": name,
        "password": password,
    }
    payload = RedisPayloadStore(redis_secure_srv.url, **common)
    rts = RedisRuntimeStore(redis_secure_srv.url, **common)
    try:
        ref = await payload.put(b"first", "k", RetentionContract(ttl_seconds=60))
        assert await rts.cas("a", None, b"1")
        rev = await admin.get(f"{ns}:rs:rev")
        await _acl(admin, "ACL", "SETUSER", name, "-set", "-hset")
        with pytest.raises(AccessDenied):
            await payload.put(b"second", "k", RetentionContract(ttl_seconds=60))
        with pytest.raises(AccessDenied):
            await rts.cas("a", (await rts.get("a"))[1], b"2")
        await _acl(admin, "ACL", "SETUSER", name, "+set", "+hset")
        got = await payload.read(ref)
        assert isinstance(got, PayloadBytes) and got.data == b"first"  # not deleted
        assert await admin.get(f"{ns}:rs:rev") == rev  # no version consumed
        assert (await rts.get("a"))[0] == b"1"
        await payload.drop_namespace()
    finally:
        await _acl(admin, "ACL", "DELUSER", name)
        await payload.aclose()
        await rts.aclose()
