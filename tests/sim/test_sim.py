"""The simulator: spec validation, the JSON result, determinism, faults, GPU slices, the
``simulate`` command."""

from __future__ import annotations

import copy
import gc
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from _paths import ROOT
from videoflow_aio.cli import main
from videoflow_aio.pipeline import LatencyHistogram
from videoflow_aio.sim import (
    SimError,
    SpecError,
    erlang_c,
    load_spec,
    lognormal_params,
    mmc_mean_response,
    parse_spec,
    simulate,
    to_json,
)

EXAMPLE = ROOT / "examples" / "camera-farm.toml"


def small(**run: Any) -> dict[str, Any]:
    """A two-stage pipeline, 20 virtual seconds."""
    doc: dict[str, Any] = {
        "run": {"seed": 3, "duration_seconds": 20.0, "warmup_seconds": 2.0, **run},
        "source": [{"name": "cams", "streams": 4, "rate_hz": 25.0, "bytes": 1024}],
        "stage": [
            {
                "name": "decode",
                "inputs": ["cams"],
                "replicas": 2,
                "service": {"dist": "exponential", "mean_ms": 10.0},
                "ack_wait_seconds": 5.0,
            },
            {
                "name": "infer",
                "inputs": ["decode"],
                "replicas": 2,
                "service": {"dist": "lognormal", "mean_ms": 8.0, "p99_ms": 30.0},
                "output_bytes": 0,
            },
        ],
    }
    return doc


def run_doc(doc: dict[str, Any]) -> dict[str, Any]:
    return simulate(parse_spec(doc))


class _Boom(Exception):
    pass


def test_simulate_restores_the_gc_thresholds() -> None:
    """A run raises the youngest generation's threshold while it goes, and gives the caller's
    thresholds back afterwards (also when the run fails)."""
    before = gc.get_threshold()
    try:
        gc.set_threshold(123, 4, 5)
        doc = small()
        doc["run"]["duration_seconds"] = 2.0
        doc["run"]["warmup_seconds"] = 0.0
        run_doc(doc)
        assert gc.get_threshold() == (123, 4, 5)

        def explode(virtual: float, total: float) -> None:
            raise _Boom

        with pytest.raises((_Boom, BaseExceptionGroup)):
            simulate(parse_spec(doc), progress=explode)
        assert gc.get_threshold() == (123, 4, 5)
    finally:
        gc.set_threshold(*before)


# -- spec validation -------------------------------------------------------------------------


