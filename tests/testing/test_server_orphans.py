"""Servers die with the pytest run that started them, however it ends (issue 26, item 18).

Each test runs a downstream-style pytest in a subprocess, with its own ``TMPDIR``: a fixture
starts a redis-server and a nats-server (one from the main thread, one from a worker thread
through ``astart``, where a parent-death signal alone would fire too early), reports their
pids through a pipe and blocks. The run is then killed (SIGKILL, SIGTERM, Ctrl-C twice); every
server must be gone within a bounded wait, and no process may still name the run's temporary
directory on its command line. Waiting uses pidfds, not sleeps.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from _servers_fixtures import need_binary

pytestmark = [pytest.mark.server, pytest.mark.vtime(False)]

CHILD = """
import json, os
import anyio
import pytest
from videoflow_aio.testing import _reaper
from videoflow_aio.testing.servers import NatsServer, RedisServer


@pytest.fixture
def servers():
    a = RedisServer().start()  # main thread
    b = anyio.run(NatsServer().astart)  # a worker thread that ends afterwards
    yield a, b
    a.stop()
    b.stop()


def children(pid):
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        if entry.isdigit() and int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry))
    return found


def test_blocks(servers):
    a, b = servers
    behind = [*children(a.pid), *children(b.pid)]  # a server behind a wrapper
    report = {"pids": [a.pid, b.pid, *behind], "dirs": [str(a.dir), str(b.dir)],
              "reaper": _reaper.reaper_pid(), "behind": behind}
    os.write(int(os.environ["ORPHAN_REPORT_FD"]), json.dumps(report).encode() + b"\\n")
    os.read(int(os.environ["ORPHAN_HOLD_FD"]), 1)  # blocks until the run is killed
"""

#: the run, with Ctrl-C as a terminal's run finds it: a test run started in the background
#: (``cmd &``, as CI may be) inherits SIGINT ignored, and so would its child, which then sat
#: through both SIGINTs until the test gave up
RUN_CHILD = (
    "import signal, sys, pytest\n"
    "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'test_child.py']))\n"
)

CLUSTER_CHILD = """
import json, os
import pytest
from videoflow_aio.testing import _reaper
from videoflow_aio.testing.clusters import NatsCluster


@pytest.fixture
def cluster():
    c = NatsCluster(size=3).start()
    yield c
    c.stop()


def test_blocks(cluster):
    report = {"pids": [m.pid for m in cluster.members], "dirs": [str(cluster.dir)],
              "reaper": _reaper.reaper_pid()}
    os.write(int(os.environ["ORPHAN_REPORT_FD"]), json.dumps(report).encode() + b"\\n")
    os.read(int(os.environ["ORPHAN_HOLD_FD"]), 1)  # blocks until the run is killed
"""

WAIT_SECONDS = 15.0
RUN_EXIT_SECONDS = 90.0
"""How long the killed run may take to exit: Ctrl-C's teardown stops its servers and prints a
summary, which a machine loaded 5-fold stretched past 15 s (what is tested is that nothing
outlives the run, not how fast pytest tears down)."""


def _wait_exit(pid: int, timeout: float) -> bool:
    """True once ``pid`` has terminated (a zombie counts), within ``timeout`` seconds."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        ready, _, _ = select.select([fd], [], [], timeout)
        return bool(ready)
    finally:
        os.close(fd)


