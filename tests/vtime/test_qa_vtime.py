"""Adversarial checks of the virtual-time loop (issue 11), beyond the cases the issue names:
spinning tasks while real I/O is pending, deadlines and clock arguments of every kind, deadlock
shapes, exits from clock callbacks, a deadlock behind a worker thread."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from typing import Any

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
import pytest

from _vtime_helpers import BACKENDS
from videoflow_aio import vtime
from videoflow_aio.memory.clock import FakeClock
from videoflow_aio.vtime import VirtualClock, VirtualTimeDeadlock

pytestmark = pytest.mark.anyio


async def _close(stream: anyio.abc.SocketStream) -> None:
    await stream.aclose()


@pytest.mark.timeout(20)
async def test_a_spinner_with_a_socket_open_still_reaches_its_deadline(
    vclock: VirtualClock,
) -> None:
    """A polling loop under ``move_on_after`` ends on a real clock whatever sockets are open.
    With real I/O registered the loop may not outrun real time, so the jump waits until that
    much real time has passed — but it must come (it never came: the spin rule refused to
    jump at all while I/O was pending)."""
    vclock.spin_threshold = 100
    wall0 = time.perf_counter()  # wall-clock: the jump must wait for real time to pass
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, _close)
        with anyio.move_on_after(0.2) as scope:
            while True:  # noqa: ASYNC110 - the polling idiom under test
                await anyio.sleep(0)  # noqa: ASYNC115
        tg.cancel_scope.cancel()
    assert scope.cancelled_caught
    assert vclock.monotonic() == 1000.2
    assert time.perf_counter() - wall0 >= 0.2  # wall-clock: never ahead of real time


@pytest.mark.parametrize("when", [None, "1", object()])
def test_a_timer_deadline_that_is_not_a_number_is_refused_at_the_call(when: object) -> None:
    """``call_at(None, ...)`` used to enter the heap and break the run loop itself (a
    TypeError from inside ``run_until_complete``, every later timer lost)."""

    async def main() -> float:
        loop = asyncio.get_running_loop()
        with pytest.raises(TypeError):
            loop.call_at(when, print)  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            loop.call_later(when, print)  # type: ignore[arg-type]
        await asyncio.sleep(1)
        return loop.time()

    assert vtime.run(main) == 1001.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_deadlines_of_every_waiting_api_in_the_corner_cases(backend: vtime.Backend) -> None:
    """inf never fires, -inf and past deadlines fire at once, NaN is refused, huge finite
    deadlines are reached exactly; the clock never reads inf or NaN."""

    async def main() -> list[object]:
        out: list[object] = []
        with anyio.move_on_after(-math.inf) as scope:
            await anyio.sleep(1)
        out.append((scope.cancelled_caught, anyio.current_time()))
        with anyio.CancelScope(deadline=math.inf):
            await anyio.sleep(3)
        out.append(anyio.current_time())
        for bad in (math.nan,):
            with pytest.raises(ValueError):
                anyio.move_on_after(bad).__enter__()
        with anyio.fail_after(math.inf):
            await anyio.sleep(2)
        out.append(anyio.current_time())
        await anyio.sleep_until(0)  # in the past
        out.append(anyio.current_time())
        with anyio.move_on_after(1e300) as scope:
            await anyio.sleep_forever()
        out.append((scope.cancelled_caught, anyio.current_time()))
        return out

    assert vtime.run(main, backend=backend) == [
        (True, 1000.0),
        1003.0,
        1005.0,
        1005.0,
        (True, 1005.0 + 1e300),
    ]


@pytest.mark.parametrize("bad", ["5", None, True, b"1", [1]])
def test_the_clock_takes_numbers_of_seconds_not_anything_float_accepts(bad: object) -> None:
    """``float()`` took ``"5"`` and ``True``: ``advance("5")`` moved time, ``at("5", cb)``
    set a timer; a wrong type is a TypeError, and nothing moves."""
    clock = FakeClock()
    with pytest.raises(TypeError):
        clock.advance(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        clock.at(bad, print)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        VirtualClock(start=bad)  # type: ignore[arg-type]
    assert clock.monotonic() == 1000.0 and not clock._pending


def test_numbers_out_of_the_float_range_are_value_errors() -> None:
    clock = FakeClock()
    for call in (lambda: clock.advance(10**400), lambda: clock.at(10**400, print)):
        with pytest.raises(ValueError):
            call()
    with pytest.raises(ValueError):
        VirtualClock(start=10**400)
    assert clock.monotonic() == 1000.0


@pytest.mark.parametrize("bad", ["no", "false", 0, None])
def test_autojump_must_be_a_bool(bad: object) -> None:
    """``VirtualClock(autojump="false")`` was truthy: autojump on, the opposite of asked."""
    with pytest.raises(TypeError):
        VirtualClock(autojump=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", BACKENDS)
def test_run_refuses_a_clock_that_is_not_a_virtual_clock(backend: vtime.Backend) -> None:
    """``clock="x"`` was an AttributeError from inside the loop's set-up (and a second one
    from the half-built loop's ``__del__``)."""

    async def main() -> None:
        await anyio.sleep(1)

    with pytest.raises(TypeError, match="VirtualClock"):
        vtime.run(main, backend=backend, clock="x")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="VirtualClock"):
        vtime.new_event_loop("x")  # type: ignore[arg-type]


