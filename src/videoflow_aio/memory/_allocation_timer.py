"""Timers for the allocation model that fire as (virtual) time passes, on asyncio and trio."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol

import anyio
import sniffio
import trio


class TimerClock(Protocol):
    """A clock the model can be given (``FakeClock`` / ``VirtualClock``)."""

    def monotonic(self) -> float: ...

    def at(self, seconds_from_now: float, callback: Callable[[], None]) -> None: ...


def call_later(clock: TimerClock | None, delay: float, callback: Callable[[], None]) -> None:
    """Run ``callback`` once ``delay`` seconds have passed on the model's time source.

    With a clock: its ``at`` (fires on ``advance``). Without: the running loop — an asyncio
    timer handle, or a trio system task sleeping until the deadline. Callbacks must be
    idempotent and must not raise; the model also settles due work lazily on every call, so
    a timer that never runs (no loop, loop closed) loses nothing.
    """
    if clock is not None:
        clock.at(delay, callback)
        return
    try:
        lib = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        return
    deadline = anyio.current_time() + delay
    if lib == "trio":

        async def sleeper() -> None:
            await trio.sleep_until(deadline)
            callback()

        trio.lowlevel.spawn_system_task(sleeper)
    else:
        asyncio.get_running_loop().call_at(deadline, callback)


__all__ = ["TimerClock", "call_later"]
