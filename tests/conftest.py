"""Shared test configuration: real-server fixtures for every test folder, and the rule that
whatever starts a real server is marked ``server`` (so ``-m "not server"`` runs none).

- ``_servers_fixtures`` is loaded as a plugin: its fixtures (``redis_srv``, ``etcd_srv``,
  ``nats_srv``, …) are available in every test module without an import; each starts its
  server when the first test of a module asks for it (module scope), never while collecting.
  A test using one of them gets the ``server`` marker there, whatever its module says.
- Conformance runs on real providers get the marker from the conformance plugin. A test that
  starts a server by other means (``videoflow_aio.testing.servers`` directly) marks itself.
- The helper modules (``_servers_fixtures``, ``_store_proxy``, …) live in this folder, which
  ``pythonpath`` (pyproject.toml) puts on ``sys.path``: tests in subfolders import them as is.
- Every anyio test runs under asyncio and trio (``anyio_backend`` below), on virtual time:
  ``vtime = true`` in pyproject.toml; a module that needs real time says
  ``pytest.mark.vtime(False)``.
"""

from __future__ import annotations

import pytest

pytest_plugins = ["_servers_fixtures", "_on_failure"]


@pytest.fixture(autouse=True)
def _no_terminal_size_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reports are read as a pipe prints them (160 columns): a ``COLUMNS`` of the caller's —
    pytest-xdist's workers set ``COLUMNS=80`` — made the CLI tests' tables truncate titles."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name
