"""videoflow_aio.testing.clusters: clusters start on loopback, members die, pause and come back
as themselves (same ports, same data), everything stops by PID."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
import time
import traceback
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from _servers_fixtures import need_binary
from videoflow_aio.contracts.errors import BackendUnavailable
from videoflow_aio.testing import clusters
from videoflow_aio.testing.clusters import (
    ClusterProcess,
    EtcdCluster,
    Member,
    NatsCluster,
    RedisReplicaSet,
    _etcd_status,
    _meta_peers_current,
    _nats_request,
    _route_view,
    _routes_complete,
    redis_call,
    redis_calls,
    redis_info,
)
from videoflow_aio.testing.servers import ServerProcess


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]


def _kill_and_check(member: Member) -> int:
    pid = member.pid
    assert pid is not None
    member.kill()
    assert _gone(pid) and member.pid is None and not member.alive()
    assert member.dir.is_dir()  # its data stays for the restart
    return pid


def _pause_resume(cluster: ClusterProcess, member: Member) -> None:
    pid = member.pid
    assert pid is not None
    member.pause()
    assert _state(pid) in ("T", "t") and member.paused and not member.up()
    member.resume()
    assert _state(pid) not in ("T", "t") and member.up()
    cluster.wait_formed(30)


# -- etcd -------------------------------------------------------------------------------------
def _etcd_put(url: str, key: str, value: str) -> None:
    import base64
    import http.client

    host, port = url.split("//", 1)[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    body = {
        "key": base64.b64encode(key.encode()).decode(),
        "value": base64.b64encode(value.encode()).decode(),
    }
    conn.request("POST", "/v3/kv/put", body=json.dumps(body))
    assert conn.getresponse().status == 200
    conn.close()


def _etcd_get(url: str, key: str, serializable: bool = False) -> str | None:
    import base64
    import http.client

    host, port = url.split("//", 1)[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    body = {"key": base64.b64encode(key.encode()).decode(), "serializable": serializable}
    conn.request("POST", "/v3/kv/range", body=json.dumps(body))
    data = json.loads(conn.getresponse().read())
    conn.close()
    kvs = data.get("kvs") or []
    return base64.b64decode(kvs[0]["value"]).decode() if kvs else None


def test_etcd_cluster_leader_dies_and_comes_back(etcd_cluster: ClusterProcess) -> None:
    c = etcd_cluster
    assert len(c.members) == 3 and c.url == ",".join(m.url for m in c.members)
    ids = {_etcd_status(m.url)["header"]["cluster_id"] for m in c.members}
    assert len(ids) == 1  # one cluster, not three
    leader = c.leader()
    assert leader is not None
    _etcd_put(c.members[0].url, "k", "before")
    _kill_and_check(leader)
    new = c.wait_formed(30)
    assert new is not leader and new.up()
    _etcd_put(new.url, "k", "during")  # the majority carries on
    leader.restart()
    c.wait_formed(30)
    # the restarted member is itself again (same ports, same data) and caught up
    assert _etcd_get(leader.url, "k") == "during"


def test_etcd_pause_is_a_partition(etcd_cluster: ClusterProcess) -> None:
    c = etcd_cluster
    leader = c.leader()
    assert leader is not None
    leader.pause()
    try:
        new = c.wait_formed(30)  # the others elect a new leader: a paused leader is gone to them
        assert new is not leader
    finally:
        leader.resume()
    c.wait_formed(30)
    follower = next(m for m in c.members if m is not c.leader())
    _pause_resume(c, follower)


# -- NATS -------------------------------------------------------------------------------------
def test_nats_cluster_meta_and_stream_leader(nats_cluster: ClusterProcess) -> None:
    import nats
    import nats.js.errors

    c = nats_cluster
    spec = c.options
    assert isinstance(spec, NatsCluster)
    for m in c.members:
        assert f"server_name: {m.name}" in (m.dir / "nats.conf").read_text()
        assert "sync_interval: always" in (m.dir / "nats.conf").read_text()

    async def stream_info() -> dict[str, object]:
        nc = await nats.connect(servers=c.urls)
        try:
            js = nc.jetstream()
            ack = None
            for _ in range(100):  # a new R3 stream elects its own leader
                led = False
                try:
                    await js.add_stream(name="S", subjects=["s.>"], num_replicas=3)
                    info = await js.stream_info("S")
                    led = info.cluster is not None and bool(info.cluster.leader)
                except Exception:
                    pass
                if led:
                    # the leader is named before its interest in s.> has reached every
                    # server: until then a publish there has no responder (and is not stored)
                    with contextlib.suppress(nats.js.errors.NoStreamResponseError):
                        ack = await js.publish("s.x", b"1")
                        break
                await asyncio.sleep(0.1)
            assert ack is not None and ack.seq == 1
            assert info.cluster is not None
            return {"leader": info.cluster.leader, "replicas": len(info.cluster.replicas or [])}
        finally:
            await nc.close()

    got = asyncio.run(stream_info())
    assert got["replicas"] == 2
    leader = spec.stream_leader(c, "S")
    assert leader is not None and leader.name == got["leader"]
    meta = c.leader()
    assert meta is not None
    _kill_and_check(meta)
    assert c.wait_formed(60) is not meta
    meta.restart()
    c.wait_formed(60)
    _pause_resume(c, c.members[0])


def _route_port(m: Member) -> int:
    found = re.search(r"cluster \{[^}]*?listen: [\d.]+:(\d+)", (m.dir / "nats.conf").read_text())
    assert found is not None
    return int(found.group(1))


def _server_id(m: Member) -> str:
    import urllib.request

    with urllib.request.urlopen(f"{m.monitor_url}/varz", timeout=5) as r:
        return str(json.load(r)["server_id"])


def _route_ids(m: Member) -> set[str]:
    import urllib.request

    with urllib.request.urlopen(f"{m.monitor_url}/routez", timeout=5) as r:
        return {route["remote_id"] for route in json.load(r)["routes"]}


def _routes(
    pool: int, *remotes: tuple[str, str | None, int], system: str | None = "$SYS"
) -> tuple[int, str | None, Counter[Any]]:
    return pool, system, Counter({(name, account): n for name, account, n in remotes})


def test_a_nats_cluster_is_formed_only_with_every_route_of_its_pool() -> None:
    """Three routes of the pool and the system account's own, both ways, for every pair."""
    full = {
        "n1": _routes(3, ("n2", None, 3), ("n2", "$SYS", 1)),
        "n2": _routes(3, ("n1", None, 3), ("n1", "$SYS", 1)),
    }
    assert _routes_complete(full)
    assert not _routes_complete({**full, "n2": _routes(3, ("n1", None, 3))})  # no $SYS yet
    assert not _routes_complete({**full, "n1": _routes(3, ("n2", None, 2), ("n2", "$SYS", 1))})
    assert not _routes_complete({**full, "n3": _routes(3)})  # a member nobody routes to
    assert not _routes_complete({**full, "n2": None})  # its monitoring answered an error
    unpooled = {"n1": _routes(-1, ("n2", None, 1)), "n2": _routes(-1, ("n1", None, 1))}
    assert _routes_complete(unpooled)
    assert not _routes_complete({**unpooled, "n2": _routes(-1)})
    no_system = {
        "n1": _routes(3, ("n2", None, 3), system=None),
        "n2": _routes(3, ("n1", None, 3), system=None),
    }
    assert _routes_complete(no_system)
    assert _routes_complete({"n1": _routes(3)})  # alone


