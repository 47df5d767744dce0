"""Run the NATS adapters' methods on the loop that holds their nats-py connection.

nats-py is asyncio-only and keeps its reader, flusher and ping tasks (and every subscription
callback) on the loop where the connection was made. :func:`bridged` makes a backend class
usable from trio through ``adapters._trio_bridge``: each contract method, called from a trio
task, runs whole as an asyncio task on the run's trio-asyncio loop, so the connection, its
subscriptions, the advisory followers and every anyio primitive the adapter keeps live there.
Called from asyncio, a method runs directly as before (one attribute test more).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ...contracts.messaging import MessagingBackend
from .._trio_bridge import Affinity, run_on_asyncio

C = TypeVar("C", bound=type[MessagingBackend])

BRIDGED = tuple(
    sorted(
        name
        for name, fn in vars(MessagingBackend).items()
        if not name.startswith("_") and inspect.iscoroutinefunction(fn)
    )
)
"""Every method of the contract (all async): each crosses the bridge when called from trio."""


def _on_client_loop(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(method)
    async def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        side: Affinity = self._side
        if not side.direct and side.from_trio():
            return await run_on_asyncio(functools.partial(method, self, *args, **kwargs))
        return await method(self, *args, **kwargs)

    return run


def bridged(cls: C) -> C:
    """Wrap every contract method of ``cls`` (and ``aclose``) with the trio bridge.

    The class must set ``self._side = Affinity()`` in ``__init__``. A method calling another
    one on the asyncio side goes direct (the caller is asyncio there).
    """
    for name in BRIDGED:
        setattr(cls, name, _on_client_loop(getattr(cls, name)))
    return cls


async def on_client_loop(backend: Any, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
    """``await fn(*args)`` on ``backend``'s loop: across the bridge when called from trio."""
    side: Affinity = backend._side
    if not side.direct and side.from_trio():
        return await run_on_asyncio(functools.partial(fn, *args))
    return await fn(*args)
