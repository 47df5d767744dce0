"""Run cases × providers × async backends, and report pass / fail / skip with reasons.

Each run of a case gets a fresh event loop (virtual time for models, the real clock for
real-time providers), a fresh fault registry and a fresh harness. A case passes only when it
returned, made at least one check, and no check failed (even one it caught).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import random
import threading
import time
import traceback
import warnings
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, cast

import anyio
import anyio.from_thread
import anyio.lowlevel
import msgspec
import trio

from .. import faults
from ..contracts.errors import ValidationError
from ..vtime import Backend, VirtualClock, VirtualTimeDeadlock
from ..vtime import run as vrun
from ._case import Case
from ._harness import CaseFailure, Harness, Skip, place
from ._parallel import side_by_side
from ._provider import Provider

Outcome = Literal["pass", "fail", "skip"]
BACKENDS = ("asyncio", "trio")
"""The async backends every case runs under by default, in this order."""
REAL_TIME_LIMIT = 120.0  # seconds a case may run on a real-time provider's clock
VIRTUAL_LIMIT = 7 * 24 * 3600.0
"""Virtual seconds a case may run on a model before it fails (catches a livelock)."""
WALL_LIMIT = 300.0  # wall seconds any one case may take, harness included
REQUIRE_SERVERS_ENV = "VIDEOFLOW_REQUIRE_SERVERS"
"""The environment variable that turns an unavailable provider (a missing server or client
library) from a skip into a failure: set it to ``1`` in CI."""


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
    """How many runs passed, failed and were skipped (``pass``/``fail``/``skip`` in JSON)."""

    # "pass" is a keyword; msgspec renames the fields in JSON
    passed: int = msgspec.field(name="pass")
    failed: int = msgspec.field(name="fail")
    skipped: int = msgspec.field(name="skip")


class Report(msgspec.Struct, frozen=True):
    """The JSON report: ``{"cases": [...], "summary": {"pass", "fail", "skip"}}``."""

    cases: list[CaseResult]
    summary: Summary


def summarize(results: Sequence[CaseResult]) -> Report:
    """The report of ``results``: every result, in the order given, and their counts."""
    counts = {"pass": 0, "fail": 0, "skip": 0}
    for r in results:
        counts[r.outcome] += 1
    return Report(list(results), Summary(counts["pass"], counts["fail"], counts["skip"]))


def servers_required() -> bool:
    """True when ``VIDEOFLOW_REQUIRE_SERVERS`` is set (CI): an unavailable provider then fails."""
    return os.environ.get(REQUIRE_SERVERS_ENV, "").strip().lower() not in ("", "0", "false", "no")


# -- describing what went wrong -------------------------------------------------------------
_FRAMEWORK = (
    str(Path(__file__).with_name("_harness.py")),
    str(Path(__file__)),
    str(Path(faults.__file__)),
    str(Path(contextlib.__file__)),
)
_LIBRARIES = tuple(str(Path(str(m.__file__)).parent) + os.sep for m in (anyio, asyncio, trio))


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def _where(exc: BaseException) -> str:
    """``file:line in func`` of the innermost frame outside the framework and event loops."""
    tb = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(tb):
        fname = frame.filename
        if fname in _FRAMEWORK or fname.startswith(_LIBRARIES):
            continue
        return place(fname, frame.lineno, frame.name)
    return ""


def _describe_one(exc: BaseException) -> str:
    if isinstance(exc, CaseFailure):
        text = str(exc) or "check failed"
    else:
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    where = _where(exc)
    return f"{text} (at {where})" if where else text


def describe(exc: BaseException) -> str:
    """One readable line for a failure, with task-group wrappers removed."""
    leaves = [e for e in _leaves(exc) if not isinstance(e, Skip)] or _leaves(exc)
    if len(leaves) == 1:
        return _describe_one(leaves[0])
    return f"{len(leaves)} errors in a task group: " + "; ".join(_describe_one(e) for e in leaves)


def _only_skips(exc: BaseException) -> Skip | None:
    leaves = _leaves(exc)
    if leaves and all(isinstance(e, Skip) for e in leaves):
        first = leaves[0]
        assert isinstance(first, Skip)
        return first
    return None


# -- what runs where ------------------------------------------------------------------------
def check_backends(backends: Iterable[str]) -> None:
    """ValueError naming the first of ``backends`` that is not asyncio or trio."""
    for b in backends:
        if b not in BACKENDS:
            raise ValueError(f"unknown backend {b!r}; expected one of {', '.join(BACKENDS)}")


def plan(
    cases: Iterable[Case], providers: Sequence[Provider], backends: Sequence[str] = BACKENDS
) -> list[tuple[Case, Provider, str]]:
    """Every (case, provider, backend) to run: a provider only runs its own contracts."""
    check_backends(backends)
    return [
        (c, p, b) for c in cases for p in providers if c.contract in p.contracts() for b in backends
    ]


def inapplicable(case: Case, provider: Provider, backend: str) -> str | None:
    """Why ``case`` does not apply to ``provider`` under ``backend`` (a backend its client
    library cannot run on, a profile it lacks, a model control it cannot perform), or None.

    Asked after the provider's setup: capabilities and controls may depend on its server.
    """
    if backend not in provider.backends:
        return f"provider {provider.name} runs only under {', '.join(provider.backends)}"
    caps = provider.capabilities(case.contract)
    if caps is not None and not case.needs <= caps:
        return f"provider {provider.name} lacks capability {', '.join(sorted(case.needs - caps))}"
    ctrls = provider.controls(case.contract)
    if ctrls is not None and not case.controls <= ctrls:
        missing = ", ".join(sorted(case.controls - ctrls))
        return f"provider {provider.name} cannot perform model control {missing}"
    return None


_SETUP_ATTR = "_conformance_setup_error"


def ensure_setup(provider: Provider) -> str | None:
    """Call ``provider.setup()`` once; the error text if it failed (remembered), else None.
    Thread-safe: runs side by side call it from each of a provider's threads."""
    with vars(provider).setdefault("_conformance_setup_lock", threading.Lock()):
        return _ensure_setup(provider)