def _fake_nats_cluster(
    monkeypatch: pytest.MonkeyPatch, size: int, *, checking: str
) -> SimpleNamespace:
    """A stand-in for a running cluster of ``size`` members, with every check of
    ``NatsCluster.formed`` stubbed to pass except the one ``checking`` names ("routes",
    "meta" or "probe")."""
    members = [
        SimpleNamespace(
            name=f"n{i}", url=f"nats://n{i}", monitor_url=f"http://n{i}", up=lambda: True
        )
        for i in range(1, size + 1)
    ]
    monkeypatch.setattr(clusters, "_http_ok", lambda *a: True)
    if checking != "routes":
        monkeypatch.setattr(clusters, "_routes_complete", lambda views: True)
        monkeypatch.setattr(clusters, "_route_view", lambda m: None)
    if checking != "meta":
        monkeypatch.setattr(NatsCluster, "_meta_peers_heard", lambda *a: True)
    if checking != "probe":
        monkeypatch.setattr(clusters, "_places_streams", lambda *a: True)
    return SimpleNamespace(
        members=members, member=lambda name: next(m for m in members if m.name == name)
    )


def test_a_nats_cluster_waits_for_its_routes_past_healthz(monkeypatch: pytest.MonkeyPatch) -> None:
    """``formed`` asks for the routes, not only for ``/healthz``."""
    cluster = _fake_nats_cluster(monkeypatch, 2, checking="routes")
    views = {
        "n1": _routes(3, ("n2", None, 3), ("n2", "$SYS", 1)),
        "n2": _routes(3, ("n1", None, 3)),
    }
    monkeypatch.setattr(clusters, "_route_view", lambda m: views[m.name])
    assert not NatsCluster().formed(cluster)  # type: ignore[arg-type]
    views["n2"] = _routes(3, ("n1", None, 3), ("n1", "$SYS", 1))
    assert NatsCluster().formed(cluster)  # type: ignore[arg-type]


