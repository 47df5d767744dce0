"""The VirtualClock facade shared by the asyncio loop, the trio clock and standalone use.

Time is a float that only ever takes the exact values programs ask for: a jump lands on
a timer's deadline bit for bit (no microsecond grid, no ulp step, no resolution fuzz), and
``await sleep(d)`` started at reading ``t`` wakes with the clock reading exactly ``t + d``
(the same float the program computes itself), on asyncio and trio alike.
"""

from __future__ import annotations

import asyncio
import heapq
import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._loop import VirtualEventLoop
    from ._trio import TrioVirtualClock


class VirtualTimeDeadlock(RuntimeError):
    """Every task is blocked and nothing (timer, real I/O, worker thread, advance) can wake one."""


Watchdog = Callable[[str], None]


class VirtualClock:
    """Virtual monotonic and wall time.

    ``monotonic()`` starts at ``start``; ``time()``/``now()`` is ``wall_start`` plus the
    virtual seconds elapsed. With ``autojump`` the loop jumps to the next deadline whenever
    every task is blocked (and no worker thread or real I/O is pending); without it time
    moves only through :meth:`advance`, and a program that waits on a timer nobody
    advances to raises :class:`VirtualTimeDeadlock`. ``autojump`` may be changed at any time.

    Used standalone (no loop driving it), :meth:`at` timers fire during :meth:`advance`.
    """

    def __init__(
        self,
        start: float = 1000.0,
        wall_start: float = 1_700_000_000.0,
        autojump: bool = True,
    ) -> None:
        start = float(start)
        if not math.isfinite(start) or not math.isfinite(float(wall_start)):
            raise ValueError("start and wall_start must be finite")
        self._start = start
        self._wall_start = float(wall_start)
        self._now = start
        #: in manual mode the loop may jump up to this instant (raised by advance()).
        self._horizon = start
        self.autojump = autojump
        # timers of a standalone (or trio-driven) clock: (when, seq, callback)
        self._pending: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = 0
        self._loop: VirtualEventLoop | None = None
        self._trio: TrioVirtualClock | None = None
        self._watchdogs: list[Watchdog] = []

    def __repr__(self) -> str:
        mode = "autojump" if self.autojump else "manual"
        return f"<{type(self).__name__} monotonic={self._now!r} {mode}>"

    # -- reading -------------------------------------------------------------------------
    def monotonic(self) -> float:
        """Virtual monotonic seconds (starts at ``start``)."""
        return self._now

    def time(self) -> float:
        """Virtual wall-clock seconds since the epoch: ``wall_start`` + elapsed."""
        return self._wall_start + (self._now - self._start)

    def now(self) -> float:
        """Same as :meth:`time`."""
        return self.time()

    @property
    def elapsed(self) -> float:
        """Virtual seconds since ``start``."""
        return self._now - self._start

    # -- backends ------------------------------------------------------------------------
    def trio_clock(self) -> trio_abc_Clock:
        """The ``trio.abc.Clock`` that runs a trio program on this clock (one per clock)."""
        if self._trio is None:
            from ._trio import TrioVirtualClock

            self._trio = TrioVirtualClock(self)
        return self._trio

    def _bind_loop(self, loop: VirtualEventLoop) -> None:
        if self._loop is not None and self._loop is not loop and not self._loop.is_closed():
            raise RuntimeError("this VirtualClock already drives another open event loop")
        self._loop = loop
        pending, self._pending = self._pending, []
        for when, _, cb in sorted(pending):
            loop._vt_push(when, cb, (), None)

    def _unbind_loop(self, loop: VirtualEventLoop) -> None:
        if self._loop is loop:
            self._loop = None

    def _active_loop(self) -> VirtualEventLoop | None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            return loop
        return None

    def _in_own_trio_run(self) -> bool:
        if self._trio is None:
            return False
        try:
            import trio

            return trio.lowlevel.current_clock() is self._trio
        except RuntimeError:
            return False

    def _set_now(self, when: float) -> None:
        if when > self._now:
            self._now = when

    # -- timers --------------------------------------------------------------------------
    def at(self, seconds_from_now: float, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once ``seconds_from_now`` virtual seconds have passed.

        Timers with equal deadlines fire in the order they were set. A negative delay
        fires at the current instant. On asyncio the callback runs as a loop callback; on
        trio and standalone it runs when the clock reaches its deadline (from the run loop
        on trio: it must not block or await).
        """
        delay = float(seconds_from_now)
        if math.isnan(delay):
            raise ValueError("delay must not be NaN")
        when = self._now + max(delay, 0.0)
        loop = self._active_loop()
        if loop is not None:
            loop._vt_push(when, callback, (), None)
            return
        self._seq += 1
        heapq.heappush(self._pending, (when, self._seq, callback))

    def _fire_pending(self, upto: float) -> int:
        """Fire standalone/trio timers due at or before ``upto``, in order; returns count."""
        pending = self._pending
        fired = 0
        while pending and pending[0][0] <= upto:
            when, _, cb = heapq.heappop(pending)
            self._set_now(when)
            fired += 1
            try:
                cb()
            except Exception:  # a timer callback's error must not kill the loop
                _report_callback_error(cb)
        return fired

    async def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, firing every timer due on the way, in order.

        Inside the loop this clock drives, the caller sleeps until ``now + seconds`` while
        the loop visits each earlier deadline in turn, letting every task woken there run
        before going on (in manual mode this is the only way time moves). Standalone, the
        clock's own :meth:`at` timers fire synchronously, each at its own instant.
        """
        seconds = float(seconds)
        if math.isnan(seconds) or seconds < 0:
            raise ValueError(f"cannot advance by {seconds!r} seconds")
        target = self._now + seconds
        loop = self._active_loop()
        if loop is not None and _running_loop() is loop:
            if target > self._horizon:
                self._horizon = target
            await loop._vt_sleep_until(target)
            return
        if self._in_own_trio_run():
            import trio

            if target > self._horizon:
                self._horizon = target
            await trio.sleep_until(target)
            return
        self._fire_pending(target)
        self._set_now(target)
        if target > self._horizon:
            self._horizon = target

    # -- deadlock reporting ---------------------------------------------------------------
    def _deadlock(self, detail: str) -> None:
        """Report a deadlock: wake the innermost watchdog, or raise if there is none."""
        msg = (
            f"virtual-time deadlock at monotonic={self._now!r}: every task is blocked and "
            f"nothing can wake one ({detail}; no real I/O is registered and no worker "
            "thread is running)"
        )
        if self._watchdogs:
            self._watchdogs.pop()(msg)
            return
        raise VirtualTimeDeadlock(msg)

    def _describe_wait(self, next_deadline: float) -> str:
        if next_deadline == math.inf:
            return "no timer is set"
        return (
            f"manual mode: the next timer is at monotonic={next_deadline!r} but advance() "
            f"only reached {self._horizon!r}"
        )

    def _may_jump_to(self, when: float) -> bool:
        """Autojump, or manual mode and ``when`` is within what advance() reached (a timer
        already due — at or before the current instant — is always taken)."""
        return self.autojump or when <= self._horizon or when <= self._now


if TYPE_CHECKING:
    from trio.abc import Clock as trio_abc_Clock
else:
    trio_abc_Clock = Any


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _report_callback_error(cb: object) -> None:
    import logging
    import sys

    logging.getLogger("videoflow_aio.vtime").error(
        "virtual-clock timer callback %r raised", cb, exc_info=sys.exc_info()
    )


def current_clock() -> VirtualClock:
    """The VirtualClock of the running loop (asyncio or trio); RuntimeError if none."""
    loop = _running_loop()
    if loop is not None:
        owner: VirtualClock | None = getattr(loop, "virtual_clock", None)
        if owner is not None:
            return owner
    try:
        import trio

        clock = trio.lowlevel.current_clock()
    except (RuntimeError, ImportError):
        if loop is not None:
            raise RuntimeError("the running asyncio loop is not on virtual time") from None
        raise RuntimeError("no event loop is running") from None
    trio_owner: VirtualClock | None = getattr(clock, "virtual_clock", None)
    if trio_owner is None:
        raise RuntimeError("the running trio loop is not on virtual time")
    return trio_owner
