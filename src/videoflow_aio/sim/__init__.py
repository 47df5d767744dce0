"""The latency simulator: a TOML spec of sources, stages and faults, run on the real memory
models (messaging, payload, allocation) on virtual time with the pipeline toolkit's
workers; per-stage and end-to-end latency, throughput, redeliveries, drops, utilisation.

    from videoflow_aio.sim import load_spec, simulate, simulate_run, to_json
    result = simulate(load_spec("examples/camera-farm.toml"))  # the JSON-ready dict
    typed = simulate_run(load_spec("examples/camera-farm.toml"))  # a SimResult Struct

    point = simulate(spec, replications=8, slo=["end_to_end.p99<=200ms"])  # PointResult
    answer = simulate(spec, sweep="stage.detect.replicas=9..14", slo=[...])  # SweepResult

One pipeline definition for both: ``Scenario.from_pipeline(nodes, service=..., arrival=...)``
takes the production :class:`~videoflow_aio.pipeline.Node` objects; ``simulate(scenario)``,
``scenario.to_toml()``, ``Scenario.from_toml(path)``; ``run_scenario(scenario, handlers)`` runs
the user's real handlers on the toolkit's workers, their compute modelled by ``await work()``.

Command line: ``videoflow-aio simulate SPEC.toml [--json out.json] [--plot out.png]``.
See ``docs/simulate.md``.
"""

from __future__ import annotations

from ._api import simulate, simulate_run
from ._capacity import Plan, PointResult, SweepResult, parse_sweep
from ._ci import Interval, mean_interval, t_quantile
from ._dist import lognormal_params, sampler
from ._executor import DaskCluster, Executor, InProcess, LocalProcesses, make_executor
from ._overrides import apply_overrides, parse_set
from ._report import faults_table, results_table, to_json
from ._result_types import (
    BatchServiceEcho,
    EndToEndResult,
    EndToEndSeries,
    FailureReport,
    FaultReport,
    GpuGrant,
    JoinCounts,
    LatencySeries,
    LatencySummary,
    RunInfo,
    SeriesResult,
    SimResult,
    SloFraction,
    SourceResult,
    StageResult,
    result_schema,
)
from ._scenario import (
    Arrival,
    Batch,
    Const,
    Empirical,
    Exp,
    LogNormal,
    Periodic,
    Poisson,
    Scenario,
    Schedule,
    Service,
    Stage,
    Trace,
)
from ._screen import StageLoad, offered_loads, warnings_for
from ._slo import Slo, SloCheck, parse_slo
from ._spec import load_spec, parse_spec
from ._spec_types import SimError, SimSpec, SpecError
from ._theory import (
    erlang_c,
    md1_mean_response,
    mg1_mean_response,
    mmc_mean_response,
    mmc_response_quantile,
    mmc_response_tail,
)
from ._work import run_scenario, work

__all__ = [
    "Arrival",
    "Batch",
    "BatchServiceEcho",
    "Const",
    "DaskCluster",
    "Empirical",
    "EndToEndResult",
    "EndToEndSeries",
    "Executor",
    "Exp",
    "FailureReport",
    "FaultReport",
    "GpuGrant",
    "InProcess",
    "Interval",
    "JoinCounts",
    "LatencySeries",
    "LatencySummary",
    "LocalProcesses",
    "LogNormal",
    "Periodic",
    "Plan",
    "PointResult",
    "Poisson",
    "RunInfo",
    "Scenario",
    "Schedule",
    "SeriesResult",
    "Service",
    "SimError",
    "SimResult",
    "SimSpec",
    "Slo",
    "SloCheck",
    "SloFraction",
    "SourceResult",
    "SpecError",
    "Stage",
    "StageLoad",
    "StageResult",
    "SweepResult",
    "Trace",
    "apply_overrides",
    "erlang_c",
    "faults_table",
    "load_spec",
    "lognormal_params",
    "make_executor",
    "md1_mean_response",
    "mean_interval",
    "mg1_mean_response",
    "mmc_mean_response",
    "mmc_response_quantile",
    "mmc_response_tail",
    "offered_loads",
    "parse_set",
    "parse_slo",
    "parse_spec",
    "parse_sweep",
    "result_schema",
    "results_table",
    "run_scenario",
    "sampler",
    "simulate",
    "simulate_run",
    "t_quantile",
    "to_json",
    "warnings_for",
    "work",
]