def _peer(name: str, current: bool = True, **more: Any) -> dict[str, Any]:
    return {"name": name, "current": current, "active": 1000, "peer": name.upper(), **more}


def test_a_nats_cluster_is_formed_only_once_its_meta_leader_has_heard_every_peer() -> None:
    """The leader's own view, the one stream placement reads: every other running member
    listed, current, not offline (``offline`` is left out of the JSON when false)."""
    both = [_peer("n1"), _peer("n3")]
    assert _meta_peers_current(both, ["n1", "n3"])
    assert not _meta_peers_current([_peer("n1"), _peer("n3", False)], ["n1", "n3"])
    assert not _meta_peers_current([_peer("n1"), _peer("n3", offline=True)], ["n1", "n3"])
    assert not _meta_peers_current([_peer("n1")], ["n1", "n3"])  # n3 not known to it yet
    assert _meta_peers_current([_peer("n1"), _peer("n3", False)], ["n1"])  # n3 is down
    assert _meta_peers_current([_peer("n1", False), _peer("n3", False)], [])  # both down
    assert not _meta_peers_current(None, ["n1"])  # no meta group in its answer
    assert not _meta_peers_current([_peer("n1"), "n3"], ["n1", "n3"])  # a malformed entry


def test_a_nats_cluster_waits_for_its_meta_leader_past_its_routes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``formed`` reads the meta leader's ``/jsz``, and only the leader's: a follower lists
    its peers as not current even when placement would succeed."""
    cluster = _fake_nats_cluster(monkeypatch, 3, checking="meta")
    follower = [_peer("n2"), _peer("n3", False)]
    replies = {
        "http://n1": {"meta_cluster": {"leader": "n2", "replicas": follower}},
        "http://n2": {
            "meta_cluster": {"leader": "n2", "replicas": [_peer("n1"), _peer("n3", False)]}
        },
        "http://n3": {"meta_cluster": {"leader": "n2", "replicas": follower}},
    }
    monkeypatch.setattr(clusters, "_get_json", lambda url, path: replies[url])
    assert not NatsCluster().formed(cluster)  # type: ignore[arg-type]
    replies["http://n2"]["meta_cluster"]["replicas"] = [_peer("n1"), _peer("n3")]
    assert NatsCluster().formed(cluster)  # type: ignore[arg-type]
    cluster.members[2].up = lambda: False  # a killed member is not waited for
    replies["http://n2"]["meta_cluster"]["replicas"] = [_peer("n1"), _peer("n3", False)]
    assert NatsCluster().formed(cluster)  # type: ignore[arg-type]
    replies["http://n2"]["meta_cluster"]["leader"] = "n1"  # n2 no longer leads, by its account
    assert not NatsCluster().formed(cluster)  # type: ignore[arg-type]


def test_a_nats_cluster_is_formed_only_once_it_places_a_stream_on_every_member(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The last check, with every member running: a stream of as many replicas as members
    is created and deleted. Only a placement refusal, a request nobody answered, or a probe
    left behind says no; with a member down there is no probe (it could not be placed)."""
    cluster = _fake_nats_cluster(monkeypatch, 3, checking="probe")
    sent: list[tuple[str, str, Any]] = []
    replies: dict[str, bytes | None] = {}

    def request(url: str, subject: str, payload: bytes) -> bytes | None:
        verb = subject.split(".")[3]
        sent.append((url, verb, json.loads(payload) if payload else None))
        return replies[verb]

    monkeypatch.setattr(clusters, "_nats_request", request)
    refused = b'{"error": {"code": 400, "err_code": 10005, "description": "no suitable peers"}}'
    replies.update(CREATE=refused, DELETE=b'{"success": true}')
    assert not NatsCluster().formed(cluster)  # type: ignore[arg-type]
    assert [verb for _, verb, _ in sent] == ["CREATE"]  # nothing to delete
    url, _, config = sent[0]
    assert url == "nats://n1" and config["num_replicas"] == 3 and config["storage"] == "memory"
    replies["CREATE"] = b'{"type": "io.nats.jetstream.api.v1.stream_create_response"}'
    sent.clear()
    assert NatsCluster().formed(cluster)  # type: ignore[arg-type]
    assert [verb for _, verb, _ in sent] == ["CREATE", "DELETE"]
    replies["DELETE"] = None  # the probe may be left behind
    assert not NatsCluster().formed(cluster)  # type: ignore[arg-type]
    replies["CREATE"] = None  # JetStream not answering yet
    assert not NatsCluster().formed(cluster)  # type: ignore[arg-type]
    overlap = b'{"error": {"code": 400, "err_code": 10065, "description": "subjects overlap"}}'
    not_found = b'{"error": {"code": 404, "err_code": 10059, "description": "stream not found"}}'
    replies.update(CREATE=overlap, DELETE=not_found)  # not about placement, nothing created
    assert NatsCluster().formed(cluster)  # type: ignore[arg-type]
    sent.clear()
    cluster.members[1].up = lambda: False
    assert NatsCluster().formed(cluster)  # type: ignore[arg-type]
    assert sent == []


