"""Run the MIG conformance cases (pure functions of the tables) on both async backends.

The memory provider needs the allocation model to open a harness; these cases open no
backend, so a provider whose factory always skips runs them on their own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from videoflow_aio.conformance import Case, Harness, Provider, Skip, run_case, select_cases
from videoflow_aio.vtime import current_clock

MIG_CASES = select_cases(select="MIG-*")


class PureProvider(Provider):
    """Runs cases that open no backend (any open() is a skip)."""

    name = "pure"

    def contracts(self) -> frozenset[str]:
        return frozenset({"allocation"})

    @asynccontextmanager
    async def harness(self, case: Case) -> AsyncIterator[Harness]:
        async def factory(**options: Any) -> Any:
            raise Skip("the pure provider opens no backend")

        yield Harness(
            provider=self.name,
            contract=case.contract,
            factory=factory,
            clock=current_clock(),
            allowed_controls=case.controls,
        )


def test_at_least_six_mig_cases() -> None:
    assert len(MIG_CASES) >= 6
    assert all(c.contract == "allocation" for c in MIG_CASES)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("mig_case", MIG_CASES, ids=[c.id for c in MIG_CASES])
def test_mig_case_passes(mig_case: Case, backend: str) -> None:
    result = run_case(mig_case, PureProvider(), backend)
    assert result.outcome == "pass", result.reason
