"""A ``trio.abc.Clock`` on virtual time.

trio asks the clock, each time it has nothing to run, how long to sleep before the next
deadline (``deadline_to_sleep_time``). The answer implements the same policy as the
asyncio loop: a worker thread in flight → wait for it, no jump; tasks waiting on real
I/O → skip ``d`` virtual seconds only after ``d`` real seconds without I/O; otherwise jump
at once, exactly to the deadline (autojump, or up to what ``advance()`` allows in manual
mode); nothing that could ever wake a task → deadlock, raised inside the blocked tasks.
Tasks parked in ``trio.testing.wait_all_tasks_blocked`` are woken before any jump, as
with ``MockClock``. trio never asks while a task is runnable, so busy iterations (tasks
spinning on ``sleep(0)``) are counted from the run loop's own ``current_time()`` reads.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, NoReturn

import trio
import trio.testing
from trio._core._run import GLOBAL_RUN_CONTEXT

from ._clock import RealWait, VirtualClock, VirtualTimeDeadlock

_WAIT_SLICE = 0.25
_FOREVER = 86400.0 * 365


try:  # trio's count of to_thread.run_sync calls in flight, read without raising
    from trio._threads import Run as _FromThreadRun
    from trio._threads import _active_threads_local
    from trio._threads import to_thread_run_sync as _to_thread_run_sync
except ImportError:  # pragma: no cover - trio layout changed: use the public (slower) call
    _active_threads_local = None  # type: ignore[assignment]
    _FromThreadRun = None  # type: ignore[assignment,misc]
    _to_thread_run_sync = None  # type: ignore[assignment]


def _threads_in_flight(runner: Any) -> int:
    return _thread_mark(runner)[0]


def _thread_mark(runner: Any) -> tuple[int, object]:
    """trio's count of to_thread.run_sync calls in flight, and the event it replaces each
    time that count drops to 0: a call that returned since changes it."""
    if _active_threads_local is None:  # pragma: no cover
        return trio.testing.active_thread_count(), None
    counter = runner._locals.get(_active_threads_local)
    return (counter.count, counter.event) if counter is not None else (0, None)


def _threads_served(runner: Any) -> int:
    """to_thread.run_sync calls whose thread is blocked in ``from_thread.run`` while the
    calling task runs its async function (found on the tasks' await chains)."""
    if _to_thread_run_sync is None:  # pragma: no cover
        return 0
    code = _to_thread_run_sync.__code__
    served = 0
    for task in list(runner.tasks):
        coro = task.coro
        while coro is not None:
            frame = getattr(coro, "cr_frame", None)
            if frame is not None and frame.f_code is code:
                if isinstance(frame.f_locals.get("msg_from_thread"), _FromThreadRun):
                    served += 1
                break
            coro = getattr(coro, "cr_await", None)
    return served


def _threads_working(runner: Any) -> bool:
    in_flight = _threads_in_flight(runner)
    return in_flight > 0 and in_flight > _threads_served(runner)


def _io_waiters(runner: Any) -> int:
    """Tasks waiting on real I/O, not counting trio's own wake-up socket reader (trio's
    run_sync_soon queue task, which is parked on it whenever the loop is idle)."""
    io_manager = runner.io_manager
    registered = getattr(io_manager, "_registered", None)
    if registered is not None and len(registered) <= 1:  # epoll: only the wake-up socket
        return 0
    stats = io_manager.statistics()
    total = 0
    for name in ("tasks_waiting_read", "tasks_waiting_write", "tasks_waiting"):
        total += getattr(stats, name, 0) or 0
    return max(total - 1, 0)


def _blocked_leaves(root: Any) -> Iterator[Any]:
    """Blocked tasks under ``root`` (itself included) that have no child task."""
    stack = [root]
    while stack:
        task = stack.pop()
        kids = [child for nursery in task.child_nurseries for child in nursery.child_tasks]
        if kids:
            stack.extend(kids)
        elif task._abort_func is not None:
            yield task


def _raiser(exc: BaseException) -> Any:
    def raise_it() -> NoReturn:
        raise exc

    return raise_it


class TrioVirtualClock(trio.abc.Clock):
    """The trio face of a :class:`VirtualClock` (see :meth:`VirtualClock.trio_clock`)."""

    def __init__(self, owner: VirtualClock) -> None:
        self.virtual_clock = owner
        self._runner: Any = None
        self._real_wait = RealWait()  # real time stuck at one instant (real I/O pending)
        # busy-loop detection: clock reads, then run-loop iterations, since trio last idled
        self._reads = 0
        self._iters = 0
        self._spin_from: object = None
        self._spin_threads: tuple[int, object] = (0, None)

    def __repr__(self) -> str:
        return f"<TrioVirtualClock of {self.virtual_clock!r}>"

    def start_clock(self) -> None:
        runner = self._runner = GLOBAL_RUN_CONTEXT.runner
        self._real_wait = RealWait()
        self._reads = self._iters = 0
        rng = self.virtual_clock._rng
        if rng is not None:  # seeded: this run's batches follow the clock's PRNG
            from . import _trio_schedule

            _trio_schedule.begin(runner, rng)
            runner.instruments.add_instrument(_trio_schedule.SeededRun(runner))

    def current_time(self) -> float:
        self._reads += 1
        if self._reads >= self.virtual_clock._spin_limit:
            return self._busy_read()
        return self.virtual_clock._now

    def _busy_read(self) -> float:
        """Once the clock has been read ``spin_threshold`` times since trio last idled,
        count the run loop's own reads (made between task steps, once per iteration);
        after ``spin_threshold`` of those, the tasks are spinning: jump."""
        owner = self.virtual_clock
        if hasattr(GLOBAL_RUN_CONTEXT, "task"):  # a task reading the time, not the loop
            return owner._now
        self._iters += 1
        if self._iters == 1:
            self._spin_begins()
        if self._iters < max(owner._spin_limit, 2):  # a round apart from _spin_begins()
            return owner._now
        self._reads = self._iters = 0
        return self._spin_jump()

    def _spin_begins(self) -> None:
        """Note what the spinning waits on (the head) and the worker threads' state."""
        self._spin_from = self._spin_head()
        self._spin_threads = _thread_mark(self._runner)

    def _spin_head(self) -> object:
        """What is due next — a deadlined cancel scope, or an ``at()`` callback — as an
        object whose identity says whether it is still the same one (None: nothing)."""
        owner = self.virtual_clock
        deadlines = getattr(self._runner, "deadlines", None)
        heap = getattr(deadlines, "_heap", None)
        if deadlines is None or heap is None:  # pragma: no cover - trio layout changed
            return None
        when = deadlines.next_deadline()  # drops stale entries from the top
        pending = owner._pending
        if pending and pending[0][0] < when:
            return pending[0]
        return heap[0][2] if heap else None

    def _spin_jump(self) -> float:
        owner = self.virtual_clock
        now = owner._now
        runner = self._runner
        deadlines = getattr(runner, "deadlines", None)
        if deadlines is None:  # pragma: no cover - trio layout changed
            return now
        pending = owner._pending
        when = deadlines.next_deadline()
        if pending and pending[0][0] < when:
            when = pending[0][0]
        if self._spin_head() is not self._spin_from:
            return now  # a deadline set during the spinning, not one it has been spinning on
        if _thread_mark(runner) != self._spin_threads:
            # a to_thread.run_sync call returned meanwhile: its task ran on, but the tasks
            # waiting for what it did may not have run yet; they get a whole threshold
            return now
        if (
            when == math.inf
            or when <= now
            or not owner._may_jump_to(when)
            or _threads_working(runner)
            or (_io_waiters(runner) and self._real_wait.waited(now, when) < when - now)
        ):
            return now
        owner._set_now(owner._jump_target(when) if owner._rng is not None else when)
        if pending and pending[0][0] <= owner._now:
            owner._fire_pending(owner._now, self._interrupt)
        return owner._now

    def jump(self, seconds: float) -> None:
        """Move time forward by ``seconds`` without waiting (like ``MockClock.jump``)."""
        if not seconds >= 0 or seconds == math.inf:
            raise ValueError(f"cannot jump by {seconds!r} seconds (need finite, >= 0)")
        owner = self.virtual_clock
        owner._set_now(owner._now + seconds)

    def _deliver(self, root: Any, message: str) -> bool:
        """Raise VirtualTimeDeadlock at the await of every blocked leaf task under ``root``
        (default: the run's main task), the way trio delivers KeyboardInterrupt: each
        wait is aborted (its cleanup runs, shielded or not) and the task resumes with the
        exception. True when at least one task got it."""
        runner = self._runner
        if root is None:
            root = runner.main_task
        if root is None:
            return False
        delivered = False
        for task in list(_blocked_leaves(root)):
            if task._abort_func is not None:  # an earlier abort may have woken it
                task._attempt_abort(_raiser(VirtualTimeDeadlock(message)))
                delivered = True
        return delivered

    def _interrupt(self, exc: BaseException) -> None:
        """A KeyboardInterrupt/SystemExit from an ``at()`` callback: delivered to the
        program as trio delivers a Ctrl-C (at the main task's next checkpoint), so the run
        ends with that exception and every ``finally`` block runs."""
        runner = self._runner
        if isinstance(exc, KeyboardInterrupt):
            runner.deliver_ki()
            return
        main = runner.main_task
        if main is None or main._abort_func is None:
            raise exc
        main._attempt_abort(_raiser(exc))

    def deadline_to_sleep_time(self, deadline: float) -> float:
        self._reads = self._iters = 0  # trio is idle: nothing is spinning
        owner = self.virtual_clock
        now = owner._now
        if deadline <= now:
            return 0.0
        pending = owner._pending
        if pending and pending[0][0] <= now:
            owner._fire_pending(now, self._interrupt)
            return 0.0
        runner = self._runner
        if runner.waiting_for_idle:  # wait_all_tasks_blocked() callers go first
            return _FOREVER
        when = min(deadline, pending[0][0]) if pending else deadline
        jumpable = when != math.inf and owner._may_jump_to(when)
        if _threads_working(runner):
            return _WAIT_SLICE  # the thread's completion wakes the loop
        if _io_waiters(runner):
            if not jumpable:
                return _WAIT_SLICE
            remaining = (when - now) - self._real_wait.waited(now, when)
            if remaining > 0:
                return min(remaining, _WAIT_SLICE)
        # before jumping or declaring a deadlock, take in any I/O already delivered (trio's
        # own wake-up socket included: thread completions and run_sync_soon use it)
        io_manager = runner.io_manager
        events = io_manager.get_events(0)
        if events:
            io_manager.process_events(events)
            return 0.0
        if jumpable:
            owner._set_now(owner._jump_target(when) if owner._rng is not None else when)
            if pending and pending[0][0] <= owner._now:
                owner._fire_pending(owner._now, self._interrupt)
            return 0.0
        owner._deadlock(owner._describe_wait(when), self._deliver)
        return 0.0
