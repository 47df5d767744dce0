"""No secret ever leaves the library: recognisable passwords and tokens (right and wrong ones)
are set on every adapter, every path runs — success, refused credentials, refused TLS,
refused permissions — and everything the library produced is searched for them: ``repr`` of
every object involved, exception messages, ``args`` and fields along the whole cause chain,
log records of every logger at DEBUG (the library's and the clients'), output written to the
process' file descriptors (gRPC's C core logs there), the ``ObservationLog`` export, the
NATS backends' ``connection_errors``, the conformance JSON report and the CLI's output.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import anyio
import pytest

from _servers_fixtures import ETCD_NAMESPACE, NATS_PREFIX, REDIS_NAMESPACES, SECRETS
from videoflow_aio.adapters import Credentials, Secret, TLSConfig
from videoflow_aio.adapters.etcd import EtcdRuntimeStore
from videoflow_aio.adapters.nats import CoreNatsMessagingBackend, JetStreamMessagingBackend
from videoflow_aio.adapters.redis import RedisPayloadStore, RedisRuntimeStore
from videoflow_aio.contracts.payload import RetentionContract
from videoflow_aio.observe import ObservationLog
from videoflow_aio.testing.servers import Certificates, ServerProcess

pytestmark = [pytest.mark.anyio, pytest.mark.server]

WRONG = {
    "redis": "wrong-PW-redis-77e1b0",
    "etcd": "wrong-PW-etcd-19c4aa",
    "nats": "wrong-PW-nats-4f02d5",
    "token": "wrong-t0ken-nats-a81c3e",
}
ALL_SECRETS = [*SECRETS.values(), *WRONG.values()]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Collected:
    """Everything the library produced in one test, as text."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def add(self, *objects: Any) -> None:
        for obj in objects:
            self.texts.append(obj if isinstance(obj, str) else repr(obj))

    def error(self, exc: BaseException) -> None:
        seen: set[int] = set()
        e: BaseException | None = exc
        while e is not None and id(e) not in seen:
            seen.add(id(e))
            self.add(str(e), repr(e), repr(e.args), repr(getattr(e, "fields", None)))
            e = e.__cause__ or e.__context__

    async def attempt(self, coro: Any) -> None:
        """Await ``coro``; keep what it returned or raised."""
        try:
            self.add(await coro)
        except Exception as exc:
            self.error(exc)

    def check(self, extra: Iterable[str] = ()) -> None:
        texts = [*self.texts, *extra]
        assert texts, "nothing collected"
        for secret in ALL_SECRETS:
            leaked = [t[:200] for t in texts if secret in t]
            assert not leaked, f"a secret leaked: {leaked[:3]}"


@pytest.fixture
def collected(caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]) -> Any:
    caplog.set_level(logging.DEBUG)
    c = Collected()
    yield c
    out, err = capfd.readouterr()
    records = [f"{r.name} {r.getMessage()} {r.args!r} {r.exc_text or ''}" for r in caplog.records]
    c.check([caplog.text, out, err, *records])


def test_value_types_never_print_a_secret(collected: Collected) -> None:
    s = Secret(SECRETS["redis_app"])
    creds = Credentials(
        username="app", password=Secret(SECRETS["redis_app"]), token=Secret(SECRETS["nats_token"])
    )
    tls = TLSConfig(key_password=Secret(SECRETS["etcd_root"]))
    collected.add(s, str(s), f"{s}", f"{s!r:>40}", creds, str(creds), tls, [s], {"k": s})
    with pytest.raises(TypeError):
        __import__("pickle").dumps(s)
    assert s.reveal() == SECRETS["redis_app"]


async def test_redis(
    collected: Collected, redis_secure_srv: ServerProcess, pki: Certificates
) -> None:
    tls = pki.client_tls(client_cert=False)
    host_port = redis_secure_srv.url.split("://", 1)[1]
    log = ObservationLog()
    good = RedisPayloadStore(
        f"rediss://app:{SECRETS['redis_app']}@{host_port}",
        namespace=f"{REDIS_NAMESPACES[1]}:leak",
        tls=tls,
        log=log,
        timeout=2.0,
    )
    contract = RetentionContract(ttl_seconds=60, obligation_seconds=30, obligations=("r",))
    collected.add(good, good._conn, good._conn.client, good._conn.client.connection_pool)
    await collected.attempt(good.put(b"frame", "k", contract))
    await collected.attempt(good.inventory())
    await good.drop_namespace()
    await good.aclose()
    collected.add(log.export_jsonl().decode(), log.events())
    for store in (
        RedisRuntimeStore(
            redis_secure_srv.url, tls=tls, username="app", password=WRONG["redis"], timeout=2.0
        ),
        RedisRuntimeStore(
            redis_secure_srv.url.replace("rediss", "redis"),
            username="app",
            password=SECRETS["redis_app"],
            timeout=2.0,
        ),
        RedisRuntimeStore(
            redis_secure_srv.url,
            namespace="elsewhere",
            tls=tls,
            username="app",
            password=SECRETS["redis_app"],
            timeout=2.0,
        ),
        RedisRuntimeStore(
            f"rediss://admin:{SECRETS['redis_admin']}@{host_port}",
            tls=TLSConfig(),
            timeout=2.0,
        ),
    ):
        collected.add(store, store._conn, store._conn.url)
        await collected.attempt(store.cas("k", None, b"v"))
        await collected.attempt(store.get("k"))
        await store.aclose()


