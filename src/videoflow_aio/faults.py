"""Named fault barriers and crash injection.

A backend awaits ``faults.reach(name)`` at each named point. Unarmed, that returns at once
without a checkpoint. A test arms a barrier to pause the next task(s) that reach it, waits
until they are parked, then releases them — or arms it to crash: the task raises
:class:`SimulatedCrash` there, leaving exactly the state a process that died at that point
would leave. Two tasks racing at barriers is how CAS and lifecycle cases are written.

Barriers live in a :class:`Barriers` registry. The module-level functions use the registry
of the current context (``isolated()`` installs a fresh one), falling back to a process-wide
default.

Faults can also come from a seed: ``barriers().inject(FaultInjector(rate, seed=...))`` makes
every barrier
a task reaches (that no test armed) a fault with probability ``rate`` — a crash, or a pause
of a seeded virtual duration — drawn from a PRNG seeded with ``seed``, so the same seed and
the same schedule inject the same faults at the same points (see :class:`FaultInjector`).
"""

from __future__ import annotations

import contextvars
import random
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

from ._seeded import check_seconds, make_rng
from .contracts.errors import ValidationError


class SimulatedCrash(BaseException):
    """Raised in a task at an armed crash barrier: the task dies as a process would.

    A ``BaseException`` so that ordinary ``except Exception`` handlers in the code under test
    do not swallow it.
    """

    def __init__(self, barrier: str) -> None:
        super().__init__(f"simulated crash at barrier {barrier!r}")
        self.barrier = barrier


