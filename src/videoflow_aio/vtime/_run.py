"""Run an async function on virtual time under asyncio or trio."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar, TypeVarTuple

import anyio

from ._clock import VirtualClock, VirtualTimeDeadlock
from ._guard import guarded
from ._loop import new_event_loop

T = TypeVar("T")
Args = TypeVarTuple("Args")

Backend = Literal["asyncio", "trio"]
"""The async backends virtual time runs on: ``"asyncio"`` or ``"trio"``."""


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
    func: Callable[[*Args], Awaitable[T]],
    *args: *Args,
    backend: Backend = "asyncio",
    clock: VirtualClock | None = None,
) -> T:
    """Run ``func(*args)`` on virtual time under ``backend`` and return its result.

    ``clock=None`` uses a fresh autojumping [`VirtualClock`][videoflow_aio.vtime.VirtualClock]
    (it starts at 1000.0). A program that can never make progress raises
    [`VirtualTimeDeadlock`][videoflow_aio.vtime.VirtualTimeDeadlock] instead of hanging. The
    arguments are typed against ``func``'s parameters, so a type checker catches a wrong one;
    an unknown ``backend`` is a ``ValueError``.
    """
    clock = clock if clock is not None else VirtualClock()
    options = backend_options(backend, clock)

    async def main() -> T:
        return await guarded(func, *args)

    try:
        return anyio.run(main, backend=backend, backend_options=options)
    except BaseException as exc:
        cause = exc.__cause__
        if type(exc).__name__ == "TrioInternalError" and isinstance(cause, VirtualTimeDeadlock):
            raise cause from None
        raise
