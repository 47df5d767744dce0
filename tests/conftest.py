"""This suite's choice of backends: every anyio test runs under asyncio and trio.

(Virtual time itself is switched on for the whole suite by ``vtime = true`` in
pyproject.toml; a module that needs real time says ``pytest.mark.vtime(False)``.)
"""

from __future__ import annotations

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name
