"""Run an async function on virtual time under asyncio or trio."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

import anyio

from ._clock import VirtualClock, _register_trio
from ._loop import new_event_loop

T = TypeVar("T")


def backend_options(backend: str, clock: VirtualClock) -> dict[str, Any]:
    """anyio backend options that put ``backend`` on ``clock``."""
    if backend == "trio":
        return {"clock": _register_trio(clock)}
    if backend == "asyncio":
        return {"loop_factory": lambda: new_event_loop(clock)}
    raise ValueError(f"unknown backend {backend!r}; expected 'asyncio' or 'trio'")


def run(
    func: Callable[..., Awaitable[T]],
    *args: Any,
    backend: Literal["asyncio", "trio"] | str = "asyncio",
    clock: VirtualClock | None = None,
) -> T:
    """Run ``func(*args)`` on virtual time and return its result."""
    clock = clock if clock is not None else VirtualClock()
    return anyio.run(func, *args, backend=backend, backend_options=backend_options(backend, clock))
