"""Explore: run targets under many seeds and collect the runs that fail.

Targets are the conformance cases (run on the memory models) and the registered programs
(``PROP-…`` and whatever a ``--load``-ed module registers). Seeds run in order; for each
seed every (target, backend) still being explored runs once. A (target, backend) stops
after ``stop_after`` failures (a failing seed is what matters: replay it), and after its
first skip (skips do not depend on the seed).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..conformance import select_cases, selector
from ..contracts.errors import ValidationError
from ..vtime import Backend
from ._program import PROGRAMS
from ._recording import RecordingMemoryProvider
from ._run import Run, Target, run_target


def load(module: str) -> None:
    """Import ``module`` (a dotted name, or a path to a ``.py`` file) so the cases and
    programs it registers can be explored. A module that cannot be found or raises while
    it is imported is a :class:`ValidationError` (field ``load``) whose one-line message
    names the module and the exception's type and first line."""
    if not isinstance(module, str) or not module:
        raise ValidationError(
            "--load needs a module name or a .py file", field="load", value=module
        )
    try:
        if module.endswith(".py"):
            path = Path(module)
            name = f"_videoflow_explore_{path.stem}"
            if name in sys.modules:
                return
            if not path.is_file():
                raise ValidationError(
                    f"cannot load {module}: no such file", field="load", value=module
                )
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise ValidationError(f"cannot load {module}", field="load", value=module)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            try:
                spec.loader.exec_module(mod)
            except BaseException:
                del sys.modules[name]  # a fixed file can be loaded again
                raise
        else:
            importlib.import_module(module)
    except ValidationError:
        raise
    except Exception as exc:  # ImportError, SyntaxError, whatever the module raised
        first = (str(exc).splitlines() or [""])[0]
        raise ValidationError(
            f"cannot load {module}: {type(exc).__name__}" + (f": {first}" if first else ""),
            field="load",
            value=module,
        ) from exc


def select_targets(select: str | None = None) -> list[Target]:
    """Conformance cases, then registered programs, filtered like ``conformance --select``
    (comma-separated globs against the ID or the title; None: everything)."""
    importlib.import_module(f"{__package__}.properties")
    cases: list[Target] = list(select_cases(select=select))
    wanted = selector(select)
    programs: list[Target] = [p for _, p in sorted(PROGRAMS.items()) if wanted(p.id, p.title)]
    return cases + programs


def find_target(target_id: str) -> Target:
    """The case or program with exactly this ID (a typed error naming what exists)."""
    for target in select_targets():
        if target.id == target_id:
            return target
    raise ValidationError(
        f"no conformance case or program {target_id!r} (list them: videoflow-aio explore --list)",
        field="target",
        value=target_id,
    )


@dataclass
class Exploration:
    """What an exploration did: runs by outcome, the failing runs (in the order found),
    the seeds tried and the wall seconds it took."""

    counts: Counter[str] = field(default_factory=Counter)
    failures: list[Run] = field(default_factory=list)
    seeds: int = 0
    wall_seconds: float = 0.0
    injected: int = 0
    """Faults injected in all (``--faults``): crashes and pauses at barriers."""
    interrupted: bool = False
    """Ctrl-C stopped it: the counts are those of the runs that ended before."""

    @property
    def runs(self) -> int:
        return sum(self.counts.values())


def explore(
    targets: Sequence[Target],
    seeds: Iterable[int],
    backends: Sequence[Backend] = ("asyncio", "trio"),
    *,
    jitter: float = 0.0,
    fault_rate: float = 0.0,
    stop_after: int = 1,
    on_run: Callable[[Run], None] | None = None,
    into: Exploration | None = None,
) -> Exploration:
    """Run every target on every backend under each seed in turn (see the module doc).
    ``into``: the Exploration to fill in as runs end (the caller keeps the partial counts
    when a ``KeyboardInterrupt`` ends it early; ``interrupted`` is then set)."""
    if stop_after < 1:
        raise ValidationError("stop_after must be >= 1", field="stop_after", value=stop_after)
    provider = RecordingMemoryProvider()
    result = Exploration() if into is None else into
    wall0 = time.perf_counter()  # wall-clock: reports how long the exploration took
    try:
        _explore(targets, seeds, backends, jitter, fault_rate, stop_after, on_run, provider, result)
    except KeyboardInterrupt:
        result.interrupted = True
        raise
    finally:
        result.wall_seconds = time.perf_counter() - wall0  # wall-clock: as above
    return result


def _explore(
    targets: Sequence[Target],
    seeds: Iterable[int],
    backends: Sequence[Backend],
    jitter: float,
    fault_rate: float,
    stop_after: int,
    on_run: Callable[[Run], None] | None,
    provider: RecordingMemoryProvider,
    result: Exploration,
) -> None:
    failed: Counter[tuple[str, str]] = Counter()
    done: set[tuple[str, str]] = set()
    for seed in seeds:
        result.seeds += 1
        for target in targets:
            for backend in backends:
                key = (target.id, backend)
                if key in done:
                    continue
                run = run_target(
                    target, backend, seed, jitter=jitter, fault_rate=fault_rate, provider=provider
                )
                result.counts[run.outcome] += 1
                result.injected += len(run.injected)
                if run.outcome == "fail":
                    result.failures.append(run)
                    failed[key] += 1
                    if failed[key] >= stop_after:
                        done.add(key)
                elif run.outcome == "skip":
                    done.add(key)
                if on_run is not None:
                    on_run(run)
