"""Virtual time for asyncio and trio.

Timers fire in virtual time: when every task is blocked, the clock jumps to the next
deadline (autojump) or waits for ``await clock.advance(s)`` (manual mode).
"""

from __future__ import annotations

from ._clock import VirtualClock, VirtualTimeDeadlock, current_clock
from ._loop import new_event_loop
from ._run import run

__all__ = ["VirtualClock", "VirtualTimeDeadlock", "current_clock", "new_event_loop", "run"]