def _ensure_setup(provider: Provider) -> str | None:
    if _SETUP_ATTR not in vars(provider):
        try:
            provider.setup()
        except Exception as exc:
            vars(provider)[_SETUP_ATTR] = f"provider {provider.name} setup failed: {describe(exc)}"
        else:
            vars(provider)[_SETUP_ATTR] = None
    error: str | None = vars(provider)[_SETUP_ATTR]
    return error


def was_set_up(provider: Provider) -> bool:
    return _SETUP_ATTR in vars(provider)


def close_provider(provider: Provider) -> None:
    """``provider.close()`` if it was set up; a failure to close becomes a warning."""
    if vars(provider).pop(_SETUP_ATTR, "missing") == "missing":
        return
    try:
        provider.close()
    except Exception as exc:
        warnings.warn(f"provider {provider.name} failed to close: {describe(exc)}", stacklevel=2)


# -- running one case -----------------------------------------------------------------------
@dataclass
class Execution:
    """A case result plus the traceback of what failed (empty when nothing did), the
    exception itself, and the faults injected under ``faults=`` (in order)."""

    result: CaseResult
    traceback: str = ""
    error: BaseException | None = None
    injected: list[faults.InjectedFault] = field(default_factory=list)


class _Watchdog:
    """Cancels a scope from a thread once ``limit`` wall seconds have passed (None: never)."""

    def __init__(self, limit: float | None) -> None:
        self.limit = limit
        self.fired = False
        self._timer: threading.Timer | None = None

    def arm(self, scope: anyio.CancelScope) -> None:
        if self.limit is None:
            return
        token = anyio.lowlevel.current_token()

        def fire() -> None:
            self.fired = True
            with contextlib.suppress(Exception):  # the loop may already be gone
                anyio.from_thread.run_sync(scope.cancel, token=token)

        self._timer = threading.Timer(self.limit, fire)
        self._timer.daemon = True
        self._timer.start()

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def execute(
    case: Case,
    provider: Provider,
    backend: str,
    *,
    require_available: bool | None = None,
    wall_limit: float | None = WALL_LIMIT,
    seed: int | None = None,
    jitter: float = 0.0,
    fault_rate: float = 0.0,
) -> Execution:
    """Run one case in a fresh event loop and keep the traceback of a failure.

    ``wall_limit=None`` runs without the wall-clock watchdog (a thread per case): for
    virtual-time providers, whose cases are capped in virtual time, run in bulk.
    On a virtual-time provider, ``seed`` (and ``jitter``) seed the case's clock and
    ``fault_rate`` injects seeded faults at the barriers it reaches (drawn from a PRNG of
    its own, derived from ``seed``); the same seed replays the same run.
    """
    _schedule(provider, seed, jitter, fault_rate)

    def result(outcome: Outcome, why: str, virtual: float = 0.0, wall: float = 0.0) -> CaseResult:
        c = case
        return CaseResult(c.id, c.title, provider.name, backend, outcome, why, virtual, wall)

    check_backends((backend,))
    refused = _preflight(case, provider, backend, require_available)
    if refused is not None:
        return Execution(result(refused[0], refused[1]), refused[2])

    span = [0.0, 0.0]
    holder: list[Harness] = []
    limit = REAL_TIME_LIMIT if provider.real_time else VIRTUAL_LIMIT
    limit_hit = [False]
    watchdog = _Watchdog(wall_limit)

    injectors: list[faults.FaultInjector] = []

    async def body() -> None:
        with faults.isolated() as registry, anyio.CancelScope() as outer:
            if seed is not None and fault_rate:
                injectors.append(registry.inject(fault_injector(seed, fault_rate)))
            watchdog.arm(outer)
            try:
                async with provider.harness(case) as harness:
                    harness.allowed_controls = case.controls
                    holder.append(harness)
                    span[0] = anyio.current_time()
                    try:
                        with anyio.CancelScope(deadline=span[0] + limit) as capped:
                            await case.func(harness)
                        limit_hit[0] = capped.cancelled_caught
                    finally:
                        span[1] = anyio.current_time()
            finally:
                watchdog.disarm()

    wall0 = time.perf_counter()  # wall-clock: reports the wall time a case took
    error: BaseException | None = None
    outcome: Outcome = "pass"
    reason = ""
    trace = ""
    try:
        _run_body(body, provider, backend, seed, jitter)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # a case failure of any kind is a result, not a crash
        error = exc
        outcome, reason, trace = _classify(exc, holder)
    wall = time.perf_counter() - wall0  # wall-clock: as above
    if outcome == "pass":
        clock = "real" if provider.real_time else "virtual"
        outcome, reason = _judge_pass(
            holder, watchdog.fired, wall_limit, limit_hit[0], limit, clock
        )
    elif outcome == "fail" and watchdog.fired:
        reason = f"stopped after the wall-clock limit of {wall_limit:g} s: {reason}"
    virtual = round(span[1] - span[0], 9)
    injected = injectors[0].injected if injectors else []
    return Execution(result(outcome, reason, virtual, round(wall, 6)), trace, error, injected)


