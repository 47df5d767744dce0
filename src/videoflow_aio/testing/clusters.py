"""Start clusters of real servers on loopback, and act on one member at a time (fault schedules).

One class per deployment holds its options; ``start()`` launches every member and returns a
:class:`ClusterProcess` once the cluster has formed (a leader is known everywhere)::

    with NatsCluster() as c:                # 3 nats-server, routes between them, JetStream
        c.url                               # "nats://127.0.0.1:p1,nats://…:p2,nats://…:p3"
        m = c.leader()                      # the JetStream meta leader (a Member)
        m.kill()                            # kill -9: nothing flushed, its data dir kept
        m.restart()                         # the same ports, the same data
        c.members[1].pause(); c.members[1].resume()   # SIGSTOP / SIGCONT

    EtcdCluster()        # 3 etcd members (--initial-cluster on loopback)
    RedisReplicaSet(server=RedisServer(appendonly=True))  # a primary, size-1 replicas

Guarantees: every member is a child process bound to 127.0.0.1 on ports chosen before the
start (a restarted member keeps them, as its peers expect), with its data in the cluster's
temporary directory, so ``restart()`` resumes from what was on disk. ``start()`` retries with
fresh ports when a member died at start (a port race), and raises
:class:`~videoflow_aio.contracts.errors.BackendUnavailable` with the members' log tails when
the cluster did not form in ``startup_timeout``. ``stop()`` ends every member by PID
(resuming a paused one first) and removes the directory; clusters still running when the
interpreter exits are stopped.

Waiting for real processes is wall-clock work: ``time.sleep``/``time.monotonic`` below are
deliberate and marked.
"""

from __future__ import annotations

import abc
import atexit
import contextlib
import dataclasses
import json
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ..contracts.errors import BackendUnavailable
from .servers import (
    HOST,
    Managed,
    RedisServer,
    ServerProcess,
    _binary_path,
    _http_ok,
    _spawn,
    _wait_until,
    free_port,
    log_tail,
)

_PAUSE_WAIT = 2.0  # seconds to wait for every thread of a paused process to stop


# -- members ----------------------------------------------------------------------------------
@dataclass(eq=False)
class Member:
    """One member of a cluster: its name, fixed ports and data directory (``dir``), and the
    process running it now (``process``; None while killed or stopped).

    ``kill()`` / ``stop()`` / ``restart()`` / ``pause()`` / ``resume()`` act on this member
    alone, by PID. Its ``server.log`` accumulates across restarts.
    """

    kind: str
    name: str
    index: int
    port: int
    url: str
    dir: Path
    argv: list[str]
    binary: str
    ready: Callable[[Member], bool] = field(repr=False)
    monitor_url: str | None = None
    process: ServerProcess | None = field(default=None, repr=False)
    paused: bool = False

    @property
    def pid(self) -> int | None:
        """The running process's id (None while down)."""
        return self.process.pid if self.process is not None and self.process.alive() else None

    def alive(self) -> bool:
        """True while its process runs (paused counts as running)."""
        return self.process is not None and self.process.alive()

    def up(self) -> bool:
        """Running and not paused: it can answer."""
        return self.alive() and not self.paused

    def spawn(self) -> None:
        """Start the process (no wait); a running member is left alone."""
        if self.alive():
            return
        self.process = _spawn(
            self.kind,
            self.binary,
            self.argv,
            self.dir,
            self.port,
            self.url,
            append=True,
            cleanup=self.dir.parent,  # the cluster's temporary directory
        )
        self.paused = False

    def wait_ready(self, timeout: float) -> None:
        """Block until the member answers its probe; BackendUnavailable (with its log's tail)
        when it died or ``timeout`` s passed."""
        proc = self.process
        if proc is None or not _wait_until(proc, lambda: self.ready(self), timeout):
            raise BackendUnavailable(
                f"{self.kind} member {self.name} is not ready after {timeout}s "
                f"({'running' if self.alive() else 'exited'}); log:\n{self.log_tail()}",
                backend=self.kind,
            )

    def kill(self) -> None:
        """``kill -9`` (a crash: nothing is flushed), reaped; its data stays for a restart."""
        proc, self.process = self.process, None
        self.paused = False
        if proc is not None:
            proc.kill(keep_dir=True)

    def stop(self) -> None:
        """A clean shutdown (SIGTERM, SIGKILL after 4 s); its data stays for a restart."""
        proc, self.process = self.process, None
        self.paused = False
        if proc is not None:
            proc.stop(keep_dir=True)

    def restart(self, timeout: float = 20.0) -> None:
        """Start it again on the same ports and data; returns once it answers."""
        self.spawn()
        self.wait_ready(timeout)

    def pause(self) -> None:
        """SIGSTOP: its peers see a partition, its clients a server that does not answer.
        Returns once every thread of the process is stopped."""
        pid = self.pid
        if pid is None:
            raise BackendUnavailable(f"member {self.name} is not running", backend=self.kind)
        os.kill(pid, signal.SIGSTOP)
        self.paused = True
        wait_stopped(pid, _PAUSE_WAIT)

    def resume(self) -> None:
        """SIGCONT: the paused member carries on (what it received meanwhile is processed)."""
        pid = self.pid
        if pid is not None:
            os.kill(pid, signal.SIGCONT)
        self.paused = False

    def log_tail(self, n: int = 20) -> str:
        """The last ``n`` lines of its log."""
        return log_tail(self.dir, n)


