"""Server fixtures for tests that need redis-server / etcd / nats-server (conftest.py makes
them available everywhere and marks their users ``server``).

A missing binary skips the test, unless ``VIDEOFLOW_REQUIRE_SERVERS=1`` (CI): then it fails.
Servers are module-scoped: one per test module that uses the fixture, started when its first
test runs.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from videoflow_aio.testing.clusters import (
    ClusterProcess,
    EtcdCluster,
    NatsCluster,
    RedisReplicaSet,
)
from videoflow_aio.testing.servers import (
    Certificates,
    RedisServer,
    ServerProcess,
    binary_unavailable,
    servers_required,
    start_etcd,
    start_nats,
    start_redis,
)


def need_binary(name: str) -> None:
    """Skip (or, under VIDEOFLOW_REQUIRE_SERVERS=1, fail) when ``name`` is not installed."""
    reason = binary_unavailable(name)
    if reason is None:
        return
    if servers_required():
        pytest.fail(f"VIDEOFLOW_REQUIRE_SERVERS=1 but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="module")
def redis_srv() -> Iterator[ServerProcess]:
    """A plain redis-server (no maxmemory)."""
    need_binary("redis-server")
    srv = start_redis()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def redis_durable_srv() -> Iterator[ServerProcess]:
    """redis-server for the durable payload tier: noeviction, a generous maxmemory."""
    need_binary("redis-server")
    srv = start_redis(maxmemory="256mb", policy="noeviction")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def redis_evictable_srv() -> Iterator[ServerProcess]:
    """redis-server for the evictable payload tier: volatile-lru."""
    need_binary("redis-server")
    srv = start_redis(maxmemory="64mb", policy="volatile-lru")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def etcd_srv() -> Iterator[ServerProcess]:
    need_binary("etcd")
    srv = start_etcd()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def nats_srv() -> Iterator[ServerProcess]:
    need_binary("nats-server")
    srv = start_nats()
    yield srv
    srv.stop()


def _cluster(spec: NatsCluster | EtcdCluster | RedisReplicaSet) -> Iterator[ClusterProcess]:
    need_binary(spec.binary)
    cluster = spec.start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def nats_cluster() -> Iterator[ClusterProcess]:
    """Three nats-server with routes between them, JetStream on each (``sync_interval``
    always: an acknowledged write is on disk)."""
    yield from _cluster(NatsCluster(sync_interval="always"))


@pytest.fixture(scope="module")
def etcd_cluster() -> Iterator[ClusterProcess]:
    """Three etcd members on loopback."""
    yield from _cluster(EtcdCluster())


@pytest.fixture(scope="module")
def redis_replicaset() -> Iterator[ClusterProcess]:
    """A Redis primary (AOF, appendfsync always, noeviction) and one replica."""
    yield from _cluster(
        RedisReplicaSet(
            server=RedisServer(
                maxmemory="256mb", policy="noeviction", appendonly=True, appendfsync="always"
            )
        )
    )


# -- secured servers (tests/adapters/*/test_security_*.py) -------------------------------
# Recognisable secrets: the no-leak test greps everything the library produced for them.
SECRETS = {
    "redis_admin": "adm1n-PW-redis-93f1c2",
    "redis_app": "app-PW-redis-5b7e0a",
    "etcd_root": "r00t-PW-etcd-c41d9e",
    "etcd_app": "app-PW-etcd-8a2f61",
    "nats_app": "app-PW-nats-2d9b47",
    "nats_token": "t0ken-nats-6e13f8",
    "nats_other": "other-PW-nats-0c5a3d",
}
REDIS_NAMESPACES = ("vfsec", "vfsecp")
"""The namespaces the least-privilege Redis user ``app`` may touch (its ACL is exactly
``acl_rules(REDIS_NAMESPACES)``)."""


@pytest.fixture(scope="module")
def pki() -> Iterator[Certificates]:
    """A throwaway CA, server and client certificates in a temporary directory (trustme)."""
    certs = Certificates.make()
    yield certs
    certs.remove()


def redis_acl() -> list[str]:
    """The ACL file of :func:`redis_secure_srv`: no default user, an ``admin`` with every
    right, ``app`` with exactly the documented least-privilege rules."""
    from videoflow_aio.adapters.redis import acl_rules

    return [
        "user default off",
        f"user admin on >{SECRETS['redis_admin']} ~* &* +@all",
        f"user app on >{SECRETS['redis_app']} {acl_rules(REDIS_NAMESPACES)}",
    ]


@pytest.fixture(scope="module")
def redis_secure_srv(pki: Certificates) -> Iterator[ServerProcess]:
    """redis-server on TLS (``rediss://``, a plain port too: ``plain_url``) with ACL users
    (:func:`redis_acl`), maxmemory-policy noeviction."""
    need_binary("redis-server")
    srv = RedisServer(
        tls=pki, plain_port=True, acl=redis_acl(), maxmemory="256mb", policy="noeviction"
    ).start()
    yield srv
    srv.stop()


ETCD_NAMESPACE = "vfsec"
"""The namespace etcd user ``app`` may read and write (its role allows ``vfsec/…`` only)."""
ETCD_CN_NAMESPACE = "vfcn"
"""The namespace of the password-less user named by the client certificate's common name."""
ETCD_TOKEN_TTL = 3
"""``--auth-token-ttl`` of the secured etcd: short, so tests see a token expire."""


def _etcd_secure(pki: Certificates, *, client_cert_auth: bool) -> ServerProcess:
    import anyio

    from videoflow_aio.adapters.etcd import enable_auth, grant_prefix
    from videoflow_aio.testing.servers import CLIENT_NAME, EtcdServer

    need_binary("etcd")
    srv = EtcdServer(
        tls=pki, client_cert_auth=client_cert_auth, args=["--auth-token-ttl", str(ETCD_TOKEN_TTL)]
    ).start()
    tls = pki.client_tls(client_cert=client_cert_auth)
    root = SECRETS["etcd_root"]

    async def setup() -> None:
        await enable_auth(srv.url, root_password=root, tls=tls)
        await grant_prefix(
            srv.url,
            username="app",
            password=SECRETS["etcd_app"],
            namespace=ETCD_NAMESPACE,
            root_password=root,
            tls=tls,
        )
        if client_cert_auth:
            await grant_prefix(
                srv.url,
                username=CLIENT_NAME,
                password=None,
                namespace=ETCD_CN_NAMESPACE,
                root_password=root,
                tls=tls,
            )

    try:
        anyio.run(setup)
    except BaseException:
        srv.stop()
        raise
    return srv


@pytest.fixture(scope="module")
def etcd_tls_srv(pki: Certificates) -> Iterator[ServerProcess]:
    """etcd serving TLS (no client certificate needed) with authentication on: ``root`` and
    ``app`` (role: ``ETCD_NAMESPACE/…`` only)."""
    srv = _etcd_secure(pki, client_cert_auth=False)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def etcd_mtls_srv(pki: Certificates) -> Iterator[ServerProcess]:
    """etcd requiring a client certificate (mTLS), authentication on: ``root``, ``app``, and
    the certificate's common name as a password-less user limited to ``ETCD_CN_NAMESPACE``."""
    srv = _etcd_secure(pki, client_cert_auth=True)
    yield srv
    srv.stop()


NATS_PREFIX = "vfsec"
"""The subject prefix NATS user ``app`` may publish on (account ``APP``, JetStream on)."""


def nats_seed(path: str) -> str:
    """Write a fresh NKey user seed to ``path``; returns its public key."""
    import os

    import nkeys

    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
    with open(path, "wb") as f:
        f.write(seed)
    os.chmod(path, 0o600)
    return str(nkeys.from_seed(bytearray(seed)).public_key.decode())


def nats_accounts(nkey_public: str) -> str:
    """The ``accounts`` block of :func:`nats_secure_srv`: ``APP`` (JetStream) with ``app``
    (password, exactly ``jetstream_permissions(NATS_PREFIX)``) and an NKey user (same
    permissions); ``OTHER`` (JetStream) with ``other``, to show accounts do not see each
    other's streams."""
    from videoflow_aio.adapters.nats import jetstream_permissions, permissions_config

    perms = permissions_config(jetstream_permissions(NATS_PREFIX))
    return (
        "accounts {\n"
        "  APP { jetstream: enabled, users: [\n"
        f'    {{user: app, password: "{SECRETS["nats_app"]}", permissions: {perms}}}\n'
        f"    {{nkey: {nkey_public}, permissions: {perms}}}\n"
        "  ] }\n"
        "  OTHER { jetstream: enabled, users: [\n"
        f'    {{user: other, password: "{SECRETS["nats_other"]}"}}\n'
        "  ] }\n"
        "}\n"
    )


@pytest.fixture(scope="module")
def nats_secure_srv(
    pki: Certificates, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """nats-server with TLS, JetStream, accounts ``APP``/``OTHER`` (:func:`nats_accounts`);
    ``srv.nkey_seed_file`` names the NKey user's seed file."""
    from videoflow_aio.testing.servers import NatsServer

    need_binary("nats-server")
    seed = str(tmp_path_factory.mktemp("nkey") / "user.nk")
    srv = NatsServer(tls=pki, config=nats_accounts(nats_seed(seed))).start()
    srv.nkey_seed_file = seed  # type: ignore[attr-defined]
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def nats_token_srv(pki: Certificates) -> Iterator[ServerProcess]:
    """nats-server with TLS and token authentication (token ``SECRETS['nats_token']``)."""
    from videoflow_aio.testing.servers import NatsServer

    need_binary("nats-server")
    conf = f'authorization {{ token: "{SECRETS["nats_token"]}" }}\n'
    srv = NatsServer(tls=pki, jetstream=False, config=conf).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def nats_mtls_srv(pki: Certificates) -> Iterator[ServerProcess]:
    """nats-server requiring a client certificate signed by the CA (mTLS), no JetStream."""
    from videoflow_aio.testing.servers import NatsServer

    need_binary("nats-server")
    srv = NatsServer(tls=pki, tls_verify=True, jetstream=False).start()
    yield srv
    srv.stop()


SERVER_FIXTURES = frozenset(
    {
        "nats_secure_srv",
        "nats_token_srv",
        "nats_mtls_srv",
        "redis_srv",
        "redis_durable_srv",
        "redis_evictable_srv",
        "etcd_srv",
        "nats_srv",
        "nats_cluster",
        "etcd_cluster",
        "redis_replicaset",
        "redis_secure_srv",
        "etcd_tls_srv",
        "etcd_mtls_srv",
    }
)
"""The fixtures above: a test using one is marked ``server`` (conftest.py)."""

CLUSTER_FIXTURES = frozenset({"nats_cluster", "etcd_cluster", "redis_replicaset"})
"""The cluster fixtures: a test using one is also marked ``cluster``."""


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker, before xdist reads groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``server`` every test that uses one of :data:`SERVER_FIXTURES`; under xdist
    (``--dist loadgroup``) those of one module share a worker, so the module's servers start
    once, not once per worker."""
    xdist = config.pluginmanager.hasplugin("xdist")
    for item in items:
        names = getattr(item, "fixturenames", ())
        if not SERVER_FIXTURES.intersection(names):
            continue
        if item.get_closest_marker("server") is None:
            item.add_marker(pytest.mark.server)
        if xdist and item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(f"servers-of-{item.nodeid.split('::')[0]}"))
    for item in items:
        names = getattr(item, "fixturenames", ())
        if CLUSTER_FIXTURES.intersection(names) and item.get_closest_marker("cluster") is None:
            item.add_marker(pytest.mark.cluster)
