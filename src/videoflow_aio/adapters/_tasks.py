"""Background tasks an adapter's connection owns: none outlives ``aclose``, none fails unseen.

A connection (NATS client, etcd store) spawns every task it does not await at once through its
:class:`TaskOwner`:

* ``keep=True`` — the task carries a write the caller was already told is done (the NATS
  publish index record of acknowledged publications, an etcd Txn whose outcome is being
  resolved): :meth:`TaskOwner.aclose` *awaits* it, bounded by the owner's timeout, and only
  cancels what is still running past that bound;
* ``keep=False`` (default) — an optimisation or a read (a lease-lapse nudge, a read RPC a
  cancelled caller left): ``aclose`` *cancels* it.

An error in a task is logged (logger ``videoflow_aio.adapters``), counted (``failures``) and
kept (``errors``, the last 32). An error the adapter expected and already accounted for is
reported with :meth:`TaskOwner.note` instead (counted and logged, not raised); any other error
is raised by the next :meth:`TaskOwner.aclose` as :class:`BackgroundTaskFailed`, so a bug in
a background task cannot pass unnoticed.

asyncio only: the adapters' engines (nats-py, grpc.aio, redis-py) are asyncio libraries; under
trio these tasks live on the bridge's trio-asyncio loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

import anyio

from ..contracts.errors import VideoflowError

T = TypeVar("T")

logger = logging.getLogger("videoflow_aio.adapters")

KEPT_ERRORS = 32


class BackgroundTaskFailed(VideoflowError):
    """A background task of an adapter's connection raised an unexpected error (its
    ``__cause__``); raised by the owner's ``aclose``."""


class TaskOwner:
    """The background tasks of one connection (see the module docstring)."""

    def __init__(self, name: str, timeout: float) -> None:
        self.name = name
        self.timeout = timeout
        """Seconds :meth:`aclose` waits for the ``keep`` tasks before cancelling them."""
        self._cancel: set[asyncio.Task[Any]] = set()
        self._keep: set[asyncio.Task[Any]] = set()
        self._unraised: BaseException | None = None
        self._awaited: set[asyncio.Task[Any]] = set()
        self.failures = 0
        """Background errors seen so far (noted or raised)."""
        self.errors: list[str] = []
        """The last background errors, newest last."""

    def __len__(self) -> int:
        """Tasks still running."""
        return len(self._cancel) + len(self._keep)

    def spawn(
        self, coro: Coroutine[Any, Any, T], *, name: str, keep: bool = False, awaited: bool = False
    ) -> asyncio.Task[T]:
        """Run ``coro`` as a task this owner holds until it ends (``keep``: awaited, not
        cancelled, by :meth:`aclose`; ``awaited``: a caller awaits it and handles its error —
        the owner only makes sure it ends, an RPC a cancelled caller left behind)."""
        task = asyncio.get_running_loop().create_task(coro, name=f"{self.name}: {name}")
        (self._keep if keep else self._cancel).add(task)
        if awaited:
            self._awaited.add(task)
        task.add_done_callback(self._done)
        return task

    def note(self, what: str, exc: BaseException) -> None:
        """An expected error of a background task, already accounted for: logged and counted,
        not raised."""
        self.failures += 1
        self.errors.append(f"{what}: {type(exc).__name__}: {exc}")
        del self.errors[:-KEPT_ERRORS]
        logger.warning("%s: background %s failed: %s", self.name, what, exc)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._keep.discard(task)
        self._cancel.discard(task)
        if task.cancelled():
            self._awaited.discard(task)
            return
        if task in self._awaited:
            self._awaited.discard(task)
            task.exception()  # its caller has it: retrieved here only for asyncio's bookkeeping
            return
        exc = task.exception()
        if exc is None:
            return
        self.failures += 1
        self.errors.append(f"{task.get_name()}: {type(exc).__name__}: {exc}")
        del self.errors[:-KEPT_ERRORS]
        logger.error("%s failed", task.get_name(), exc_info=exc)
        if self._unraised is None:
            self._unraised = exc

    async def aclose(self) -> None:
        """Cancel the ``keep=False`` tasks, await the ``keep`` ones (at most ``timeout``
        seconds, then cancel them too), and raise the first unexpected error not raised yet.
        Shielded: a cancelled caller still leaves no task behind."""
        with anyio.CancelScope(shield=True):
            while self._cancel or self._keep:
                for task in list(self._cancel):
                    task.cancel()
                kept = list(self._keep)
                if kept:
                    with anyio.move_on_after(self.timeout):
                        await asyncio.gather(*kept, return_exceptions=True)
                    for task in kept:
                        task.cancel()
                with contextlib.suppress(BaseException):
                    await asyncio.gather(*self._cancel, *kept, return_exceptions=True)
        exc, self._unraised = self._unraised, None
        if exc is not None:
            raise BackgroundTaskFailed(
                f"{self.name}: a background task failed: {type(exc).__name__}: {exc}"
            ) from exc


async def gather(*aws: Awaitable[T]) -> list[T | Exception]:
    """Run ``aws`` at once; each one's result or ``Exception``, in order (an error that is not
    an ``Exception``, e.g. a child's own cancellation, is raised; every child's error is
    retrieved either way).

    A cancelled caller gets *its own* ``CancelledError``, raised once every child has ended.
    ``asyncio.gather`` does not promise that: when a child swallows the cancellation it
    passed on and returns (nats-py's requests do — ``asyncio.wait_for`` on Python 3.11
    returns a reply that arrived with the cancel), it raises a fresh ``CancelledError`` that
    no cancel scope sent, and an anyio scope lets that one escape as if the task itself had
    been cancelled.
    """
    tasks = [asyncio.ensure_future(a) for a in aws]
    if not tasks:
        return []
    try:
        await asyncio.wait(tasks)
    except GeneratorExit:  # this coroutine is being closed: it may not await any more
        for task in tasks:
            task.cancel()
        raise
    except BaseException:
        for task in tasks:
            task.cancel()
        while not all(task.done() for task in tasks):
            # a scope may repeat its cancel meanwhile: the one being raised is the same
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait(tasks)
        _retrieve(tasks)  # the caller's cancellation is what goes on
        raise
    errors = _retrieve(tasks)
    out: list[T | Exception] = []
    for task, exc in zip(tasks, errors, strict=True):
        if task.cancelled():
            task.result()  # cancelled by another hand: its CancelledError
        if exc is None:
            out.append(task.result())
        elif isinstance(exc, Exception):
            out.append(exc)
        else:
            raise exc
    return out


def _retrieve(tasks: list[asyncio.Task[Any]]) -> list[BaseException | None]:
    """Each ended task's error (None for a result or a cancellation), every one retrieved so
    that asyncio never reports one as never retrieved."""
    return [None if task.cancelled() else task.exception() for task in tasks]
