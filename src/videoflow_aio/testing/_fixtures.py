"""The fixtures of the virtual-time pytest plugin.

Registered as a plugin of its own from ``pytest_configure`` (see ``pytest_plugin``), i.e.
after every entry-point plugin: pytest lets the last registered plugin's fixture win, so
this ``anyio_backend`` replaces anyio's own whatever order entry points load in.
"""

from __future__ import annotations

from typing import Any

import pytest

from videoflow_aio.vtime import VirtualClock
from videoflow_aio.vtime._run import backend_options


@pytest.fixture
def vclock() -> VirtualClock:
    """A fresh autojumping virtual clock for this test (set ``.autojump = False`` for manual)."""
    return VirtualClock()


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(
    request: pytest.FixtureRequest, vclock: VirtualClock
) -> tuple[str, dict[str, Any]]:
    """Each anyio test runs twice, on asyncio and on trio, on the test's ``vclock``."""
    name: str = request.param
    return name, backend_options(name, vclock)
