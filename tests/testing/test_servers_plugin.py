"""The shipped real-server fixtures (issue 26, item 17): ``redis_server``, ``nats_server``,
``etcd_server`` from ``videoflow_aio.testing.servers_plugin``, used by a downstream-style
project run by pytest in a subprocess.

Opt-in by ``-p`` or by the ini line ``videoflow_servers = true``; without it the fixtures do
not exist. A missing binary skips with what to install, or fails under
``VIDEOFLOW_REQUIRE_SERVERS=1``. Servers are stopped when the session ends.
"""

from __future__ import annotations

import os
import select
import sys
from pathlib import Path

import pytest

from _plugin_helpers import NO_LOOPTIME, run_pytest, write
from _servers_fixtures import need_binary

pytestmark = [pytest.mark.server, pytest.mark.vtime(False)]

_DOWNSTREAM = {
    "test_downstream.py": """
        import os
        import socket

        import pytest

        from videoflow_aio.adapters.redis import RedisRuntimeStore


        @pytest.fixture
        def anyio_backend():
            return "asyncio"


        @pytest.mark.anyio
        async def test_redis(redis_server):
            assert redis_server.url.startswith("redis://127.0.0.1:")
            with open(os.environ["PIDS_FILE"], "a") as f:
                f.write(f"{redis_server.pid}\\n")
            async with RedisRuntimeStore(redis_server.url, namespace="ds") as store:
                assert await store.cas("k", None, b"v")
                assert (await store.get("k"))[0] == b"v"


        def test_the_same_server_for_the_session(redis_server):
            with open(os.environ["PIDS_FILE"]) as f:
                assert f.read().split() == [str(redis_server.pid)]


        def test_nats(nats_server):
            assert nats_server.url.startswith("nats://127.0.0.1:")
            assert nats_server.monitor_url
            with open(os.environ["PIDS_FILE"], "a") as f:
                f.write(f"{nats_server.pid}\\n")
    """,
}


def _gone(pid: int) -> bool:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], 10.0)[0])
    finally:
        os.close(fd)


@pytest.mark.parametrize("opt_in", ["-p", "ini"])
def test_downstream_project_uses_the_shipped_fixtures(tmp_path: Path, opt_in: str) -> None:
    need_binary("redis-server")
    need_binary("nats-server")
    files = dict(_DOWNSTREAM)
    args = [*NO_LOOPTIME]
    if opt_in == "ini":
        files["pytest.ini"] = "[pytest]\nvideoflow_servers = true\n"
    else:
        files["pytest.ini"] = "[pytest]\n"
        args += ["-p", "videoflow_aio.testing.servers_plugin"]
    write(tmp_path, files)
    pids = tmp_path / "pids"
    pids.write_text("")
    run = run_pytest(sys.executable, tmp_path, *args, env={"PIDS_FILE": str(pids)})
    for name in ("test_redis", "test_the_same_server_for_the_session", "test_nats"):
        assert run.result(f"test_downstream.py::{name}") == "passed", run.output
    started = [int(p) for p in pids.read_text().split()]
    assert len(started) == 2
    if hasattr(os, "pidfd_open"):
        assert all(_gone(pid) for pid in started), "a server outlived its session"


def test_without_the_opt_in_the_fixtures_do_not_exist(tmp_path: Path) -> None:
    write(tmp_path, {"pytest.ini": "[pytest]\n", "test_none.py": _NONE})
    run = run_pytest(sys.executable, tmp_path, *NO_LOOPTIME)
    assert run.result("test_none.py::test_wants_redis") == "error", run.output
    assert "fixture 'redis_server' not found" in run.output


_NONE = """
    def test_wants_redis(redis_server):
        pass
"""

_MISSING = """
    def test_wants_redis(redis_server):
        pass

    def test_wants_etcd(etcd_server):
        pass
"""


@pytest.mark.parametrize("required", [False, True])
def test_a_missing_binary_skips_or_fails_saying_what_to_install(
    tmp_path: Path, required: bool
) -> None:
    write(tmp_path, {"pytest.ini": "[pytest]\nvideoflow_servers = true\n", "test_m.py": _MISSING})
    env = {"PATH": str(tmp_path / "empty-bin")}  # neither binary is beside this interpreter
    if required:
        env["VIDEOFLOW_REQUIRE_SERVERS"] = "1"
    else:
        env["VIDEOFLOW_REQUIRE_SERVERS"] = ""
    run = run_pytest(sys.executable, tmp_path, *NO_LOOPTIME, "-rs", env=env)
    for name, hint in (("test_wants_redis", "redis-server"), ("test_wants_etcd", "etcd")):
        test_id = f"test_m.py::{name}"
        assert run.result(test_id) == ("error" if required else "skipped"), run.output
        assert f"{hint} not found" in run.message(test_id)
        assert "apt-get install" in run.message(test_id)
        if required:
            assert "VIDEOFLOW_REQUIRE_SERVERS=1" in run.message(test_id)
