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
import numbers
import random
import sys
import time
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._seeded import Seed, check_jitter, make_rng, overshoot, shuffle
from ._advance import Advance

if TYPE_CHECKING:
    from ._loop import VirtualEventLoop
    from ._trio import TrioVirtualClock


class VirtualTimeDeadlock(RuntimeError):
    """Every task is blocked and nothing (timer, real I/O, worker thread, advance) can wake one."""


#: consecutive busy loop iterations at one instant after which the loop treats the
#: tasks as spinning and lets time move to the next deadline (see ``spin_threshold``)
DEFAULT_SPIN_THRESHOLD = 10_000
_NEVER = sys.maxsize

#: deadlock reports delivered into tasks at one instant before the loop stops delivering
#: (a program that swallows the error and blocks again would otherwise never end)
_MAX_DELIVERIES = 1000

#: deliver(root_task_or_None, message) -> True when VirtualTimeDeadlock was raised into
#: at least one blocked task (the loop's / trio clock's part of a deadlock report)
Deliver = Callable[[object | None, str], bool]


class RealWait:
    """Real seconds a loop has been stuck (idle, or spinning) at one virtual instant with the
    same deadline next: with real I/O pending, a jump of ``d`` virtual seconds to that
    deadline waits until this reaches ``d``. A new deadline at the head (a timeout set
    while real I/O went on at this instant) starts its own count: it gets its ``d`` real
    seconds, whatever the loop waited for before it was set."""

    __slots__ = ("_at", "_deadline", "_since")

    def __init__(self) -> None:
        self._at = math.nan
        self._deadline = math.nan
        self._since = 0.0

    def waited(self, now: float, deadline: float) -> float:
        """Real seconds since the first call at virtual instant ``now`` with ``deadline``
        the next one."""
        real_now = time.perf_counter()  # wall-clock: real I/O is measured in real time
        if self._at != now or self._deadline != deadline:
            self._at, self._deadline, self._since = now, deadline, real_now
        return real_now - self._since


@dataclass(eq=False)
class Watch:
    """A guard's registration: the task it runs in and how to cancel the guarded call."""

    task: object
    cancel: Callable[[str], None]