def test_a_nats_request_over_the_client_protocol(nats_srv: ServerProcess) -> None:
    """The harness's own request (no client library): a reply's payload; None when nobody
    answers."""
    reply = _nats_request(nats_srv.url, "$JS.API.INFO", b"")
    assert reply is not None
    assert json.loads(reply)["type"] == "io.nats.jetstream.api.v1.account_info_response"
    assert _nats_request(nats_srv.url, "nobody.listens.here", b"x") is None


def test_a_formed_nats_cluster_has_every_route_up(nats_cluster: ClusterProcess) -> None:
    """What the engine reports once ``wait_formed`` returns (nats-server 2.15: a pool of 3
    and a pinned system-account route to each peer). A monitoring read that fails under
    load is read again."""
    nats_cluster.wait_formed(60)
    views: dict[str, Any] = {}
    deadline = time.monotonic() + 30  # wall-clock: real servers' monitoring
    while time.monotonic() < deadline and len(views) < len(nats_cluster.members):
        for m in nats_cluster.members:
            with contextlib.suppress(OSError, ValueError):
                view = _route_view(m)
                if view is not None:
                    views[m.name] = view
    assert len(views) == len(nats_cluster.members)
    for name, (pool, system, routes) in views.items():
        assert pool == 3 and system == "$SYS"
        for other in views:
            if other != name:
                assert routes[(other, None)] == 3 and routes[(other, "$SYS")] == 1, routes
    names = _nats_request(nats_cluster.urls[0], "$JS.API.STREAM.NAMES", b"")
    assert names is not None
    assert clusters._PROBE_STREAM not in (json.loads(names).get("streams") or [])  # deleted


@pytest.mark.server
@pytest.mark.cluster
def test_a_nats_member_on_a_killed_members_route_port_is_not_taken_into_its_cluster() -> None:
    """A killed member's peers dial its route port every second. A member of another cluster
    that comes up on that port (another test, another xdist worker: the kernel hands ports
    out again) is refused — each cluster has a name of its own — not taken in. With one
    name for all, it joined the other cluster's routes and JetStream meta group."""
    need_binary("nats-server")
    with NatsCluster() as a, NatsCluster() as b:
        dead, stranger = a.members[2], b.members[0]
        port = _route_port(dead)
        dead.kill()
        stranger.stop()
        conf = stranger.dir / "nats.conf"
        text = conf.read_text()
        own = f"listen: 127.0.0.1:{_route_port(stranger)}\n  routes"
        assert own in text
        conf.write_text(text.replace(own, f"listen: 127.0.0.1:{port}\n  routes"))
        stranger.restart()
        log = stranger.dir / "server.log"
        for _ in range(200):  # a's members dial every second: refused, logged
            if "does not match" in log.read_text():
                break
            time.sleep(0.05)  # wall clock: another process's retry timer
        assert "does not match" in log.read_text(), stranger.log_tail()
        ours = {_server_id(m) for m in b.members if m is not stranger}
        theirs = {_server_id(m) for m in a.members if m is not dead}
        assert not _route_ids(stranger) & theirs
        for m in a.members:
            if m is not dead:
                assert not _route_ids(m) & (ours | {_server_id(stranger)})


