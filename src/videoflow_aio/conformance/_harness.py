"""The harness a case receives: how to open backends, reach controls, and scale time.

``Harness[BackendT, ControlsT]`` is typed by contract: ``MessagingHarness.open()`` returns a
:class:`~videoflow_aio.contracts.messaging.MessagingBackend` and ``controls()`` a
:class:`~videoflow_aio.conformance.MessagingControls`, so mypy checks every case against the
contract it is written for (likewise ``PayloadHarness``, ``RuntimeStoreHarness``,
``AllocationHarness``).
"""

from __future__ import annotations

import contextlib
import inspect
import sys
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Generic, cast

import anyio
from typing_extensions import TypeVar

from ..contracts.allocation import AcceleratorAllocationBackend
from ..contracts.messaging import MessagingBackend
from ..contracts.payload import PayloadStore
from ..contracts.runtime_store import RuntimeStore
from ..vtime import VirtualClock
from ._controls import AllocationControls, MessagingControls, PayloadControls, RuntimeStoreControls

_HERE = (__file__, contextlib.__file__)


class Skip(Exception):
    """The provider cannot run this case; ``reason`` says which capability or control it lacks."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CaseFailure(AssertionError):
    """A check inside a case failed."""


# defaults: a bare ``Harness`` (a provider's, a framework test's) is ``Harness[Any, Any]``
BackendT = TypeVar("BackendT", default=Any)
ControlsT = TypeVar("ControlsT", default=Any)
T = TypeVar("T")


class _Controls:
    """Async view of a provider's controls for one backend; only declared controls are reachable."""

    def __init__(self, harness: Harness[Any, Any], target: Any) -> None:
        self._harness = harness
        self._target = target

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        if name.startswith("_"):
            raise AttributeError(name)
        h = self._harness
        if name not in h.allowed_controls:
            h._fail(f"case uses control {name!r} without declaring it in controls=")
        method = getattr(self._target, name, None)
        if method is None or not callable(method):
            if h.strict_controls:
                h._fail(f"provider {h.provider} has no model control {name!r}")
            raise Skip(f"provider {h.provider} cannot perform control {name!r}")

        async def call(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            if inspect.isawaitable(result):
                result = await result
            return result

        call.__name__ = name
        return call


BackendFactory = Callable[..., Awaitable[Any]]
ControlsFactory = Callable[[Any], Any]


class Harness(Generic[BackendT, ControlsT]):
    """What a case gets: a factory for fresh backends, their controls, and time.

    ``open(**options)`` returns a new backend configured with ``options`` (seed constructor
    arguments such as ``core_only=True`` or ``tier='evictable'``); a provider that cannot honour
    an option raises :class:`Skip`. Durations a case uses go through :meth:`seconds`,
    :meth:`deadline`, :meth:`sleep`, :meth:`fail_after` or :meth:`move_on_after`, so a
    real-time provider can scale them down (``scale`` < 1) to what its engine can honour.
    ``slack`` is the provider's scheduling slack (real seconds a loaded engine may run late,
    ``Provider.scheduling_slack``): upper bounds of timing checks add it (:meth:`at_most`).

    Every failed check is recorded as well as raised, so a case that catches the
    :class:`CaseFailure` (``except Exception``) still fails.
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
        slack: float = 0.0,
        allowed_controls: Iterable[str] = (),
        strict_controls: bool = False,
    ) -> None:
        if scale <= 0:
            raise ValueError("scale must be positive")
        if slack < 0:
            raise ValueError("slack must not be negative")
        self.provider = provider
        self.contract = contract
        self.clock = clock
        self.scale = scale
        self.slack = slack
        self.strict_controls = strict_controls
        self.allowed_controls = frozenset(allowed_controls)
        self._factory = factory
        self._controls_for = controls_for
        self.checks = 0
        self.failures: list[str] = []
        self.opened: list[Any] = []

    @property
    def virtual(self) -> bool:
        """True when the case runs on virtual time (a model), False on a real engine's clock."""
        return self.clock is not None

    async def open(self, **options: Any) -> BackendT:
        """A fresh backend with ``options``; raises Skip when the provider cannot honour them."""
        backend: BackendT = await self._factory(**options)
        self.opened.append(backend)
        return backend

    def controls(self, backend: BackendT) -> ControlsT:
        """The model controls for ``backend``: each attribute is an awaitable method.

        Using a control the case did not declare in ``controls=`` fails the case; a control the
        provider cannot perform skips it (on the reference models it fails).
        """
        target = backend if self._controls_for is None else self._controls_for(backend)
        return cast(ControlsT, _Controls(self, target))

    # -- time ------------------------------------------------------------------------------
    def seconds(self, s: float) -> float:
        """A case's duration in this provider's time (scaled on real engines)."""
        return s * self.scale

    def at_most(self, s: float) -> float:
        """The latest a thing due ``s`` (scaled) seconds after a start may be seen: that plus
        the provider's scheduling slack (``slack``, real seconds; 0 on virtual time). Upper
        bounds of timing checks use it; a lower bound needs none when the start is taken
        before the cause (load only makes things later)."""
        return s * self.scale + self.slack

    def now(self) -> float:
        """The running loop's clock (virtual on models)."""
        return anyio.current_time()

    def deadline(self, s: float) -> float:
        """An absolute loop-clock deadline ``s`` (scaled) seconds from now."""
        return anyio.current_time() + s * self.scale

    async def sleep(self, s: float) -> None:
        """Sleep ``s`` (scaled) seconds."""
        await anyio.sleep(s * self.scale)

    async def sleep_until(self, when: float) -> None:
        """Sleep until the loop clock reads ``when`` (absolute, as :meth:`now`; not scaled)."""
        await anyio.sleep(max(0.0, when - anyio.current_time()))

    def fail_after(self, s: float) -> AbstractContextManager[anyio.CancelScope]:
        """``anyio.fail_after`` with a scaled duration (raises TimeoutError on expiry)."""
        return anyio.fail_after(s * self.scale)

    def move_on_after(self, s: float) -> anyio.CancelScope:
        """``anyio.move_on_after`` with a scaled duration."""
        return anyio.move_on_after(s * self.scale)

    # -- checks ----------------------------------------------------------------------------
    def _fail(self, message: str) -> None:
        """Record the failure with the case line that made it, then raise it."""
        frame = sys._getframe(1)
        while frame.f_back is not None and frame.f_code.co_filename in _HERE:
            frame = frame.f_back
        where = place(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)
        self.failures.append(f"{message} (at {where})")
        raise CaseFailure(message)

    def check(self, condition: object, message: str = "check failed") -> None:
        """Assert ``condition``; a case that makes no check fails."""
        self.checks += 1
        if not condition:
            self._fail(message)

    def expect_type(self, value: object, cls: type[T], what: str = "value") -> T:
        """Check that ``value`` is a ``cls`` and return it as one (e.g. ``Known`` vs
        ``Unknown``), so the rest of the case is typed by what it checked."""
        self.check(isinstance(value, cls), f"{what}: expected {cls.__name__}, got {value!r}")
        return cast(T, value)

    def equal(self, actual: object, expected: object, what: str = "value") -> None:
        """Check ``actual == expected`` with a readable message."""
        self.check(actual == expected, f"{what}: expected {expected!r}, got {actual!r}")

    @contextmanager
    def raises(
        self, exc_type: type[BaseException] | tuple[type[BaseException], ...], what: str = ""
    ) -> Iterator[None]:
        """Check that the block raises ``exc_type`` (counts as one check)."""
        names = (
            exc_type.__name__
            if isinstance(exc_type, type)
            else " or ".join(t.__name__ for t in exc_type)
        )
        label = f"{what}: " if what else ""
        try:
            yield
        except exc_type:
            self.check(True)
            return
        self.check(False, f"{label}expected {names}, nothing was raised")

    def require(self, condition: object, capability: str) -> None:
        """Skip the case unless the opened backend offers ``capability``."""
        if not condition:
            raise Skip(f"needs capability {capability}")


MessagingHarness = Harness[MessagingBackend, MessagingControls]
"""The harness of a messaging case: ``h.open()`` returns a ``MessagingBackend``."""
PayloadHarness = Harness[PayloadStore, PayloadControls]
"""The harness of a payload case: ``h.open()`` returns a ``PayloadStore``."""
RuntimeStoreHarness = Harness[RuntimeStore, RuntimeStoreControls]
"""The harness of a runtime-store case: ``h.open()`` returns a ``RuntimeStore``."""
AllocationHarness = Harness[AcceleratorAllocationBackend, AllocationControls]
"""The harness of an allocation case: ``h.open()`` returns an
``AcceleratorAllocationBackend``."""


def place(filename: str, lineno: int | None, function: str) -> str:
    """``folder/file.py:line in function``: where a case failed, short enough to read."""
    return f"{'/'.join(Path(filename).parts[-2:])}:{lineno} in {function}"
