"""Run an async function so that a virtual-time deadlock surfaces as an exception in it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import sniffio

from ._clock import VirtualTimeDeadlock, Watch, current_clock

T = TypeVar("T")


def _current_task() -> object:
    if sniffio.current_async_library() == "trio":
        import trio

        return trio.lowlevel.current_task()
    import asyncio

    return asyncio.current_task()


def _only_deadlocks(exc: BaseException) -> VirtualTimeDeadlock | None:
    """The first VirtualTimeDeadlock of a group that holds nothing else but cancellations."""
    if not isinstance(exc, BaseExceptionGroup):
        return None
    match, rest = exc.split(VirtualTimeDeadlock)
    if match is None:
        return None
    if rest is not None and rest.split(anyio.get_cancelled_exc_class())[1] is not None:
        return None
    leaves: list[BaseException] = []
    stack: list[BaseException] = [match]
    while stack:
        node = stack.pop()
        if isinstance(node, BaseExceptionGroup):
            stack.extend(reversed(node.exceptions))
        else:
            leaves.append(node)
    first = leaves[0]
    assert isinstance(first, VirtualTimeDeadlock)
    if len(leaves) > 1:
        first.add_note(f"({len(leaves) - 1} more blocked task(s) got the same report)")
    return first


async def guarded(func: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
    """``await func(*args, **kwargs)``, turning a virtual-time deadlock into an exception.

    On a deadlock the loop raises :class:`VirtualTimeDeadlock` inside the blocked tasks of
    the guarded call, at the awaits that can never complete (``finally`` blocks run; a
    ``pytest.raises(VirtualTimeDeadlock)`` around such an await catches it). If it
    escapes as an exception group of nothing but deadlocks (blocked tasks of a task
    group), the guard raises the first of them. If no task can take it, the call is
    cancelled and the guard raises it. Also raises ``RuntimeError`` when a
    ``clock.advance(s)`` made inside was never awaited. Off virtual time it just awaits.
    """
    try:
        clock = current_clock()
    except RuntimeError:  # not on virtual time: nothing to guard
        return await func(*args, **kwargs)
    reasons: list[str] = []
    with anyio.CancelScope() as scope:

        def cancel(reason: str) -> None:
            reasons.append(reason)
            scope.cancel()

        watch = Watch(_current_task(), cancel)
        clock._watchdogs.append(watch)
        try:
            result = await func(*args, **kwargs)
        except BaseException as exc:
            lost = clock._take_lost_advance()
            if lost is not None and lost not in str(exc):
                exc.add_note(lost)
            single = None if reasons else _only_deadlocks(exc)
            if single is not None:
                raise single from None
            raise
        finally:
            if watch in clock._watchdogs:
                clock._watchdogs.remove(watch)
    if reasons:
        raise VirtualTimeDeadlock(reasons[0])
    lost = clock._take_lost_advance()
    if lost is not None:
        raise RuntimeError(lost)
    return result
