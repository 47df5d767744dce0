"""A deadline of inf is "never": the clock never reads inf or NaN, on asyncio and trio."""

from __future__ import annotations

import asyncio
import math

import anyio
import pytest
import trio

from _vtime_helpers import BACKENDS
from videoflow_aio import vtime
from videoflow_aio.memory.clock import FakeClock
from videoflow_aio.vtime import VirtualClock, VirtualTimeDeadlock, current_clock

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("backend", BACKENDS)
def test_sleep_forever_alone_is_a_deadlock_and_the_clock_stays_finite(
    backend: vtime.Backend,
) -> None:
    clock = VirtualClock()
    cleaned: list[float] = []

    async def main() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            cleaned.append(anyio.current_time())

    with pytest.raises(VirtualTimeDeadlock, match="deadlines of inf, which never come"):
        vtime.run(main, backend=backend, clock=clock)
    assert cleaned == [1000.0]
    assert clock.monotonic() == 1000.0


def test_asyncio_sleep_inf_is_a_deadlock_not_a_return() -> None:
    async def main() -> None:
        await asyncio.sleep(math.inf)

    clock = VirtualClock()
    with pytest.raises(VirtualTimeDeadlock):
        vtime.run(main, clock=clock)
    assert clock.monotonic() == 1000.0


def test_asyncio_wait_for_with_an_infinite_timeout_never_times_out() -> None:
    async def main() -> None:
        await asyncio.wait_for(asyncio.Event().wait(), timeout=math.inf)

    clock = VirtualClock()
    with pytest.raises(VirtualTimeDeadlock):  # not TimeoutError: inf never comes
        vtime.run(main, clock=clock)
    assert clock.monotonic() == 1000.0


async def test_infinite_sleepers_do_not_stop_other_timers(vclock: VirtualClock) -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.sleep_forever)
        tg.start_soon(anyio.sleep, math.inf)
        await anyio.sleep(5)
        assert vclock.monotonic() == 1005.0
        tg.cancel_scope.cancel()
    with anyio.move_on_after(2):
        await anyio.sleep_forever()
    assert vclock.monotonic() == 1007.0
    assert math.isfinite(anyio.current_time())


async def test_asyncio_call_at_inf_never_fires(anyio_backend_name: str) -> None:
    if anyio_backend_name != "asyncio":
        pytest.skip("asyncio loop API")
    loop = asyncio.get_running_loop()
    fired: list[str] = []
    loop.call_at(math.inf, fired.append, "inf")
    loop.call_later(math.inf, fired.append, "later inf")
    loop.call_at(-math.inf, fired.append, "-inf")  # in the past: due now
    await asyncio.sleep(10)
    assert fired == ["-inf"]
    assert loop.time() == 1010.0


async def test_clock_at_inf_never_fires(vclock: VirtualClock) -> None:
    fired: list[float] = []
    vclock.at(math.inf, lambda: fired.append(vclock.monotonic()))
    await anyio.sleep(3600)
    await vclock.advance(1e9)
    assert fired == []
    assert math.isfinite(vclock.monotonic())


def test_a_standalone_clock_never_fires_inf_and_refuses_infinite_advances() -> None:
    clock = FakeClock()
    fired: list[float] = []
    clock.at(math.inf, lambda: fired.append(clock.monotonic()))
    clock.advance(1e300)
    assert fired == [] and clock.monotonic() == 1e300 + 1000.0
    for bad in (math.inf, -math.inf, math.nan, -1.0):
        with pytest.raises(ValueError):
            clock.advance(bad)
    clock.advance(1.7e308)
    with pytest.raises(ValueError, match="float range"):
        clock.advance(1.7e308)  # finite, but the sum overflows to inf
    assert math.isfinite(clock.monotonic())


def test_trio_clock_jump_refuses_inf_and_nan() -> None:
    trio_clock = VirtualClock().trio_clock()
    for bad in (math.inf, math.nan, -1.0):
        with pytest.raises(ValueError):
            trio_clock.jump(bad)  # type: ignore[attr-defined]


def test_trio_sleep_until_inf_is_a_deadlock_in_a_bare_run() -> None:
    clock = VirtualClock()

    async def main() -> None:
        assert current_clock() is clock
        await trio.sleep_until(math.inf)

    with pytest.raises(VirtualTimeDeadlock):  # raised in main: no TrioInternalError
        trio.run(main, clock=clock.trio_clock())
    assert clock.monotonic() == 1000.0
