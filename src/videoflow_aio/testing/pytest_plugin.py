"""pytest plugin: anyio tests that opt in run on virtual time, each on a fresh clock.

Registered by the ``pytest11`` entry point ``videoflow_aio``; it changes nothing for a
test that does not opt in. A test opts in with ``@pytest.mark.vtime`` (or a module's
``pytestmark``), with the ini option ``vtime = true`` (every anyio test of the project),
or by requesting the ``vclock`` fixture; ``pytest.mark.vtime(False)`` opts out. Which
backends it runs on stays anyio's choice (``anyio_backend``): the plugin puts that backend
on the test's :class:`~videoflow_aio.vtime.VirtualClock` (the ``vclock`` fixture). A test
that deadlocks gets :class:`~videoflow_aio.vtime.VirtualTimeDeadlock` at the await that
can never complete, so ``pytest.raises(VirtualTimeDeadlock)`` catches it, and it never
hangs the session. ``--vtime-seeds N`` runs every such test under seeds ``0..N-1`` (see
docs/explore.md). See docs/vtime.md, "Testing with it".

The ini option ``videoflow_servers = true`` (or ``-p videoflow_aio.testing.servers_plugin``)
adds the real-server fixtures ``redis_server``, ``nats_server``, ``etcd_server``
(:mod:`videoflow_aio.testing.servers_plugin`).
"""

from __future__ import annotations

import inspect
from collections.abc import Generator
from typing import Any

import pytest

from . import _hints
from ._fixtures import vclock
from ._optin import (
    CLOCK_OPTIONS,
    INI,
    MARKER,
    PREFIX,
    SEED_PARAM,
    SEEDS_OPTION,
    choice,
    item_clock,
    marker_enabled,
    refuse,
    seeds_for,
    virtual_backend,
)
from ._wrap import guard_fixture, guard_test, with_backend

__all__ = ["vclock"]

