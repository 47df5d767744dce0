"""Run an async function on virtual time under asyncio or trio."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

import anyio

from ._clock import VirtualClock, VirtualTimeDeadlock
from ._guard import guarded
from ._loop import new_event_loop

T = TypeVar("T")


def backend_options(backend: str, clock: VirtualClock) -> dict[str, Any]:
    """anyio backend options that put ``backend`` on ``clock``."""
    if not isinstance(clock, VirtualClock):
        raise TypeError(f"clock must be a VirtualClock, not {clock!r}")
    if backend == "trio":
        return {"clock": clock.trio_clock()}
    if backend == "asyncio":
        return {"loop_factory": functools.partial(new_event_loop, clock)}
    raise ValueError(f"unknown backend {backend!r}; expected 'asyncio' or 'trio'")


def run(
    func: Callable[..., Awaitable[T]],
    *args: Any,
    backend: Literal["asyncio", "trio"] | str = "asyncio",
    clock: VirtualClock | None = None,
) -> T:
    """Run ``func(*args)`` on virtual time and return its result.

    ``clock=None`` uses a fresh autojumping :class:`VirtualClock`. A program that can
    never make progress raises :class:`VirtualTimeDeadlock`.
    """
    clock = clock if clock is not None else VirtualClock()
    options = backend_options(backend, clock)
    try:
        return anyio.run(guarded, func, *args, backend=backend, backend_options=options)
    except BaseException as exc:
        cause = exc.__cause__
        if type(exc).__name__ == "TrioInternalError" and isinstance(cause, VirtualTimeDeadlock):
            raise cause from None
        raise