def _run_body(
    body: Callable[[], Awaitable[None]],
    provider: Provider,
    backend: str,
    seed: int | None,
    jitter: float,
) -> None:
    """Run ``body`` on real time or on a fresh virtual clock, as the provider runs."""
    if provider.real_time:
        anyio.run(body, backend=backend)
    else:
        vclock = VirtualClock(seed=seed, jitter=jitter)
        vrun(body, backend=cast(Backend, backend), clock=vclock)  # backend checked there


def _preflight(
    case: Case, provider: Provider, backend: str, require_available: bool | None
) -> tuple[Outcome, str, str] | None:
    """``(outcome, reason, trace)`` when the run cannot start, else None. Order: backend →
    available here? → set up (capabilities may depend on the live server) → profile and
    controls."""
    if backend not in provider.backends:
        return "skip", inapplicable(case, provider, backend) or "", ""
    try:
        missing = provider.unavailable()
        if missing:
            if require_available if require_available is not None else servers_required():
                why = f"provider required ({REQUIRE_SERVERS_ENV}=1) but unavailable: {missing}"
                return "fail", why, ""
            return "skip", missing, ""
        setup_error = ensure_setup(provider)
        if setup_error is not None:
            return "fail", setup_error, ""
        skip = inapplicable(case, provider, backend)
    except Exception as exc:  # a broken provider is a failure of its cases, not of the run
        trace = "".join(traceback.format_exception(exc))
        return "fail", f"provider {provider.name}: {describe(exc)}", trace
    return None if skip is None else ("skip", skip, "")