def _state_of(m: Member) -> str:
    if not m.alive():
        return "down"
    return "paused" if m.paused else "running"


def wait_stopped(pid: int, timeout: float) -> bool:
    """Wait until every thread of ``pid`` is stopped (state T); False after ``timeout`` s.
    True at once where ``/proc`` is absent (nothing to check)."""
    tasks = Path(f"/proc/{pid}/task")
    deadline = time.monotonic() + timeout  # wall-clock: another process's state
    while time.monotonic() < deadline:  # wall-clock: as above
        if not tasks.is_dir() or all(_thread_stopped(t) for t in tasks.iterdir()):
            return True
        time.sleep(0.001)  # wall-clock: polling another process
    return False


def _thread_stopped(task: Path) -> bool:
    try:
        stat = (task / "stat").read_text()
    except OSError:
        return True  # the thread is gone
    return stat.rsplit(")", 1)[-1].split()[0] in ("T", "t")


# -- a running cluster ------------------------------------------------------------------------
@dataclass(eq=False)
class ClusterProcess:
    """A running cluster: its ``members``, their client ``urls``, its temporary ``dir`` and
    the ``options`` it was started with. ``stop()`` is idempotent."""

    kind: str
    members: list[Member]
    dir: Path
    options: Cluster = field(repr=False)

    @property
    def urls(self) -> list[str]:
        """Every member's client URL, in member order."""
        return [m.url for m in self.members]

    @property
    def url(self) -> str:
        """Every member's client URL, comma-separated (what multi-URL clients take)."""
        return ",".join(self.urls)

    def member(self, name: str) -> Member:
        """The member called ``name`` (KeyError when there is none)."""
        for m in self.members:
            if m.name == name:
                return m
        raise KeyError(name)

    def leader(self) -> Member | None:
        """The member that leads now (None while there is no leader or none answers)."""
        return self.options.find_leader(self)

    def formed(self) -> bool:
        """True when every running member answers and agrees on a leader."""
        try:
            return self.options.formed(self)
        except (OSError, ValueError, KeyError):
            return False

    def wait_formed(self, timeout: float = 30.0) -> Member:
        """Block until :meth:`formed`; returns the leader. BackendUnavailable after
        ``timeout`` s, with every member's log tail."""
        deadline = time.monotonic() + timeout  # wall-clock: real processes elect a leader
        while time.monotonic() < deadline:  # wall-clock: as above
            if self.formed():
                leader = self.leader()
                if leader is not None:
                    return leader
            time.sleep(0.05)  # wall-clock: polling real servers
        raise BackendUnavailable(
            f"{self.kind} cluster did not form in {timeout}s; {self._logs()}", backend=self.kind
        )

    def _logs(self) -> str:
        return self.log_tail(8, sep="; ")

    def log_tail(self, n: int = 20, *, sep: str = "\n") -> str:
        """The last ``n`` lines of every member's log, each headed by its name and whether it
        runs."""
        return sep.join(f"{m.name} ({_state_of(m)}):\n{m.log_tail(n)}" for m in self.members)

    def stop(self) -> None:
        """Stop every member by PID (a paused one is resumed first), remove the directory."""
        for m in self.members:
            m.stop()
        with _LIVE_LOCK:
            _LIVE.discard(self)
        shutil.rmtree(self.dir, ignore_errors=True)


_LIVE: set[ClusterProcess] = set()
_LIVE_LOCK = threading.Lock()


@atexit.register
def _stop_leftovers() -> None:  # a crashed run must not leave clusters (or their dirs) behind
    for cluster in list(_LIVE):
        cluster.stop()