async def test_etcd(collected: Collected, etcd_tls_srv: ServerProcess, pki: Certificates) -> None:
    tls = pki.client_tls(client_cert=False)
    for kw in (
        {"password": SECRETS["etcd_app"]},
        {"password": WRONG["etcd"]},
        {"password": SECRETS["etcd_app"], "namespace": "elsewhere"},
        {"password": SECRETS["etcd_app"], "tls": TLSConfig()},
    ):
        options: dict[str, Any] = {"namespace": ETCD_NAMESPACE, "tls": tls, "timeout": 2.0}
        options.update(kw)
        store = EtcdRuntimeStore(etcd_tls_srv.url, username="app", **options)
        collected.add(store, store._client, store._client.metadata)
        await collected.attempt(store.cas("leak", None, b"v"))
        await collected.attempt(store.scan(""))
        await store.aclose()
    with pytest.raises(Exception) as info:
        EtcdRuntimeStore(f"https://app:{SECRETS['etcd_app']}@127.0.0.1:1")
    collected.error(info.value)


async def test_nats(
    collected: Collected,
    nats_secure_srv: ServerProcess,
    nats_token_srv: ServerProcess,
    pki: Certificates,
) -> None:
    tls = pki.client_tls(client_cert=False)
    host_port = nats_secure_srv.url.split("://", 1)[1]
    backends: list[Any] = [
        JetStreamMessagingBackend(
            f"tls://app:{SECRETS['nats_app']}@{host_port}",
            subject_prefix=NATS_PREFIX,
            tls=tls,
            request_timeout=1.0,
        ),
        JetStreamMessagingBackend(
            nats_secure_srv.url,
            username="app",
            password=WRONG["nats"],
            tls=tls,
            request_timeout=1.0,
        ),
        JetStreamMessagingBackend(
            nats_secure_srv.url.replace("tls://", "nats://"),
            username="app",
            password=SECRETS["nats_app"],
            request_timeout=1.0,
        ),
        CoreNatsMessagingBackend(
            nats_token_srv.url, token=SECRETS["nats_token"], tls=tls, request_timeout=1.0
        ),
        CoreNatsMessagingBackend(
            nats_token_srv.url, token=WRONG["token"], tls=tls, request_timeout=1.0
        ),
        CoreNatsMessagingBackend(
            nats_secure_srv.url,
            subject_prefix="elsewhere",
            username="app",
            password=SECRETS["nats_app"],
            tls=tls,
            request_timeout=1.0,
        ),
    ]
    from videoflow_aio.contracts.messaging import make_channel, make_envelope

    for b in backends:
        collected.add(b, b.connection.auth, b.servers)
        ch = make_channel("f", "r", "leak", "work", retention="limits")
        await collected.attempt(b.ensure_channel(ch, "op-leak"))
        await collected.attempt(b.publish(make_envelope(ch.channel, "p"), anyio.current_time() + 1))
        collected.add(getattr(b, "connection_errors", []))
        await b.aclose()


def test_cli_and_json_report(
    collected: Collected,
    redis_secure_srv: ServerProcess,
    etcd_tls_srv: ServerProcess,
    nats_secure_srv: ServerProcess,
    pki: Certificates,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """Credentials from environment variables and files only; the run passes on all three
    secured servers, and neither its output nor its JSON report carries a secret."""
    from videoflow_aio.cli import main

    def secret_file(name: str, value: str) -> str:
        path = tmp_path / name
        path.write_text(value + "\n")
        path.chmod(0o600)
        return str(path)

    env = {
        "VIDEOFLOW_REDIS_SECURE_USERNAME": "app",
        "VIDEOFLOW_REDIS_SECURE_PASSWORD_FILE": secret_file("redis", SECRETS["redis_app"]),
        "VIDEOFLOW_REDIS_SECURE_TLS_CA_FILE": str(pki.ca_file),
        "VIDEOFLOW_ETCD_SECURE_USERNAME": "app",
        "VIDEOFLOW_ETCD_SECURE_PASSWORD": SECRETS["etcd_app"],
        "VIDEOFLOW_ETCD_SECURE_TLS_CA_FILE": str(pki.ca_file),
        "VIDEOFLOW_NATS_SECURE_USERNAME": "app",
        "VIDEOFLOW_NATS_SECURE_PASSWORD_FILE": secret_file("nats", SECRETS["nats_app"]),
        "VIDEOFLOW_NATS_SECURE_TLS_CA_FILE": str(pki.ca_file),
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    report = tmp_path / "report.json"
    argv = [
        "conformance", "--secure", "--provider", "redis,etcd,nats", "--backend", "asyncio",
        "--select", "RTS-001,PAY-001,MSG-001", "--json", str(report),
        "--redis-url", redis_secure_srv.url, "--etcd-url", etcd_tls_srv.url,
        "--nats-url", nats_secure_srv.url,
    ]  # fmt: skip
    assert main(argv) == 0, capfd.readouterr()
    out, err = capfd.readouterr()
    text = report.read_text()
    assert "redis-secure" in text and "etcd-secure" in text and "nats-secure" in text
    collected.add(out, err, text)
    # a secret on the command line is refused, and the refusal does not repeat it
    for bad in (
        ["--option", f"redis-secure.password={WRONG['redis']}"],
        ["--redis-url", f"rediss://app:{WRONG['redis']}@{redis_secure_srv.url[9:]}"],
    ):
        assert main(["conformance", "--secure", "-p", "redis", *bad]) == 2
        out, err = capfd.readouterr()
        assert "not taken from the command line" in err
        collected.add(out, err)
