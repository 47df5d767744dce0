"""The object ``VirtualClock.advance()`` returns: done at once, or a wait to await.

A clock no loop is driving advances synchronously inside ``advance()`` (the seed's plain
call works); the returned object is then already complete. A clock driven by the running
loop can only advance while the caller waits, so the returned object must be awaited; if
it is dropped unawaited, the clock records the mistake and the next deadlock report and
the enclosing guard (``vtime.run``, the pytest plugin) raise it.
"""

from __future__ import annotations

import collections.abc
from collections.abc import Callable, Coroutine, Generator
from types import TracebackType
from typing import Any

_NOT_STARTED = 0
_STARTED = 1
_DONE = 2


class Advance(collections.abc.Coroutine[Any, Any, None]):
    """``await clock.advance(s)``; also usable where a coroutine is expected."""

    __slots__ = ("_coro", "_factory", "_on_lost", "_state")

    def __init__(
        self,
        factory: Callable[[], Coroutine[Any, Any, None]] | None,
        on_lost: Callable[[], None] | None = None,
    ) -> None:
        self._factory = factory
        self._on_lost = on_lost
        self._coro: Coroutine[Any, Any, None] | None = None
        self._state = _DONE if factory is None else _NOT_STARTED

    def _inner(self) -> Coroutine[Any, Any, None]:
        if self._coro is None:
            self._coro = _completed() if self._factory is None else self._factory()
            self._state = _STARTED
        return self._coro

    def send(self, value: None) -> Any:
        return self._inner().send(value)

    def throw(
        self,
        typ: type[BaseException] | BaseException,
        val: object = None,
        tb: TracebackType | None = None,
    ) -> Any:
        exc = typ if isinstance(typ, BaseException) else typ()
        return self._inner().throw(exc)

    def close(self) -> None:
        if self._coro is not None:
            self._coro.close()
        self._state = _DONE

    def __await__(self) -> Generator[Any, None, None]:
        return self._inner().__await__()

    def __del__(self) -> None:
        if self._state == _NOT_STARTED and self._on_lost is not None:
            self._on_lost()


async def _completed() -> None:
    return None
