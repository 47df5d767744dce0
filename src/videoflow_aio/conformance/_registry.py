"""Where providers come from: the built-in table and the ``videoflow_aio.providers`` entry
points, each loaded lazily (listing names imports nothing).

A provider is named by a target ``"package.module:attribute"``: a :class:`Provider` subclass or
a factory returning one. :class:`LazyFactory` imports the target the first time it is called:

- an ``ImportError`` (an optional dependency missing) puts an :class:`UnimportableProvider` in
  its place, whose ``unavailable()`` gives the error, so its cases skip with that reason (or
  fail where servers are required) and the other providers are unaffected;
- any other error, or a target that is not callable, is a :class:`ProviderLoadError` naming
  the provider and where it was declared.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import warnings
from collections.abc import Callable, Iterable
from contextlib import AbstractAsyncContextManager
from typing import Any

from ._case import CONTRACTS, Case
from ._harness import Harness
from ._provider import Provider

GROUP = "videoflow_aio.providers"
"""The entry-point group a package declares its providers in (``name = "module:attribute"``)."""

IMPORT_ERRORS: dict[str, str] = {}
"""provider name -> the import error that put an :class:`UnimportableProvider` in its place
(filled as providers are loaded)."""


class ProviderLoadError(ValueError):
    """A registered provider could not be loaded: its target raised while importing (other than
    an ``ImportError``), does not exist, or is not callable. ``name`` is the provider's name and
    ``origin`` where it was declared (the built-in table, or an entry point and its package)."""

    def __init__(self, name: str, origin: str, problem: str) -> None:
        self.name = name
        self.origin = origin
        self.problem = problem
        super().__init__(f"provider {name!r} ({origin}) cannot be loaded: {problem}")


class UnimportableProvider(Provider):
    """Stands in for a provider whose module could not be imported (an optional dependency is
    missing): ``unavailable()`` gives the import error, so its runs skip with that reason."""

    def __init__(self, name: str, error: str, origin: str | None = None) -> None:
        self.name = name
        self.error = error
        self.origin = origin

    def contracts(self) -> frozenset[str]:
        return frozenset(CONTRACTS)

    def unavailable(self) -> str | None:
        if self.origin is None:
            return f"provider module {self.name!r} cannot be imported: {self.error}"
        return f"provider {self.name!r} ({self.origin}) cannot be imported: {self.error}"

    def harness(self, case: Case) -> AbstractAsyncContextManager[Harness]:
        raise RuntimeError(self.unavailable())


class LazyFactory:
    """A provider factory that imports its target on first use (see the module docstring)."""

    def __init__(self, name: str, target: str, origin: str | None = None) -> None:
        self.name = name
        self.target = target
        self.origin = origin  # None: the built-in table
        self._factory: Callable[..., Provider] | None = None

    def __repr__(self) -> str:
        return f"{self.target} ({self.origin or 'built-in'})"

    @property
    def loaded(self) -> bool:
        """Whether the target was imported (by :meth:`resolve` or a call)."""
        return self._factory is not None

    def resolve(self) -> Callable[..., Provider]:
        """The target itself, imported once (or a placeholder when its import failed)."""
        if self._factory is None:
            self._factory = self._load()
        return self._factory

    def __call__(self, **options: Any) -> Provider:
        provider = self.resolve()(**options)
        if not isinstance(provider, Provider):
            returned = type(provider).__name__
            raise ProviderLoadError(
                self.name, repr(self), f"its factory returned a {returned}, not a Provider"
            )
        return provider

    def _load(self) -> Callable[..., Provider]:
        where = repr(self)
        module, colon, attr = self.target.partition(":")
        if not (colon and module and attr):
            raise ProviderLoadError(self.name, where, "expected a target 'module:attribute'")
        try:
            obj: Any = importlib.import_module(module)
        except ImportError as exc:
            return self._placeholder(f"{type(exc).__name__}: {exc}")
        except Exception as exc:
            raise ProviderLoadError(self.name, where, f"{type(exc).__name__}: {exc}") from exc
        for part in attr.split("."):
            try:
                obj = getattr(obj, part)
            except AttributeError as exc:
                raise ProviderLoadError(self.name, where, f"{module} has no {attr}") from exc
        if not callable(obj):
            raise ProviderLoadError(self.name, where, f"{attr} is not a Provider or a factory")
        factory: Callable[..., Provider] = obj
        return factory

    def _placeholder(self, error: str) -> Callable[..., Provider]:
        IMPORT_ERRORS[self.name] = error
        origin = None if self.origin is None else repr(self)  # a built-in's message as before

        def factory(**_: object) -> Provider:
            return UnimportableProvider(self.name, error, origin)

        return factory


def entry_point_factories() -> list[LazyFactory]:
    """A :class:`LazyFactory` for each ``videoflow_aio.providers`` entry point installed (on
    ``sys.path`` now), in a stable order: by name, then by package."""
    found: list[LazyFactory] = []
    for ep in importlib.metadata.entry_points(group=GROUP):
        dist = ep.dist
        package = f"{dist.name} {dist.version}" if dist is not None else "an unknown package"
        found.append(LazyFactory(ep.name, ep.value, f"entry point {ep.name} of {package}"))
    return sorted(found, key=lambda f: (f.name, f.origin or ""))


def unique(factories: Iterable[LazyFactory], taken: Iterable[str]) -> list[LazyFactory]:
    """``factories`` without the names already ``taken`` or seen before, each one left out
    with a warning that names it (the built-in or earlier provider keeps the name)."""
    seen = set(taken)
    kept: list[LazyFactory] = []
    for factory in factories:
        if factory.name in seen:
            warnings.warn(
                f"provider {factory.name!r} ({factory.origin}) ignored: the name is taken",
                RuntimeWarning,
                stacklevel=2,
            )
            continue
        seen.add(factory.name)
        kept.append(factory)
    return kept


__all__ = [
    "GROUP",
    "IMPORT_ERRORS",
    "LazyFactory",
    "ProviderLoadError",
    "UnimportableProvider",
    "entry_point_factories",
    "unique",
]
