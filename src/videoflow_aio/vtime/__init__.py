"""Virtual time for asyncio and trio.

Timers fire in virtual time: when every task is blocked, the clock jumps exactly to the
next deadline (autojump) or waits for ``await clock.advance(s)`` (manual mode). It never
jumps while a worker thread is running, and never outruns real time while real I/O is
pending. See ``docs/vtime.md``.
"""

from __future__ import annotations

from ._clock import VirtualClock, VirtualTimeDeadlock, current_clock
from ._fake import FakeClock
from ._guard import guarded
from ._loop import VirtualEventLoop, new_event_loop
from ._run import Backend, backend_options, run

__all__ = [
    "Backend",
    "FakeClock",
    "VirtualClock",
    "VirtualEventLoop",
    "VirtualTimeDeadlock",
    "backend_options",
    "current_clock",
    "guarded",
    "new_event_loop",
    "run",
]
