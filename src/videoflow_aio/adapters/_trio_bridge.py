"""Run an asyncio-only client library from trio, on a trio-asyncio loop: the one bridge.

An adapter built on an asyncio client (nats-py, redis-py, aetcd) decorates its class with
:func:`bridged`. Every public coroutine method (the contract's, the adapter's own admin helpers
such as ``drop_namespace``, a controls class's controls) and ``__aenter__``/``__aexit__`` then
run whole as one asyncio task on ONE trio-asyncio loop per ``trio.run`` when called from a trio
task: opened on first use in a trio system task, closed when the run ends. Called from asyncio,
a method runs directly, and ``trio_asyncio`` is not even imported (asyncio is not patched). So
trio code needs no setup::

    async with RedisRuntimeStore(url) as store:   # inside trio.run(...)
        await store.cas("k", None, b"v")

Guarantees:

- Cancelling the trio caller cancels the asyncio task and waits for it to finish (its cleanup,
  e.g. resolving a lost write, runs to completion), then raises ``trio.Cancelled``.
- Exceptions (including BaseExceptions) raised by the asyncio side reach the trio caller as is.
- Deadlines the adapter keeps on the asyncio side read the trio clock (the loop's ``time()``
  is ``trio.current_time()``).
- All calls of one run share the loop, so a client's connections (bound to the loop that
  opened them) stay usable across calls and tasks; a client object must not outlive the
  ``trio.run`` it was used in.
- An object is settled by its first call (:class:`Affinity`): first called from asyncio, it
  never bridges (its client belongs to that asyncio loop); once called from trio, every call
  from trio crosses, and calls the bridged method makes on the asyncio side go direct.

Importing ``trio_asyncio`` patches ``asyncio.get_running_loop``/``current_task`` process-wide
(correct under asyncio, about 2 µs a call slower); it is imported only on the first trio call.
It also makes new asyncio loops trio-asyncio loops; :func:`keep_plain_asyncio_loops` undoes
that for the importing thread (other threads of a process that used the bridge get a
``SyncTrioEventLoop`` from ``asyncio.new_event_loop()``). A module
that imported those functions by name earlier keeps the unpatched C functions, which do not see
a trio-asyncio loop ("no running event loop"; python-trio/trio-asyncio#83). anyio's asyncio
backend does so, and the adapters use anyio on their asyncio side, so :func:`_import` rebinds
its names to the patched ones (which behave as the originals outside a trio-asyncio loop).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import sniffio
import trio

from ..contracts.errors import Unsupported

T = TypeVar("T")
C = TypeVar("C", bound=type)

INSTALL_HINT = "the trio bridge needs trio-asyncio: pip install 'trio-asyncio>=0.15'"
# asyncio functions trio-asyncio replaces, as bound by name in modules imported before it
_PATCHED = ("get_running_loop", "_get_running_loop", "current_task")
_STALE_BINDERS = ("anyio._backends._asyncio",)


def caller_is_trio() -> bool:
    """True in a trio task, False in an asyncio task (also one on a trio-asyncio loop).

    Raises :class:`Unsupported` for any other (or no) async library.
    """
    try:
        lib = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError as exc:
        raise Unsupported("not called from an async library", capability="async") from exc
    if lib == "trio":
        return True
    if lib == "asyncio":
        return False
    raise Unsupported(f"async library {lib!r} is not supported", capability=lib)


class Affinity:
    """Where an asyncio-only client runs, settled by its first call.

    :func:`bridged` methods test ``if not side.direct and side.from_trio()``: after a first
    call from asyncio, ``direct`` is True and that test is all the asyncio path pays. After a
    call from trio, every call from trio is bridged (and the bridged asyncio side runs the
    method's body). Objects sharing one client share one ``Affinity``.
    """

    __slots__ = ("bridged", "direct")

    def __init__(self) -> None:
        self.direct = False  # first call came from asyncio: never bridge
        self.bridged = False  # a call came from trio: the client lives on the bridge's loop

    def from_trio(self) -> bool:
        """True when this call comes from a trio task and must cross the bridge."""
        if caller_is_trio():
            self.bridged = True
            return True
        if not self.bridged:
            self.direct = True
        return False


def _import() -> Any:
    """Import trio_asyncio, then undo what it does to asyncio outside trio (see the module doc)
    and point stale by-name bindings at its patched functions."""
    first = "trio_asyncio" not in sys.modules
    try:
        import trio_asyncio  # type: ignore[import-untyped]
    except ImportError as exc:
        raise Unsupported(INSTALL_HINT, capability="trio") from exc
    if first:
        keep_plain_asyncio_loops()
    for module_name in _STALE_BINDERS:
        module = sys.modules.get(module_name)
        if module is None:
            continue  # imported later, it binds the patched functions itself
        for name in _PATCHED:
            if name in vars(module):
                setattr(module, name, getattr(asyncio, name))
    return trio_asyncio


def keep_plain_asyncio_loops() -> None:
    """Outside trio, let asyncio make its own loops again (this thread): call it first in a
    thread that runs plain asyncio (``asyncio.run``, anyio) once the bridge has been used.

    On import trio_asyncio makes ``asyncio.new_event_loop()`` (so ``asyncio.run`` and anyio's
    asyncio backend) return a ``SyncTrioEventLoop`` - trio in a thread - outside trio unless a
    policy was set with ``asyncio.set_event_loop_policy``, which it records per thread and
    which cannot be called from the trio task importing it. Recording the policy that was in
    force before the import restores plain asyncio loops; inside trio nothing changes.
    """
    from trio_asyncio import _loop  # type: ignore[import-untyped]

    faked = getattr(_loop, "_faked_policy", None)
    original = getattr(_loop, "_original_policy", None)
    if faked is not None and original is not None and faked.policy is None:
        faked.policy = original


class _SharedLoop:
    """The run's trio-asyncio loop, hosted by a system task."""

    def __init__(self) -> None:
        self.ready = trio.Event()
        self.loop: Any = None
        self.error: BaseException | None = None


_SHARED: trio.lowlevel.RunVar[_SharedLoop] = trio.lowlevel.RunVar("videoflow_trio_asyncio_loop")


BATCH_LIMIT = 64
"""The most asyncio callbacks one trio scheduling round of the bridge's loop runs after its
first (a bound on how long trio tasks wait for the loop: a callback that keeps scheduling
itself cannot starve them)."""


def _batch_callbacks(loop: Any) -> None:
    """Make ``loop`` run, per trio scheduling round, every asyncio callback queued when the
    round starts — as asyncio's own loop does — instead of one.

    trio-asyncio's main loop takes one callback off its queue per round, each behind a
    ``move_on_after`` and a channel receive: a call through an asyncio client makes about 20
    callbacks (task steps, future callbacks, the client's flusher and reader), so the bridge
    cost ~0.5 ms of CPU per call (measured: ``benchmarks/nats_bench.py``, docs/benchmarks.md).
    The loop looks its ``_main_loop_one`` up on every round, so an instance attribute takes
    over at the next round; the callbacks queued at its start then run with ``no_wait``
    (trio-asyncio's own non-blocking step, timers included), at most as many as were queued,
    so a callback that keeps scheduling itself cannot starve trio. Without those internals (a
    different trio-asyncio) the loop is left as it is."""
    one = getattr(loop, "_main_loop_one", None)
    queue = getattr(loop, "_q_recv", None)
    if one is None or not hasattr(queue, "statistics"):
        return

    async def batched(no_wait: bool = False) -> None:
        await one(no_wait)
        if no_wait:
            return
        for _ in range(BATCH_LIMIT):
            try:
                await one(True)
            except trio.WouldBlock:  # nothing queued: the round is over
                return

    loop._main_loop_one = batched


async def _host(shared: _SharedLoop, trio_asyncio: Any) -> None:
    try:
        async with trio_asyncio.open_loop() as loop:
            _batch_callbacks(loop)
            shared.loop = loop
            shared.ready.set()
            await trio.sleep_forever()  # until the run ends (system tasks are cancelled then)
    except Exception as exc:  # a system task must not raise: report it to the callers instead
        shared.error = exc
    finally:
        shared.loop = None
        shared.ready.set()


async def _loop() -> Any:
    try:
        shared = _SHARED.get()
    except LookupError:
        trio_asyncio = _import()
        shared = _SharedLoop()
        _SHARED.set(shared)
        trio.lowlevel.spawn_system_task(
            _host, shared, trio_asyncio, name="videoflow trio-asyncio loop"
        )
    if not shared.ready.is_set():
        await shared.ready.wait()
    if shared.loop is None:
        raise Unsupported(
            f"the trio-asyncio loop of this run is closed ({shared.error!r})", capability="trio"
        )
    return shared.loop


async def run_on_asyncio(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """From a trio task: ``await fn(*args)`` as an asyncio task on this run's shared loop."""
    loop = await _loop()
    result: T = await loop.run_aio_coroutine(fn(*args))
    return result


# -- the class decorator -------------------------------------------------------------------------
_DUNDERS = ("__aenter__", "__aexit__")
_MARK = "__videoflow_bridged__"


def bridged_names(cls: type) -> tuple[str, ...]:
    """The methods :func:`bridged` wraps on ``cls``: every public coroutine method (its own and
    inherited, the contract's included) and ``__aenter__``/``__aexit__``, sorted."""
    return tuple(
        sorted(
            name
            for name in dir(cls)
            if (not name.startswith("_") or name in _DUNDERS)
            and inspect.iscoroutinefunction(getattr(cls, name, None))
        )
    )


def _on_client_loop(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(method)
    async def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        side: Affinity = self._side
        if not side.direct and side.from_trio():
            return await run_on_asyncio(functools.partial(method, self, *args, **kwargs))
        return await method(self, *args, **kwargs)

    setattr(run, _MARK, True)
    return run


def bridged(cls: C) -> C:
    """Class decorator: make an asyncio-only adapter (or its controls) usable from trio.

    Wraps every method :func:`bridged_names` lists so that a call from a trio task runs whole
    on the run's trio-asyncio loop, and a call from asyncio runs directly (one attribute test).
    Instances must set ``self._side`` to an :class:`Affinity` before their first call (a
    controls class shares its backend's). A subclass overriding a wrapped method must be
    decorated too; wrapping is idempotent.
    """
    for name in bridged_names(cls):
        method = getattr(cls, name)
        if not getattr(method, _MARK, False):
            setattr(cls, name, _on_client_loop(method))
    return cls


async def on_client_loop(obj: Any, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """``await fn(*args)`` where ``obj``'s client lives (``obj._side``): across the bridge when
    called from trio, directly from asyncio. For one-off code outside a bridged class."""
    side: Affinity = obj._side
    if not side.direct and side.from_trio():
        return await run_on_asyncio(functools.partial(fn, *args))
    return await fn(*args)
