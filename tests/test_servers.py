"""Server management: start on a free port, answer, stop by PID, clean the temp dir."""

from __future__ import annotations

import os
import socket

import pytest

from _servers_fixtures import need_binary
from videoflow_aio.adapters import _servers
from videoflow_aio.adapters._servers import (
    binary_unavailable,
    etcd_server,
    nats_server,
    redis_server,
    servers_required,
)
from videoflow_aio.contracts.errors import BackendUnavailable


def _answers(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_missing_binary_has_a_reason() -> None:
    reason = binary_unavailable("no-such-server-binary-xyz")
    assert reason is not None and "no-such-server-binary-xyz" in reason
    with pytest.raises(BackendUnavailable):
        _servers._launch(
            "x", "no-such-server-binary-xyz", lambda d, p: [], str, lambda s: True, 1.0
        )


def test_require_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VIDEOFLOW_REQUIRE_SERVERS", "1")
    assert servers_required()
    monkeypatch.setenv("VIDEOFLOW_REQUIRE_SERVERS", "0")
    assert not servers_required()


@pytest.mark.parametrize(
    ("binary", "ctx"),
    [("redis-server", redis_server), ("etcd", etcd_server), ("nats-server", nats_server)],
)
def test_sync_start_and_stop(binary: str, ctx: type) -> None:
    need_binary(binary)
    with ctx() as srv:
        assert srv.alive()
        assert srv.url.startswith(("redis://", "http://", "nats://"))
        assert _answers(srv.port)
        assert srv.dir.is_dir()
        pid = srv.pid
    assert not srv.alive()
    assert not srv.dir.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    srv.stop()  # idempotent


def test_nats_monitoring_and_jetstream() -> None:
    need_binary("nats-server")
    with nats_server() as srv:
        assert srv.monitor_url is not None
        assert _servers._nats_health(srv)


def test_redis_config_options() -> None:
    need_binary("redis-server")
    with (
        redis_server(maxmemory="8mb", policy="volatile-lru") as srv,
        socket.create_connection(("127.0.0.1", srv.port)) as s,
    ):
        s.sendall(b"CONFIG GET maxmemory-policy\r\n")
        assert b"volatile-lru" in s.recv(256)


@pytest.mark.anyio
async def test_async_context_manager() -> None:
    need_binary("redis-server")
    async with redis_server() as srv:
        assert srv.alive() and _answers(srv.port)
    assert not srv.alive()


def test_missing_server_skips_locally_and_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    import _servers_fixtures

    monkeypatch.setattr(_servers_fixtures, "binary_unavailable", lambda name: f"{name} missing")
    monkeypatch.delenv("VIDEOFLOW_REQUIRE_SERVERS", raising=False)
    with pytest.raises(pytest.skip.Exception, match="redis-server missing"):
        need_binary("redis-server")
    monkeypatch.setenv("VIDEOFLOW_REQUIRE_SERVERS", "1")
    with pytest.raises(pytest.fail.Exception, match="VIDEOFLOW_REQUIRE_SERVERS=1"):
        need_binary("redis-server")
