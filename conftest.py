"""Runs the documentation: every ```python block of README.md and docs/ is a test.

pytest-codeblocks (``--codeblocks`` in pyproject.toml) collects the blocks of the Markdown
files on ``testpaths`` and runs each as a whole program, with ``exec``, in this process. Only
``python`` fences run (``sh``/``bash`` ones would run as shell commands: the docs write
commands in plain fences, which are not run). An HTML comment above a block, invisible on the
rendered page, can mark it:

- ``<!--pytest.mark.skip(reason="...")-->``: not run, with the reason in the report (``-rs``);
- ``<!--pytest.mark.server("nats", "redis", "etcd")-->``: the block needs those servers. This
  hook starts each (once per session, on 127.0.0.1, with ``videoflow_aio.testing.servers``)
  and sets ``NATS_URL``, ``REDIS_URL``, ``ETCD_URL`` while the block runs; the example reads
  its URL from there (``os.environ.get("NATS_URL", "nats://127.0.0.1:4222")``), as a user's
  program would. A missing binary skips the block, or fails it under
  ``VIDEOFLOW_REQUIRE_SERVERS=1`` (CI).
"""

from __future__ import annotations

import pytest

from videoflow_aio.testing.servers import (
    ServerProcess,
    binary_unavailable,
    servers_required,
    start_etcd,
    start_nats,
    start_redis,
)

SERVERS = {
    "nats": ("nats-server", start_nats),
    "redis": ("redis-server", start_redis),
    "etcd": ("etcd", start_etcd),
}
"""Server name in ``pytest.mark.server(...)`` -> (binary, starter)."""

_running: dict[str, ServerProcess] = {}
_env = pytest.StashKey[pytest.MonkeyPatch]()


def _is_doc_block(item: pytest.Item) -> bool:
    return item.path.suffix == ".md" and hasattr(item, "obj")


def _server(config: pytest.Config, name: str) -> ServerProcess:
    srv = _running.get(name)
    if srv is None:
        binary, start = SERVERS[name]
        reason = binary_unavailable(binary)
        if reason is not None:
            if servers_required():
                pytest.fail(f"VIDEOFLOW_REQUIRE_SERVERS=1 but {reason}")
            pytest.skip(reason)
        srv = _running[name] = start()
        config.add_cleanup(srv.stop)
    return srv


def pytest_runtest_setup(item: pytest.Item) -> None:
    marker = item.get_closest_marker("server")
    if not _is_doc_block(item) or marker is None:
        return
    unknown = sorted(set(marker.args) - set(SERVERS))
    if unknown:
        pytest.fail(f"pytest.mark.server names unknown servers {unknown}; known: {sorted(SERVERS)}")
    env = item.stash[_env] = pytest.MonkeyPatch()
    for name in marker.args:
        env.setenv(f"{name.upper()}_URL", _server(item.config, name).url)


def pytest_runtest_teardown(item: pytest.Item) -> None:
    env = item.stash.get(_env, None)
    if env is not None:
        env.undo()