class Barrier:
    """One armed barrier: pauses or crashes the next ``times`` tasks that reach it."""

    def __init__(self, name: str, *, crash: bool, times: int) -> None:
        if times < 1:
            raise ValueError("times must be >= 1")
        self.name = name
        self.crash = crash
        self.remaining = times
        self.hits = 0
        self.contexts: list[dict[str, Any]] = []
        self._parked: list[anyio.Event] = []
        self._changed: anyio.Event | None = None

    @property
    def paused(self) -> int:
        """How many tasks are parked here now."""
        return len(self._parked)

    def _notify(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def _hit(self, context: dict[str, Any]) -> None:
        self.remaining -= 1
        self.hits += 1
        self.contexts.append(context)
        if self.crash:
            self._notify()
            raise SimulatedCrash(self.name)
        gate = anyio.Event()
        self._parked.append(gate)
        self._notify()
        try:
            await gate.wait()
        finally:
            if gate in self._parked:
                self._parked.remove(gate)

    async def _wait_until(self, done: Callable[[], bool]) -> None:
        while not done():
            if self._changed is None:
                self._changed = anyio.Event()
            await self._changed.wait()

    async def wait_reached(self, count: int = 1) -> None:
        """Wait until ``count`` tasks have reached this barrier (paused there, or crashed)."""
        await self._wait_until(lambda: self.hits >= count)

    async def wait_paused(self, count: int = 1) -> None:
        """Wait until ``count`` tasks are parked here at the same time."""
        await self._wait_until(lambda: self.paused >= count)

    def release(self) -> int:
        """Let every parked task continue; returns how many were released."""
        parked, self._parked = self._parked, []
        for gate in parked:
            gate.set()
        return len(parked)


@dataclass(frozen=True)
class InjectedFault:
    """One fault a :class:`FaultInjector` injected: where, what, when (loop time), and the
    context the barrier was reached with."""

    barrier: str
    kind: Literal["crash", "pause"]
    at: float
    pause: float = 0.0
    context: dict[str, Any] = field(default_factory=dict)


def _probability(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(f"{name} must be a number in [0, 1], not {value!r}", field=name)
    if not 0.0 <= value <= 1.0:  # also refuses nan
        raise ValidationError(f"{name} must be in [0, 1], not {value!r}", field=name, value=value)
    return float(value)


class FaultInjector:
    """Seeded random faults at barriers: each reach is a fault with probability ``rate``.

    A fault is a crash (:class:`SimulatedCrash`) with probability ``crash``, else a pause of
    ``u * max_pause`` virtual seconds for a drawn ``u`` in [0, 1). ``barriers`` limits it to
    those names (default: every barrier). Every decision is drawn from one PRNG seeded with
    ``seed`` (a non-negative int, or a ``random.Random``), in the order tasks reach
    barriers, so a deterministic schedule gets the same faults every run; a draw of 0.0
    always means "no fault". ``injected`` lists what was injected, in order.
    """

    def __init__(
        self,
        rate: float,
        *,
        seed: int | random.Random,
        crash: float = 0.5,
        max_pause: float = 1.0,
        barriers: Collection[str] | None = None,
    ) -> None:
        self.rate = _probability(rate, "rate")
        self.crash = _probability(crash, "crash")
        self.max_pause = check_seconds(max_pause, "max_pause")
        rng = make_rng(seed)
        if rng is None:
            raise ValidationError("fault injection needs a seed", field="seed", value=seed)
        self._rng = rng
        self.only = None if barriers is None else frozenset(barriers)
        self.injected: list[InjectedFault] = []

    async def _reach(self, name: str, context: dict[str, Any]) -> None:
        if self.only is not None and name not in self.only:
            return
        draw = self._rng.random
        if draw() < 1.0 - self.rate:
            return
        at = anyio.current_time()
        if draw() >= 1.0 - self.crash:
            self.injected.append(InjectedFault(name, "crash", at, context=context))
            raise SimulatedCrash(name)
        pause = draw() * self.max_pause
        self.injected.append(InjectedFault(name, "pause", at, pause, context))
        await anyio.sleep(pause)


class Barriers:
    """A registry of armed barriers. Reaching an unarmed name costs one dict lookup."""

    def __init__(self) -> None:
        self._armed: dict[str, Barrier] = {}
        self._injector: FaultInjector | None = None

    def inject(self, injector: FaultInjector) -> FaultInjector:
        """Inject ``injector``'s seeded faults at the barriers reached from now on; a barrier
        a test armed behaves as armed. Replaces any earlier injector; ``uninject()`` stops
        it. Returns ``injector`` (its ``injected`` lists what it did)."""
        if not isinstance(injector, FaultInjector):
            raise ValidationError(
                f"inject() takes a FaultInjector, not {injector!r}", field="injector"
            )
        global _used
        _used = True
        self._injector = injector
        return injector

    def uninject(self) -> None:
        """Stop injecting faults."""
        self._injector = None

    def arm(self, name: str, *, crash: bool = False, times: int = 1) -> Barrier:
        """Arm ``name``: the next ``times`` tasks to reach it pause (or crash)."""
        global _used
        _used = True
        barrier = Barrier(name, crash=crash, times=times)
        old = self._armed.get(name)
        if old is not None:
            old.release()
        self._armed[name] = barrier
        return barrier

    def disarm(self, name: str | None = None) -> None:
        """Disarm ``name`` (every barrier when None), releasing any parked task."""
        names = list(self._armed) if name is None else [name]
        for n in names:
            barrier = self._armed.pop(n, None)
            if barrier is not None:
                barrier.release()

    def armed(self, name: str) -> bool:
        """Reaching ``name`` may do something: it is armed, or faults are injected there."""
        barrier = self._armed.get(name)
        if barrier is not None and barrier.remaining > 0:
            return True
        injector = self._injector
        return injector is not None and (injector.only is None or name in injector.only)

    async def reach(self, name: str, **context: Any) -> None:
        """Called by backends at the named point. A no-op unless ``name`` is armed (or
        faults are injected)."""
        barrier = self._armed.get(name)
        if barrier is not None and barrier.remaining > 0:
            await barrier._hit(context)
        elif self._injector is not None:
            await self._injector._reach(name, context)


_used = False
"""Set once anything is armed or injected in this process (never reset): until then
:func:`active` answers without reading the context variable."""
_default = Barriers()
_current: contextvars.ContextVar[Barriers] = contextvars.ContextVar("videoflow_aio_barriers")


def barriers() -> Barriers:
    """The registry of the current context (the process-wide default outside ``isolated``)."""
    return _current.get(_default)


@contextmanager
def isolated() -> Iterator[Barriers]:
    """Install a fresh registry for the current context (and tasks started from it)."""
    fresh = Barriers()
    token = _current.set(fresh)
    try:
        yield fresh
    finally:
        fresh.disarm()
        fresh.uninject()
        _current.reset(token)


async def reach(name: str, **context: Any) -> None:
    """Backends call this at each named point; free when the barrier is not armed."""
    registry = _current.get(_default)
    if registry._armed or registry._injector is not None:
        await registry.reach(name, **context)


def active() -> bool:
    """Whether reaching a barrier may do anything in this context (one is armed, or faults
    are injected). Hot paths test this before awaiting :func:`reach`, so an unarmed barrier
    costs a context-variable read and no coroutine."""
    if not _used:  # nothing was ever armed or injected in this process: the common case
        return False
    registry = _current.get(_default)
    return bool(registry._armed) or registry._injector is not None


def arm(name: str, *, crash: bool = False, times: int = 1) -> Barrier:
    """Arm a barrier in the current registry."""
    return barriers().arm(name, crash=crash, times=times)


def disarm(name: str | None = None) -> None:
    """Disarm a barrier (all when None) in the current registry, releasing parked tasks."""
    barriers().disarm(name)


__all__ = [
    "Barrier",
    "Barriers",
    "FaultInjector",
    "InjectedFault",
    "SimulatedCrash",
    "active",
    "arm",
    "barriers",
    "disarm",
    "isolated",
    "reach",
]
