"""One run's result is a tree of frozen msgspec Structs, built once by the code that computes
the figures; its ``to_builtins`` is the documented dict, identical — every key, value and
key order — to the dict main gave before the Struct existed (``golden/``, recorded on main at
e203744), and so is the CLI's ``--json``.

The golden specs run on asyncio: a trio run with faults is, on main too, sensitive to when
the cyclic collector runs (the same spec after another run in the same process can differ),
so its bytes are not a stable fixture inside one pytest process.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import msgspec
import pytest

from videoflow_aio.cli import main
from videoflow_aio.sim import (
    EndToEndResult,
    FailureReport,
    FaultReport,
    GpuGrant,
    LatencySummary,
    RunInfo,
    SimResult,
    StageResult,
    load_spec,
    result_schema,
    simulate,
    simulate_run,
    to_json,
)

GOLDEN = Path(__file__).parent / "golden"
SPECS = ("gpu_faults", "all_faults", "failures_join_batch", "nothing_measured")
_EXPECTED: dict[str, Any] = json.loads((GOLDEN / "results.json").read_text())
_WALL = re.compile(rb'"wall_seconds": [0-9.eE+-]+')


def _without_wall(doc: dict[str, Any]) -> dict[str, Any]:
    return doc | {"run": doc["run"] | {"wall_seconds": 0.0}}


@pytest.fixture(scope="module")
def runs() -> dict[str, SimResult]:
    return {name: simulate_run(load_spec(GOLDEN / f"{name}.toml")) for name in SPECS}


@pytest.mark.parametrize("name", SPECS)
def test_the_dict_is_mains_dict_key_for_key_in_the_same_order(name: str) -> None:
    got = _without_wall(simulate(load_spec(GOLDEN / f"{name}.toml")))
    # the encoded bytes compare keys, their order and every float exactly
    assert msgspec.json.encode(got) == msgspec.json.encode(_EXPECTED[name])


@pytest.mark.parametrize("name", SPECS)
def test_the_struct_gives_the_same_dict_and_json(runs: dict[str, SimResult], name: str) -> None:
    result = runs[name]
    doc = result.to_dict()
    assert msgspec.json.encode(_without_wall(doc)) == msgspec.json.encode(_EXPECTED[name])
    assert to_json(result) == to_json(doc)


@pytest.mark.parametrize("name", ["all_faults", "failures_join_batch", "gpu_faults"])
def test_the_cli_json_is_byte_for_byte_mains(name: str, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert main(["simulate", str(GOLDEN / f"{name}.toml"), "-q", "--json", str(out)]) == 0
    got = _WALL.sub(b'"wall_seconds": 0.0', out.read_bytes())
    assert got == (GOLDEN / f"cli_{name}.json").read_bytes()


def test_the_run_returns_the_typed_parts(runs: dict[str, SimResult]) -> None:
    result = runs["gpu_faults"]
    assert type(result) is SimResult
    assert type(result.run) is RunInfo and result.run.passes == 1
    assert type(result.end_to_end) is EndToEndResult
    decode: StageResult = result.stages["decode"]
    assert type(decode.latency_ms) is LatencySummary
    p99: float | None = decode.latency_ms.p99
    assert p99 is not None and p99 > 0.0
    assert decode.gpu is None
    gpu = result.stages["infer"].gpu
    assert type(gpu) is GpuGrant and gpu.released == "released" and gpu.nodes == ["gpu-0"]
    crash, slow, late = result.faults
    assert all(type(f) is FaultReport for f in result.faults)
    assert crash.applied_at_seconds is not None and crash.died_at_seconds is not None
    assert slow.ended_at_seconds == pytest.approx(15.0) and slow.factor == 3
    assert late.applied_at_seconds is None  # due after the load: never applied
    assert result.failures is None and "failures" not in result.to_dict()
    assert runs["all_faults"].run.passes == 2  # it lost messages: run again, following them


def test_failure_processes_are_reported_once_the_run_is_over(runs: dict[str, SimResult]) -> None:
    failures = runs["failures_join_batch"].failures
    assert failures is not None
    depth, payload = failures
    assert type(depth) is FailureReport and len(depth.events) == 2  # one per replica
    assert depth.availability == 1.0 - sum(depth.down_seconds) / (60.0 * 2)
    assert len(payload.events) == 1 and payload.stage is None
    doc = runs["failures_join_batch"].to_dict()
    assert list(doc)[-2:] == ["failures", "series"]


def test_the_result_is_frozen(runs: dict[str, SimResult]) -> None:
    result = runs["gpu_faults"]
    with pytest.raises(AttributeError):
        result.run.passes = 2  # type: ignore[misc]
    with pytest.raises(AttributeError):
        result.faults[0].applied_at_seconds = 0.0  # type: ignore[misc]


def test_nothing_measured_is_none_never_zero(runs: dict[str, SimResult]) -> None:
    result = runs["nothing_measured"]
    assert result.end_to_end.measured == 0
    assert result.end_to_end.latency_ms == LatencySummary(
        mean=None, p50=None, p90=None, p99=None, p999=None, max=None
    )
    assert result.series.end_to_end.quantiles_ms is None
    assert result.stages["x"].waiting_ms.p99 is None
    assert set(result.series.stages["x"].latency.mean) == {None}


@pytest.mark.parametrize("name", SPECS)
def test_json_round_trips_to_an_equal_struct(runs: dict[str, SimResult], name: str) -> None:
    result = runs[name]
    back = msgspec.json.decode(to_json(result), type=SimResult)
    assert back == result
    assert to_json(back) == to_json(result)


@pytest.mark.parametrize("name", SPECS)
def test_the_schema_validates_a_real_runs_json(runs: dict[str, SimResult], name: str) -> None:
    schema = result_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    doc = json.loads(to_json(runs[name]))
    jsonschema.Draft202012Validator(schema).validate(doc)


def test_the_schema_and_the_decoder_refuse_what_the_result_never_holds(
    runs: dict[str, SimResult],
) -> None:
    validator = jsonschema.Draft202012Validator(result_schema())
    doc = json.loads(to_json(runs["gpu_faults"]))
    bad: list[dict[str, Any]] = [
        doc | {"surprise": 1},  # an unknown key
        doc | {"run": {k: v for k, v in doc["run"].items() if k != "passes"}},  # a missing one
        doc | {"end_to_end": doc["end_to_end"] | {"measured": None}},  # a count is never None
        doc | {"faults": [doc["faults"][0] | {"kind": 3}]},  # a wrong type
    ]
    for d in bad:
        assert not validator.is_valid(d)
        with pytest.raises(msgspec.ValidationError):
            msgspec.json.decode(json.dumps(d), type=SimResult)