# -- what a cluster kind says -----------------------------------------------------------------
@dataclass(kw_only=True)
class Cluster(Managed[ClusterProcess]):
    """The options of one kind of cluster; :meth:`start` launches its members.

    A context manager too (``with`` / ``async with``): started on enter, stopped on exit;
    ``cluster`` is the running cluster meanwhile. ``args`` are appended to every member's
    command line.
    """

    size: int = 3
    args: Sequence[str] = ()
    startup_timeout: float = 30.0
    cluster: ClusterProcess | None = field(default=None, init=False, repr=False, compare=False)

    _slot: ClassVar[str] = "cluster"

    def start(self, attempts: int = 3) -> ClusterProcess:
        """Launch every member, then wait until the cluster forms (see the module docs)."""
        if self.size < 1:
            raise ValueError("a cluster needs at least one member")
        path = _binary_path(self.binary, self.kind)
        error: BackendUnavailable | None = None
        for _ in range(attempts):
            tmp = Path(tempfile.mkdtemp(prefix=f"videoflow-{self.kind}-cluster-"))
            members = self._members(tmp, path)
            cluster = ClusterProcess(self.kind, members, tmp, self)
            with _LIVE_LOCK:
                _LIVE.add(cluster)
            try:
                for m in members:
                    m.spawn()
                for m in members:
                    m.wait_ready(self.startup_timeout)
                cluster.wait_formed(self.startup_timeout)
                return cluster
            except BackendUnavailable as exc:
                error = exc
                died = any(not m.alive() for m in members)
                cluster.stop()
                if not died:  # timed out while every member ran: not a port race
                    raise
        assert error is not None
        raise error

    def _member(
        self, tmp: Path, path: str, index: int, port: int, url: str, argv: list[str], **kw: Any
    ) -> Member:
        name = f"{self.kind[0]}{index + 1}"
        mdir = tmp / name
        mdir.mkdir(parents=True, exist_ok=True)
        return Member(self.kind, name, index, port, url, mdir, [*argv, *self.args], path, **kw)

    @abc.abstractmethod
    def _members(self, tmp: Path, path: str) -> list[Member]:
        """The members (ports chosen, command lines built, nothing started) under ``tmp``."""

    @abc.abstractmethod
    def formed(self, cluster: ClusterProcess) -> bool:
        """True when every running member answers and agrees on a leader."""

    @abc.abstractmethod
    def find_leader(self, cluster: ClusterProcess) -> Member | None:
        """The leading member now, or None."""


# -- NATS -------------------------------------------------------------------------------------
def _get_json(url: str, path: str) -> Any:
    box: list[Any] = []

    def keep(status: int, body: bytes) -> bool:
        if status != 200:
            return False
        box.append(json.loads(body or b"{}"))
        return True

    return box[0] if _http_ok(url, path, keep) else None