def _processes_naming(text: str) -> list[int]:
    """Live (non-zombie) processes whose command line contains ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if text.encode() in cmdline:
            found.append(int(entry.name))
    return found


def _wrapper(directory: Path) -> Path:
    """A ``redis-server`` that is a shell running the real one as its child (not ``exec``),
    as a launcher might: the server proper is a grandchild."""
    real = shutil.which("redis-server")
    assert real is not None
    directory.mkdir()
    script = directory / "redis-server"
    script.write_text(f'#!/bin/sh\n"{real}" "$@" &\nwait\n')
    script.chmod(0o755)
    return directory


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if entry.name.isdigit() and int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def _run_and_kill(tmp_path: Path, how: str, child: str = CHILD, *, wrapped: bool = False) -> None:
    need_binary("redis-server")
    need_binary("nats-server")
    (tmp_path / "test_child.py").write_text(child)
    tmpdir = tmp_path / "t"
    tmpdir.mkdir()
    read_end, write_end = os.pipe()
    # the run blocks reading a pipe nobody writes to: not its stdin, which pytest's capture
    # points at /dev/null (a read there returned at once, and the run tore its servers down
    # while it was being killed: a directory was left behind one run in ten under load)
    hold_read, hold_write = os.pipe()
    report: dict[str, Any] = {"pids": []}
    env = {
        **os.environ,
        "TMPDIR": str(tmpdir),
        "ORPHAN_REPORT_FD": str(write_end),
        "ORPHAN_HOLD_FD": str(hold_read),
    }
    if wrapped:
        env["PATH"] = f"{_wrapper(tmp_path / 'bin')}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.Popen(
        [sys.executable, "-c", RUN_CHILD],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        pass_fds=(write_end, hold_read),
    )
    os.close(write_end)
    os.close(hold_read)
    try:
        ready, _, _ = select.select([read_end], [], [], 60.0)
        assert ready, "the child run did not start its servers in 60 s"
        report = json.loads(os.read(read_end, 65536).decode())
        for directory in report["dirs"]:  # the run is blocked with its servers up
            assert Path(directory).is_dir(), f"{directory} gone before the run was killed"
        if wrapped:
            assert report["behind"], "the wrapper did not start the server as its child"
        if how == "SIGKILL":
            proc.kill()
        elif how == "SIGTERM":
            proc.terminate()
        else:  # Ctrl-C twice: the second one lands in the teardown the first one began
            proc.send_signal(signal.SIGINT)
            proc.send_signal(signal.SIGINT)
        proc.wait(RUN_EXIT_SECONDS)
        for pid in report["pids"]:
            assert _wait_exit(pid, WAIT_SECONDS), f"server {pid} outlived the run ({how})"
        if report["reaper"] is not None:
            assert _wait_exit(report["reaper"], WAIT_SECONDS), "the reaper did not finish"
        for pid in _processes_naming(str(tmpdir)):  # a grandchild behind a wrapper, say
            assert _wait_exit(pid, WAIT_SECONDS), f"{pid} outlived the run ({how})"
        assert _processes_naming(str(tmpdir)) == []
        for directory in report["dirs"]:
            assert not Path(directory).exists(), f"{directory} left behind ({how})"
    finally:
        os.close(read_end)
        os.close(hold_write)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        assert proc.stdin is not None
        proc.stdin.close()
        leftovers = [p for p in report["pids"] if not _wait_exit(p, 0)]
        for pid in {*_processes_naming(str(tmpdir)), *leftovers}:  # never leave one ourselves
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="needs Linux pidfds")
@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM", "SIGINT-twice"])
def test_servers_die_with_the_run(tmp_path: Path, how: str) -> None:
    _run_and_kill(tmp_path, how)


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="needs Linux pidfds")
def test_a_server_behind_a_wrapper_dies_with_the_run(tmp_path: Path) -> None:
    """The wrapper (a shell) dies by its parent-death signal; the real server, its child,
    by the reaper's SIGKILL of the whole process group."""
    _run_and_kill(tmp_path, "SIGKILL", wrapped=True)


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="needs Linux pidfds")
def test_stop_ends_a_server_behind_a_wrapper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from videoflow_aio.testing.servers import RedisServer

    need_binary("redis-server")
    monkeypatch.setenv("PATH", f"{_wrapper(tmp_path / 'bin')}{os.pathsep}{os.environ['PATH']}")
    srv = RedisServer().start()
    behind = _children(srv.pid)
    assert behind, "the wrapper did not start the server as its child"
    srv.stop()
    for pid in behind:
        assert _wait_exit(pid, WAIT_SECONDS), "stop() left the server behind its wrapper"


@pytest.mark.cluster
@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="needs Linux pidfds")
def test_a_cluster_dies_with_the_run(tmp_path: Path) -> None:
    _run_and_kill(tmp_path, "SIGKILL", CLUSTER_CHILD)


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="needs Linux pidfds")
def test_a_server_started_from_a_short_lived_thread_outlives_the_thread() -> None:
    """The parent-death signal fires when the forking *thread* ends: servers are forked from
    a thread that lives as long as the process."""
    import threading

    from videoflow_aio.testing.servers import RedisServer, ServerProcess

    need_binary("redis-server")
    box: list[ServerProcess] = []
    thread = threading.Thread(target=lambda: box.append(RedisServer().start()))
    thread.start()
    thread.join()
    srv = box[0]
    try:
        assert not _wait_exit(srv.pid, 0.5), "the server died with the thread that started it"
        assert srv.alive()
    finally:
        srv.stop()


def test_stop_removes_the_directory_before_the_reaper_lets_it_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An owner killed while it stops a server leaves nothing behind: the reaper is told the
    server is gone only once its directory is (it was told first, and a run killed in between
    left the directory)."""
    from videoflow_aio.testing import _reaper
    from videoflow_aio.testing.servers import RedisServer

    need_binary("redis-server")
    srv = RedisServer().start()
    real = _reaper.forget
    seen: list[bool] = []

    def forget(pid: int) -> None:
        seen.append(srv.dir.exists())
        real(pid)

    monkeypatch.setattr(_reaper, "forget", forget)
    srv.stop()
    assert seen == [False]
