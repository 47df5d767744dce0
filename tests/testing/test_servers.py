"""videoflow_aio.testing.servers: start on a free port, answer, stop by PID, clean the temp dir."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import ClassVar

import pytest

from _servers_fixtures import need_binary
from videoflow_aio.contracts.errors import BackendUnavailable
from videoflow_aio.testing import servers
from videoflow_aio.testing.servers import (
    EtcdServer,
    NatsServer,
    RedisServer,
    Server,
    ServerProcess,
    binary_unavailable,
    servers_required,
    start_redis,
)


def _answers(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


class _Missing(Server):
    kind: ClassVar[str] = "x"
    binary: ClassVar[str] = "no-such-server-binary-xyz"

    def _argv(self, tmp: Path, port: int) -> list[str]:
        return []

    def _probe(self, srv: ServerProcess) -> bool:
        return True


def test_missing_binary_has_a_reason() -> None:
    reason = binary_unavailable("no-such-server-binary-xyz")
    assert reason is not None and "no-such-server-binary-xyz" in reason
    assert _Missing().unavailable() == reason
    with pytest.raises(BackendUnavailable, match="no-such-server-binary-xyz"):
        _Missing().start()


def test_require_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VIDEOFLOW_REQUIRE_SERVERS", "1")
    assert servers_required()
    monkeypatch.setenv("VIDEOFLOW_REQUIRE_SERVERS", "0")
    assert not servers_required()


@pytest.mark.server
@pytest.mark.parametrize("spec", [RedisServer(), EtcdServer(), NatsServer()], ids=lambda s: s.kind)
def test_sync_start_and_stop(spec: Server) -> None:
    need_binary(spec.binary)
    with spec as srv:
        assert spec.server is srv and srv.options is spec
        assert srv.alive()
        assert srv.url.startswith(("redis://", "http://", "nats://"))
        assert _answers(srv.port)
        assert srv.dir.is_dir()
        assert (srv.dir / f"{spec.kind}.pid").read_text() == str(srv.pid)
        pid = srv.pid
    assert spec.server is None
    assert not srv.alive()
    assert not srv.dir.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    srv.stop()  # idempotent


@pytest.mark.server
def test_nats_monitoring_and_jetstream() -> None:
    need_binary("nats-server")
    with NatsServer() as srv:
        assert srv.monitor_url is not None
        assert NatsServer()._probe(srv)


@pytest.mark.server
def test_redis_config_options() -> None:
    need_binary("redis-server")
    with (
        RedisServer(maxmemory="8mb", policy="volatile-lru") as srv,
        socket.create_connection(("127.0.0.1", srv.port)) as s,
    ):
        s.sendall(b"CONFIG GET maxmemory-policy\r\n")
        assert b"volatile-lru" in s.recv(256)


@pytest.mark.server
def test_a_server_restarts_from_its_data_dir(tmp_path: Path) -> None:
    need_binary("redis-server")
    srv = start_redis(appendonly=True, appendfsync="always", data_dir=tmp_path / "aof")
    try:
        with socket.create_connection(("127.0.0.1", srv.port)) as s:
            s.sendall(b"SET k kept\r\n")
            assert s.recv(64).startswith(b"+OK")
    finally:
        srv.stop()
    assert srv.options is not None
    again = srv.options.start()  # same options, same data_dir: a restarted server
    try:
        assert again.pid != srv.pid
        with socket.create_connection(("127.0.0.1", again.port)) as s:
            s.sendall(b"GET k\r\n")
            assert b"kept" in s.recv(64)
    finally:
        again.stop()


@pytest.mark.server
@pytest.mark.anyio
async def test_async_context_manager() -> None:
    need_binary("redis-server")
    async with RedisServer() as srv:
        assert srv.alive() and _answers(srv.port)
    assert not srv.alive()


def test_the_public_names_are_exported() -> None:
    import videoflow_aio.testing as testing

    assert testing.RedisServer is RedisServer and testing.ServerProcess is ServerProcess
    assert set(servers.__all__) >= {"EtcdServer", "NatsServer", "RedisServer", "free_port"}


def test_missing_server_skips_locally_and_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    import _servers_fixtures

    monkeypatch.setattr(_servers_fixtures, "binary_unavailable", lambda name: f"{name} missing")
    monkeypatch.delenv("VIDEOFLOW_REQUIRE_SERVERS", raising=False)
    with pytest.raises(pytest.skip.Exception, match="redis-server missing"):
        need_binary("redis-server")
    monkeypatch.setenv("VIDEOFLOW_REQUIRE_SERVERS", "1")
    with pytest.raises(pytest.fail.Exception, match="VIDEOFLOW_REQUIRE_SERVERS=1"):
        need_binary("redis-server")


@pytest.fixture
def redis_srv() -> str:
    """Shadows the real fixture in this module: the name alone must bring the marker."""
    return "not started"


def test_a_server_fixture_marks_its_user(redis_srv: str, request: pytest.FixtureRequest) -> None:
    assert redis_srv == "not started"
    assert request.node.get_closest_marker("server") is not None


def test_the_server_fixtures_exist() -> None:
    import _servers_fixtures

    for name in _servers_fixtures.SERVER_FIXTURES:
        assert callable(getattr(_servers_fixtures, name)), name


def test_free_port_never_hands_out_a_port_twice_across_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stopped server's peers keep dialling its port (a NATS route, a Redis replica's
    primary): a port handed out once is not handed out again for an hour, by this process or
    another. Without the record, 2,000 kernel picks held 126 repeats. (A registry of
    its own: the 2,000 records stay out of the one the other tests share.)"""
    import subprocess
    import sys
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            "from videoflow_aio.testing.servers import free_port\n"
            "print(' '.join(str(free_port()) for _ in range(500)))",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    theirs = [int(p) for p in child.stdout.split()]
    ours = [servers.free_port() for _ in range(1500)]
    assert len(theirs) == 500
    assert len(set(ours + theirs)) == 2000
    assert len(list(tmp_path.glob("videoflow-ports-*/*"))) == 2000


def test_a_port_is_handed_out_again_once_its_record_expired(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from videoflow_aio.testing import _ports

    monkeypatch.setattr(_ports, "registry", lambda: tmp_path)
    monkeypatch.setattr(_ports, "_pick", lambda host: 40000)
    assert _ports.claim("127.0.0.1") == 40000
    assert (tmp_path / "40000").exists()
    monkeypatch.setattr(_ports, "TRIES", 3)
    assert _ports.claim("127.0.0.1") == 40000  # every pick recorded: the last one, anyway
    old = (tmp_path / "40000").stat().st_mtime - _ports.REUSE_AFTER - 1
    os.utime(tmp_path / "40000", (old, old))
    picks = iter([40000, 40001])
    monkeypatch.setattr(_ports, "_pick", lambda host: next(picks))
    assert _ports.claim("127.0.0.1") == 40000  # expired: handed out again, stamped anew
    assert (tmp_path / "40000").stat().st_mtime > old + _ports.REUSE_AFTER


def test_a_registry_that_cannot_be_used_still_gives_a_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from videoflow_aio.testing import _ports

    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")  # the registry's path is a file: mkdir fails
    monkeypatch.setattr(_ports, "registry", lambda: blocker)
    port = _ports.claim("127.0.0.1")
    assert 0 < port < 65536