# -- Redis ------------------------------------------------------------------------------------
def test_a_wait_may_block_past_the_socket_timeout_by_its_own(redis_srv: ServerProcess) -> None:
    """``WAIT 1 1500`` on a server without replicas answers 0 after 1.5 s, past the 1 s
    socket timeout: the read waits for it (a 1 s socket timeout against ``WAIT 1 2000`` of the
    test below failed under load)."""
    got = redis_calls(redis_srv.port, ("SET", "w", "1"), ("WAIT", 1, 1500), timeout=1.0)
    assert got == ["OK", 0]


def test_a_call_that_times_out_leaves_no_socket_open(redis_srv: ServerProcess) -> None:
    """The connection closes with the error, not when the error's traceback is collected (a
    test's failure kept it alive, and its ``ResourceWarning`` failed a later test)."""
    with pytest.raises(TimeoutError) as raised:
        redis_calls(redis_srv.port, ("BLPOP", f"none-{os.getpid()}", 5), timeout=0.05)
    # the frames are still alive here: the socket among their locals is closed all the same
    sockets = [
        v
        for frame, _ in traceback.walk_tb(raised.value.__traceback__)
        for v in frame.f_locals.values()
        if isinstance(v, socket.socket)
    ]
    assert sockets and all(s.fileno() == -1 for s in sockets)


def test_redis_replicaset_replicates_and_restarts_on_its_data(
    redis_replicaset: ClusterProcess,
) -> None:
    c = redis_replicaset
    spec = c.options
    assert isinstance(spec, RedisReplicaSet)
    primary, replica = c.members
    assert c.leader() is primary
    assert redis_info(replica.port)["role"] == "slave"
    # WAIT on the write's own connection: the replica acknowledged (applied) it
    assert redis_calls(primary.port, ("SET", "k", "v1"), ("WAIT", 1, 2000)) == ["OK", 1]
    assert redis_call(replica.port, "GET", "k") == "v1"
    assert spec.replicas_in_sync(c)
    _kill_and_check(primary)
    primary.restart()  # AOF with appendfsync always: the acknowledged write is on disk
    assert redis_call(primary.port, "GET", "k") == "v1"
    c.wait_formed(30)
    _pause_resume(c, replica)


def test_redis_promote_is_a_manual_failover() -> None:
    need_binary("redis-server")
    with RedisReplicaSet(size=3) as c:
        spec = c.options
        assert isinstance(spec, RedisReplicaSet)
        old, new, third = c.members
        # both replicas hold the write before the primary dies: WAIT on the write's own
        # connection (on a fresh one it answered 2 at once, and the primary, killed a moment
        # later, had sent "k" to neither replica one run in five)
        assert redis_calls(old.port, ("SET", "k", "v"), ("WAIT", 2, 20000)) == ["OK", 2]
        old.kill()
        spec.promote(c, new)
        assert c.wait_formed(30) is new
        assert redis_call(new.port, "GET", "k") == "v"
        assert redis_info(third.port)["master_port"] == str(new.port)
        old.restart()  # it comes back as a replica of the new primary
        assert c.wait_formed(30) is new
        assert redis_info(old.port)["role"] == "slave"


@pytest.mark.server
def test_wait_on_a_fresh_connection_confirms_nothing() -> None:
    """Why redis_calls exists: WAIT counts the replicas holding its own connection's writes;
    on a new connection (redis_call) it answers at once, whatever the replicas hold."""
    need_binary("redis-server")
    with RedisReplicaSet() as c:
        primary, replica = c.members
        replica.pause()  # it cannot acknowledge anything now
        try:
            redis_call(primary.port, "SET", "k", "v")
            assert redis_call(primary.port, "WAIT", 1, 100) == 1  # vacuous
            assert redis_calls(primary.port, ("SET", "k", "v"), ("WAIT", 1, 100)) == ["OK", 0]
        finally:
            replica.resume()


