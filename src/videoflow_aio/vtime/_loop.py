"""An asyncio event loop on virtual time (PROVISIONAL foundation stub)."""

from __future__ import annotations

import asyncio
import math
import selectors
from typing import Any

from ._clock import VirtualClock, VirtualTimeDeadlock


def _anyio_threads_busy() -> bool:
    try:
        import anyio.to_thread

        return anyio.to_thread.current_default_thread_limiter().borrowed_tokens > 0
    except Exception:
        return False


class _VirtualSelector(selectors.DefaultSelector):
    def __init__(self) -> None:
        super().__init__()
        self.loop: VirtualEventLoop | None = None

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        events = super().select(0)
        if events or timeout == 0 or self.loop is None:
            return events
        loop = self.loop
        clock = loop.virtual_clock
        scheduled = loop._scheduled  # type: ignore[attr-defined]
        busy_threads = loop._vt_threads > 0 or _anyio_threads_busy()
        if busy_threads:
            return super().select(timeout if timeout is None else min(timeout, 0.01))
        if scheduled and clock.autojump:
            when = scheduled[0].when()
            if when >= clock._now:
                # stub: asyncio fires handles with when < now + resolution; step one ulp past
                clock._now = math.nextafter(when, math.inf)
            return events
        if len(self.get_map()) > 1:  # real I/O registered besides the self-pipe
            return super().select(timeout)
        if not scheduled or not clock.autojump:
            raise VirtualTimeDeadlock(
                "every task is blocked and no timer, I/O or thread can wake one"
            )
        return events


class VirtualEventLoop(asyncio.SelectorEventLoop):
    """A selector event loop whose clock is a :class:`VirtualClock`."""

    def __init__(self, clock: VirtualClock | None = None) -> None:
        selector = _VirtualSelector()
        super().__init__(selector)
        selector.loop = self
        self.virtual_clock = clock if clock is not None else VirtualClock()
        self.virtual_clock._loop = self
        self._vt_threads = 0
        self._clock_resolution = 0.0

    def time(self) -> float:
        return self.virtual_clock._now

    def run_in_executor(self, executor: Any, func: Any, *args: Any) -> asyncio.Future[Any]:
        self._vt_threads += 1
        fut = super().run_in_executor(executor, func, *args)

        def _done(_: Any) -> None:
            self._vt_threads -= 1

        fut.add_done_callback(_done)
        return fut


def new_event_loop(clock: VirtualClock | None = None) -> asyncio.AbstractEventLoop:
    """A new asyncio event loop on virtual time; usable as ``asyncio.Runner(loop_factory=...)``."""
    return VirtualEventLoop(clock)