_CURRENT = pytest.StashKey[pytest.Item]()
_BACKEND_ARG = "anyio_backend"
_ANYIO_PLUGIN = "anyio"  # the name anyio's pytest11 entry point registers
SERVERS_INI = "videoflow_servers"
SERVERS_PLUGIN = "videoflow_aio.testing.servers_plugin"


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(f"{SEEDS_OPTION} needs a positive count, not {text}")
    return value


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("videoflow_aio").addoption(
        SEEDS_OPTION,
        type=_positive_int,
        default=None,
        metavar="N",
        help="run every virtual-time test under seeds 0..N-1 (each seed a schedule; a test "
        "whose vtime marker sets seed= keeps it)",
    )
    parser.addini(
        INI,
        type="bool",
        default=False,
        help="videoflow_aio: run every anyio test on virtual time (opt out: "
        "pytest.mark.vtime(False))",
    )
    _hints.add_ini(parser)
    parser.addini(
        SERVERS_INI,
        type="bool",
        default=False,
        help="videoflow_aio: offer the real-server fixtures redis_server, nats_server, "
        "etcd_server (the plugin videoflow_aio.testing.servers_plugin)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_hints.HintPlugin(config), _hints.PLUGIN_NAME)
    if config.getini(SERVERS_INI):
        config.pluginmanager.import_plugin(SERVERS_PLUGIN)
    config.addinivalue_line(
        "markers",
        f"{MARKER}(enabled=True, *, {', '.join(f'{o}=...' for o in CLOCK_OPTIONS)}): run this "
        "async test through anyio on virtual time, on a fresh VirtualClock built with these "
        "options (videoflow_aio); vtime(False) opts out",
    )


def _own_or_closest_vtime(collector: pytest.Collector, obj: object) -> pytest.Mark | None:
    own = [m for m in getattr(obj, "pytestmark", ()) if getattr(m, "name", None) == MARKER]
    if own:
        first: pytest.Mark = own[0]  # the one pytest's get_closest_marker returns
        return first
    return collector.get_closest_marker(MARKER)


def _requests_vclock(collector: pytest.Collector, obj: object, inner: object) -> bool:
    """The test names ``vclock`` as an argument or in a ``usefixtures`` marker."""
    try:
        if "vclock" in inspect.signature(inner).parameters:  # type: ignore[arg-type]
            return True
    except (TypeError, ValueError):
        pass
    marks = [m for m in getattr(obj, "pytestmark", ()) if getattr(m, "name", None) == "usefixtures"]
    marks += collector.iter_markers("usefixtures")
    return any("vclock" in m.args for m in marks)


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(
    collector: pytest.Module | pytest.Class, name: str, obj: object
) -> None:
    """An async test marked ``vtime``, or requesting ``vclock``, is an anyio test (no
    separate anyio marker needed)."""
    if not collector.istestfunction(obj, name):
        return
    inner = getattr(getattr(obj, "hypothesis", None), "inner_test", obj)
    if not inspect.iscoroutinefunction(inner):
        return
    mark = _own_or_closest_vtime(collector, obj)
    if mark is None:
        if not _requests_vclock(collector, obj, inner):
            return
    elif not marker_enabled(mark):
        return
    if not collector.config.pluginmanager.has_plugin(_ANYIO_PLUGIN):
        return  # refused at collection's end, saying why (see pytest_collection_modifyitems)
    own_anyio = any(getattr(m, "name", None) == "anyio" for m in getattr(obj, "pytestmark", ()))
    if not own_anyio and collector.get_closest_marker("anyio") is None:
        pytest.mark.anyio(obj)
    pytest.mark.usefixtures(_BACKEND_ARG)(obj)


def _asyncio_auto_mode(config: pytest.Config) -> bool:
    try:
        mode = config.getoption("asyncio_mode", None) or config.getini("asyncio_mode")
    except ValueError:  # pytest-asyncio is not installed
        return False
    return bool(mode == "auto")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``--vtime-seeds N``: one item per seed for every virtual-time test."""
    seeds = seeds_for(metafunc)
    if seeds:
        metafunc.fixturenames.append(SEED_PARAM)
        metafunc.parametrize(SEED_PARAM, seeds, ids=[f"seed{s}" for s in seeds])


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A virtual-time test that pytest-asyncio also claims would run on pytest-asyncio's
    real-time loop, trio items included: it fails at setup, saying what to change."""
    auto = _asyncio_auto_mode(config)
    no_anyio = not config.pluginmanager.has_plugin(_ANYIO_PLUGIN)
    if not auto and not no_anyio:
        for unrun, why in _hints.refuse_unrun_async_tests(config, items):
            refuse(unrun, why)
    for item in items:
        if not isinstance(item, pytest.Function):
            continue
        if no_anyio and inspect.iscoroutinefunction(item.function) and choice(item).enabled:
            refuse(
                item,
                "this async test asks for virtual time, which runs through anyio's pytest "
                "plugin, but that plugin is not active (-p no:anyio?). Enable it, or mark "
                "the test pytest.mark.vtime(False) and run it with another plugin.",
            )
            continue
        if item.get_closest_marker("asyncio") is None:
            continue
        if not choice(item).enabled:
            continue
        why = "asyncio_mode = auto makes it claim every async test" if auto else "its marker"
        refuse(
            item,
            f"pytest-asyncio also claims this test ({why}) and would run it on its own "
            "real-time asyncio loop, even the [trio] run. Use pytest-asyncio in strict mode "
            "(asyncio_mode = strict, its default) and mark its own tests "
            "@pytest.mark.asyncio, or opt this test out with pytest.mark.vtime(False).",
        )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    item.config.stash[_CURRENT] = item
    try:
        return (yield)
    finally:
        del item.config.stash[_CURRENT]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    error = choice(item).error
    if error is not None:
        pytest.fail(error, pytrace=False)


def _virtual_item(request: pytest.FixtureRequest) -> pytest.Item | None:
    """The test whose fixtures are being set up, when it is an anyio test on virtual time."""
    item = request.config.stash.get(_CURRENT, None)
    if item is None or _BACKEND_ARG not in request.fixturenames or not choice(item).enabled:
        return None
    return item


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_fixture_setup(
    fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
) -> Generator[None, object, object]:
    """An async fixture of a virtual-time test runs guarded, on the test's clock (wrapped
    before anyio's plugin takes it over)."""
    func = fixturedef.func
    is_async = inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func)
    item = _virtual_item(request) if is_async else None
    if item is None:
        return (yield)
    try:
        if fixturedef.scope != "function":
            kind = (
                "async generator fixture" if inspect.isasyncgenfunction(func) else "async fixture"
            )
            pytest.fail(
                f"{PREFIX}{kind} {fixturedef.argname!r} has scope {fixturedef.scope!r}, so "
                "anyio keeps one event loop running for all the tests that share it (for as "
                "long as the fixture lives), but each virtual-time test runs on its own fresh "
                "clock. Make it function-scoped, or mark those tests pytest.mark.vtime(False).",
                pytrace=False,
            )
        backend = request.getfixturevalue(_BACKEND_ARG)
        virtual_backend(item, backend)  # a usage error shows here, as this fixture's error
        replacement = (
            func  # anyio rebinds fixture methods itself: leave them unguarded
            if inspect.ismethod(func)
            else guard_fixture(func, item_clock(item), backend)
        )
    except pytest.fail.Exception as exc:  # raised by the fixture, so pytest caches the error
        replacement = _failing(exc)
    fixturedef.func = replacement  # type: ignore[misc]
    try:
        return (yield)
    finally:
        fixturedef.func = func  # type: ignore[misc]


