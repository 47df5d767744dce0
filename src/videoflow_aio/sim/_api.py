"""``simulate``: one run (its JSON-ready dict), or the capacity features with typed results;
``simulate_run``: one run as a typed :class:`SimResult`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, overload

from ._capacity import Plan, PointResult, SweepResult, evaluate, parse_sweep, parse_values
from ._capacity import sweep as run_sweep
from ._executor import Executor, make_executor
from ._overrides import apply_overrides
from ._probe import ProgressCallback
from ._result_types import SimResult
from ._run import run_result
from ._scenario import Scenario
from ._slo import Slo, parse_slo, with_slo_targets
from ._spec_types import SimSpec

Sweep = str | tuple[str, Sequence[Any]]
"""``"stage.detect.replicas=9..14"`` or ``("stage.detect.replicas", [9, 10, 11])``."""


@overload
def simulate(
    spec: SimSpec | Scenario, *, progress: ProgressCallback | None = None
) -> dict[str, Any]: ...


@overload
def simulate(
    spec: SimSpec | Scenario,
    *,
    progress: ProgressCallback | None = None,
    replications: int | None = None,
    confidence: float = 0.95,
    precision: float | None = None,
    max_virtual_seconds: float | None = None,
    slo: Sequence[str | Slo] | str = (),
    sweep: Sweep | Mapping[str, Any],
    overrides: Sequence[tuple[str, Any]] = (),
    executor: Executor | str | int | None = None,
) -> SweepResult: ...


@overload
def simulate(
    spec: SimSpec | Scenario,
    *,
    progress: ProgressCallback | None = None,
    replications: int | None = None,
    confidence: float = 0.95,
    precision: float | None = None,
    max_virtual_seconds: float | None = None,
    slo: Sequence[str | Slo] | str = (),
    sweep: None = None,
    overrides: Sequence[tuple[str, Any]] = (),
    executor: Executor | str | int | None = None,
) -> Any: ...


def simulate(
    spec: SimSpec | Scenario,
    *,
    progress: ProgressCallback | None = None,
    replications: int | None = None,
    confidence: float = 0.95,
    precision: float | None = None,
    max_virtual_seconds: float | None = None,
    slo: Sequence[str | Slo] | str = (),
    sweep: Sweep | Mapping[str, Any] | None = None,
    overrides: Sequence[tuple[str, Any]] = (),
    executor: Executor | str | int | None = None,
) -> Any:
    """Simulate ``spec`` (a :class:`Scenario` is simulated as its :meth:`~Scenario.to_spec`).

    Without any capacity argument: one run, the JSON-ready dict of ``docs/simulate.md``
    (``progress(virtual, total)`` is called as it runs). With ``replications``,
    ``precision``, ``slo`` or ``sweep``: a :class:`PointResult` (replications of one spec,
    with intervals and SLO checks) or a :class:`SweepResult` (``sweep``; its ``answer`` is
    the smallest value meeting every SLO; with ``slo`` or ``sweep`` but neither
    ``precision`` nor ``replications``, ``precision`` is 0.05). ``overrides`` are
    ``(dotted key, value)`` pairs applied first (``--set``). ``executor``: an
    :class:`Executor`, a Dask scheduler address (``"tcp://host:8786"``), ``"local"`` (one
    process per CPU), a number of local processes, or None (this process). The results do
    not depend on the executor.
    """
    spec = _prepared(spec, progress, overrides)
    if isinstance(slo, str | Slo):
        slo = [slo]
    slos = [s if isinstance(s, Slo) else parse_slo(s, [st.name for st in spec.stages]) for s in slo]
    spec = with_slo_targets(spec, slos)
    capacity = replications is not None or precision is not None or slo or sweep is not None
    if not capacity:
        return run_result(spec, progress=progress).to_dict()
    question = bool(slos) or sweep is not None
    if precision is None and replications is None and question:
        precision = 0.05  # as the command: a question asked without saying how sure
    plan = Plan(
        replications=replications or (4 if question else 1),
        confidence=confidence,
        precision=precision,
        max_virtual_seconds=max_virtual_seconds,
    )
    own = not hasattr(executor, "run")
    ex: Executor
    if executor in ("local", "processes"):
        ex = make_executor()
    elif isinstance(executor, str):
        ex = make_executor(dask=executor)
    elif isinstance(executor, int):
        ex = make_executor(workers=executor)
    elif executor is None:
        ex = make_executor(workers=1)
    else:
        ex = executor
    try:
        if sweep is not None:
            key, values = _sweep_of(sweep)
            result: PointResult | SweepResult = run_sweep(spec, key, values, slos, plan, ex)
        else:
            result = evaluate(spec, slos, plan, ex)
    finally:
        if own:
            ex.close()
    return result


def simulate_run(
    spec: SimSpec | Scenario,
    *,
    progress: ProgressCallback | None = None,
    overrides: Sequence[tuple[str, Any]] = (),
) -> SimResult:
    """One run of ``spec``, as :func:`simulate` without capacity arguments, typed:
    ``simulate(spec) == simulate_run(spec).to_dict()`` (``run.wall_seconds`` aside).
    ``result_schema()`` is the JSON Schema of its JSON."""
    return run_result(_prepared(spec, progress, overrides), progress=progress)


def _prepared(
    spec: SimSpec | Scenario,
    progress: ProgressCallback | None,
    overrides: Sequence[tuple[str, Any]],
) -> SimSpec:
    """The spec to run: a Scenario's, with ``overrides`` applied; TypeError for a bad
    ``spec`` or ``progress``."""
    if not isinstance(spec, SimSpec | Scenario):
        raise TypeError(f"spec must be a SimSpec (load_spec) or a Scenario, not {spec!r:.80}")
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be a callable or None, not {progress!r:.80}")
    if isinstance(spec, Scenario):
        spec = spec.to_spec()
    return apply_overrides(spec, overrides)


def _sweep_of(sweep: Sweep | Mapping[str, Any]) -> tuple[str, list[Any]]:
    """``"KEY=VALUES"``, ``(KEY, values or "A..B")`` or ``{KEY: values}``."""
    if isinstance(sweep, str):
        return parse_sweep(sweep)
    if isinstance(sweep, Mapping):
        ((key, values),) = sweep.items()
    else:
        key, values = sweep
    if isinstance(values, str):
        return key, parse_values(values)
    return key, list(values)


__all__ = ["Sweep", "simulate", "simulate_run"]
