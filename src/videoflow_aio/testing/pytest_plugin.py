"""pytest plugin: anyio tests run on virtual time, under asyncio and trio, fresh clock per test.

Registered by the ``pytest11`` entry point ``videoflow_aio``. Every test marked
``@pytest.mark.anyio`` runs twice (``[asyncio]`` and ``[trio]``) on a loop driven by a fresh
:class:`~videoflow_aio.vtime.VirtualClock`, available as the ``vclock`` fixture. A test
whose tasks all block with nothing able to wake them fails with
:class:`~videoflow_aio.vtime.VirtualTimeDeadlock` instead of hanging.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncGenerator, Callable, Coroutine, Generator
from typing import Any

import pytest

from videoflow_aio.vtime import new_event_loop
from videoflow_aio.vtime._guard import guarded
from videoflow_aio.vtime._trio import TrioVirtualClock

from . import _fixtures

_REGISTERED_NAME = "videoflow_aio.testing._fixtures"


def pytest_configure(config: pytest.Config) -> None:
    # register the fixtures last, so that they override anyio's plugin fixtures
    if not config.pluginmanager.has_plugin(_REGISTERED_NAME):
        config.pluginmanager.register(_fixtures, _REGISTERED_NAME)


def _is_virtual(backend: object) -> bool:
    if not (isinstance(backend, tuple) and len(backend) == 2 and isinstance(backend[1], dict)):
        return False
    options = backend[1]
    factory = options.get("loop_factory")
    if isinstance(factory, functools.partial) and factory.func is new_event_loop:
        return True
    return isinstance(options.get("clock"), TrioVirtualClock)


def _guard_test(
    func: Callable[..., Coroutine[Any, Any, Any]],
) -> Callable[..., Coroutine[Any, Any, Any]]:
    @functools.wraps(func)
    async def run_guarded(**kwargs: Any) -> Any:
        return await guarded(func, **kwargs)

    return run_guarded


def _guard_fixture(func: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.isasyncgenfunction(func):

        @functools.wraps(func)
        async def guarded_gen(**kwargs: Any) -> AsyncGenerator[Any, None]:
            agen = func(**kwargs)
            value = await guarded(agen.__anext__)
            yield value
            try:
                await guarded(agen.__anext__)
            except StopAsyncIteration:
                return
            raise RuntimeError(f"async generator fixture {func.__name__} did not stop")

        return guarded_gen

    @functools.wraps(func)
    async def guarded_fixture(**kwargs: Any) -> Any:
        return await guarded(func, **kwargs)

    return guarded_fixture


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_fixture_setup(
    fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
) -> Generator[None, object, object]:
    """Async fixtures of anyio tests run under a deadlock guard too (before anyio wraps them:
    on trio an unguarded deadlock would abort anyio's test runner and hang the session)."""
    func = fixturedef.func
    wrap = (
        "anyio_backend" in request.fixturenames
        and not inspect.ismethod(func)
        and (inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func))
    )
    if wrap:
        fixturedef.func = _guard_fixture(func)  # type: ignore[misc]
    try:
        return (yield)
    finally:
        if wrap:
            fixturedef.func = func  # type: ignore[misc]


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Generator[None, object, object]:
    """Run a virtual-time test under a deadlock guard (anyio's hook then runs it)."""
    backend = pyfuncitem.funcargs.get("anyio_backend")
    original = pyfuncitem.obj
    wrap = (
        _is_virtual(backend)
        and inspect.iscoroutinefunction(original)
        and not hasattr(original, "hypothesis")
    )
    if wrap:
        pyfuncitem.obj = _guard_test(original)
    try:
        return (yield)
    finally:
        if wrap:
            pyfuncitem.obj = original