@dataclass(kw_only=True)
class NatsCluster(Cluster):
    """``size`` nats-server processes with a ``cluster {}`` block (a name unique to this
    cluster) and routes to each other, JetStream on each (its own store directory), a unique
    ``server_name`` (``n1``, ``n2``, …).

    ``sync_interval`` sets JetStream's ``sync_interval`` (``"always"`` fsyncs before every
    acknowledgement; the server's default fsyncs every two minutes). ``leader()`` is the
    JetStream meta leader; :meth:`stream_leader` the leader of one stream's raft group.
    """

    sync_interval: str | None = None

    kind: ClassVar[str] = "nats"
    binary: ClassVar[str] = "nats-server"

    def _members(self, tmp: Path, path: str) -> list[Member]:
        ports = [(free_port(), free_port(), free_port()) for _ in range(self.size)]
        routes = ", ".join(f"nats-route://{HOST}:{r}" for _, r, _ in ports)
        # a cluster name of its own: a killed member's peers keep dialling its route port,
        # and a member of another cluster that lands on that port is refused, not joined
        name = tmp.name
        members = []
        for i, (client, route, monitor) in enumerate(ports):
            m = self._member(
                tmp,
                path,
                i,
                client,
                f"nats://{HOST}:{client}",
                [],
                ready=_nats_member_ready,
                monitor_url=f"http://{HOST}:{monitor}",
            )
            sync = f"\n  sync_interval: {self.sync_interval}" if self.sync_interval else ""
            conf = m.dir / "nats.conf"
            conf.write_text(
                f"server_name: {m.name}\n"
                f"listen: {HOST}:{client}\n"
                f"http: {HOST}:{monitor}\n"
                f'jetstream {{\n  store_dir: "{m.dir / "js"}"{sync}\n}}\n'
                f'cluster {{\n  name: "{name}"\n  listen: {HOST}:{route}\n'
                f"  routes: [{routes}]\n}}\n"
            )
            m.argv[:0] = ["-c", str(conf)]
            members.append(m)
        return members

    def formed(self, cluster: ClusterProcess) -> bool:
        # /healthz (without js-enabled-only) answers 200 once the meta leader is known
        up = [m for m in cluster.members if m.up()]
        return (
            bool(up)
            and all(_http_ok(m.monitor_url or "", "/healthz", lambda s, _b: s == 200) for m in up)
            and _routes_complete({m.name: _route_view(m) for m in up})
            and self._meta_peers_heard(cluster, up)
            and (len(up) < len(cluster.members) or _places_streams(up[0], len(up)))
        )

    def _meta_peers_heard(self, cluster: ClusterProcess, up: Sequence[Member]) -> bool:
        leader = self.find_leader(cluster)
        if leader is None:
            return False
        jsz = _get_json(leader.monitor_url or "", "/jsz")
        meta = (jsz or {}).get("meta_cluster") or {}
        if meta.get("leader") != leader.name:  # named by another, not leading by its own account
            return False
        return _meta_peers_current(meta.get("replicas"), [m.name for m in up if m is not leader])

    def find_leader(self, cluster: ClusterProcess) -> Member | None:
        return self._leader_named(cluster, lambda jsz: jsz.get("meta_cluster") or {}, "/jsz")

    def stream_leader(self, cluster: ClusterProcess, stream: str) -> Member | None:
        """The member leading ``stream``'s raft group now (None: no leader, or unknown)."""

        def info(jsz: Any) -> dict[str, Any]:
            for account in jsz.get("account_details") or []:
                for detail in account.get("stream_detail") or []:
                    if detail.get("name") == stream:
                        return dict(detail.get("cluster") or {})
            return {}

        return self._leader_named(cluster, info, "/jsz?accounts=true&streams=true")

    def consumer_leader(self, cluster: ClusterProcess, stream: str, consumer: str) -> Member | None:
        """The member leading the consumer's raft group now (None: no leader, or unknown)."""

        def info(jsz: Any) -> dict[str, Any]:
            for account in jsz.get("account_details") or []:
                for detail in account.get("stream_detail") or []:
                    if detail.get("name") != stream:
                        continue
                    for c in detail.get("consumer_detail") or []:
                        if c.get("name") == consumer:
                            return dict(c.get("cluster") or {})
            return {}

        return self._leader_named(cluster, info, "/jsz?accounts=true&streams=true&consumers=true")

    @staticmethod
    def _leader_named(
        cluster: ClusterProcess, pick: Callable[[Any], dict[str, Any]], path: str
    ) -> Member | None:
        for m in cluster.members:
            if not m.up():
                continue
            try:
                jsz = _get_json(m.monitor_url or "", path)
            except (OSError, ValueError):
                continue
            name = pick(jsz or {}).get("leader") if jsz else None
            if name:
                with contextlib.suppress(KeyError):
                    leader = cluster.member(str(name))
                    return leader if leader.up() else None
        return None


RouteView = tuple[int, str | None, Counter[tuple[str, str | None]]] | None
"""A member's ``pool_size``, its system account, and its routes counted by (remote server,
pinned account); None when its monitoring answered with an error."""


def _route_view(m: Member) -> RouteView:
    varz = _get_json(m.monitor_url or "", "/varz")
    routez = _get_json(m.monitor_url or "", "/routez")
    if varz is None or routez is None:
        return None
    pool = int((varz.get("cluster") or {}).get("pool_size") or 0)
    system = varz.get("system_account") or None
    routes = routez.get("routes") or []
    return (
        pool,
        system,
        Counter((str(r.get("remote_name")), r.get("account") or None) for r in routes),
    )


def _routes_complete(views: Mapping[str, RouteView]) -> bool:
    """Whether every member has its whole set of routes to every other: ``pool_size`` pooled
    routes and the system account's own (a pool below 1 means one route, none pinned).

    The meta leader is known, and ``/healthz`` answers 200, before this: under load a pair's
    system-account route came up a second later, racing the route its peer dialled ("Duplicate
    Route"), and a ``STREAM.CREATE`` reply sent meanwhile was lost (MSG-001 on
    ``nats-cluster``, a hog run at ``ea60c9c``)."""
    for name, view in views.items():
        if view is None:
            return False
        pool, system, routes = view
        for other in views:
            if other == name:
                continue
            if routes[(other, None)] < max(pool, 1):
                return False
            if pool >= 1 and system is not None and routes[(other, system)] < 1:
                return False
    return True


def _meta_peers_current(replicas: Any, others: Sequence[str]) -> bool:
    """Whether the meta leader's ``/jsz`` ``meta_cluster.replicas`` lists every other running
    member as current and not offline (a leader is elected before it has heard them all)."""
    if not isinstance(replicas, list):
        return False
    heard = {
        str(r.get("name")): bool(r.get("current")) and not r.get("offline")
        for r in replicas
        if isinstance(r, dict)
    }
    return all(heard.get(name, False) for name in others)


