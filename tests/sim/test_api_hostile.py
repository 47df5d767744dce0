"""The simulator's Python API refuses hostile arguments with a typed error, as its TOML does:
the queueing formulas (``erlang_c`` with ``c = 10**73`` looped for ever; ``0`` divided by
zero; huge ints overflowed), ``lognormal_params``, a capacity ``Plan`` (``replications =
10**400`` hung, a precision of ``5e-324`` overflowed), and ``simulate``'s own arguments (an
int for ``spec``, a ``progress`` that is not callable raised from inside a task group)."""

from __future__ import annotations

import math
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from videoflow_aio.contracts import ValidationError
from videoflow_aio.sim import (
    Plan,
    SpecError,
    erlang_c,
    lognormal_params,
    md1_mean_response,
    mg1_mean_response,
    mmc_mean_response,
    mmc_response_quantile,
    mmc_response_tail,
    offered_loads,
    parse_set,
    parse_spec,
    parse_sweep,
    run_scenario,
    simulate,
)

HUGE = 10**400
BAD_NUMBERS: list[Any] = [HUGE, -HUGE, math.nan, math.inf, -1, 0, True, "1", None]

FORMULAS: dict[str, Callable[[Any], float | tuple[float, float]]] = {
    "erlang_c(c)": lambda v: erlang_c(v, 0.5),
    "erlang_c(offered)": lambda v: erlang_c(4, v),
    "mmc_mean_response(lam)": lambda v: mmc_mean_response(v, 1.0, 2),
    "mmc_mean_response(mu)": lambda v: mmc_mean_response(1.0, v, 2),
    "mmc_mean_response(c)": lambda v: mmc_mean_response(1.0, 1.0, v),
    "mmc_response_tail(t)": lambda v: mmc_response_tail(1.0, 1.0, 2, v),
    "mmc_response_quantile(q)": lambda v: mmc_response_quantile(1.0, 1.0, 2, v),
    "mg1_mean_response(mean)": lambda v: mg1_mean_response(1.0, v, 0.25),
    "mg1_mean_response(second_moment)": lambda v: mg1_mean_response(1.0, 0.5, v),
    "md1_mean_response(service)": lambda v: md1_mean_response(1.0, v),
    "lognormal_params(mean)": lambda v: lognormal_params(v, 2.0),
    "lognormal_params(p99)": lambda v: lognormal_params(1.0, v),
}
#: values some formulas accept: a tail at t <= 0 or t = inf is defined; an offered load of 0
ACCEPTED = {("mmc_response_tail(t)", v) for v in (-1, 0, math.inf)} | {("erlang_c(offered)", 0)}


@pytest.mark.parametrize("value", BAD_NUMBERS, ids=repr)
@pytest.mark.parametrize("where", sorted(FORMULAS))
def test_formulas_refuse_hostile_numbers(where: str, value: Any) -> None:
    call = FORMULAS[where]
    if (where, value) in ACCEPTED and not isinstance(value, bool):
        answer = call(value)
        assert isinstance(answer, float) and math.isfinite(answer)
        return
    with pytest.raises(ValidationError):
        call(value)


def test_erlang_c_refuses_more_servers_than_it_can_count_in_time() -> None:
    with pytest.raises(ValidationError, match="c must be an integer"):
        erlang_c(10**73, 0.5)  # looped for ever


def test_formulas_still_answer() -> None:
    assert erlang_c(1, 0.5) == pytest.approx(0.5)
    assert mmc_mean_response(1.0, 2.0, 1) == pytest.approx(1.0)  # 1 / (mu - lam)
    assert md1_mean_response(1.0, 0.5) == pytest.approx(0.75)  # D + rho D / (2 (1 - rho))
    mu, sigma = lognormal_params(1.0, 2.0)
    assert math.exp(mu + sigma * sigma / 2) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"replications": HUGE},
        {"replications": 0},
        {"replications": 2.5},
        {"replications": True},
        {"confidence": math.nan},
        {"confidence": HUGE},
        {"precision": math.inf},
        {"precision": -HUGE},
        {"max_virtual_seconds": math.inf},
        {"max_virtual_seconds": HUGE},
    ],
    ids=repr,
)
def test_a_plan_refuses_what_it_cannot_run(kwargs: dict[str, Any]) -> None:
    with pytest.raises(SpecError, match=next(iter(kwargs))):
        Plan(**kwargs)


SPEC = parse_spec(
    tomllib.loads(
        """
[[source]]
name = "cam"
rate_hz = 20
[run]
duration_seconds = 2
[[stage]]
name = "a"
inputs = ["cam"]
service = { dist = "exponential", mean_ms = 10 }
"""
    ),
    base=Path("/nonexistent"),
)


def test_a_precision_finer_than_floats_can_count_stops_at_the_budget() -> None:
    result = simulate(SPEC, replications=2, precision=5e-324, max_virtual_seconds=8)
    assert result.document is not None
    assert result.document["run"]["precision"]["stopped"] == "budget"


@pytest.mark.parametrize(
    "call",
    [
        lambda: simulate(42),  # type: ignore[call-overload]
        lambda: simulate(SPEC, progress=1),  # type: ignore[call-overload]
        lambda: run_scenario(SPEC),  # type: ignore[arg-type]
        lambda: offered_loads({"stage": []}),  # type: ignore[arg-type]
        lambda: parse_sweep(42),  # type: ignore[arg-type]
        lambda: parse_set(42),  # type: ignore[arg-type]
    ],
    ids=["simulate(spec)", "simulate(progress)", "run_scenario", "offered_loads", "sweep", "set"],
)
def test_wrong_types_are_type_errors_before_anything_runs(call: Callable[[], object]) -> None:
    with pytest.raises(TypeError, match="must be"):
        call()
