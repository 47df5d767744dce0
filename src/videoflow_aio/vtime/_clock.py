"""The VirtualClock facade shared by the asyncio loop and the trio clock.

PROVISIONAL implementation (foundation stub): the asyncio side is a selector loop whose
``time()`` is virtual; the trio side delegates to ``trio.testing.MockClock``.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable

import sniffio
import trio
import trio.testing


class VirtualTimeDeadlock(RuntimeError):
    """Every task is blocked and nothing (timer, I/O, thread, advance) can ever wake one."""


class VirtualClock:
    """Virtual monotonic and wall time.

    ``monotonic()`` starts at ``start``; ``time()``/``now()`` is ``wall_start`` plus the
    virtual seconds elapsed. With ``autojump`` the loop jumps to the next timer when every
    task is blocked; without it time moves only through :meth:`advance`.
    """

    def __init__(
        self,
        start: float = 1000.0,
        wall_start: float = 1_700_000_000.0,
        autojump: bool = True,
    ) -> None:
        self._start = float(start)
        self._wall_start = float(wall_start)
        self._now = float(start)
        self.autojump = autojump
        self._trio_clock: trio.testing.MockClock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = 0

    # -- reading -------------------------------------------------------------------------
    def monotonic(self) -> float:
        if self._trio_clock is not None:
            return self._trio_clock.current_time()
        return self._now

    def time(self) -> float:
        return self._wall_start + (self.monotonic() - self._start)

    def now(self) -> float:
        return self.time()

    # -- trio binding --------------------------------------------------------------------
    def trio_clock(self) -> trio.abc.Clock:
        """The ``trio.abc.Clock`` that runs a trio program on this clock."""
        if self._trio_clock is None:
            mock = trio.testing.MockClock(
                rate=0.0, autojump_threshold=0.0 if self.autojump else math.inf
            )
            mock.jump(self._now)
            self._trio_clock = mock
        return self._trio_clock

    # -- timers --------------------------------------------------------------------------
    def at(self, seconds_from_now: float, callback: Callable[[], None]) -> None:
        """Call ``callback`` once ``seconds_from_now`` virtual seconds have passed."""
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_at(self.monotonic() + seconds_from_now, callback)
            return
        import heapq

        self._seq += 1
        heapq.heappush(self._pending, (self.monotonic() + seconds_from_now, self._seq, callback))

    async def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, firing every timer due on the way, in order."""
        if seconds < 0:
            raise ValueError("cannot advance by a negative amount")
        import heapq

        target = self.monotonic() + seconds
        if self._trio_clock is not None:
            # step so every trio timer on the way fires at its own time
            self._trio_clock.jump(seconds)
            await trio.lowlevel.checkpoint()
            return
        if self._loop is not None and not self._loop.is_closed():
            while True:
                scheduled = getattr(self._loop, "_scheduled", [])
                nxt = scheduled[0].when() if scheduled else math.inf
                if nxt > target:
                    break
                self._now = max(self._now, nxt)
                await asyncio.sleep(0)
                await asyncio.sleep(0)
            self._now = target
            await asyncio.sleep(0)
            return
        while self._pending and self._pending[0][0] <= target:
            when, _, cb = heapq.heappop(self._pending)
            self._now = when
            cb()
        self._now = target


def current_clock() -> VirtualClock:
    """The VirtualClock of the running loop (asyncio or trio)."""
    lib = sniffio.current_async_library()
    if lib == "trio":
        clock = trio.lowlevel.current_clock()
        owner = _TRIO_OWNERS.get(id(clock))
        if owner is None:
            raise RuntimeError("the running trio loop is not on virtual time")
        return owner
    loop = asyncio.get_running_loop()
    owner_clock: VirtualClock | None = getattr(loop, "virtual_clock", None)
    if owner_clock is None:
        raise RuntimeError("the running asyncio loop is not on virtual time")
    return owner_clock


_TRIO_OWNERS: dict[int, VirtualClock] = {}


def _register_trio(clock: VirtualClock) -> trio.abc.Clock:
    tc = clock.trio_clock()
    _TRIO_OWNERS[id(tc)] = clock
    return tc
