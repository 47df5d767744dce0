"""Spec validation at its edges: every key the issue shows, with the input a careless or
hostile spec gives it — each refused with a SpecError naming the key, before anything runs."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest

from videoflow_aio.contracts.errors import ValidationError
from videoflow_aio.sim import SimError, SpecError, load_spec, parse_spec, simulate


def base() -> dict[str, Any]:
    return {
        "run": {"seed": 1, "duration_seconds": 5.0},
        "source": [{"name": "cams", "rate_hz": 10}],
        "stage": [
            {
                "name": "decode",
                "inputs": ["cams"],
                "service": {"dist": "constant", "value_ms": 1.0},
            },
            {
                "name": "infer",
                "inputs": ["decode"],
                "service": {"dist": "exponential", "mean_ms": 2.0},
            },
        ],
    }


def refused(doc: dict[str, Any], field: str) -> SpecError:
    with pytest.raises(SpecError) as err:
        parse_spec(doc)
    assert err.value.field == field, err.value
    assert str(err.value).startswith(field + ":")
    return err.value


def test_a_stage_listing_an_input_twice_is_a_spec_error() -> None:
    # before: accepted, then ensure_pipeline raised a bare ValidationError without a key path
    doc = base()
    doc["stage"][0]["inputs"] = ["cams", "cams"]
    refused(doc, "stage[0].inputs")


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan, -1.0, True, "5"])
def test_inline_empirical_samples_must_be_finite_numbers(bad: Any) -> None:
    doc = base()
    doc["stage"][0]["service"] = {"dist": "empirical", "samples_ms": [1.0, bad]}
    refused(doc, "stage[0].service.samples_ms[1]")


def test_an_empty_empirical_file_names_the_file_key(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_text("# no samples yet\n\n")
    doc = base()
    doc["stage"][0]["service"] = {"dist": "empirical", "file": "empty.txt"}
    with pytest.raises(SpecError) as err:
        parse_spec(doc, base=tmp_path)
    assert err.value.field == "stage[0].service.file"


@pytest.mark.parametrize(
    ("service", "field"),
    [
        ({"dist": "constant", "value_ms": 1.0, "p99_ms": 5.0}, "stage[0].service.p99_ms"),
        ({"dist": "constant", "value_ms": 1.0, "mean_ms": 5.0}, "stage[0].service.mean_ms"),
        ({"dist": "exponential", "mean_ms": 1.0, "value_ms": 5.0}, "stage[0].service.value_ms"),
        ({"dist": "exponential", "mean_ms": 1.0, "p99_ms": 5.0}, "stage[0].service.p99_ms"),
        (
            {"dist": "lognormal", "mean_ms": 1.0, "p99_ms": 5.0, "file": "x"},
            "stage[0].service.file",
        ),
        ({"dist": "empirical", "samples_ms": [1.0], "mean_ms": 3.0}, "stage[0].service.mean_ms"),
    ],
)
def test_a_service_key_that_does_not_apply_to_the_dist_is_refused(
    service: dict[str, Any], field: str
) -> None:
    # before: silently ignored — the run used another distribution than the one written
    doc = base()
    doc["stage"][0]["service"] = service
    refused(doc, field)


@pytest.mark.parametrize(
    ("fault", "field"),
    [
        ({"kind": "kill_stage", "stage": "decode", "replica": 1}, "fault[0].replica"),
        ({"kind": "crash_replica", "stage": "decode", "count": 3}, "fault[0].count"),
        ({"kind": "crash_replica", "stage": "decode", "channel": "cams"}, "fault[0].channel"),
        ({"kind": "crash_replica", "stage": "decode", "factor": 2.0}, "fault[0].factor"),
        (
            {"kind": "pause_payload", "duration_seconds": 1.0, "stage": "decode"},
            "fault[0].stage",
        ),
        (
            {"kind": "fail_payload_reads", "count": 1, "duration_seconds": 2.0},
            "fault[0].duration_seconds",
        ),
        (
            {"kind": "slow_stage", "stage": "decode", "duration_seconds": 1.0, "count": 2},
            "fault[0].count",
        ),
        (
            {
                "kind": "pause_acceptance",
                "stage": "decode",
                "channel": "cams",
                "duration_seconds": 1,
            },
            "fault[0].stage",
        ),
    ],
)
def test_a_fault_key_that_does_not_apply_to_its_kind_is_refused(
    fault: dict[str, Any], field: str
) -> None:
    doc = base()
    doc["fault"] = [{"at_seconds": 1.0, **fault}]
    refused(doc, field)


def test_pausing_a_sink_which_has_no_channel_is_a_spec_error() -> None:
    # before: accepted, and the run died with a KeyError inside an ExceptionGroup
    doc = base()
    doc["fault"] = [
        {"at_seconds": 1.0, "kind": "pause_acceptance", "channel": "infer", "duration_seconds": 1}
    ]
    refused(doc, "fault[0].channel")
    doc["fault"][0]["channel"] = "decode"  # read by infer: a channel
    parse_spec(doc)


def _gpu_doc(gpu: str, mig: dict[str, int], **node: Any) -> dict[str, Any]:
    doc = base()
    doc["stage"][1]["gpu"] = gpu
    doc["node"] = [{"name": "gpu-0", "mig": mig, **node}]
    return doc


@pytest.mark.parametrize("gpu", ["9g.99gb", "1g.10GB", "mig"])
def test_a_gpu_profile_that_does_not_exist_is_a_spec_error(gpu: str) -> None:
    # before: accepted, and the run raised SimError once the allocation model planned it
    refused(_gpu_doc(gpu, {"1g.10gb": 7}), "stage[1].gpu")


@pytest.mark.parametrize(
    ("mig", "node", "field"),
    [
        ({"9g.99gb": 1}, {}, "node[0].mig.9g.99gb"),
        ({"1g.10gb": 8}, {}, "node[0].mig.1g.10gb"),
        ({"1g.10gb": 15}, {"gpus": 2}, "node[0].mig.1g.10gb"),
        ({"7g.80gb": 1, "1g.10gb": 1}, {}, "node[0].mig"),
        ({"7g.80gb": 3}, {"gpus": 2}, "node[0].mig.7g.80gb"),
        ({"1g.10gb": 1}, {"product": "Tesla-T4"}, "node[0].product"),
    ],
)
def test_node_mig_geometry_that_cannot_exist_is_a_spec_error(
    mig: dict[str, int], node: dict[str, Any], field: str
) -> None:
    refused(_gpu_doc("1g.10gb", mig, **node), field)


def test_node_geometry_that_fits_is_accepted() -> None:
    parse_spec(_gpu_doc("1g.10gb", {"1g.10gb": 7}))
    parse_spec(_gpu_doc("1g.10gb", {"1g.10gb": 14}, gpus=2))
    parse_spec(_gpu_doc("3g.40gb", {"3g.40gb": 2}))
    parse_spec(_gpu_doc("whole", {}, product="Tesla-T4"))


def test_gpu_slices_that_do_not_fit_are_a_spec_error_too() -> None:
    # valid names and geometry, but 3 replicas on 2 slices: found when placing, still a
    # SpecError (the spec has to change) naming the key
    doc = _gpu_doc("1g.10gb", {"1g.10gb": 2})
    doc["stage"][1]["replicas"] = 3
    spec = parse_spec(doc)
    with pytest.raises(SpecError) as err:
        simulate(spec)
    assert isinstance(err.value, SimError) and isinstance(err.value, ValidationError)
    assert err.value.field == "stage[1].gpu" and "do not fit" in str(err.value)


def test_node_memory_must_be_positive() -> None:
    refused(_gpu_doc("whole", {}, memory_gib=0), "node[0].memory_gib")


def test_a_bin_width_that_would_need_millions_of_bins_is_refused() -> None:
    # before: accepted; the run allocated duration / bin_seconds entries per stage
    doc = base()
    doc["run"]["bin_seconds"] = 1e-9
    refused(doc, "run.bin_seconds")
    doc["run"]["bin_seconds"] = 5.0 / 100_000
    parse_spec(doc)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("seed", 1.5),
        ("seed", "7"),
        ("duration_seconds", math.inf),
        ("duration_seconds", math.nan),
        ("duration_seconds", -1.0),
        ("warmup_seconds", math.nan),
        ("warmup_seconds", -1.0),
        ("backend", "curio"),
        ("backend", 1),
    ],
)
def test_run_keys_with_wrong_values(key: str, value: Any) -> None:
    doc = base()
    doc["run"][key] = value
    refused(doc, f"run.{key}")


def test_a_spec_file_with_each_error_is_refused_by_load_spec(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(
        "[run]\nduration_seconds = 10\n[[source]]\nname='cams'\nrate_hz=1\n"
        "[[stage]]\nname='decode'\ninputs=['cams', 'cams']\nservice={dist='constant', value_ms=1}\n"
    )
    with pytest.raises(SpecError) as err:
        load_spec(spec)
    assert err.value.field == "stage[0].inputs"
    ok = copy.deepcopy(spec.read_text()).replace("['cams', 'cams']", "['cams']")
    spec.write_text(ok)
    load_spec(spec)


@pytest.mark.parametrize(
    ("rate", "streams", "duration", "frames"),
    [(1e308, 1, 5.0, "more than 1e+308"), (1e6, 16, 100.0, "1.6e+09"), (2e8, 1, 5.0, "1e+09")],
)
def test_a_load_above_a_billion_frames_is_refused_before_running(
    rate: float, streams: int, duration: float, frames: str
) -> None:
    # before: accepted, and the run went on for (virtually) ever
    doc = base()
    doc["run"]["duration_seconds"] = duration
    doc["source"][0].update(rate_hz=rate, streams=streams)
    if frames == "1e+09":  # exactly the bound is allowed; one stream more is not
        parse_spec(doc)
        doc["source"][0]["rate_hz"] = rate * 1.001
        frames = "1e+09"
    err = refused(doc, "source[0].rate_hz")
    assert f"= {frames} frames: at most 1e+09 frames a run" in str(err)
    assert "streams × rate_hz × run.duration_seconds" in str(err)


def test_the_bound_is_on_all_sources_together() -> None:
    doc = base()
    doc["run"]["duration_seconds"] = 1000.0
    doc["source"] = [{"name": "a", "rate_hz": 6e5}, {"name": "b", "rate_hz": 6e5}]
    doc["stage"][0]["inputs"] = ["a", "b"]
    err = refused(doc, "source")
    assert "add up to 1.2e+09 frames (a 6e+08, b 6e+08)" in str(err)


def test_a_duration_override_above_the_bound_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from videoflow_aio.cli import main

    spec = tmp_path / "s.toml"
    spec.write_text(
        '[run]\nduration_seconds = 5\n[[source]]\nname = "cams"\nstreams = 16\nrate_hz = 30\n'
        '[[stage]]\nname = "s"\ninputs = ["cams"]\nservice = { dist = "constant", value_ms = 1 }\n'
    )
    assert main(["simulate", str(spec), "-q", "--duration", "1e7"]) == 2
    err = capsys.readouterr().err
    assert "source[0].rate_hz" in err and "4.8e+09 frames" in err
