"""The adapters' cheap deadlines (asyncio only), on the virtual-time asyncio loop."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest

from videoflow_aio.adapters._watchdog import Watchdog
from videoflow_aio.vtime import VirtualClock
from videoflow_aio.vtime._run import backend_options

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend(vclock: VirtualClock) -> tuple[str, dict[str, Any]]:
    return "asyncio", backend_options("asyncio", vclock)  # the watchdog is asyncio-only


async def test_deadline_raises_timeout_between_timeout_and_timeout_plus_period() -> None:
    wd = Watchdog(2.0, period=0.5)
    t0 = anyio.current_time()
    with pytest.raises(TimeoutError):
        async with wd.guard():
            await asyncio.sleep(60)
    assert 2.0 <= anyio.current_time() - t0 <= 2.5 + 1e-6


async def test_fast_operations_are_untouched_and_the_runner_stops() -> None:
    wd = Watchdog(1.0, period=0.25)
    for _ in range(100):
        async with wd.guard():
            await asyncio.sleep(0.01)
    await asyncio.sleep(1)
    assert wd._runner is not None and wd._runner.done()  # no in-flight op: no timer left
    assert not wd._inflight


async def test_an_outer_cancellation_stays_a_cancellation() -> None:
    wd = Watchdog(10.0)
    with anyio.move_on_after(1) as scope:
        async with wd.guard():
            await asyncio.sleep(60)
    assert scope.cancelled_caught  # not converted into TimeoutError


async def test_concurrent_operations_each_get_their_own_deadline() -> None:
    wd = Watchdog(1.0, period=0.1)
    outcomes: dict[float, str] = {}

    async def op(duration: float) -> None:
        try:
            async with wd.guard():
                await asyncio.sleep(duration)
            outcomes[duration] = "done"
        except TimeoutError:
            outcomes[duration] = "timeout"

    async with anyio.create_task_group() as tg:
        for d in (0.2, 0.5, 5.0, 30.0):
            tg.start_soon(op, d)
    assert outcomes == {0.2: "done", 0.5: "done", 5.0: "timeout", 30.0: "timeout"}
