"""tests/_on_failure.py: a failed test shows its servers' logs, and its leaks are its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from _servers_fixtures import need_binary
from videoflow_aio.conformance import ServerProvider, get_provider
from videoflow_aio.testing.clusters import RedisReplicaSet

pytest_plugins = ["pytester"]

LEAKING = """
import gc
import socket


def test_fails_with_a_socket_in_its_frames():
    held = socket.socket()
    assert held is None


def test_next_collects():
    gc.collect()
"""

WITH_A_SERVER = """
import pytest
from videoflow_aio.testing.servers import start_redis


@pytest.fixture
def srv():
    s = start_redis()
    yield s
    s.stop()


def test_fails_beside_a_server(srv):
    assert srv is None
"""


def _run(pytester: pytest.Pytester, source: str, *plugins: str) -> pytest.RunResult:
    pytester.makepyfile(test_it=source)
    pytester.makeini("[pytest]\npythonpath = " + str(Path(__file__).parent))
    args = [a for p in plugins for a in ("-p", p)]
    return pytester.runpytest_subprocess(*args, "-p", "no:cacheprovider", "-W", "error")


def test_the_failed_test_is_blamed_for_its_leak(pytester: pytest.Pytester) -> None:
    result = _run(pytester, LEAKING, "_on_failure")
    result.assert_outcomes(failed=1, passed=1, errors=1)
    result.stdout.fnmatch_lines(["*ERROR at teardown of test_fails_with_a_socket_in_its_frames*"])


def test_without_it_the_next_test_is_blamed(pytester: pytest.Pytester) -> None:
    """The hazard the plugin removes, shown on the same two tests."""
    result = _run(pytester, LEAKING)
    result.assert_outcomes(failed=2)


@pytest.mark.server
def test_a_failed_test_shows_its_servers_log(pytester: pytest.Pytester) -> None:
    need_binary("redis-server")
    result = _run(pytester, WITH_A_SERVER, "_on_failure")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*server log: srv*", "*Ready to accept connections*"])


@pytest.mark.server
@pytest.mark.cluster
def test_a_server_providers_log_tail_heads_each_role() -> None:
    """What a failed conformance case on a real provider shows after its reason."""
    need_binary("redis-server")
    provider = get_provider("redis-replicated")
    assert isinstance(provider, ServerProvider)
    provider.setup()
    try:
        text = provider.log_tail(5)
    finally:
        provider.close()
    assert text.startswith("main (redis://")
    assert "r1 (running):" in text and "r2 (running):" in text


@pytest.mark.server
@pytest.mark.cluster
def test_a_clusters_log_tail_heads_each_member() -> None:
    need_binary("redis-server")
    with RedisReplicaSet(size=2) as c:
        text = c.log_tail(3)
        c.members[1].kill()
        after = c.log_tail(3)
    assert "r1 (running):" in text and "r2 (running):" in text
    assert "r2 (down):" in after