def _with(path: str, value: Any) -> dict[str, Any]:
    doc = small()
    target: Any = doc
    keys = path.split(".")
    for k in keys[:-1]:
        target = target[int(k)] if k.isdigit() else target[k]
    last = keys[-1]
    if value is _DELETE:
        del target[last]
    else:
        target[last] = value
    return doc


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("run.duration_seconds", 0, "run.duration_seconds"),
        ("run.duration_seconds", "long", "run.duration_seconds"),
        ("run.warmup_seconds", 30.0, "run.warmup_seconds"),
        ("run.backend", "curio", "run.backend"),
        ("run.sede", 1, "run.sede"),
        ("source.0.rate_hz", -1, "source[0].rate_hz"),
        ("source.0.arrival", "bursty", "source[0].arrival"),
        ("source.0.name", "a.b", "source[0].name"),
        ("stage.0.inputs", ["nowhere"], "stage[0].inputs"),
        ("stage.0.inputs", [], "stage[0].inputs"),
        ("stage.0.replicas", 0, "stage[0].replicas"),
        ("stage.0.service", _DELETE, "stage[0].service"),
        ("stage.0.service", {"dist": "gamma"}, "stage[0].service.dist"),
        ("stage.0.service", {"dist": "exponential"}, "stage[0].service.mean_ms"),
        ("stage.1.service.p99_ms", 5.0, "stage[1].service.p99_ms"),
        ("stage.1.service.p99_ms", 1000.0, "stage[1].service.p99_ms"),
        ("stage.0.service", {"dist": "empirical"}, "stage[0].service"),
        ("stage.0.service", {"dist": "empirical", "file": "nope.txt"}, "stage[0].service.file"),
        ("stage.0.max_deliver", 0, "stage[0].max_deliver"),
        ("stage.0.gpu", "1g.10gb", "node"),
        ("stage.1.name", "decode", "stage[1].name"),
        ("stage.1.inputs", ["infer"], "stage[1].inputs"),
    ],
)
def test_a_malformed_spec_names_the_key(path: str, value: Any, field: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec(_with(path, value))
    assert err.value.field == field
    assert field in str(err.value)


def test_cycles_and_fault_targets_are_checked() -> None:
    doc = small()
    doc["stage"][0]["inputs"] = ["infer"]
    with pytest.raises(SpecError, match="cycle"):
        parse_spec(doc)
    for fault, field in [
        ({"at_seconds": 1, "kind": "explode"}, "fault[0].kind"),
        ({"at_seconds": 1, "kind": "crash_replica"}, "fault[0].stage"),
        ({"at_seconds": 1, "kind": "crash_replica", "stage": "zz"}, "fault[0].stage"),
        ({"at_seconds": 1, "kind": "crash_replica", "stage": "decode", "replica": 2}, None),
        ({"at_seconds": 1, "kind": "pause_acceptance", "stage": "decode"}, None),
    ]:
        doc = small()
        doc["fault"] = [fault]
        with pytest.raises(SpecError) as err:
            parse_spec(doc)
        assert field is None or err.value.field == field


def test_empirical_samples_from_a_file(tmp_path: Path) -> None:
    (tmp_path / "samples.txt").write_text("# ms\n5\n10\n\n15  # comment\n")
    doc = small()
    doc["stage"][0]["service"] = {"dist": "empirical", "file": "samples.txt"}
    spec_file = tmp_path / "s.toml"
    import tomllib  # noqa: F401 - the spec is written as TOML below

    spec_file.write_text(_toml(doc))
    spec = load_spec(spec_file)
    assert spec.stages[0].service.samples_ms == (5.0, 10.0, 15.0)
    assert spec.stages[0].service.mean_ms == 10.0
    (tmp_path / "samples.txt").write_text("5\nfast\n")
    with pytest.raises(SpecError) as err:
        load_spec(spec_file)
    assert err.value.field == "stage[0].service.file" and "samples.txt:2" in str(err.value)


def test_lognormal_parameters_give_the_asked_mean_and_p99() -> None:
    import math
    from statistics import NormalDist

    mu, sigma = lognormal_params(0.008, 0.030)
    assert math.exp(mu + sigma**2 / 2) == pytest.approx(0.008)
    assert math.exp(mu + NormalDist().inv_cdf(0.99) * sigma) == pytest.approx(0.030)


def test_theory_helpers() -> None:
    assert erlang_c(1, 0.5) == pytest.approx(0.5)  # M/M/1: P(wait) = rho
    assert mmc_mean_response(5.0, 10.0, 1) == pytest.approx(0.2)  # 1 / (mu - lam)
    with pytest.raises(ValueError):
        mmc_mean_response(20.0, 10.0, 2)


def test_histogram_percentiles_within_the_stated_error() -> None:
    import random

    rng = random.Random(5)
    values = [rng.lognormvariate(-5, 1.2) for _ in range(20000)] + [0.0] * 10
    h = LatencyHistogram()
    h.extend(values)
    exact = sorted(values)
    for q in (0.0001, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0):
        want = exact[max(1, -(-int(q * 1e6) * len(exact) // 1_000_000)) - 1]
        assert abs(h.percentile(q) - want) <= h.relative_error * want + 1e-15, q
    assert h.mean == pytest.approx(sum(values) / len(values))
    assert h.max == max(values) and h.min == 0.0
    other = LatencyHistogram()
    other.extend(values)
    h.merge(other)
    assert h.count == 2 * len(values) and h.percentile(0.5) == other.percentile(0.5)
    assert LatencyHistogram().summary()["p99"] is None


# -- a run -----------------------------------------------------------------------------------


def test_result_has_the_documented_shape() -> None:
    r = run_doc(small())
    assert set(r) == {"run", "stages", "end_to_end", "sources", "faults", "series"}
    assert {"seed", "virtual_seconds", "wall_seconds", "events"} <= set(r["run"])
    for part in (*r["stages"].values(), r["end_to_end"]):
        assert set(part["latency_ms"]) == {"mean", "p50", "p90", "p99", "p999", "max"}
        for key in ("throughput_hz", "redeliveries", "dropped", "unresolved", "utilization"):
            assert key in part
    assert len(r["stages"]["decode"]["utilization"]) == 2
    assert r["run"]["drained"] and r["run"]["events"] == 2 * r["sources"]["cams"]["frames"]
    assert r["sources"]["cams"]["frames"] == 4 * 25 * 20
    assert r["end_to_end"]["throughput_hz"] == pytest.approx(100.0, rel=0.02)
    e2e = r["end_to_end"]["latency_ms"]
    assert e2e["p50"] <= e2e["p90"] <= e2e["p99"] <= e2e["p999"] <= e2e["max"]
    # end to end is at least each stage's share: both stages' means add up
    stages = r["stages"]
    total = stages["decode"]["latency_ms"]["mean"] + stages["infer"]["latency_ms"]["mean"]
    assert e2e["mean"] == pytest.approx(total, rel=1e-6)
    json.loads(to_json(r))


def test_same_seed_same_bytes_on_asyncio_and_another_seed_differs() -> None:
    faults = [
        {"at_seconds": 4.0, "kind": "crash_replica", "stage": "decode", "replica": 0},
        {"at_seconds": 6.0, "kind": "pause_acceptance", "stage": "infer", "duration_seconds": 6},
        {"at_seconds": 9.0, "kind": "fail_payload_reads", "count": 2},
    ]
    a, b, c = (with_faults(*faults), with_faults(*faults), with_faults(*faults, seed=4))
    results = [run_doc(doc) for doc in (a, b, c)]
    for r in results:
        r["run"]["wall_seconds"] = 0.0
    assert to_json(results[0]) == to_json(results[1])
    assert to_json(results[0]) != to_json(results[2])
    assert results[0]["stages"]["decode"]["redeliveries"] >= 3


def _without_replica_split(r: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(r)
    out["run"]["wall_seconds"] = 0.0
    out["run"]["backend"] = ""
    for stage in out["stages"].values():
        stage["utilization"] = round(sum(stage["utilization"]), 9)  # summed in another order
    return out


def test_on_trio_only_the_split_between_replicas_varies() -> None:
    # trio runs same-instant tasks in any order, so which replica takes which message varies
    # from run to run. Messages are still delivered in order and service times drawn in
    # delivery order, so every latency, count and series is the asyncio run's; only the
    # per-replica utilisation list (not its sum) can differ.
    a = run_doc(small())
    for _ in range(3):
        t = run_doc(small(backend="trio"))
        assert to_json(_without_replica_split(t)) == to_json(_without_replica_split(a))


def test_adding_a_stage_leaves_the_others_samples_alone() -> None:
    # constant arrivals and a single replica: decode's latencies are its service samples
    doc = small()
    doc["source"][0].update(streams=1, rate_hz=2.0)
    doc["stage"][0]["replicas"] = 1
    first = run_doc(doc)["stages"]["decode"]["latency_ms"]
    doc2 = copy.deepcopy(doc)
    doc2["stage"].append(
        {"name": "extra", "inputs": ["cams"], "service": {"dist": "exponential", "mean_ms": 3.0}}
    )
    assert run_doc(doc2)["stages"]["decode"]["latency_ms"] == first


# -- faults ----------------------------------------------------------------------------------


def with_faults(*faults: dict[str, Any], **run: Any) -> dict[str, Any]:
    doc = small(**run)
    doc["fault"] = list(faults)
    return doc


def test_crash_replica_redelivers_after_the_lease() -> None:
    r = run_doc(
        with_faults(
            {"at_seconds": 5.0, "kind": "crash_replica", "stage": "decode", "replica": 1},
            duration_seconds=30.0,
        )
    )
    [f] = r["faults"]
    assert f["applied_at_seconds"] == 5.0
    assert 5.0 <= f["died_at_seconds"] < 5.1
    assert f["restarted_at_seconds"] == pytest.approx(f["died_at_seconds"] + 10.0)
    decode = r["stages"]["decode"]
    assert decode["crashes"] == 1 and decode["redeliveries"] == 1
    assert r["end_to_end"]["redeliveries"] == 1
    # the redelivered frame waited out its 5 s lease
    assert r["end_to_end"]["latency_ms"]["max"] >= 5000.0
    assert r["run"]["drained"] and r["end_to_end"]["completed"] > 0


def test_kill_stage_without_restart_backs_up_and_reports_what_is_left() -> None:
    r = run_doc(
        with_faults(
            {"at_seconds": 10.0, "kind": "kill_stage", "stage": "infer"},
            drain_seconds=5.0,
        )
    )
    assert not r["run"]["drained"]
    infer = r["stages"]["infer"]
    assert infer["crashes"] == 2 and infer["unfinished"] > 0
    assert r["end_to_end"]["completed"] < r["sources"]["cams"]["frames"]


def test_pause_acceptance_holds_publications_and_stores_them_late() -> None:
    r = run_doc(
        with_faults(
            {
                "at_seconds": 5.0,
                "kind": "pause_acceptance",
                "stage": "decode",
                "duration_seconds": 7.0,
            },
        )
    )
    [f] = r["faults"]
    assert f["resumed_at_seconds"] == pytest.approx(12.0)
    # the source's publish timed out after 5 s (PublicationUnknown) and was sent again with
    # the same id; both held attempts are stored on resume, the second as a duplicate
    assert r["sources"]["cams"]["ambiguous_publishes_retried"] == 1
    assert f["accepted_late"] == 2
    assert r["end_to_end"]["latency_ms"]["max"] >= 6500.0
    assert r["end_to_end"]["measured"] == r["sources"]["cams"]["frames"] - 4 * 25 * 2


def test_payload_faults() -> None:
    r = run_doc(
        with_faults(
            {"at_seconds": 5.0, "kind": "pause_payload", "duration_seconds": 2.0},
            {"at_seconds": 12.0, "kind": "fail_payload_reads", "count": 3},
        )
    )
    stall, _ = r["faults"]
    assert stall["resumed_at_seconds"] == pytest.approx(7.0)
    assert r["end_to_end"]["latency_ms"]["max"] >= 1500.0  # frames waited out the stall
    assert r["stages"]["decode"]["payload_failures"] == 3
    assert r["stages"]["decode"]["retried"] == 3 and r["stages"]["decode"]["redeliveries"] == 3


def test_slow_stage_raises_latency_for_its_window() -> None:
    base = run_doc(small())
    r = run_doc(
        with_faults(
            {
                "at_seconds": 5.0,
                "kind": "slow_stage",
                "stage": "infer",
                "duration_seconds": 5.0,
                "factor": 5.0,
            },
        )
    )
    assert r["faults"][0]["ended_at_seconds"] == pytest.approx(10.0)
    assert (
        r["stages"]["infer"]["latency_ms"]["mean"]
        > 2 * base["stages"]["infer"]["latency_ms"]["mean"]
    )


# -- GPU slices ------------------------------------------------------------------------------


def gpu_doc(slices: int, replicas: int = 2) -> dict[str, Any]:
    doc = small()
    doc["stage"][1]["gpu"] = "1g.10gb"
    doc["stage"][1]["replicas"] = replicas
    doc["node"] = [{"name": "gpu-0", "mig": {"1g.10gb": slices}}]
    return doc


def test_gpu_slices_are_reserved_bound_and_released() -> None:
    r = run_doc(gpu_doc(7))
    g = r["stages"]["infer"]["gpu"]
    assert g["nodes"] == ["gpu-0"] and g["released"] == "released"
    assert g["devices"] == {
        "infer-0": ["gpu-0/mig-1g.10gb-0"],
        "infer-1": ["gpu-0/mig-1g.10gb-1"],
    }


def test_gpu_slices_that_do_not_fit_are_an_error() -> None:
    with pytest.raises(SimError) as err:
        run_doc(gpu_doc(1, replicas=2))
    assert err.value.field == "stage[1].gpu" and "do not fit" in str(err.value)


def test_geometry_change_delays_the_start_until_ready() -> None:
    doc = gpu_doc(0)
    doc["node"] = [{"name": "gpu-0"}]  # a whole H100: the manager must split it
    doc["gpu"] = {"authority": "mig-manager", "mig_apply_seconds": 30.0}
    r = run_doc(doc)
    assert r["run"]["gpu_ready_seconds"] == pytest.approx(30.0)
    assert r["stages"]["infer"]["gpu"]["devices"]["infer-1"][0].startswith("gpu-0/")


# -- the command -----------------------------------------------------------------------------


def test_cli_writes_json_and_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    code = main(
        ["simulate", str(EXAMPLE), "--duration", "8", "--warmup", "2", "-q", "--json", str(out)]
    )
    assert code == 0
    data = json.loads(out.read_text())
    assert data["run"]["duration_seconds"] == 8.0 and data["stages"]["infer"]["gpu"]
    shown = capsys.readouterr().out
    assert "end to end" in shown and "decode" in shown


def test_cli_shows_progress_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(EXAMPLE), "--duration", "4", "--warmup", "1"]) == 0
    captured = capsys.readouterr()
    assert "end to end" in captured.out and "messages in" in captured.out


def test_cli_bad_spec_exits_2_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(EXAMPLE.read_text().replace("rate_hz = 30", "rate_hz = -30"))
    assert main(["simulate", str(bad), "-q"]) == 2
    assert "source[0].rate_hz" in capsys.readouterr().err
    bad.write_text("[run\n")
    assert main(["simulate", str(bad), "-q"]) == 2
    assert "not valid TOML" in capsys.readouterr().err
    assert main(["simulate", str(tmp_path / "missing.toml"), "-q"]) == 2


def test_cli_plot_without_matplotlib_names_the_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails
    code = main(["simulate", str(EXAMPLE), "-q", "--plot", str(tmp_path / "r.png")])
    assert code == 2
    assert "videoflow-aio[plot]" in capsys.readouterr().err
    assert not (tmp_path / "r.png").exists()


def test_cli_plot(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    out = tmp_path / "r.png"
    assert (
        main(
            ["simulate", str(EXAMPLE), "--duration", "8", "--warmup", "2", "-q", "--plot", str(out)]
        )
        == 0
    )
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _toml(doc: dict[str, Any]) -> str:
    """A tiny TOML writer for these test documents (tables of scalars, arrays, inline
    tables)."""

    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + " }"
        return repr(v)

    lines: list[str] = []
    for key, section in doc.items():
        if isinstance(section, dict):
            lines.append(f"[{key}]")
            lines += [f"{k} = {value(v)}" for k, v in section.items()]
        else:
            for item in section:
                lines.append(f"[[{key}]]")
                lines += [f"{k} = {value(v)}" for k, v in item.items()]
    return "\n".join(lines) + "\n"


def test_the_readme_command_runs(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    line = next(x for x in readme.splitlines() if "videoflow-aio simulate " in x)
    argv = line.split("videoflow-aio ", 1)[1].split()
    assert argv[:2] == ["simulate", "examples/camera-farm.toml"]
    argv[1] = str(ROOT / argv[1])
    argv = [str(tmp_path / a) if a.startswith("r.") else a for a in argv]
    if "--plot" in argv and not _has_matplotlib():
        i = argv.index("--plot")
        del argv[i : i + 2]
    assert main([*argv, "--duration", "6", "--warmup", "1", "-q"]) == 0
    assert json.loads((tmp_path / "r.json").read_text())["run"]["duration_seconds"] == 6.0


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def test_every_fault_kind_the_spec_accepts_has_an_implementation() -> None:
    from videoflow_aio.sim._faults import _KINDS
    from videoflow_aio.sim._spec_types import FAULT_KINDS

    assert set(_KINDS) == set(FAULT_KINDS)
