"""Receivers waiting on one subscription, each on its own wake-up, with a deadline.

:class:`Waiters` is a condition variable for the messaging model's ``receive``: ``wait``
parks the caller until it is notified or its deadline passes; ``notify(n)`` wakes the ``n``
longest-waiting callers, ``notify_all`` every one; ``earliest`` is the soonest deadline among
them (a timer due before it must wake them, or it would fire late). A caller woken that
leaves without looking (cancelled) passes its wake-up on, so no notification is lost.

On asyncio a waiter is a bare future with a ``loop.call_at`` timer — a fraction of the cost
of an ``anyio.Event`` under an ``anyio.CancelScope`` — and cancellation still reaches it
(anyio cancels a task by cancelling the future it awaits). On trio it is a ``trio.Event``
under ``trio.move_on_at``. Both read time from the running loop.
"""

from __future__ import annotations

import math
from asyncio import Future
from asyncio import _get_running_loop as _running_loop
from collections import deque
from typing import Any

import trio

_WOKEN = True
_EXPIRED = False


def _expire(fut: Future[bool]) -> None:
    if not fut.done():
        fut.set_result(_EXPIRED)


class _TrioWaiter:
    __slots__ = ("deadline", "event", "woken")

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.event = trio.Event()
        self.woken = False


class Waiters(deque[Any]):
    """The callers parked in ``wait`` on one subscription (see the module docstring), longest
    waiting first: a ``deque`` of ``Future[bool]`` (asyncio) or ``_TrioWaiter``, so that
    ``if sub.waiters:`` — asked on every publish and settle — is a C-level length test."""

    __slots__ = ("_deadlines",)

    def __init__(self) -> None:
        super().__init__()
        self._deadlines: dict[int, float] = {}  # id(entry) -> deadline, for earliest

    @property
    def earliest(self) -> float:
        """The soonest deadline of a parked caller (``inf`` when none)."""
        d = self._deadlines
        return min(d.values()) if d else math.inf

    def notify(self, n: int = 1) -> int:
        """Wake the ``n`` longest-waiting callers; how many were woken."""
        q = self
        woken = 0
        while q and woken < n:
            entry = q.popleft()
            self._deadlines.pop(id(entry), None)
            if type(entry) is _TrioWaiter:
                if not entry.woken:
                    entry.woken = True
                    entry.event.set()
                    woken += 1
            elif not entry.done():
                entry.set_result(_WOKEN)
                woken += 1
        return woken

    def notify_all(self) -> int:
        """Wake every parked caller; how many were woken."""
        return self.notify(len(self))

    async def wait(self, deadline: float) -> bool:
        """Park until notified (True) or ``deadline`` on the loop clock (False). Cancellation
        propagates; a caller cancelled after it was notified passes the wake-up on."""
        loop = _running_loop()
        if loop is None:
            return await self._wait_trio(deadline)
        fut: Future[bool] = loop.create_future()
        self.append(fut)
        self._deadlines[id(fut)] = deadline
        timer = loop.call_at(deadline, _expire, fut) if deadline != math.inf else None
        try:
            return await fut
        except BaseException:
            if fut.done() and not fut.cancelled() and fut.result() is _WOKEN:
                self.notify(1)
            raise
        finally:
            if timer is not None:
                timer.cancel()
            self._forget(fut)

    async def _wait_trio(self, deadline: float) -> bool:
        entry = _TrioWaiter(deadline)
        self.append(entry)
        self._deadlines[id(entry)] = deadline
        try:
            with trio.move_on_at(deadline):
                await entry.event.wait()
            return entry.woken
        except BaseException:
            if entry.woken:
                self.notify(1)
            raise
        finally:
            self._forget(entry)

    def _forget(self, entry: object) -> None:
        """Take a caller that stopped waiting off the queue (woken callers are off it)."""
        if self._deadlines.pop(id(entry), None) is not None:
            self.remove(entry)  # the two are kept in step: it is there


__all__ = ["Waiters"]