def _failing(exc: BaseException) -> Any:
    def fail_fixture(**kwargs: Any) -> None:
        raise exc

    return fail_fixture


def _is_anyio_fixture_runner(func: object) -> bool:
    """The generator anyio's ``pytest_fixture_setup`` puts in place of an async fixture."""
    return (
        getattr(func, "__module__", None) == "anyio.pytest_plugin"
        and getattr(func, "__qualname__", "") == "pytest_fixture_setup.<locals>.wrapper"
        and inspect.isgeneratorfunction(func)
    )


@pytest.hookimpl(specname="pytest_fixture_setup", wrapper=True, trylast=True)
def pytest_fixture_setup_on_virtual_time(
    fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
) -> Generator[None, object, object]:
    """Inside anyio's own hook: hand anyio's fixture runner the virtual-time backend."""
    func = fixturedef.func
    if not _is_anyio_fixture_runner(func):
        return (yield)
    item = _virtual_item(request)
    if item is None:
        return (yield)
    virtual = virtual_backend(item, request.getfixturevalue(_BACKEND_ARG))
    fixturedef.func = with_backend(func, virtual)  # type: ignore[misc]
    try:
        return (yield)
    finally:
        fixturedef.func = func  # type: ignore[misc]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Generator[None, object, object]:
    """Hand anyio's test runner the virtual-time backend and a guarded test."""
    funcargs = pyfuncitem.funcargs
    if _BACKEND_ARG not in funcargs or not choice(pyfuncitem).enabled:
        return (yield)
    value = funcargs[_BACKEND_ARG]
    funcargs[_BACKEND_ARG] = virtual_backend(pyfuncitem, value)
    original = pyfuncitem.obj
    wrap = inspect.iscoroutinefunction(original) and not hasattr(original, "hypothesis")
    if wrap:
        pyfuncitem.obj = guard_test(original, item_clock(pyfuncitem), value)
    try:
        return (yield)
    finally:
        funcargs[_BACKEND_ARG] = value
        if wrap:
            pyfuncitem.obj = original