async def _finally_awaits(log: list[object]) -> None:
    try:
        await anyio.Event().wait()
    finally:
        log.append(anyio.current_time())
        await anyio.sleep(1)  # cleanup that itself waits: it runs, on virtual time
        log.append(anyio.current_time())


async def _nested_groups(log: list[object]) -> None:
    async def leaf(i: int) -> None:
        try:
            with anyio.CancelScope(shield=True):
                await anyio.Semaphore(0).acquire()
        finally:
            log.append(i)

    async def middle(i: int) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(leaf, 10 * i + 1)
            tg.start_soon(leaf, 10 * i + 2)

    async with anyio.create_task_group() as tg:
        tg.start_soon(middle, 1)
        tg.start_soon(middle, 2)


async def _sibling_finishes_first(log: list[object]) -> None:
    async def stuck() -> None:
        send, receive = anyio.create_memory_object_stream[int](0)
        async with send, receive:
            try:
                await receive.receive()
            finally:
                log.append(anyio.current_time())

    async with anyio.create_task_group() as tg:
        tg.start_soon(stuck)
        tg.start_soon(anyio.sleep, 5)  # the deadlock comes once this one is done


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (_finally_awaits, [1000.0, 1001.0]),
        (_nested_groups, [11, 12, 21, 22]),
        (_sibling_finishes_first, [1005.0]),
    ],
    ids=["finally-awaits", "nested-shielded-groups", "sibling-finishes-first"],
)
@pytest.mark.parametrize("backend", BACKENDS)
def test_deadlock_shapes_end_cleanly_with_every_finally_run(
    backend: vtime.Backend, body: Any, expected: list[object]
) -> None:
    log: list[object] = []
    with pytest.raises(VirtualTimeDeadlock) as info:
        vtime.run(body, log, backend=backend)
    assert type(info.value) is VirtualTimeDeadlock  # one plain exception, not a group
    assert sorted(log, key=str) == sorted(expected, key=str)


@pytest.mark.parametrize("exc", [SystemExit(3), KeyboardInterrupt()], ids=["exit", "ctrl-c"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_an_exit_raised_in_a_clock_callback_ends_the_run_after_every_finally(
    backend: vtime.Backend, exc: BaseException
) -> None:
    log: list[object] = []

    async def main() -> None:
        def interrupt() -> None:
            raise exc

        vtime.current_clock().at(1, interrupt)
        try:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(10)
        finally:
            log.append(anyio.current_time())

    with pytest.raises(type(exc)):
        vtime.run(main, backend=backend)
    assert log == [1001.0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_deadlock_behind_a_worker_thread_travels_back_through_it(
    backend: vtime.Backend, caplog: pytest.LogCaptureFixture
) -> None:
    """A worker thread waiting in ``from_thread.run`` for a task that can never finish is
    stuck with it. The report goes to that task, so the thread sees the error and hands it
    back to the task awaiting it — on asyncio it went to the awaiting task directly, and
    the thread's later result hit a future already done (InvalidStateError, logged)."""
    seen: list[str] = []

    def in_thread() -> None:
        try:
            anyio.from_thread.run(anyio.sleep_forever)
        except VirtualTimeDeadlock:
            seen.append("thread")
            raise

    async def main() -> None:
        await anyio.to_thread.run_sync(in_thread)

    with pytest.raises(VirtualTimeDeadlock):
        vtime.run(main, backend=backend)
    assert seen == ["thread"]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
