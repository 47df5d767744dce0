"""The harness a case receives: how to open backends, reach controls, and scale time."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import anyio

from ..vtime import VirtualClock


class Skip(Exception):
    """The provider cannot run this case; ``reason`` says which capability or control it lacks."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CaseFailure(AssertionError):
    """A check inside a case failed."""


class _Controls:
    """Async view of a provider's controls for one backend; only declared controls are reachable."""

    def __init__(self, target: Any, allowed: frozenset[str], provider: str) -> None:
        self._target = target
        self._allowed = allowed
        self._provider = provider

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        if name.startswith("_"):
            raise AttributeError(name)
        if name not in self._allowed:
            raise CaseFailure(f"case uses control {name!r} without declaring it in controls=")
        method = getattr(self._target, name, None)
        if method is None:
            raise Skip(f"provider {self._provider} cannot perform control {name!r}")

        async def call(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            if inspect.isawaitable(result):
                result = await result
            return result

        return call


BackendFactory = Callable[..., Awaitable[Any]]
ControlsFactory = Callable[[Any], Any]


class Harness:
    """What a case gets: a factory for fresh backends, their controls, and time.

    ``open(**options)`` returns a new backend configured with ``options`` (seed constructor
    arguments such as ``core_only=True`` or ``tier='evictable'``); a provider that cannot honour
    an option raises :class:`Skip`. Durations a case uses go through :meth:`seconds`, so a
    real-time provider can scale them down (``scale`` < 1) to what its engine can honour.
    """

    def __init__(
        self,
        *,
        provider: str,
        contract: str,
        factory: BackendFactory,
        controls_for: ControlsFactory | None = None,
        clock: VirtualClock | None = None,
        scale: float = 1.0,
        allowed_controls: Iterable[str] = (),
    ) -> None:
        self.provider = provider
        self.contract = contract
        self.clock = clock
        self.scale = scale
        self._factory = factory
        self._controls_for = controls_for
        self._allowed = frozenset(allowed_controls)
        self.checks = 0
        self.opened: list[Any] = []

    @property
    def virtual(self) -> bool:
        """True when the case runs on virtual time (a model), False on a real engine's clock."""
        return self.clock is not None

    async def open(self, **options: Any) -> Any:
        """A fresh backend with ``options``; raises Skip when the provider cannot honour them."""
        backend = await self._factory(**options)
        self.opened.append(backend)
        return backend

    def controls(self, backend: Any) -> Any:
        """The model controls for ``backend`` (awaitable methods); Skip if the provider has none."""
        target = backend if self._controls_for is None else self._controls_for(backend)
        return _Controls(target, self._allowed, self.provider)

    # -- time ------------------------------------------------------------------------------
    def seconds(self, s: float) -> float:
        """A case's duration in this provider's time (scaled on real engines)."""
        return s * self.scale

    def now(self) -> float:
        return anyio.current_time()

    def deadline(self, s: float) -> float:
        """An absolute monotonic deadline ``s`` (scaled) seconds from now."""
        return anyio.current_time() + s * self.scale

    async def sleep(self, s: float) -> None:
        await anyio.sleep(s * self.scale)

    # -- checks ----------------------------------------------------------------------------
    def check(self, condition: object, message: str = "check failed") -> None:
        """Assert ``condition``. A case that makes no check fails: nothing passes by doing nothing."""
        self.checks += 1
        if not condition:
            raise CaseFailure(message)

    def equal(self, actual: object, expected: object, what: str = "value") -> None:
        """Check ``actual == expected`` with a readable message."""
        self.check(actual == expected, f"{what}: expected {expected!r}, got {actual!r}")

    def require(self, condition: object, capability: str) -> None:
        """Skip the case unless the opened backend offers ``capability``."""
        if not condition:
            raise Skip(f"needs capability {capability}")
