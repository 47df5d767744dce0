"""Runs side by side: providers (and, where a provider allows it, its async backends) each in
a thread of their own.

A real-time provider spends its wall time waiting on its servers, so providers overlap well.
Within a provider, cases run one after the other — unless it sets ``parallel_backends``: then
its asyncio runs and its trio runs go in two threads, and a case using one of its
``exclusive_controls`` (a control that acts on the server process: pause, restart, kill a
member) runs alone on that provider (a readers-writer lock), so no other case of it sees the
fault. Each case still has its own event loop (``anyio.run`` in the thread), so nothing async
is shared between threads.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._case import Case
    from ._provider import Provider

Item = tuple[int, "Case", "Provider", str]


class _Exclusive:
    """A readers-writer lock: many ordinary cases, or one exclusive case, at a time."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False

    @contextmanager
    def hold(self, exclusive: bool) -> Iterator[None]:
        with self._cond:
            while self._writer or (exclusive and self._readers):
                self._cond.wait()
            if exclusive:
                self._writer = True
            else:
                self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                if exclusive:
                    self._writer = False
                else:
                    self._readers -= 1
                self._cond.notify_all()


def _groups(todo: list[tuple[Case, Provider, str]]) -> list[list[Item]]:
    """One group per provider, or per (provider, backend) where ``parallel_backends``."""
    groups: dict[tuple[int, str], list[Item]] = {}
    for i, (c, p, b) in enumerate(todo):
        key = (id(p), b if getattr(p, "parallel_backends", False) else "")
        groups.setdefault(key, []).append((i, c, p, b))
    return list(groups.values())


def side_by_side(
    todo: list[tuple[Case, Provider, str]],
    run_one: Callable[[Case, Provider, str], Any],
    on_result: Callable[[Any], None] | None,
) -> list[Any]:
    """``run_one(case, provider, backend)`` for each of ``todo``, the groups in parallel;
    results in ``todo`` order."""
    results: dict[int, Any] = {}
    lock = threading.Lock()
    stop = threading.Event()
    locks: dict[int, _Exclusive] = {id(p): _Exclusive() for _, p, _ in todo}

    def worker(items: list[Item]) -> None:
        for i, c, p, b in items:
            if stop.is_set():
                return
            _plain_asyncio_loops_here()
            exclusive = bool(c.controls & getattr(p, "exclusive_controls", frozenset()))
            with locks[id(p)].hold(exclusive):
                result = run_one(c, p, b)
            with lock:
                results[i] = result
                if on_result is not None:
                    on_result(result)

    groups = _groups(todo)
    if len(groups) <= 1:  # nothing to overlap: run here
        for items in groups:
            worker(items)
        return [results[i] for i in sorted(results)]
    threads = [
        threading.Thread(target=worker, args=(items,), name=f"conformance-{items[0][2].name}")
        for items in groups
    ]
    for t in threads:
        t.start()
    try:
        for t in threads:
            while t.is_alive():  # a timed join keeps Ctrl-C deliverable to this thread
                t.join(0.2)
    except BaseException:
        stop.set()  # the running cases finish (each has its wall limit); no new ones start
        for t in threads:
            t.join()
        raise
    return [results[i] for i in sorted(results)]


def _plain_asyncio_loops_here() -> None:
    """Once trio-asyncio is imported (by a trio case), asyncio in a thread that has not told
    it otherwise gets trio-asyncio's loop; give this thread plain asyncio loops again."""
    if "trio_asyncio" in sys.modules:
        from ..adapters import keep_plain_asyncio_loops

        keep_plain_asyncio_loops()