@pytest.mark.server
def test_redis_promote_keeps_a_write_only_another_replica_holds() -> None:
    """The promoted replica fell behind (its link to the primary broke); the other replica
    acknowledged a write (WAIT 1) before the primary died. promote catches the new primary
    up from that replica first: promoted as it was, the other replica's partial resync
    failed against the new primary's shorter history and a full resync flushed the write
    WAIT had confirmed."""
    need_binary("redis-server")
    with RedisReplicaSet(size=3) as c:
        spec = c.options
        assert isinstance(spec, RedisReplicaSet)
        old, new, third = c.members
        redis_call(new.port, "REPLICAOF", "127.0.0.1", _dead_port())  # new falls behind
        assert redis_calls(old.port, ("SET", "k", "v"), ("WAIT", 1, 20000)) == ["OK", 1]
        assert redis_call(new.port, "GET", "k") is None
        old.kill()
        spec.promote(c, new)
        assert c.wait_formed(30) is new
        assert redis_call(new.port, "GET", "k") == "v"
        assert redis_calls(new.port, ("SET", "k2", "v2"), ("WAIT", 1, 20000)) == ["OK", 1]
        assert redis_call(third.port, "GET", "k") == "v"  # not flushed by a full resync
        assert "--replicaof" not in new.argv  # restarted, the new primary stays primary


@pytest.mark.server
def test_redis_promote_with_the_primary_running_loses_no_write() -> None:
    """A failover while the old primary runs: its writes stop (CLIENT PAUSE WRITE), the
    candidate reaches its offset, then it follows the candidate; a write it acknowledged
    just before is on the new primary."""
    need_binary("redis-server")
    with RedisReplicaSet(size=2) as c:
        spec = c.options
        assert isinstance(spec, RedisReplicaSet)
        old, new = c.members
        for i in range(200):
            redis_call(old.port, "SET", f"k{i}", "v")
        spec.promote(c, new)
        assert c.wait_formed(30) is new
        assert redis_call(new.port, "DBSIZE") == 200
        assert redis_info(old.port)["role"] == "slave"
        with pytest.raises(ValueError, match="READONLY"):
            redis_call(old.port, "SET", "late", "v")


def _dead_port() -> int:
    from videoflow_aio.testing.servers import free_port

    return free_port()  # nothing listens there


# -- start and stop ---------------------------------------------------------------------------
@pytest.mark.server
def test_stop_ends_every_member_by_pid_and_removes_the_dir() -> None:
    need_binary("etcd")
    spec = EtcdCluster(size=1)
    with spec as c:
        assert spec.cluster is c
        pids = [m.pid for m in c.members]
        assert all(p is not None for p in pids)
        c.members[0].pause()  # a paused member is stopped too
    assert spec.cluster is None
    assert all(_gone(p) for p in pids if p is not None)
    assert not c.dir.exists()
    c.stop()  # idempotent


@pytest.mark.server
def test_a_member_that_cannot_start_fails_the_start() -> None:
    need_binary("etcd")
    with pytest.raises(BackendUnavailable, match=r"e1|e2|e3"):
        EtcdCluster(args=["--no-such-flag"], startup_timeout=5).start(attempts=1)


@pytest.mark.server
def test_async_context_manager() -> None:
    need_binary("redis-server")

    async def main() -> None:
        async with RedisReplicaSet() as c:
            assert c.leader() is c.members[0]
            pids = [m.pid for m in c.members]
        assert all(p is not None and _gone(p) for p in pids)

    asyncio.run(main())


def test_sigterm_resumes_a_paused_member_first(etcd_cluster: ClusterProcess) -> None:
    """stop() on a paused member must not wait 4 s for a SIGTERM it cannot act on."""
    c = etcd_cluster
    m = c.members[2]
    m.pause()
    pid = m.pid
    assert pid is not None
    m.stop()
    assert _gone(pid)
    m.restart()
    c.wait_formed(30)


@pytest.mark.server
def test_check_starts_each_cluster_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """What .ci/run calls first: 0 when every member started and the cluster formed."""
    need_binary("etcd")
    from videoflow_aio.testing.clusters import check

    assert check(["etcd"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("etcd: formed in") and "e1 pid" in out and "e3 pid" in out
