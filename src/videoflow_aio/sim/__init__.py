"""The latency simulator: a TOML spec of sources, stages and faults, run on the real memory
models (messaging, payload, allocation) on virtual time with the pipeline toolkit's
workers; per-stage and end-to-end latency, throughput, redeliveries, drops, utilisation.

    from videoflow_aio.sim import load_spec, simulate, to_json
    result = simulate(load_spec("examples/camera-farm.toml"))

Command line: ``videoflow-aio simulate SPEC.toml [--json out.json] [--plot out.png]``.
See ``docs/simulate.md``.
"""

from __future__ import annotations

from ._dist import lognormal_params, sampler
from ._report import faults_table, results_table, to_json
from ._run import simulate
from ._spec import SimError, SimSpec, SpecError, load_spec, parse_spec
from ._theory import erlang_c, md1_mean_response, mg1_mean_response, mmc_mean_response

__all__ = [
    "SimError",
    "SimSpec",
    "SpecError",
    "erlang_c",
    "faults_table",
    "load_spec",
    "lognormal_params",
    "md1_mean_response",
    "mg1_mean_response",
    "mmc_mean_response",
    "parse_spec",
    "results_table",
    "sampler",
    "simulate",
    "to_json",
]