_PROBE_STREAM = "VIDEOFLOW_FORMED_PROBE"
_PROBE_TIMEOUT = 5.0
_NO_SUITABLE_PEERS = 10005  # JetStream's err_code for a refused placement
_STREAM_NOT_FOUND = 10059


def _places_streams(m: Member, replicas: int) -> bool:
    """Whether the cluster places a stream of ``replicas`` now: one is created through ``m``
    (in memory, on a subject of its own) and deleted. Only a placement refusal says no, and
    a stream left behind: any other answer is not about the cluster being formed.

    The meta leader places a stream only on peers whose JetStream statistics it has received
    (nats-server's ``nodeInfo.selectable``); a server broadcasts them 0.25, 0.75, 1.75, … s
    after its start, and those sent before the system account's route was up are lost. Until
    the next arrives the leader refuses ``10005 no suitable peers for placement, peer offline``,
    while ``/jsz`` already lists the peer current and online: nothing in monitoring shows it
    (MSG-047 on ``nats-cluster``, a hog run at ``dad2c46``; docs/clusters.md measures it)."""
    config = {
        "name": _PROBE_STREAM,
        "subjects": [f"_videoflow.{_PROBE_STREAM.lower()}"],
        "num_replicas": replicas,
        "storage": "memory",
    }
    created = _nats_request(
        m.url, f"$JS.API.STREAM.CREATE.{_PROBE_STREAM}", json.dumps(config).encode()
    )
    if created is None or _api_error_code(created) == _NO_SUITABLE_PEERS:
        return False
    deleted = _nats_request(m.url, f"$JS.API.STREAM.DELETE.{_PROBE_STREAM}", b"")
    return deleted is not None and _api_error_code(deleted) in (None, _STREAM_NOT_FOUND)


def _api_error_code(reply: bytes) -> int | None:
    error = json.loads(reply or b"{}").get("error")
    return int(error.get("err_code") or 0) if isinstance(error, dict) else None


def _nats_request(url: str, subject: str, payload: bytes) -> bytes | None:
    """One request over the NATS client protocol, on a connection of its own: the reply's
    payload, or None when nobody answered ("no responders", or the server refused the
    connection's protocol). A server silent for ``_PROBE_TIMEOUT`` raises ``TimeoutError``
    (an ``OSError``). The connection is closed when this returns or raises."""
    host, _, port = url.split("//", 1)[-1].rstrip("/").partition(":")
    inbox = f"_INBOX.videoflow.{os.urandom(8).hex()}"
    deadline = time.monotonic() + _PROBE_TIMEOUT  # wall-clock: a real server's reply
    with (
        socket.create_connection((host, int(port)), timeout=_PROBE_TIMEOUT) as s,
        s.makefile("rb") as reader,  # the socket closes only once its file does too
    ):
        if not reader.readline().startswith(b"INFO "):
            return None
        connect = {"verbose": False, "pedantic": False, "headers": True, "no_responders": True}
        s.sendall(
            b"CONNECT %s\r\nSUB %s 1\r\nPUB %s %s %d\r\n%s\r\n"
            % (
                json.dumps(connect).encode(),
                inbox.encode(),
                subject.encode(),
                inbox.encode(),
                len(payload),
                payload,
            )
        )
        while time.monotonic() < deadline:  # wall-clock: as above
            line = reader.readline()
            if not line or line.startswith(b"-ERR"):
                return None
            if line.startswith(b"PING"):
                s.sendall(b"PONG\r\n")
            elif line.startswith((b"MSG ", b"HMSG ")):
                fields = line.split()
                body = reader.read(int(fields[-1]) + 2)[:-2]
                if line.startswith(b"HMSG "):  # only headers: 503 no responders
                    return None if len(body) <= int(fields[-2]) else body[int(fields[-2]) :]
                return body
    return None


def _nats_member_ready(m: Member) -> bool:
    return _http_ok(m.monitor_url or "", "/healthz?js-enabled-only=true", lambda s, _b: s == 200)


# -- etcd -------------------------------------------------------------------------------------
def _etcd_status(url: str) -> dict[str, Any]:
    """``POST /v3/maintenance/status`` on the JSON gateway: member id, leader id, revision."""
    import http.client

    hostport = url.split("//", 1)[1]
    host, _, port = hostport.partition(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=0.5)
    try:
        conn.request("POST", "/v3/maintenance/status", body=b"{}")
        resp = conn.getresponse()
        body = resp.read()
        if resp.status != 200:
            raise ValueError(f"status {resp.status}")
        out: dict[str, Any] = json.loads(body)
        return out
    finally:
        conn.close()


