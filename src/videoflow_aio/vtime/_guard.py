"""Run an async function so that a virtual-time deadlock surfaces as an exception in it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

from ._clock import VirtualTimeDeadlock, current_clock

T = TypeVar("T")


async def guarded(func: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """``await func(*args, **kwargs)``; on a deadlock, cancel it and raise VirtualTimeDeadlock.

    The loop reports a deadlock to the innermost guard: the guarded call is cancelled
    (its ``finally`` blocks run) and :class:`VirtualTimeDeadlock` is raised here, as a plain
    exception, on asyncio and trio alike. Without a guard the loop raises it itself (on
    trio that aborts the run as ``TrioInternalError``). Off virtual time it just awaits.
    """
    try:
        clock = current_clock()
    except RuntimeError:  # not on virtual time: nothing to guard
        return await func(*args, **kwargs)
    reasons: list[str] = []
    with anyio.CancelScope() as scope:

        def on_deadlock(reason: str) -> None:
            reasons.append(reason)
            scope.cancel()

        clock._watchdogs.append(on_deadlock)
        try:
            result = await func(*args, **kwargs)
        finally:
            if on_deadlock in clock._watchdogs:
                clock._watchdogs.remove(on_deadlock)
    if reasons:
        raise VirtualTimeDeadlock(reasons[0])
    return result
