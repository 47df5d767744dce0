"""A fake provider and helpers for testing the conformance framework itself."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from typing import Any

from videoflow_aio.conformance import Case, Harness, Provider
from videoflow_aio.conformance._case import CaseFunc


class FakeBackend:
    """A backend with two model controls (one sync, one async)."""

    def __init__(self, **options: Any) -> None:
        self.options = options
        self.paused = False
        self.failing = False

    def pause_acceptance(self) -> str:
        self.paused = True
        return "paused"

    async def fail_reads(self, on: bool = True) -> bool:
        self.failing = on
        return on


class FakeProvider(Provider):
    """Configurable provider: what it offers, whether it is available, how it sets up."""

    def __init__(
        self,
        name: str = "fake",
        *,
        contracts: Iterable[str] = ("messaging",),
        capabilities: Iterable[str] | None = None,
        controls: Iterable[str] | None = None,
        real_time: bool = False,
        unavailable: str | None = None,
        strict: bool = False,
        scale: float = 1.0,
        setup_error: Exception | None = None,
        url: str | None = None,
    ) -> None:
        self.name = name
        self._contracts = frozenset(contracts)
        self._caps = None if capabilities is None else frozenset(capabilities)
        self._ctrls = None if controls is None else frozenset(controls)
        self.real_time = real_time
        self._unavailable = unavailable
        self.strict = strict
        self.scale = scale
        self.setup_error = setup_error
        self.url = url
        self.setups = 0
        self.closes = 0
        self.harnesses: list[Harness] = []

    def contracts(self) -> frozenset[str]:
        return self._contracts

    def unavailable(self) -> str | None:
        return self._unavailable

    def capabilities(self, contract: str) -> frozenset[str] | None:
        return self._caps

    def controls(self, contract: str) -> frozenset[str] | None:
        return self._ctrls

    def setup(self) -> None:
        self.setups += 1
        if self.setup_error is not None:
            raise self.setup_error

    def close(self) -> None:
        self.closes += 1

    @asynccontextmanager
    async def harness(self, case: Case) -> AsyncIterator[Harness]:
        async def factory(**options: Any) -> FakeBackend:
            return FakeBackend(**options)

        h = Harness(
            provider=self.name,
            contract=case.contract,
            factory=factory,
            scale=self.scale,
            strict_controls=self.strict,
        )
        self.harnesses.append(h)
        yield h


def fake_case(
    func: CaseFunc,
    id: str = "MSG-901",
    *,
    contract: str = "messaging",
    needs: Iterable[str] = (),
    controls: Iterable[str] = (),
) -> Case:
    """An unregistered case (the global registry stays untouched)."""
    title = (func.__doc__ or func.__name__).strip()
    return Case(id, title, contract, func, frozenset(needs), frozenset(controls))
