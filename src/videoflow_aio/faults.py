"""Named fault barriers and crash injection.

A backend awaits ``faults.reach(name)`` at each named point. Unarmed, that returns at once
without a checkpoint. A test arms a barrier to pause the next task(s) that reach it, waits
until they are parked, then releases them — or arms it to crash: the task raises
:class:`SimulatedCrash` there, leaving exactly the state a process that died at that point
would leave. Two tasks racing at barriers is how CAS and lifecycle cases are written.

Barriers live in a :class:`Barriers` registry. The module-level functions use the registry
of the current context (``isolated()`` installs a fresh one), falling back to a process-wide
default.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio


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


class Barriers:
    """A registry of armed barriers. Reaching an unarmed name costs one dict lookup."""

    def __init__(self) -> None:
        self._armed: dict[str, Barrier] = {}

    def arm(self, name: str, *, crash: bool = False, times: int = 1) -> Barrier:
        """Arm ``name``: the next ``times`` tasks to reach it pause (or crash)."""
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
        barrier = self._armed.get(name)
        return barrier is not None and barrier.remaining > 0

    async def reach(self, name: str, **context: Any) -> None:
        """Called by backends at the named point. A no-op unless ``name`` is armed."""
        barrier = self._armed.get(name)
        if barrier is None or barrier.remaining <= 0:
            return
        await barrier._hit(context)


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
        _current.reset(token)


async def reach(name: str, **context: Any) -> None:
    """Backends call this at each named point; free when the barrier is not armed."""
    registry = _current.get(_default)
    if registry._armed:
        await registry.reach(name, **context)


def arm(name: str, *, crash: bool = False, times: int = 1) -> Barrier:
    """Arm a barrier in the current registry."""
    return barriers().arm(name, crash=crash, times=times)


def disarm(name: str | None = None) -> None:
    """Disarm a barrier (all when None) in the current registry, releasing parked tasks."""
    barriers().disarm(name)


__all__ = [
    "Barrier",
    "Barriers",
    "SimulatedCrash",
    "arm",
    "barriers",
    "disarm",
    "isolated",
    "reach",
]
