"""Relative deadlines and the running loop's own clock and sleep, without per-call dispatch.

The contracts take absolute deadlines on the running loop's clock. :func:`deadline_in` turns
a relative timeout into one. :func:`loop_clock` hands back the native ``time`` and ``sleep``
of the running loop (asyncio's ``loop.time``/``asyncio.sleep``, trio's
``trio.current_time``/``trio.sleep``): the same readings and the same cancellation as
anyio's, without anyio's backend lookup on every call — a stage worker calls them for every
message.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable

import anyio
import sniffio

from .._finite import as_float
from ..contracts.errors import ValidationError

_set_result_unless_cancelled = asyncio.futures._set_result_unless_cancelled  # type: ignore[attr-defined]
"""What ``asyncio.sleep``'s timer calls (the virtual-time loop runs it without a context)."""

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


def deadline_in(seconds: float) -> float:
    """The absolute deadline ``seconds`` from now on the running loop's clock.

    Raises :class:`ValidationError` for a negative or NaN ``seconds`` (``inf`` is allowed:
    no deadline).
    """
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds >= 0:
        raise ValidationError("seconds must be a number >= 0", field="seconds", value=seconds)
    return anyio.current_time() + as_float(seconds)


def check_seconds(value: float, field: str, *, positive: bool = False) -> float:
    """``value`` as a float if it is a finite number >= 0 (> 0 with ``positive``)."""
    ok = (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and math.isfinite(as_float(value))
        and (value > 0 if positive else value >= 0)
    )
    if not ok:
        bound = "> 0" if positive else ">= 0"
        raise ValidationError(f"{field} must be a finite number {bound}", field=field, value=value)
    return float(value)


def _asyncio_sleep(loop: asyncio.AbstractEventLoop) -> Sleep:
    """``asyncio.sleep`` bound to ``loop``: the same future, timer and cancellation, without
    looking up the running loop on each call (a ``getpid`` system call per lookup)."""
    create_future = loop.create_future
    call_later = loop.call_later
    asyncio_sleep = asyncio.sleep

    async def sleep(delay: float) -> None:
        if not delay > 0:  # zero, negative or NaN: as asyncio.sleep does (a bare yield, or
            await asyncio_sleep(delay)  # the loop's error for NaN)
            return
        fut = create_future()
        handle = call_later(delay, _set_result_unless_cancelled, fut, None)
        try:
            await fut
        finally:
            handle.cancel()

    return sleep


def loop_clock() -> tuple[Clock, Sleep]:
    """The running loop's ``(time, sleep)``: what ``anyio.current_time``/``anyio.sleep``
    return and do, called directly (on asyncio, ``asyncio.sleep`` bound to the loop)."""
    library = sniffio.current_async_library()
    if library == "asyncio":
        loop = asyncio.get_running_loop()
        return loop.time, _asyncio_sleep(loop)
    if library == "trio":
        import trio

        return trio.current_time, trio.sleep
    return anyio.current_time, anyio.sleep  # pragma: no cover - anyio knows no third loop


__all__ = ["Clock", "Sleep", "check_seconds", "deadline_in", "loop_clock"]