@dataclass(kw_only=True)
class EtcdCluster(Cluster):
    """``size`` etcd members (``m1``…) with ``--initial-cluster`` on loopback peer ports.

    ``election_timeout_ms``/``heartbeat_ms`` set etcd's ``--election-timeout`` and
    ``--heartbeat-interval`` (defaults 1000/100); ``max_request_bytes`` its
    ``--max-request-bytes``. ``leader()`` asks each member's ``/v3/maintenance/status``.
    """

    election_timeout_ms: int | None = None
    heartbeat_ms: int | None = None
    max_request_bytes: int | None = None

    kind: ClassVar[str] = "etcd"
    binary: ClassVar[str] = "etcd"

    def _members(self, tmp: Path, path: str) -> list[Member]:
        ports = [(free_port(), free_port()) for _ in range(self.size)]
        names = [f"e{i + 1}" for i in range(self.size)]
        initial = ",".join(f"{n}=http://{HOST}:{p}" for n, (_, p) in zip(names, ports, strict=True))
        members = []
        for i, (client, peer) in enumerate(ports):
            curl, purl = f"http://{HOST}:{client}", f"http://{HOST}:{peer}"
            argv = [
                "--name", names[i],
                "--data-dir", str(tmp / names[i] / "data"),
                "--listen-client-urls", curl,
                "--advertise-client-urls", curl,
                "--listen-peer-urls", purl,
                "--initial-advertise-peer-urls", purl,
                "--initial-cluster", initial,
                "--initial-cluster-state", "new",
                "--initial-cluster-token", tmp.name,
            ]  # fmt: skip
            for flag, value in (
                ("--election-timeout", self.election_timeout_ms),
                ("--heartbeat-interval", self.heartbeat_ms),
                ("--max-request-bytes", self.max_request_bytes),
            ):
                if value is not None:
                    argv += [flag, str(value)]
            members.append(self._member(tmp, path, i, client, curl, argv, ready=_etcd_ready))
        return members

    def _statuses(self, cluster: ClusterProcess) -> dict[str, dict[str, Any]]:
        out = {}
        for m in cluster.members:
            if m.up():
                with contextlib.suppress(OSError, ValueError):
                    out[m.name] = _etcd_status(m.url)
        return out

    def formed(self, cluster: ClusterProcess) -> bool:
        up = [m.name for m in cluster.members if m.up()]
        statuses = self._statuses(cluster)
        leaders = {s.get("leader") for s in statuses.values()}
        return bool(up) and set(statuses) == set(up) and len(leaders) == 1 and "0" not in leaders

    def find_leader(self, cluster: ClusterProcess) -> Member | None:
        for name, status in self._statuses(cluster).items():
            if status.get("leader") == status.get("header", {}).get("member_id"):
                return cluster.member(name)
        return None


def _etcd_ready(m: Member) -> bool:
    def ok(status: int, body: bytes) -> bool:
        return status == 200 and json.loads(body or b"{}").get("health") == "true"

    return _http_ok(m.url, "/health", ok)


# -- Redis ------------------------------------------------------------------------------------
def redis_call(port: int, *args: str | int, timeout: float = 1.0) -> Any:
    """One Redis command over a fresh loopback socket (RESP2), its reply decoded: str for a
    status or bulk string, int, None, a list; a server error raises ``ValueError``.

    A fresh connection each time: ``WAIT`` after a write must go through
    :func:`redis_calls` instead (``WAIT`` waits for the writes of its own connection; on a
    new one it returns at once, whatever the replicas hold)."""
    return redis_calls(port, [*args], timeout=timeout)[0]


def redis_calls(port: int, *commands: Sequence[str | int], timeout: float = 1.0) -> list[Any]:
    """Several Redis commands, one after the other on one loopback connection (so that
    ``WAIT`` counts the replicas holding this connection's writes); their replies in order.
    A server error raises ``ValueError``; no reply within ``timeout`` (plus the time a
    ``WAIT`` may block by its own timeout) raises ``TimeoutError``. The connection is closed
    when this returns or raises."""
    out = []
    with (
        socket.create_connection((HOST, port), timeout=timeout) as s,
        s.makefile("rb") as reader,  # the socket closes only once its file does too
    ):
        for command in commands:
            parts = [str(a).encode() for a in command]
            request = b"*%d\r\n" % len(parts) + b"".join(
                b"$%d\r\n%s\r\n" % (len(p), p) for p in parts
            )
            s.settimeout(_blocks(command, timeout))
            s.sendall(request)
            out.append(_resp(reader))
    return out