class VirtualClock:
    """Virtual monotonic and wall time.

    ``monotonic()`` starts at ``start``; ``time()``/``now()`` is ``wall_start`` plus the
    virtual seconds elapsed. With ``autojump`` the loop jumps to the next deadline whenever
    every task is blocked (and no worker thread or real I/O is pending); without it time
    moves only through :meth:`advance`, and a program that waits on a timer nobody
    advances to raises :class:`VirtualTimeDeadlock`. ``autojump`` may be changed at any time.
    ``spin_threshold`` bounds how long tasks spinning on ``sleep(0)`` can hold time still
    (see :attr:`spin_threshold`). The clock never reads ``inf`` or NaN: a deadline of
    ``inf`` is never reached.

    Used standalone (no loop driving it), :meth:`advance` is a plain call that fires the
    :meth:`at` timers due on the way.

    ``seed`` (a non-negative int) makes the schedule a function of the seed: everything that
    becomes ready at one virtual instant (callbacks, timers with equal deadlines, tasks
    woken together) runs in an order drawn from a PRNG seeded with it, the same on every run
    of the same program (see :attr:`seed`). ``jitter`` (seconds, needs a seed) makes each
    jump overshoot its deadline by a seeded amount in ``[0, jitter)``: timers fire late,
    never early, and timers that fall within the overshoot fire together, in seeded order.
    """

    def __init__(
        self,
        start: float = 1000.0,
        wall_start: float = 1_700_000_000.0,
        autojump: bool = True,
        spin_threshold: int | None = DEFAULT_SPIN_THRESHOLD,
        seed: Seed | None = None,
        jitter: float = 0.0,
    ) -> None:
        rng = make_rng(seed)
        self._jitter = check_jitter(jitter, seed)
        self._seed = seed
        #: the PRNG every seeded decision draws from (None: FIFO, as without a seed)
        self._rng: random.Random | None = rng
        start = _seconds(start, "start")
        wall_start = _seconds(wall_start, "wall_start")
        if not math.isfinite(start) or not math.isfinite(wall_start):
            raise ValueError("start and wall_start must be finite")
        if not isinstance(autojump, bool):  # "false" would be truthy: autojump on
            raise TypeError(f"autojump must be True or False, not {autojump!r}")
        self._spin_limit = _NEVER
        self.spin_threshold = spin_threshold
        self._start = start
        self._wall_start = wall_start
        self._now = start
        #: in manual mode the loop may jump up to this instant (raised by advance()).
        self._horizon = start
        self.autojump = autojump
        # timers of a standalone (or trio-driven) clock: (when, seq, callback)
        self._pending: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = 0
        self._loop: VirtualEventLoop | None = None
        self._trio: TrioVirtualClock | None = None
        self._watchdogs: list[Watch] = []
        self._deadlock_at = math.nan
        self._deliveries = 0
        #: a driven ``advance()`` dropped without ``await`` (raised by the next guard)
        self._lost_advance: str | None = None

    def __repr__(self) -> str:
        mode = "autojump" if self.autojump else "manual"
        seeded = "" if self._seed is None else f" seed={self._seed!r}"
        jitter = f" jitter={self._jitter!r}" if self._jitter else ""
        return f"<{type(self).__name__} monotonic={self._now!r} {mode}{seeded}{jitter}>"

    @property
    def seed(self) -> Seed | None:
        """The seed the schedule is drawn from (None: unseeded).

        Unseeded, asyncio runs same-instant work FIFO and trio in its own random order.
        Seeded, both draw that order from one PRNG, seeded once when the clock is made: a
        fresh clock with the same seed gives the same schedule for the same program (a
        clock reused for a second run continues the PRNG where the first run left it).
        """
        return self._seed

    @property
    def jitter(self) -> float:
        """Upper bound, in seconds, of the seeded overshoot of each jump (0.0: none)."""
        return self._jitter

    def _jump_target(self, when: float) -> float:
        """Where a jump to deadline ``when`` lands: ``when``, or later by the seeded jitter
        (never past what ``advance()`` reached in manual mode)."""
        if not self._jitter:
            return when
        assert self._rng is not None
        limit = math.inf if self.autojump else max(self._horizon, when)
        return overshoot(when, self._jitter, self._rng.random, limit)

    @property
    def spin_threshold(self) -> int | None:
        """Busy loop iterations at one instant after which time may move (None: never).

        A task that polls with ``await sleep(0)`` never lets the loop go idle, so time
        would never move. After this many consecutive iterations at one virtual instant in
        which tasks were always ready, the loop treats them as spinning: it jumps to the
        next deadline as if they had taken that long (never while a worker thread runs,
        never ahead of real time while real I/O is pending, nor past what ``advance()``
        allows in manual mode).
        """
        return None if self._spin_limit == _NEVER else self._spin_limit

    @spin_threshold.setter
    def spin_threshold(self, value: int | None) -> None:
        if value is None:
            self._spin_limit = _NEVER
            return
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"spin_threshold must be a positive int or None, not {value!r}")
        self._spin_limit = value

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
        """The ``trio.abc.Clock`` that runs a trio program on this clock (one per clock).

        Seeded, it raises ``RuntimeError`` on a trio whose scheduler it cannot take over.
        """
        if self._rng is not None:
            from ._trio_schedule import check_trio

            check_trio()
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
        if when > self._now and when != math.inf:
            self._now = when

    # -- timers --------------------------------------------------------------------------
    def at(self, seconds_from_now: float, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once ``seconds_from_now`` virtual seconds have passed.

        Timers with equal deadlines fire in the order they were set (seeded: in seeded
        order). A negative delay
        fires at the current instant. On asyncio the callback runs as a loop callback; on
        trio and standalone it runs when the clock reaches its deadline (from the run loop
        on trio: it must not block or await).
        """
        delay = _seconds(seconds_from_now, "delay")
        if math.isnan(delay):
            raise ValueError("delay must not be NaN")
        when = self._now + max(delay, 0.0)
        loop = self._active_loop()
        if loop is not None:
            loop._vt_push(when, callback, (), None)
            return
        self._seq += 1
        heapq.heappush(self._pending, (when, self._seq, callback))

    def _fire_pending(
        self, upto: float, on_interrupt: Callable[[BaseException], None] | None = None
    ) -> int:
        """Fire standalone/trio timers due at or before ``upto``, in order; returns count.

        An ``Exception`` from a callback is logged; a ``KeyboardInterrupt`` /
        ``SystemExit`` goes to ``on_interrupt`` (trio: delivered to the program) or, with
        none, propagates to the caller.
        """
        pending = self._pending
        rng = self._rng
        fired = 0
        while pending and pending[0][0] <= upto:
            # the timers due at one instant (every one the clock has already passed is due
            # now), in the order set, or in seeded order
            instant = max(pending[0][0], self._now)
            group = []
            while pending and pending[0][0] <= instant:
                group.append(heapq.heappop(pending))
            if rng is not None and len(group) > 1:
                shuffle(group, rng.random)
            self._set_now(instant)
            for i, (_, _, cb) in enumerate(group):
                fired += 1
                try:
                    cb()
                except Exception:  # a timer callback's error must not kill the loop
                    _report_callback_error(cb)
                except BaseException as exc:
                    if on_interrupt is None:
                        for entry in group[i + 1 :]:  # not fired: still pending
                            heapq.heappush(pending, entry)
                        raise
                    on_interrupt(exc)
        return fired

    def advance(self, seconds: float) -> Awaitable[None]:
        """Move time forward by ``seconds``, firing every timer due on the way, in order.

        Inside the loop this clock drives, ``await clock.advance(s)``: the caller sleeps
        until ``now + seconds`` while the loop visits each earlier deadline in turn,
        letting every task woken there run before going on (in manual mode this is the
        only way time moves). Dropping it unawaited there is an error, raised by the
        enclosing guard (``vtime.run``, the pytest plugin) and named in any deadlock.

        On a clock no loop is driving (standalone), the call itself advances, firing the
        clock's own :meth:`at` timers synchronously, each at its own instant — as the
        seed's ``FakeClock.advance(s)``; the returned awaitable is already complete.
        On a clock whose event loop is open but not running, it raises ``RuntimeError``.
        """
        seconds = _seconds(seconds, "seconds")
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"cannot advance by {seconds!r} seconds (need finite, >= 0)")
        if not math.isfinite(self._now + seconds):
            raise ValueError(f"advancing by {seconds!r} s would leave the float range")
        loop = self._active_loop()
        if loop is not None:
            if _running_loop() is not loop:
                raise RuntimeError(
                    "this VirtualClock drives an open event loop that is not running here: "
                    "await clock.advance(s) inside that loop, or close the loop first"
                )
            return self._driven_advance(seconds, loop._vt_sleep_until)
        if self._in_own_trio_run():
            import trio

            return self._driven_advance(seconds, trio.sleep_until)
        target = self._now + seconds
        self._fire_pending(target)
        self._set_now(target)
        if target > self._horizon:
            self._horizon = target
        return Advance(None)

    def _driven_advance(
        self, seconds: float, sleep_until: Callable[[float], Awaitable[None]]
    ) -> Advance:
        frame = sys._getframe(2)
        site = f"{frame.f_code.co_filename}:{frame.f_lineno}"

        async def run() -> None:
            target = self._now + seconds
            if target > self._horizon:
                self._horizon = target
            await sleep_until(target)

        def lost() -> None:
            message = (
                f"clock.advance({seconds!r}) at {site} was never awaited, so time did not "
                "move: inside the loop that drives the clock, write await clock.advance(s)"
            )
            if self._lost_advance is None:
                self._lost_advance = message
            warnings.warn(message, RuntimeWarning, stacklevel=2)

        return Advance(run, lost)

    def _take_lost_advance(self) -> str | None:
        message, self._lost_advance = self._lost_advance, None
        return message

    # -- deadlock reporting ---------------------------------------------------------------
    def _deadlock(self, detail: str, deliver: Deliver | None = None) -> None:
        """Report a deadlock: raise VirtualTimeDeadlock inside the blocked program.

        In order: ``deliver`` raises it into the blocked leaf tasks under the innermost
        guard's task (then the next guard's; with no guard, the run's main task), where
        the program sees it at the very await that can never complete; if no task can
        take it (or it keeps blocking again at this instant), the innermost guard is
        cancelled and raises it; with no guard it is raised here (asyncio raises it from
        ``run_until_complete``, trio aborts the run).
        """
        msg = (
            f"virtual-time deadlock at monotonic={self._now!r}: every task is blocked and "
            f"nothing can wake one ({detail}; no real I/O is registered and no worker "
            "thread is running)"
        )
        if self._lost_advance is not None:
            msg += f". Note: {self._lost_advance}"
        if self._now != self._deadlock_at:
            self._deadlock_at = self._now
            self._deliveries = 0
        self._deliveries += 1
        if deliver is not None and self._deliveries <= _MAX_DELIVERIES:
            roots = [watch.task for watch in reversed(self._watchdogs)] or [None]
            for root in roots:
                if deliver(root, msg):
                    return
        if self._watchdogs:
            self._watchdogs.pop().cancel(msg)
            return
        raise VirtualTimeDeadlock(msg)

    def _describe_wait(self, next_deadline: float) -> str:
        if next_deadline == math.inf:
            return "no timer is set, or only deadlines of inf, which never come"
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


def _seconds(value: object, name: str) -> float:
    """``value`` as a float of seconds: an int or float (not a bool or a str, which
    ``float()`` would take); TypeError for another type, ValueError past the float range."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number of seconds, not {value!r}")
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"{name} {value!r} is out of the float range") from None


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
