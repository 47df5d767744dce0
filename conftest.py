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

A block that defines ``test_…`` functions is a test module, as a reader would save it: it runs
as one, with pytest in a subprocess in a temporary directory (no configuration of this
repository applies), and every test it collects must pass.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

import pytest

from videoflow_aio.testing.servers import ServerProcess, start_etcd, start_nats, start_redis

pytest_plugins = ["_servers_fixtures"]  # tests/ is on pythonpath (pyproject.toml)

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
        from _servers_fixtures import need_binary  # a plugin by now: imported after rewriting

        binary, start = SERVERS[name]
        need_binary(binary)  # skips, or fails under VIDEOFLOW_REQUIRE_SERVERS=1
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


_TEST_FUNCTION = re.compile(r"^(async )?def test_", re.MULTILINE)


def _disabled_plugins(config: pytest.Config) -> list[str]:
    """The ``-p no:…`` options of this run's ``addopts`` (plugins this suite keeps out)."""
    args = list(config.getini("addopts"))
    return [a for i, a in enumerate(args) if a.startswith("no:") and args[i - 1] == "-p"]


def _run_as_test_module(item: Any) -> None:
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    argv += [arg for name in _disabled_plugins(item.config) for arg in ("-p", name)]
    with tempfile.TemporaryDirectory() as tmp:
        module = Path(tmp) / f"test_{item.path.stem.replace('-', '_')}_block.py"
        module.write_text(item.obj.code)
        done = subprocess.run(
            [*argv, module.name],
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    if done.returncode != 0 or " passed" not in done.stdout:
        pytest.fail(f"the block, run as a test module:\n{done.stdout}{done.stderr}", False)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _is_doc_block(item) and _TEST_FUNCTION.search(item.obj.code):
            item.runtest = types.MethodType(_run_as_test_module, item)  # type: ignore[method-assign]
