"""Wrappers that run a test or async fixture on its virtual clock, under a deadlock guard."""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncGenerator, Callable, Coroutine, Generator
from typing import Any

import pytest

from videoflow_aio.vtime import VirtualClock, current_clock, guarded

from ._optin import PREFIX

_BACKEND_ARG = "anyio_backend"


def _check_clock(expected: VirtualClock) -> None:
    """Fail clearly when anyio runs the test on a loop that is not on its clock."""
    try:
        running: VirtualClock | None = current_clock()
    except RuntimeError:
        running = None
    if running is not expected:
        where = "real time" if running is None else "another test's virtual clock"
        pytest.fail(
            f"{PREFIX}this test should run on its own clock, but anyio runs it on an event "
            f"loop that was already running on {where}: an async generator fixture of "
            "broader scope keeps that loop open. Make that fixture function-scoped, or mark "
            "the tests that use it pytest.mark.vtime(False).",
            pytrace=False,
        )


def _prepare(kwargs: dict[str, Any], clock: VirtualClock, backend: object) -> None:
    if _BACKEND_ARG in kwargs:
        kwargs[_BACKEND_ARG] = backend
    _check_clock(clock)


def guard_test(
    func: Callable[..., Coroutine[Any, Any, Any]], clock: VirtualClock, backend: object
) -> Callable[..., Coroutine[Any, Any, Any]]:
    """The test, checked to run on ``clock``, under a deadlock guard; a test that takes
    ``anyio_backend`` still gets anyio's own value ``backend``."""

    @functools.wraps(func)
    async def run_test(**kwargs: Any) -> Any:
        _prepare(kwargs, clock, backend)
        return await guarded(func, **kwargs)

    return run_test


def guard_fixture(func: Callable[..., Any], clock: VirtualClock, backend: object) -> Any:
    """An async (generator) fixture, checked and guarded like the test it serves."""
    if inspect.isasyncgenfunction(func):

        @functools.wraps(func)
        async def guarded_gen(**kwargs: Any) -> AsyncGenerator[Any, None]:
            _prepare(kwargs, clock, backend)
            agen = func(**kwargs)
            value = await guarded(agen.__anext__)
            yield value
            _check_clock(clock)
            try:
                await guarded(agen.__anext__)
            except StopAsyncIteration:
                return
            raise RuntimeError(f"async generator fixture {func.__name__} did not stop")

        return guarded_gen

    @functools.wraps(func)
    async def guarded_fixture(**kwargs: Any) -> Any:
        _prepare(kwargs, clock, backend)
        return await guarded(func, **kwargs)

    return guarded_fixture


def with_backend(anyio_wrapper: Callable[..., Any], virtual: object) -> Callable[..., Any]:
    """anyio's fixture runner, handed the virtual-time backend instead of anyio's value."""

    def run_fixture(**kwargs: Any) -> Generator[Any, Any, Any]:
        kwargs[_BACKEND_ARG] = virtual
        return (yield from anyio_wrapper(**kwargs))

    return run_fixture
