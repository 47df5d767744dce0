"""Deadlocks end cleanly: VirtualTimeDeadlock is raised at the blocked awaits (so
``pytest.raises`` catches it and ``finally`` blocks run), shielded or not, on both backends;
a ``KeyboardInterrupt`` from a clock callback ends the run cleanly too."""

from __future__ import annotations

import asyncio
import traceback

import anyio
import anyio.lowlevel
import pytest
import trio

from _vtime_helpers import BACKENDS
from videoflow_aio import vtime
from videoflow_aio.vtime import VirtualClock, VirtualTimeDeadlock, current_clock

pytestmark = pytest.mark.anyio


async def test_pytest_raises_catches_a_deadlock_at_the_blocked_await(
    vclock: VirtualClock,
) -> None:
    cleaned: list[str] = []

    async def stuck() -> None:
        try:
            await anyio.Event().wait()
        finally:
            cleaned.append("cleaned up")

    with pytest.raises(VirtualTimeDeadlock, match="no timer is set") as info:
        await stuck()
    assert cleaned == ["cleaned up"]
    assert any(frame.name == "stuck" for frame in traceback.extract_tb(info.tb))
    await anyio.sleep(1)  # the test goes on, on the same clock
    assert vclock.monotonic() == 1001.0


async def test_a_deadlock_in_a_shielded_wait_is_raised_there(vclock: VirtualClock) -> None:
    with pytest.raises(VirtualTimeDeadlock), anyio.CancelScope(shield=True):
        await anyio.Event().wait()


async def test_deadlocked_task_group_children_each_get_it(vclock: VirtualClock) -> None:
    cleaned: list[int] = []

    async def child(i: int) -> None:
        try:
            with anyio.CancelScope(shield=True):
                await anyio.Event().wait()
        finally:
            cleaned.append(i)

    with pytest.RaisesGroup(VirtualTimeDeadlock, VirtualTimeDeadlock):
        async with anyio.create_task_group() as tg:
            tg.start_soon(child, 1)
            tg.start_soon(child, 2)
    assert sorted(cleaned) == [1, 2]


async def _stuck_shielded(flags: list[str]) -> None:
    try:
        with anyio.CancelScope(shield=True):
            await anyio.Event().wait()
    finally:
        flags.append("finally ran")


async def _stuck_shielded_child(flags: list[str]) -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(_stuck_shielded, flags)
        tg.start_soon(_stuck_shielded, flags)


@pytest.mark.parametrize("body", [_stuck_shielded, _stuck_shielded_child])
@pytest.mark.parametrize("backend", BACKENDS)
def test_run_ends_a_shielded_deadlock_cleanly(backend: vtime.Backend, body: object) -> None:
    flags: list[str] = []
    with pytest.raises(VirtualTimeDeadlock) as info:  # one plain exception, not a group
        vtime.run(body, flags, backend=backend)  # type: ignore[arg-type]
    assert flags and set(flags) == {"finally ran"}
    assert type(info.value) is VirtualTimeDeadlock


def test_a_bare_trio_run_ends_a_shielded_deadlock_without_trio_internal_error() -> None:
    flags: list[str] = []
    clock = VirtualClock()
    with pytest.raises(VirtualTimeDeadlock):
        trio.run(_stuck_shielded, flags, clock=clock.trio_clock())
    assert flags == ["finally ran"]


def test_a_bare_asyncio_runner_gets_the_deadlock_in_its_main_task() -> None:
    flags: list[str] = []
    with (
        pytest.raises(VirtualTimeDeadlock),
        asyncio.Runner(loop_factory=vtime.new_event_loop) as runner,
    ):
        runner.run(_stuck_shielded(flags))
    assert flags == ["finally ran"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_program_that_swallows_the_deadlock_and_waits_again_still_ends(
    backend: vtime.Backend,
) -> None:
    swallowed: list[int] = []

    async def stubborn() -> None:
        while True:
            try:
                await anyio.Event().wait()
            except VirtualTimeDeadlock:
                swallowed.append(1)  # e.g. a retry loop that catches every error

    with pytest.raises(VirtualTimeDeadlock):
        vtime.run(stubborn, backend=backend)
    assert len(swallowed) == 1000  # then the guard cancels it


@pytest.mark.parametrize("backend", BACKENDS)
def test_keyboard_interrupt_in_a_clock_callback_ends_the_run_cleanly(
    backend: vtime.Backend,
) -> None:
    flags: list[float] = []

    async def main() -> None:
        def interrupt() -> None:
            raise KeyboardInterrupt

        current_clock().at(1, interrupt)
        try:
            await anyio.sleep(10)
        finally:
            flags.append(anyio.current_time())

    with pytest.raises(KeyboardInterrupt):
        vtime.run(main, backend=backend)
    assert flags == [1001.0]


def test_keyboard_interrupt_in_a_clock_callback_of_a_bare_trio_run() -> None:
    clock = VirtualClock()
    flags: list[float] = []

    async def main() -> None:
        def interrupt() -> None:
            raise KeyboardInterrupt

        clock.at(1, interrupt)
        try:
            await trio.sleep(10)
        finally:
            flags.append(trio.current_time())

    with pytest.raises(KeyboardInterrupt):  # not TrioInternalError
        trio.run(main, clock=clock.trio_clock())
    assert flags == [1001.0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_guard_around_part_of_the_program_gets_the_deadlock(backend: vtime.Backend) -> None:
    async def main() -> float:
        with pytest.raises(VirtualTimeDeadlock):
            await vtime.guarded(anyio.sleep_forever)
        await anyio.sleep(2)
        return anyio.current_time()

    assert vtime.run(main, backend=backend) == 1002.0
