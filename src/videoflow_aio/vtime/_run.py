"""Run an async function on virtual time under asyncio or trio."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar, TypeVarTuple

import anyio

from .._seeded import Seed
from ..contracts.errors import ValidationError
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
    seed: Seed | None = None,
    jitter: float = 0.0,
) -> T:
    """Run ``func(*args)`` on virtual time under ``backend`` and return its result.

    ``clock=None`` uses a fresh autojumping [`VirtualClock`][videoflow_aio.vtime.VirtualClock]
    (it starts at 1000.0), built with ``seed`` and ``jitter``: the same seed gives the same
    schedule for the same program (see ``VirtualClock.seed``); with a ``clock`` of your own,
    give it the seed instead. A program that can never make
    progress raises [`VirtualTimeDeadlock`][videoflow_aio.vtime.VirtualTimeDeadlock] instead
    of hanging. The arguments are typed against ``func``'s parameters, so a type checker
    catches a wrong one; an unknown ``backend`` is a ``ValueError``.
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

    async def main() -> T:
        return await guarded(func, *args)

    try:
        return anyio.run(main, backend=backend, backend_options=options)
    except BaseException as exc:
        cause = exc.__cause__
        if type(exc).__name__ == "TrioInternalError" and isinstance(cause, VirtualTimeDeadlock):
            raise cause from None
        raise
