"""pytest plugin: anyio tests run on virtual time, under asyncio and trio, fresh clock per test.

Registered by entry point. Tests marked ``@pytest.mark.anyio`` get the ``anyio_backend``
fixture defined here, which is parametrized over asyncio and trio and binds a fresh
:class:`~videoflow_aio.vtime.VirtualClock` (the ``vclock`` fixture) to the loop.
"""

from __future__ import annotations

from typing import Any

import pytest

from videoflow_aio.vtime import VirtualClock
from videoflow_aio.vtime._run import backend_options


@pytest.fixture
def vclock() -> VirtualClock:
    """A fresh autojumping virtual clock for this test."""
    return VirtualClock()


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest, vclock: VirtualClock) -> tuple[str, dict[str, Any]]:
    name: str = request.param
    return name, backend_options(name, vclock)
