"""Run one target (a conformance case or a program) on one backend under one seed.

A run is a function of (target, backend, seed, jitter, fault rate) alone: the seed fixes the
order of same-instant work, the jitter drawn, the faults injected and (for programs) the
program's own choices. :func:`run_target` runs it in-process on a fresh loop and returns
what happened, with the run's ObservationLog.
"""

from __future__ import annotations

import asyncio
import shlex
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import anyio
import trio

from .. import faults
from ..conformance import VIRTUAL_LIMIT, Case, CaseFailure, describe, execute, fault_injector
from ..contracts.errors import VideoflowError
from ..observe import ObservationLog
from ..vtime import Backend, VirtualClock, VirtualTimeDeadlock
from ..vtime import run as vrun
from ._checks import log_violations
from ._program import Context, Program, program_rng
from ._recording import RecordingMemoryProvider

Outcome = Literal["pass", "fail", "faulted", "skip"]
"""What a run came to (see :class:`Run`)."""
Target = Case | Program
"""What the explorer runs: a conformance case or a program."""

#: what an injected fault may legitimately cause in a case written without faults in mind:
#: its own checks failing, the crash itself, a wait that can never end, a timeout, an error
#: the contract defines, a cancellation. Anything else (a KeyError or an assert inside a
#: model, …) is a failure even after a fault.
_FAULT_CONSEQUENCES: tuple[type[BaseException], ...] = (
    CaseFailure,
    faults.SimulatedCrash,
    VirtualTimeDeadlock,
    TimeoutError,
    VideoflowError,
    trio.Cancelled,
    asyncio.CancelledError,
)


@dataclass
class Run:
    """One run: what ran (target, backend, seed, jitter, fault rate), its outcome and why,
    the ObservationLog, the faults injected, and the virtual and wall seconds it took.

    ``outcome``: ``pass``; ``fail`` (a check, an invariant on the log, or an unexpected
    error); ``faulted`` (a case written without faults failed after an injected fault, in
    a way the fault explains — not a finding); ``skip`` (the case does not apply).
    """

    target: str
    backend: Backend
    seed: int
    jitter: float
    fault_rate: float
    outcome: Outcome = "pass"
    reason: str = ""
    log: ObservationLog = field(default_factory=ObservationLog)
    injected: list[faults.InjectedFault] = field(default_factory=list)
    virtual_seconds: float = 0.0
    wall_seconds: float = 0.0
    traceback: str = ""

    def fingerprint(self) -> bytes:
        """Everything a replay must reproduce: outcome, reason, virtual time, the injected
        faults and the log, as bytes (equal fingerprints: the same run)."""
        head = [
            self.outcome,
            self.reason,
            repr(self.virtual_seconds),
            *(f"{f.kind} {f.barrier} {f.at!r} {f.pause!r}" for f in self.injected),
        ]
        return "\n".join(head).encode() + b"\n" + self.log.export_jsonl()


def replay_command(run: Run, log: str = "out.jsonl", load: Sequence[str] = ()) -> str:
    """The command line that replays ``run`` and writes its log to ``log``."""
    words = ["videoflow-aio", "explore", "--replay", run.target, "--seed", str(run.seed)]
    words += ["--backend", run.backend]
    if run.jitter:
        words += ["--jitter", repr(run.jitter)]
    if run.fault_rate:
        words += ["--faults", repr(run.fault_rate)]
    for module in load:
        words += ["--load", module]
    words += ["--log", log]
    return shlex.join(words)


def _explained_by_faults(error: BaseException | None) -> bool:
    if error is None:  # the case caught its failure, or made no check
        return True
    if isinstance(error, BaseExceptionGroup):
        return all(_explained_by_faults(e) for e in error.exceptions)
    return isinstance(error, _FAULT_CONSEQUENCES)


def _case(run: Run, case: Case, provider: RecordingMemoryProvider) -> None:
    """Run a conformance case on the memory models; a failure after an injected fault that
    the fault explains is ``faulted``."""
    ex = execute(
        case,
        provider,
        run.backend,
        seed=run.seed,
        jitter=run.jitter,
        fault_rate=run.fault_rate,
        wall_limit=None,
    )
    result = ex.result
    run.log, run.injected, run.traceback = provider.log, ex.injected, ex.traceback
    run.outcome, run.reason = result.outcome, result.reason
    run.virtual_seconds, run.wall_seconds = result.virtual_seconds, result.wall_seconds
    if run.outcome == "fail" and ex.injected and _explained_by_faults(ex.error):
        run.outcome = "faulted"


def _program(run: Run, program: Program) -> None:
    """Run a program: any exception it raises is a failure."""
    clock = VirtualClock(seed=run.seed, jitter=run.jitter)
    context = Context(run.seed, program_rng(run.seed), run.log, run.backend)
    injectors: list[faults.FaultInjector] = []
    capped = [False]

    async def body() -> None:
        with faults.isolated() as registry:
            if run.fault_rate:
                injectors.append(registry.inject(fault_injector(run.seed, run.fault_rate)))
            with anyio.move_on_after(VIRTUAL_LIMIT) as scope:
                await program.func(context)
            capped[0] = scope.cancelled_caught

    wall0 = time.perf_counter()  # wall-clock: reports the wall time a run took
    try:
        vrun(body, backend=run.backend, clock=clock)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # the property failed: a result, not a crash
        run.outcome, run.reason = "fail", describe(exc)
        run.traceback = "".join(traceback.format_exception(exc))
    run.wall_seconds = round(time.perf_counter() - wall0, 6)  # wall-clock: as above
    run.virtual_seconds = round(clock.elapsed, 9)
    run.injected = injectors[0].injected if injectors else []
    if capped[0] and run.outcome == "pass":
        run.outcome, run.reason = "fail", f"still running after {VIRTUAL_LIMIT:g} virtual seconds"


def run_target(
    target: Target,
    backend: Backend,
    seed: int,
    *,
    jitter: float = 0.0,
    fault_rate: float = 0.0,
    provider: RecordingMemoryProvider | None = None,
) -> Run:
    """Run a conformance case (on the memory models; ``provider`` reuses one) or a program
    under ``seed``; then check the log's invariants (a violation fails the run)."""
    run = Run(target.id, backend, seed, jitter, fault_rate)
    if isinstance(target, Case):
        _case(run, target, provider if provider is not None else RecordingMemoryProvider())
    else:
        _program(run, target)
    if run.outcome in ("pass", "fail", "faulted"):
        violations = log_violations(run.log)
        if violations and run.outcome != "fail":
            run.outcome, run.reason = "fail", f"log invariant: {violations[0]}"
    return run