def _blocks(command: Sequence[str | int], timeout: float) -> float | None:
    """How long a reply to ``command`` may take: ``timeout``, and for ``WAIT`` its own
    timeout too (``WAIT n 0`` blocks until ``n`` replicas acknowledged: no bound)."""
    if len(command) == 3 and str(command[0]).upper() == "WAIT":
        try:
            ms = int(command[2])
        except ValueError:
            return timeout  # the server refuses it at once
        return None if ms == 0 else timeout + max(ms, 0) / 1000
    return timeout


def _resp(reader: Any) -> Any:
    line = reader.readline()
    if not line:
        raise OSError("connection closed")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise ValueError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        return None if n < 0 else reader.read(n + 2)[:-2].decode(errors="replace")
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_resp(reader) for _ in range(n)]
    raise ValueError(f"unexpected reply {line!r}")


def redis_info(port: int, section: str = "replication") -> dict[str, str]:
    """``INFO <section>`` as a dict."""
    text = redis_call(port, "INFO", section)
    return dict(
        line.split(":", 1) for line in str(text).splitlines() if ":" in line and line[0] != "#"
    )


@dataclass(kw_only=True)
class RedisReplicaSet(Cluster):
    """A Redis primary (``r1``) and ``size - 1`` replicas (``--replicaof`` it), each started
    with the options of ``server`` (a :class:`~videoflow_aio.testing.servers.RedisServer`:
    ``maxmemory``, ``policy``, ``appendonly``, ``appendfsync``, …; its ``data_dir`` is
    replaced by each member's own). Replication is asynchronous: a write the primary
    acknowledged may not have reached any replica (``WAIT`` narrows this).

    ``leader()`` is the member that answers ``role:master``; :meth:`promote` makes another
    member the primary by hand (``REPLICAOF NO ONE``, the others follow it) — no Sentinel.
    """

    size: int = 2
    server: RedisServer = field(default_factory=RedisServer)

    kind: ClassVar[str] = "redis"
    binary: ClassVar[str] = "redis-server"

    def _members(self, tmp: Path, path: str) -> list[Member]:
        ports = [free_port() for _ in range(self.size)]
        members = []
        for i, port in enumerate(ports):
            mdir = tmp / f"r{i + 1}"
            mdir.mkdir(parents=True, exist_ok=True)
            argv = dataclasses.replace(self.server, data_dir=mdir)._argv(mdir, port)
            argv += [*self.server.args, "--repl-diskless-sync-delay", "0"]  # sync at once
            if i:
                argv += ["--replicaof", HOST, str(ports[0])]
            url = f"redis://{HOST}:{port}"
            members.append(self._member(tmp, path, i, port, url, argv, ready=_redis_ready))
        return members

    def formed(self, cluster: ClusterProcess) -> bool:
        leader = self.find_leader(cluster)
        if leader is None:
            return False
        for m in cluster.members:
            if m is leader or not m.up():
                continue
            info = redis_info(m.port)
            if (
                info.get("master_port") != str(leader.port)
                or info.get("master_link_status") != "up"
            ):
                return False
        return True

    def find_leader(self, cluster: ClusterProcess) -> Member | None:
        for m in cluster.members:
            if m.up():
                with contextlib.suppress(OSError, ValueError):
                    if redis_info(m.port).get("role") == "master":
                        return m
        return None

    def promote(self, cluster: ClusterProcess, member: Member, timeout: float = 10.0) -> None:
        """Make ``member`` the primary and every other running member its replica: a manual
        failover (no Sentinel) that loses no write a running member holds.

        A running primary stops taking writes first (``CLIENT PAUSE … WRITE``, lifted once
        it follows ``member``). ``member`` then catches up with the running member whose
        replication offset is furthest ahead (it replicates from that member until it has
        its offset) before ``REPLICAOF NO ONE``: promoted behind another replica, that
        replica would fail its partial resync against the new primary and a full resync
        would flush the writes only it held — writes ``WAIT`` had confirmed. Lost is only
        what no running member received (replication is asynchronous: a killed primary's
        unsent writes). A restart of any member keeps the new topology.
        :class:`~videoflow_aio.contracts.errors.BackendUnavailable` when ``member`` did not
        catch up in ``timeout`` s (nothing promoted then; a paused primary is resumed)."""
        others = [m for m in cluster.members if m is not member and m.up()]
        primaries = [m for m in others if redis_info(m.port).get("role") == "master"]
        for p in primaries:  # its offset stops moving; clients wait, then get READONLY
            redis_call(p.port, "CLIENT", "PAUSE", int((timeout + 5) * 1000), "WRITE")
        try:
            self._catch_up(member, others, timeout)
            redis_call(member.port, "REPLICAOF", "NO", "ONE")
            for m in others:
                redis_call(m.port, "REPLICAOF", HOST, member.port)
        finally:
            for p in primaries:
                with contextlib.suppress(OSError, ValueError):
                    redis_call(p.port, "CLIENT", "UNPAUSE")
        _drop_replicaof(member)  # restarted, it stays the primary
        for m in cluster.members:  # a restarted member must follow the new primary too
            if m is not member:
                _drop_replicaof(m)
                m.argv += ["--replicaof", HOST, str(member.port)]

    @staticmethod
    def _catch_up(member: Member, others: Sequence[Member], timeout: float) -> None:
        """Block until ``member``'s replication offset reaches the highest among ``others``,
        replicating from the member that has it (a primary first among equals). A replica
        refuses to serve a sync while its own primary is gone (``-NOMASTERLINK``): such a
        source becomes a primary itself first (``REPLICAOF NO ONE`` keeps its data; it
        follows ``member`` afterwards)."""
        if not others:
            return
        infos = {m.name: redis_info(m.port) for m in (member, *others)}

        def offset(m: Member) -> int:
            return int(infos[m.name].get("master_repl_offset", 0))

        ahead = max(others, key=lambda m: (offset(m), infos[m.name].get("role") == "master"))
        target = offset(ahead)
        if offset(member) >= target:
            return
        if infos[member.name].get("master_port") != str(ahead.port):
            redis_call(member.port, "REPLICAOF", HOST, ahead.port)
        deadline = time.monotonic() + timeout  # wall-clock: a real replica catching up
        while time.monotonic() < deadline:  # wall-clock: as above
            source = redis_info(ahead.port)
            if source.get("role") == "slave" and source.get("master_link_status") != "up":
                redis_call(ahead.port, "REPLICAOF", "NO", "ONE")
            if int(redis_info(member.port).get("master_repl_offset", 0)) >= target:
                return
            time.sleep(0.01)  # wall-clock: polling a real server
        raise BackendUnavailable(
            f"redis member {member.name} did not reach replication offset {target} of "
            f"{ahead.name} in {timeout}s; log:\n{member.log_tail()}",
            backend="redis",
        )

    def replicas_in_sync(self, cluster: ClusterProcess) -> bool:
        """True when every running replica has the primary's replication offset."""
        leader = self.find_leader(cluster)
        if leader is None:
            return False
        offset = redis_info(leader.port).get("master_repl_offset")
        return all(
            redis_info(m.port).get("slave_repl_offset") == offset
            for m in cluster.members
            if m is not leader and m.up()
        )


