"""Run cases × providers × async backends, and report pass / fail / skip with reasons."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from typing import Literal

import anyio
import msgspec

from .. import faults
from ..vtime import VirtualClock, VirtualTimeDeadlock
from ..vtime import run as vrun
from ._case import Case
from ._harness import CaseFailure, Skip
from ._provider import Provider

Outcome = Literal["pass", "fail", "skip"]
BACKENDS = ("asyncio", "trio")
REAL_TIME_LIMIT = 120.0  # wall seconds a real-engine case may take


class CaseResult(msgspec.Struct, frozen=True):
    """One case on one provider and async backend."""

    id: str
    title: str
    provider: str
    backend: str
    outcome: Outcome
    reason: str
    virtual_seconds: float
    wall_seconds: float


class Summary(msgspec.Struct, frozen=True):
    # "pass" is a keyword; msgspec renames the field in JSON
    passed: int = msgspec.field(name="pass")
    failed: int = msgspec.field(name="fail")
    skipped: int = msgspec.field(name="skip")


class Report(msgspec.Struct, frozen=True):
    cases: list[CaseResult]
    summary: Summary


def summarize(results: Sequence[CaseResult]) -> Report:
    counts = {"pass": 0, "fail": 0, "skip": 0}
    for r in results:
        counts[r.outcome] += 1
    return Report(list(results), Summary(counts["pass"], counts["fail"], counts["skip"]))


def _describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, CaseFailure):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _find_skip(exc: BaseException) -> Skip | None:
    if isinstance(exc, Skip):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _find_skip(inner)
            if found is not None:
                return found
    return None


def static_skip(case: Case, provider: Provider) -> str | None:
    """Why ``provider`` cannot run ``case`` at all, before opening anything."""
    reason = provider.unavailable()
    if reason:
        return reason
    caps = provider.capabilities(case.contract)
    if caps is not None and not case.needs <= caps:
        return f"provider {provider.name} lacks capability {', '.join(sorted(case.needs - caps))}"
    ctrls = provider.controls(case.contract)
    if ctrls is not None and not case.controls <= ctrls:
        missing = ", ".join(sorted(case.controls - ctrls))
        return f"provider {provider.name} cannot perform model control {missing}"
    return None


def run_case(case: Case, provider: Provider, backend: str) -> CaseResult:
    """Run one case in a fresh event loop (virtual time for models, real time for engines)."""
    skip = static_skip(case, provider)
    if skip is not None:
        return CaseResult(case.id, case.title, provider.name, backend, "skip", skip, 0.0, 0.0)

    span = [0.0, 0.0]

    async def body() -> None:
        with faults.isolated():
            async with provider.harness(case) as harness:
                span[0] = anyio.current_time()
                try:
                    if provider.real_time:
                        with anyio.fail_after(REAL_TIME_LIMIT):
                            await case.func(harness)
                    else:
                        await case.func(harness)
                finally:
                    span[1] = anyio.current_time()
                if harness.checks == 0:
                    raise CaseFailure("the case made no check (a case never passes by doing nothing)")

    wall0 = time.perf_counter()  # wall-clock: reports the wall time a case took
    outcome: Outcome = "pass"
    reason = ""
    try:
        if provider.real_time:
            anyio.run(body, backend=backend)
        else:
            vrun(body, backend=backend, clock=VirtualClock())
    except VirtualTimeDeadlock as exc:
        outcome, reason = "fail", f"deadlock: {exc}"
    except BaseException as exc:  # a case failure of any kind is a result, not a crash
        if isinstance(exc, KeyboardInterrupt):
            raise
        found = _find_skip(exc)
        if found is not None:
            outcome, reason = "skip", found.reason
        else:
            outcome, reason = "fail", _describe(exc)
    wall = time.perf_counter() - wall0  # wall-clock: as above
    return CaseResult(
        case.id, case.title, provider.name, backend, outcome, reason, span[1] - span[0], wall
    )


def run(
    cases: Iterable[Case],
    providers: Sequence[Provider],
    backends: Sequence[str] = BACKENDS,
    on_result: Callable[[CaseResult], None] | None = None,
) -> list[CaseResult]:
    """Every applicable (case, provider, backend); a provider only runs its own contracts."""
    results: list[CaseResult] = []
    for c in cases:
        for p in providers:
            if c.contract not in p.contracts():
                continue
            for b in backends:
                result = run_case(c, p, b)
                results.append(result)
                if on_result is not None:
                    on_result(result)
    return results
