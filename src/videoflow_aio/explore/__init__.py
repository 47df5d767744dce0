"""Deterministic schedule exploration: run conformance cases and properties under many
seeds — each seed one schedule (same-instant order, timing jitter, injected faults) — and
replay any failure exactly from its seed. See ``docs/explore.md``.

    from videoflow_aio import explore
    found = explore.explore(explore.select_targets("MSG-0*,PROP-*"), seeds=range(1000))
    for run in found.failures:
        print(run.target, run.backend, run.seed, run.reason, explore.replay_command(run))

Hypothesis strategies for seeds and schedules are in :mod:`videoflow_aio.explore.strategies`.
"""

from __future__ import annotations

from ._checks import log_violations, messaging_violations
from ._explorer import Exploration, explore, find_target, load, select_targets
from ._program import PROGRAMS, Context, Program, ProgramFunc, program, program_rng
from ._recording import RecordingMemoryProvider
from ._run import Outcome, Run, Target, replay_command, run_target

__all__ = [
    "PROGRAMS",
    "Context",
    "Exploration",
    "Outcome",
    "Program",
    "ProgramFunc",
    "RecordingMemoryProvider",
    "Run",
    "Target",
    "explore",
    "find_target",
    "load",
    "log_violations",
    "messaging_violations",
    "program",
    "program_rng",
    "replay_command",
    "run_target",
    "select_targets",
]
