"""Run an async function on virtual time under asyncio or trio."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

import anyio

from ..contracts.errors import ValidationError
from ._clock import VirtualClock, VirtualTimeDeadlock
from ._guard import guarded
from ._loop import new_event_loop
from ._seeded import Seed

T = TypeVar("T")


def backend_options(backend: str, clock: VirtualClock) -> dict[str, Any]:
    """anyio backend options that put ``backend`` on ``clock``."""
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
    seed: Seed | None = None,
    jitter: float = 0.0,
) -> T:
    """Run ``func(*args)`` on virtual time and return its result.

    ``clock=None`` uses a fresh autojumping :class:`VirtualClock` built with ``seed`` and
    ``jitter``: the same seed gives the same schedule for the same program (see
    :attr:`VirtualClock.seed`). With a ``clock`` of your own, give it the seed instead. A
    program that can never make progress raises :class:`VirtualTimeDeadlock`.
    """
    if clock is None:
        clock = VirtualClock(seed=seed, jitter=jitter)
    elif seed is not None or jitter:
        field = "seed" if seed is not None else "jitter"
        raise ValidationError(
            f"run() got both a clock and {field}=: build the clock with it "
            f"(VirtualClock({field}=...)) or pass no clock",
            field=field,
            value=seed if seed is not None else jitter,
        )
    options = backend_options(backend, clock)
    try:
        return anyio.run(guarded, func, *args, backend=backend, backend_options=options)
    except BaseException as exc:
        cause = exc.__cause__
        if type(exc).__name__ == "TrioInternalError" and isinstance(cause, VirtualTimeDeadlock):
            raise cause from None
        raise
