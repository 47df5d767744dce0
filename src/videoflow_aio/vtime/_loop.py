# mypy: disable-error-code="attr-defined, has-type, override, misc, assignment, unused-ignore"
# (this module extends asyncio.SelectorEventLoop through its private attributes)
"""An asyncio event loop on virtual time.

The loop keeps its timers in a ``(when, seq, handle)`` heap (equal deadlines fire FIFO)
and replaces asyncio's run-once step with a tight loop that never calls ``select()``
while callbacks are ready unless real I/O is registered. When nothing is ready it decides
(see ``_vt_idle``): wait for worker threads, wait for real I/O, jump to the next deadline,
or report a deadlock. On a seeded clock each round is permuted from the clock's PRNG
(``_vt_permute``) and every jump goes through ``_vt_idle`` (which adds the jitter).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import heapq
import math
import operator
import selectors
import weakref
from asyncio import events, format_helpers
from asyncio.futures import _set_result_unless_cancelled as _futures_set_result_unless_cancelled
from collections.abc import Callable
from typing import Any

from .._seeded import shuffle
from ._clock import RealWait, VirtualClock, VirtualTimeDeadlock

try:  # AnyIO keeps its worker threads per event loop, in a "run var" dict keyed by the loop
    from anyio._backends._asyncio import _threadpool_idle_workers, _threadpool_workers
    from anyio.lowlevel import _run_vars
except ImportError:  # pragma: no cover - anyio layout changed: only executor jobs count
    _run_vars = None
    _threadpool_workers = _threadpool_idle_workers = None

#: the task AnyIO's ``from_thread.run`` starts on the loop for a worker thread that then
#: blocks until it finishes: while it runs, that thread is waiting, not working
_ANYIO_FROM_THREAD = "AsyncIOBackend.run_async_from_thread.<locals>.task_wrapper"

#: real seconds the loop blocks at a time while waiting for a worker thread or real I/O
#: that cannot be jumped over (it re-evaluates after each slice).
_WAIT_SLICE = 0.25

_read_now = operator.attrgetter("_now")  # a VirtualClock's reading


class _Handle(events.Handle):
    """A Handle that is cheap to create (no debug lookups unless the loop is in debug)."""

    __slots__ = ()

    def __init__(
        self,
        callback: Callable[..., object],
        args: tuple[Any, ...],
        loop: VirtualEventLoop,
        context: contextvars.Context | None,
    ) -> None:
        self._context = context if context is not None else contextvars.copy_context()
        self._loop = loop
        self._callback = callback
        self._args = args
        self._cancelled = False
        self._repr = None
        self._source_traceback = None


class _Timer(asyncio.TimerHandle):
    """A TimerHandle that is cheap to create and counts its own cancellation."""

    __slots__ = ()

    def __init__(
        self,
        when: float,
        callback: Callable[..., object],
        args: tuple[Any, ...],
        loop: VirtualEventLoop,
        context: contextvars.Context | None,
    ) -> None:
        if loop._debug:
            super().__init__(when, callback, args, loop, context)
        else:
            self._context = context if context is not None else contextvars.copy_context()
            self._loop = loop
            self._callback = callback
            self._args = args
            self._cancelled = False
            self._repr = None
            self._source_traceback = None
            self._when = when
        self._scheduled = True

    def cancel(self) -> None:
        if not self._cancelled:
            if self._scheduled:
                self._loop._vt_cancelled += 1
            self._cancelled = True
            self._callback = None
            self._args = None


def _batch_order(handle: events.Handle) -> int:
    """A handle's place in a seeded batch before the permutation: -1 for a callback that
    is not a task step (the stable sort keeps those in the order scheduled), else the
    number of the task it steps or wakes (callbacks woken by iterating a set of tasks —
    cancelling a task group, say — are thus ordered by task, not by memory address)."""
    order: int = getattr(getattr(handle._callback, "__self__", None), "_vt_order", -1)
    return order


def _set_result_unless_cancelled(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        try:  # noqa: SIM105 - a try costs nothing here, a suppress() a call per timer
            fut.set_result(None)
        except asyncio.InvalidStateError:  # cancelled between the check and the set: a
            pass  # signal handler (Ctrl-C cancelling the main task) ran in between


def _report_callback_error(handle: events.Handle, exc: BaseException) -> None:
    """What ``Handle._run`` does when a callback raises: hand it to the exception handler."""
    cb = format_helpers._format_callback_source(handle._callback, handle._args)
    context: dict[str, Any] = {
        "message": f"Exception in callback {cb}",
        "exception": exc,
        "handle": handle,
    }
    if handle._source_traceback:
        context["source_traceback"] = handle._source_traceback
    handle._loop.call_exception_handler(context)


class VirtualEventLoop(asyncio.SelectorEventLoop):
    """A selector event loop whose clock is a :class:`VirtualClock`.

    Guarantees: ``time()`` is the clock's reading and only changes by jumping exactly to
    a timer's deadline; timers with equal deadlines run in the order they were set; the
    clock never jumps while a ``run_in_executor`` job or an AnyIO worker thread is in
    flight; while real I/O is registered a jump of ``d`` virtual seconds happens only
    after ``d`` real seconds without I/O (so real round trips never time out spuriously).
    """

    def __init__(self, clock: VirtualClock | None = None) -> None:
        if clock is not None and not isinstance(clock, VirtualClock):
            self._closed = True  # nothing to close: BaseEventLoop.__del__ looks at this
            raise TypeError(f"clock must be a VirtualClock, not {clock!r}")
        self._vt_heap: list[tuple[float, int, asyncio.TimerHandle]] = []
        self._vt_seq = 0
        self._vt_spin_from: asyncio.TimerHandle | None = None  # the head when spinning began
        self._vt_spin_threads: tuple[int, int, int] = (0, 0, 0)  # worker threads then
        self._vt_cancelled = 0
        self._vt_threads = 0
        self._vt_serving = 0  # from_thread calls being served (their threads wait on us)
        self._vt_serving_tasks: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()
        self._vt_real_wait = RealWait()  # real time stuck at one instant (real I/O pending)
        self._vt_children: weakref.WeakSet[Any] = weakref.WeakSet()
        self._vt_nchildren = 0
        # task -> the task that created it, and the task run_until_complete runs: where a
        # deadlock report is delivered (see _vt_deliver)
        self._vt_parents: weakref.WeakKeyDictionary[asyncio.Task[Any], Any] = (
            weakref.WeakKeyDictionary()
        )
        self._vt_main: asyncio.Task[Any] | None = None
        self._vt_ntasks = 0  # tasks created (numbered only when seeded)
        super().__init__(selectors.DefaultSelector())
        self._clock_resolution = 0.0
        self._vt_fds: dict[Any, Any] = self._selector._fd_to_key  # registered fds
        self._vt_base_fds = len(self._vt_fds)  # the loop's own wake-up pipe
        # hand AnyIO its per-loop run-var dict now, so a jump can look at its workers cheaply
        self._vt_anyio_vars: dict[Any, Any] | None = (
            _run_vars.setdefault(self, {}) if _run_vars is not None else None
        )
        self.virtual_clock = clock if clock is not None else VirtualClock()
        self.virtual_clock._bind_loop(self)
        # what is asked several times per message, as C-level callables (no Python frame per
        # call): the clock's reading, and a future (whose constructor asks get_debug())
        self.time = functools.partial(_read_now, self.virtual_clock)
        self.create_future = functools.partial(asyncio.Future, loop=self)

    def set_debug(self, enabled: bool) -> None:
        super().set_debug(enabled)
        self.get_debug = (True).__bool__ if self._debug else (False).__bool__

    # -- time and timers -----------------------------------------------------------------
    def time(self) -> float:  # replaced per instance by the same reading, one C call deep
        return self.virtual_clock._now

    def _vt_push(
        self,
        when: float,
        callback: Callable[..., object],
        args: tuple[Any, ...],
        context: contextvars.Context | None,
    ) -> asyncio.TimerHandle:
        if when != when:  # NaN
            raise ValueError("timer deadline must not be NaN")
        timer = _Timer(when, callback, args, self, context)
        self._vt_seq += 1
        heapq.heappush(self._vt_heap, (when, self._vt_seq, timer))
        return timer

    def call_at(
        self,
        when: float,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        if self._closed:
            raise RuntimeError("Event loop is closed")
        if self._debug:
            self._check_thread()
            self._check_callback(callback, "call_at")
        if type(when) is not float:  # a non-number would break the heap's comparisons later
            when = when + 0.0  # TypeError here, at the call, for None, a str, an object
        return self._vt_push(when, callback, args, context)

    def call_later(
        self,
        delay: float,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.TimerHandle:
        if delay is None:
            raise TypeError("delay must not be None")
        if self._closed:
            raise RuntimeError("Event loop is closed")
        if self._debug:
            self._check_thread()
            self._check_callback(callback, "call_later")
        when = self.virtual_clock._now + delay
        if when != when:  # NaN
            raise ValueError("timer delay must not be NaN")
        timer = _Timer(when, callback, args, self, context)
        self._vt_seq += 1
        heapq.heappush(self._vt_heap, (when, self._vt_seq, timer))
        return timer

    def call_soon(
        self,
        callback: Callable[..., object],
        *args: Any,
        context: contextvars.Context | None = None,
    ) -> asyncio.Handle:
        if self._closed:
            raise RuntimeError("Event loop is closed")
        if self._debug:
            return super().call_soon(callback, *args, context=context)
        handle = _Handle(callback, args, self, context)
        self._ready.append(handle)
        return handle

    async def _vt_sleep_until(self, when: float) -> None:
        fut: asyncio.Future[None] = self.create_future()
        handle = self._vt_push(when, _set_result_unless_cancelled, (fut,), None)
        try:
            await fut
        finally:
            handle.cancel()

    # -- worker threads ------------------------------------------------------------------
    def run_in_executor(
        self, executor: concurrent.futures.Executor | None, func: Callable[..., Any], *args: Any
    ) -> asyncio.Future[Any]:
        self._check_closed()
        if executor is None:
            executor = self._default_executor
            self._check_default_executor()
            if executor is None:
                executor = concurrent.futures.ThreadPoolExecutor(thread_name_prefix="asyncio")
                self._default_executor = executor
        cfut = executor.submit(func, *args)
        self._vt_threads += 1
        fut = asyncio.wrap_future(cfut, loop=self)
        # counted until the job itself ends (not when an awaiting task gives up on it);
        # added after wrap_future's callback, so the result is on the loop before the count
        # drops and there is no idle instant in between for the clock to jump in
        cfut.add_done_callback(self._vt_job_done)
        return fut

    def _vt_job_done(self, _: object) -> None:
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            self.call_soon_threadsafe(self._vt_job_finished)

    def _vt_job_finished(self) -> None:
        self._vt_threads -= 1

    async def shutdown_default_executor(self, *args: Any, **kwargs: Any) -> None:
        # asyncio joins the executor on a plain thread that reports back thread-safely
        self._vt_threads += 1
        try:
            await super().shutdown_default_executor(*args, **kwargs)
        finally:
            self._vt_threads -= 1

    def _vt_thread_state(self) -> tuple[int, int, int]:
        """Worker threads started, anyio's pool and its idle part: a thread that finished
        changes it (its result may still be on its way to the task that waits for it)."""
        run_vars = self._vt_anyio_vars
        workers = run_vars.get(_threadpool_workers) if run_vars else None
        idle = run_vars.get(_threadpool_idle_workers) if run_vars else None
        return (self._vt_threads, len(workers) if workers else 0, len(idle) if idle else 0)

    def _vt_threads_busy(self) -> bool:
        """A worker thread is doing work (not merely waiting for the loop)."""
        working = self._vt_threads - self._vt_serving
        run_vars = self._vt_anyio_vars
        if run_vars:
            workers = run_vars.get(_threadpool_workers)
            if workers:
                idle = run_vars.get(_threadpool_idle_workers)
                working += len(workers) - (len(idle) if idle else 0)
        return working > 0

    def create_task(self, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        task = super().create_task(coro, **kwargs)
        if self.virtual_clock._rng is not None:  # seeded: the task's place in a batch
            task._vt_order = self._vt_ntasks
            self._vt_ntasks += 1
        parent = asyncio.current_task(self)
        if parent is not None:
            self._vt_parents[task] = weakref.ref(parent)
        code = getattr(coro, "cr_code", None)
        if code is not None and code.co_qualname == _ANYIO_FROM_THREAD:
            self._vt_serving += 1
            self._vt_serving_tasks.add(task)
            task.add_done_callback(self._vt_served)
        return task

    def _vt_served(self, _: object) -> None:
        self._vt_serving -= 1

    # -- child processes -----------------------------------------------------------------
    async def _make_subprocess_transport(self, *args: Any, **kwargs: Any) -> Any:
        transport = await super()._make_subprocess_transport(*args, **kwargs)
        self._vt_children.add(transport)
        self._vt_nchildren += 1
        return transport

    def _vt_real_io(self) -> bool:
        """Real I/O is pending: a registered fd (besides the loop's own wake-up pipe), or
        a child process still running (its exit arrives from a watcher thread)."""
        if len(self._vt_fds) > self._vt_base_fds:
            return True
        if not self._vt_nchildren:
            return False
        return any(t.get_returncode() is None for t in list(self._vt_children))

    # -- deadlock delivery ---------------------------------------------------------------
    def run_until_complete(self, future: Any) -> Any:
        made_here = not asyncio.isfuture(future)
        if made_here:  # as asyncio does for a task it makes here
            future = asyncio.ensure_future(future, loop=self)
            future._log_destroy_pending = False
        previous = self._vt_main
        self._vt_main = future if isinstance(future, asyncio.Task) else None
        try:
            return super().run_until_complete(future)
        except BaseException:
            if made_here and future.done() and not future.cancelled():
                future.exception()  # consumed, as asyncio does: the caller cannot see it
            raise
        finally:
            self._vt_main = previous

    def _vt_deliver(self, root: Any, message: str) -> bool:
        """Raise VirtualTimeDeadlock in every blocked leaf task under ``root`` (default:
        the task ``run_until_complete`` runs): a task none of whose own tasks is still
        pending, waiting on a future — the future gets the exception, so the task sees it
        at that await. True when at least one task got it.

        A worker thread blocked in ``from_thread.run`` waits for a task the loop runs for it
        (no parent task): that task's leaves get the report first, so it travels back
        through the thread to the task awaiting the thread."""
        if root is None:
            root = self._vt_main
        if root is None or root.done():
            return False
        children: dict[Any, list[asyncio.Task[Any]]] = {}
        parents = self._vt_parents
        for task in asyncio.all_tasks(self):
            ref = parents.get(task)
            parent = ref() if ref is not None else None
            if parent is not None:
                children.setdefault(parent, []).append(task)
        served = [task for task in self._vt_serving_tasks if not task.done()]
        if served and self._vt_raise_in_leaves(served, children, message):
            return True
        return self._vt_raise_in_leaves([root], children, message)

    @staticmethod
    def _vt_raise_in_leaves(
        roots: list[Any], children: dict[Any, list[asyncio.Task[Any]]], message: str
    ) -> bool:
        delivered = False
        stack = list(roots)
        while stack:
            task = stack.pop()
            kids = children.get(task)
            if kids:
                stack.extend(kids)
                continue
            waiter = getattr(task, "_fut_waiter", None)
            if waiter is None or waiter.done() or isinstance(waiter, asyncio.Task):
                continue  # awaiting another task: that one gets it
            waiter.set_exception(VirtualTimeDeadlock(message))
            delivered = True
        return delivered

    def _vt_spin_head(self) -> asyncio.TimerHandle | None:
        """The timer due next (cancelled ones dropped from the heap's top), or None."""
        heap = self._vt_heap
        while heap and heap[0][2]._cancelled:
            heapq.heappop(heap)
            self._vt_cancelled -= 1
        return heap[0][2] if heap else None

    def _vt_spin_jump(self, now: float) -> float:
        """Tasks kept the loop busy for ``spin_threshold`` rounds at ``now``: let time
        move to the next deadline, under the same rules as an idle jump — and only if that
        deadline was already the next one ``spin_threshold`` rounds ago (see
        ``_vt_spin_from``): a deadline the spinning code itself keeps setting and dropping
        (``with move_on_after(T): await sleep(0)`` in a bounded loop) is never jumped to,
        since on a real clock that loop would end long before any of them."""
        heap = self._vt_heap
        head = self._vt_spin_head()
        if head is None:
            return now
        threads = self._vt_thread_state()
        if head is not self._vt_spin_from or threads != self._vt_spin_threads:
            # a new head must stay the head a whole threshold; and a worker thread that
            # ended meanwhile gets a whole threshold for its result to reach its task
            self._vt_spin_from = head
            self._vt_spin_threads = threads
            return now
        when = heap[0][0]
        if (
            when == math.inf
            or when <= now
            or not self.virtual_clock._may_jump_to(when)
            or self._vt_threads_busy()
            or (self._vt_real_io() and self._vt_real_wait.waited(now, when) < when - now)
        ):
            return now
        clock = self.virtual_clock
        clock._set_now(clock._jump_target(when) if clock._rng is not None else when)
        return clock._now

    # -- the run loop --------------------------------------------------------------------
    def _run_once(self) -> None:
        """Run rounds until ``stop()``: each round runs the callbacks ready at its start."""
        ready = self._ready
        heap = self._vt_heap
        clock = self.virtual_clock
        popleft = ready.popleft
        append = ready.append
        heappop = heapq.heappop
        fds = self._vt_fds
        base_fds = self._vt_base_fds
        anyio_vars = self._vt_anyio_vars
        workers_key = _threadpool_workers
        sleep_done = _futures_set_result_unless_cancelled
        inf = math.inf
        rng = clock._rng  # seeded: each round is permuted (see _vt_permute), no inlined jumps
        seeded = rng is not None
        spin_at = math.nan  # the instant of the current run of busy rounds, and its length
        spins = 0
        while True:
            if ready:
                if len(fds) > base_fds:
                    self._process_events(self._selector.select(0))
                now = clock._now
                if now != spin_at:
                    spin_at = now
                    spins = 0
                    self._vt_spin_from = None  # taken at the first busy round below
                elif spins == 0:
                    spins = 1
                    self._vt_spin_from = self._vt_spin_head()
                    self._vt_spin_threads = self._vt_thread_state()
                else:
                    spins += 1
                    since = self._vt_spin_from
                    if since is None or since._when <= now:
                        # the head taken was due at this instant (it fired: the deadline
                        # the spinner waits for is the one set after it), or there was none
                        self._vt_spin_from = self._vt_spin_head()
                    if spins >= clock._spin_limit:
                        spins = 0
                        now = spin_at = self._vt_spin_jump(now)
                while heap and heap[0][0] <= now:
                    timer = heappop(heap)[2]
                    if timer._cancelled:
                        self._vt_cancelled -= 1
                    else:
                        timer._scheduled = False
                        append(timer)
                timer = None
                if seeded and len(ready) > 1 and len(fds) <= base_fds:
                    self._vt_permute(rng)
                for _ in range(len(ready)):
                    handle = popleft()
                    if handle._cancelled:
                        continue
                    try:
                        handle._context.run(handle._callback, *handle._args)
                    except (SystemExit, KeyboardInterrupt):
                        raise
                    except BaseException as exc:
                        _report_callback_error(handle, exc)
                handle = None  # break reference cycles when a callback raised
                if self._stopping:
                    return
            elif self._stopping:
                return
            elif (
                heap
                and clock.autojump
                and len(fds) <= base_fds
                and not self._vt_threads
                and not self._vt_nchildren
                and not (anyio_vars and anyio_vars.get(workers_key))
                and not heap[0][2]._cancelled
                and heap[0][0] != inf  # a deadline of inf is never: see _vt_idle
                and not seeded  # seeded: _vt_idle jumps (jitter) and the round permutes
                and not self._signal_handlers  # _vt_idle reads signals raised meanwhile
            ):
                # the common case, inlined: nothing external pending → jump to the deadline
                # and run the timers due there (ready is empty, so running them now is
                # the same order as queueing them for the next round)
                when = heap[0][0]
                if when > clock._now:
                    clock._now = when
                while heap and heap[0][0] <= when:
                    timer = heappop(heap)[2]
                    if timer._cancelled:
                        self._vt_cancelled -= 1
                        continue
                    timer._scheduled = False
                    callback = timer._callback
                    args = timer._args
                    if callback is sleep_done:  # asyncio.sleep's wake-up: no context needed
                        fut = args[0]
                        if not fut.done():
                            try:  # noqa: SIM105 - the hot path: no suppress() call
                                fut.set_result(args[1])
                            except asyncio.InvalidStateError:
                                # a Python signal handler ran between the check and the
                                # set (Ctrl-C: asyncio.run's handler cancels the main
                                # task, and with it this future): cancelled stays cancelled
                                pass
                        continue
                    try:
                        timer._context.run(callback, *args)
                    except (SystemExit, KeyboardInterrupt):
                        raise
                    except BaseException as exc:
                        _report_callback_error(timer, exc)
                timer = callback = args = fut = None
                if self._stopping:
                    return
            else:
                spins = 0
                self._vt_idle()

    def _vt_idle(self) -> None:
        """Nothing is ready: wait for threads or I/O, jump, or report a deadlock."""
        heap = self._vt_heap
        while heap and heap[0][2]._cancelled:
            heapq.heappop(heap)
            self._vt_cancelled -= 1
        if self._vt_cancelled > 64 and 2 * self._vt_cancelled > len(heap):
            heap[:] = [entry for entry in heap if not entry[2]._cancelled]  # in place:
            heapq.heapify(heap)  # _run_once holds a reference to this very list
            self._vt_cancelled = 0
        if self._vt_threads_busy():
            # never jump while a worker thread runs: its completion wakes the self-pipe
            self._process_events(self._selector.select(_WAIT_SLICE))
            return
        if self._signal_handlers:
            # a signal already raised (by an at() callback, say) is handled at this instant,
            # before time moves on: its wake-up byte is in the self-pipe, which only a
            # select reads (signals still in flight do not hold the clock: docs/vtime.md)
            self._process_events(self._selector.select(0))
            if self._ready:
                return
        clock = self.virtual_clock
        when = heap[0][0] if heap else math.inf
        jumpable = when != math.inf and clock._may_jump_to(when)
        if self._vt_real_io() and not self._vt_wait_real_io(when, jumpable):
            return
        if jumpable:
            if clock._rng is not None and when > clock._now:
                when = clock._jump_target(when)
            clock._set_now(when)
            ready = self._ready
            while heap and heap[0][0] <= when:
                timer = heapq.heappop(heap)[2]
                if timer._cancelled:
                    self._vt_cancelled -= 1
                else:
                    timer._scheduled = False
                    ready.append(timer)
            return
        clock._deadlock(clock._describe_wait(when), self._vt_deliver)

    def _vt_permute(self, rng: Any) -> None:
        """Seeded: put this round's handles in a canonical order (handles that are not task
        steps in the order scheduled, then task steps by task creation, so no memory address
        decides) and permute them from the clock's PRNG. Not while real I/O is registered:
        asyncio's transports rely on FIFO order, and real I/O is not reproducible anyway."""
        batch = list(self._ready)
        batch.sort(key=_batch_order)
        shuffle(batch, rng.random)
        self._ready.clear()
        self._ready.extend(batch)

    def _vt_wait_real_io(self, when: float, jumpable: bool) -> bool:
        """Wait for real I/O; True when the jump to ``when`` may go ahead.

        A jump of ``d`` virtual seconds goes ahead only after ``d`` real seconds, counted
        from when the loop first went idle at the current instant with that deadline next
        (:class:`RealWait`).
        """
        selector = self._selector
        if not jumpable:
            self._process_events(selector.select(_WAIT_SLICE))
            return False
        now = self.virtual_clock._now
        remaining = (when - now) - self._vt_real_wait.waited(now, when)
        if remaining <= 0:
            return True
        events_ = selector.select(min(remaining, _WAIT_SLICE))
        if events_:
            self._process_events(events_)
            return False
        return remaining <= _WAIT_SLICE

    def close(self) -> None:
        if self.is_running():
            raise RuntimeError("Cannot close a running event loop")
        if not self.is_closed():
            for _, _, handle in self._vt_heap:
                handle._scheduled = False
            self._vt_heap.clear()
            self.virtual_clock._unbind_loop(self)
        super().close()


def new_event_loop(clock: VirtualClock | None = None) -> asyncio.AbstractEventLoop:
    """A new asyncio event loop on virtual time; usable as ``asyncio.Runner(loop_factory=...)``.

    With ``clock=None`` the loop gets a fresh autojumping :class:`VirtualClock`.
    """
    return VirtualEventLoop(clock)