def _classify(exc: BaseException, holder: list[Harness]) -> tuple[Outcome, str, str]:
    """``(outcome, reason, trace)`` of a run that raised ``exc``."""
    only_skip = _only_skips(exc)
    if holder and holder[0].failures:
        return "fail", holder[0].failures[0], ""  # a failed check: its message and line say it
    trace = "".join(traceback.format_exception(exc))
    if only_skip is not None:
        return "skip", only_skip.reason, trace
    if isinstance(exc, VirtualTimeDeadlock):
        return "fail", f"deadlock: {exc}", trace
    return "fail", describe(exc), trace


def _judge_pass(
    holder: list[Harness],
    watchdog_fired: bool,
    wall_limit: float | None,
    limit_hit: bool,
    limit: float,
    clock: str,
) -> tuple[Outcome, str]:
    """A run that returned normally passes only if it ran, checked something, and neither
    a limit nor a caught failure spoils it."""
    if watchdog_fired:
        return "fail", f"stopped after the wall-clock limit of {wall_limit:g} s"
    if limit_hit:
        return "fail", f"still running after {limit:g} {clock} seconds (blocked forever? deadlock?)"
    if not holder:
        return "fail", "the provider's harness never started the case"
    if holder[0].failures:
        return "fail", holder[0].failures[0] + " (the case caught the failure)"
    if holder[0].checks == 0:
        return "fail", "the case made no check (nothing passes by doing nothing)"
    return "pass", ""


def fault_injector(seed: int, rate: float) -> faults.FaultInjector:
    """The fault injector of a run under ``seed``: its PRNG is derived from the seed, apart
    from the clock's (so the same seed does not pair each fault with a scheduling draw)."""
    return faults.FaultInjector(rate, seed=random.Random(f"videoflow-faults/{seed}"))


def _schedule(provider: Provider, seed: int | None, jitter: float, fault_rate: float) -> None:
    """Refuse a seed, jitter or faults a provider's run cannot honour (before anything runs)."""
    if provider.real_time and (seed is not None or jitter or fault_rate):
        raise ValueError(
            f"provider {provider.name} runs on real time: seeds, jitter and injected faults "
            "need a virtual-time provider"
        )
    VirtualClock(seed=seed, jitter=jitter)  # the clock's own checks: a typed error here
    if fault_rate:
        if seed is None:
            raise ValidationError(
                "injected faults need a seed", field="fault_rate", value=fault_rate
            )
        faults.FaultInjector(fault_rate, seed=0)  # the injector's own checks, up front


def run_case(
    case: Case,
    provider: Provider,
    backend: str,
    *,
    require_available: bool | None = None,
    wall_limit: float = WALL_LIMIT,
) -> CaseResult:
    """Run one case in a fresh event loop (virtual time for models, real time for engines).

    Calls ``provider.setup()`` first if nothing has yet; closing the provider is the caller's
    job (:func:`run` does it). An unavailable provider skips, or fails when
    ``require_available`` (default: the ``VIDEOFLOW_REQUIRE_SERVERS`` environment variable).
    """
    return execute(
        case, provider, backend, require_available=require_available, wall_limit=wall_limit
    ).result


def run(
    cases: Iterable[Case],
    providers: Sequence[Provider],
    backends: Sequence[str] = BACKENDS,
    on_result: Callable[[CaseResult], None] | None = None,
    *,
    require_available: bool | None = None,
    wall_limit: float = WALL_LIMIT,
    close: bool = True,
    parallel: bool = False,
) -> list[CaseResult]:
    """Every applicable (case, provider, backend), in case order; providers closed at the end.

    ``parallel``: the providers run side by side, each in a thread of its own (a real-time
    provider spends its wall time waiting on its servers), a provider with
    ``parallel_backends`` in one thread per async backend (see :mod:`._parallel`).
    ``on_result`` is then called from those threads, one call at a time, as results arrive;
    the list returned is in case order either way.
    """
    todo = plan(cases, providers, backends)
    try:
        if parallel:
            run_one = functools.partial(
                run_case, require_available=require_available, wall_limit=wall_limit
            )
            return side_by_side(todo, run_one, on_result)
        results: list[CaseResult] = []
        for c, p, b in todo:
            result = run_case(c, p, b, require_available=require_available, wall_limit=wall_limit)
            results.append(result)
            if on_result is not None:
                on_result(result)
        return results
    finally:
        if close:
            for p in providers:
                close_provider(p)