def _drop_replicaof(m: Member) -> None:
    argv = m.argv
    if "--replicaof" in argv:
        i = argv.index("--replicaof")
        del argv[i : i + 3]


def _redis_ready(m: Member) -> bool:
    try:
        return bool(redis_call(m.port, "PING", timeout=0.5) == "PONG")
    except ValueError:  # -LOADING: still reading its data
        return False


__all__ = [
    "Cluster",
    "ClusterProcess",
    "EtcdCluster",
    "Member",
    "NatsCluster",
    "RedisReplicaSet",
    "check",
    "redis_call",
    "redis_calls",
    "redis_info",
    "wait_stopped",
]


def check(kinds: Sequence[str] = ("nats", "etcd", "redis")) -> int:
    """Start each cluster, print its members and leader, stop it (``python -m
    videoflow_aio.testing.clusters``): 0 when every member of every cluster started and
    the cluster formed, 1 otherwise (with the members' log tails)."""
    specs: dict[str, Cluster] = {
        "nats": NatsCluster(sync_interval="always"),
        "etcd": EtcdCluster(),
        "redis": RedisReplicaSet(server=RedisServer(appendonly=True, appendfsync="always")),
    }
    failed = 0
    for kind in kinds:
        spec = specs[kind]
        reason = spec.unavailable()
        if reason is not None:
            print(f"{kind}: cannot start: {reason}")
            failed += 1
            continue
        t0 = time.monotonic()  # wall-clock: how long a real cluster takes to form
        try:
            with spec as cluster:
                leader = cluster.leader()
                members = ", ".join(f"{m.name} pid {m.pid} {m.url}" for m in cluster.members)
                took = time.monotonic() - t0  # wall-clock: as above
                print(f"{kind}: formed in {took:.1f} s, leader {leader and leader.name}: {members}")
        except BackendUnavailable as exc:
            print(f"{kind}: FAILED: {exc}")
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(check())
