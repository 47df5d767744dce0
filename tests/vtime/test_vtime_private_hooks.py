"""The private hooks of asyncio, anyio and trio that the virtual-time loops rely on are there.

Each hook has a fallback that keeps the loops working when a new release moves it (slower,
or without worker-thread awareness), so a move would otherwise pass unnoticed: these tests
make an upgrade that moves one fail here, by name, instead.
"""

from __future__ import annotations

import types
from importlib.metadata import version
from typing import Any

from anyio._backends import _asyncio as anyio_asyncio

from videoflow_aio.vtime import _loop, _trio, _trio_schedule


def _nested_code(fn: Any) -> list[types.CodeType]:
    """Every code object defined inside ``fn``, at any depth."""
    found: list[types.CodeType] = []
    todo = [fn.__code__]
    while todo:
        code = todo.pop()
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                found.append(const)
                todo.append(const)
    return found


def test_anyio_worker_thread_registry_is_found() -> None:
    # without it the asyncio loop cannot tell a busy AnyIO worker thread from an idle one
    for name in ("_run_vars", "_threadpool_workers", "_threadpool_idle_workers"):
        assert getattr(_loop, name) is not None, f"anyio {version('anyio')}: {name} moved"


def test_anyio_from_thread_task_is_recognised_by_its_qualname() -> None:
    # a worker thread blocked in from_thread.run waits on this task: matched by qualname
    run_async = anyio_asyncio.AsyncIOBackend.run_async_from_thread
    fn = getattr(run_async, "__func__", run_async)
    names = {code.co_qualname for code in _nested_code(fn)}
    assert _loop._ANYIO_FROM_THREAD in names, (
        f"anyio {version('anyio')} names from_thread's task otherwise: {sorted(names)}"
    )


def test_trio_thread_counters_are_found() -> None:
    # without them the trio clock uses the public (slower) count of threads in flight
    for name in ("_active_threads_local", "_FromThreadRun", "_to_thread_run_sync"):
        assert getattr(_trio, name) is not None, f"trio {version('trio')}: trio._threads.{name}"


def test_trio_scheduler_shuffle_hooks_are_found() -> None:
    # seeded schedules on trio take over trio's batch shuffle
    _trio_schedule.check_trio()
