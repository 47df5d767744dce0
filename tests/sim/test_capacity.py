"""Capacity answers (issue #22): overrides, replications with intervals, SLO search against
Erlang C, screening, executors, the command's JSON and its answer line."""

from __future__ import annotations

import contextlib
import json
import math
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from videoflow_aio.cli import main
from videoflow_aio.sim import (
    InProcess,
    LocalProcesses,
    PointResult,
    SpecError,
    SweepResult,
    apply_overrides,
    mean_interval,
    mmc_response_quantile,
    mmc_response_tail,
    offered_loads,
    parse_slo,
    parse_spec,
    parse_sweep,
    simulate,
    t_quantile,
    to_json,
    warnings_for,
)
from videoflow_aio.sim._capacity import Plan, sweep

LAM, MEAN_MS = 200.0, 20.0  # offered load 4.0: 4 replicas are exactly saturated


def mmc(replicas: int = 5, duration: float = 20.0, seed: int = 3) -> Any:
    """One M/M/c stage: Poisson arrivals at LAM, exponential service of MEAN_MS."""
    return parse_spec(
        {
            "run": {"seed": seed, "duration_seconds": duration, "warmup_seconds": 2},
            "source": [{"name": "arrivals", "rate_hz": LAM, "arrival": "poisson"}],
            "stage": [
                {
                    "name": "server",
                    "inputs": ["arrivals"],
                    "replicas": replicas,
                    "service": {"dist": "exponential", "mean_ms": MEAN_MS},
                }
            ],
        }
    )


def p99_ms(c: int) -> float:
    return mmc_response_quantile(LAM, 1000.0 / MEAN_MS, c, 0.99) * 1000.0


def _strip_wall(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_wall(v) for k, v in value.items() if k != "wall_seconds"}
    if isinstance(value, list):
        return [_strip_wall(v) for v in value]
    return value


# -- closed forms and intervals ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("p", "df", "want"),
    [(0.975, 1, 12.7062047), (0.975, 4, 2.7764451), (0.975, 30, 2.0422725), (0.995, 9, 3.2498355)],
)
def test_t_quantile_matches_the_tables(p: float, df: int, want: float) -> None:
    assert t_quantile(p, df) == pytest.approx(want, rel=1e-7)


def test_mean_interval_is_the_student_t_interval() -> None:
    iv = mean_interval([1.0, 2.0, 3.0, 4.0], 0.95)
    hw = 3.1824463 * math.sqrt((5.0 / 3.0) / 4)  # t(0.975, 3 degrees of freedom)
    assert (
        iv.estimate == 2.5
        and iv.low == pytest.approx(2.5 - hw)
        and iv.high == pytest.approx(2.5 + hw)
    )
    assert mean_interval([7.0], 0.95).pair() is None


def test_mmc_response_quantile_is_exact_for_one_server() -> None:
    # M/M/1: the time in system is exponential with rate mu - lam
    lam, mu = 30.0, 50.0
    assert mmc_response_quantile(lam, mu, 1, 0.99) == pytest.approx(math.log(100) / (mu - lam))
    assert mmc_response_tail(lam, mu, 3, mmc_response_quantile(lam, mu, 3, 0.9)) == pytest.approx(
        0.1
    )


# -- overrides ---------------------------------------------------------------------------------


def test_overrides_address_array_tables_by_name() -> None:
    s = apply_overrides(
        mmc(),
        [
            ("stage.server.replicas", 7),
            ("source.arrivals.rate_hz", 25),
            ("stage.server.service.mean_ms", 12),
            ("run.duration_seconds", 120),
        ],
    )
    assert s.stage("server").replicas == 7
    assert s.sources[0].rate_hz == 25.0
    assert s.stage("server").service.mean_ms == 12.0
    assert s.run.duration_seconds == 120.0
    assert mmc().stage("server").replicas == 5  # the original is unchanged


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("stage.nope.replicas", 3, "no stage named 'nope'"),
        ("stage.server.replicas", 0, "stage[0].replicas: must be >= 1"),
        ("stage.server.replicaz", 3, "unknown key"),
        ("run.duration_seconds", "long", "must be a finite number"),
        ("bogus.x", 1, "unknown table 'bogus'"),
    ],
)
def test_a_bad_override_is_a_spec_error_naming_it(key: str, value: Any, says: str) -> None:
    with pytest.raises(SpecError) as err:
        apply_overrides(mmc(), [(key, value)])
    assert err.value.message.startswith(f"--set {key}") and says in err.value.message


def test_a_bad_set_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _spec_file(tmp_path)
    assert main(["simulate", str(spec), "-q", "--set", "stage.server.replicas=-1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--set stage.server.replicas=-1" in err[0]
    assert main(["simulate", str(spec), "-q", "--slo", "end_to_end.p42<=1ms"]) == 2
    assert "unknown figure" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["camera-farm.toml", "detector-replicas.toml"])
def test_overrides_start_from_the_document_the_spec_came_from(name: str) -> None:
    from _paths import ROOT
    from videoflow_aio.sim import load_spec
    from videoflow_aio.sim._overrides import to_doc

    spec = load_spec(ROOT / "examples" / name)
    assert parse_spec(to_doc(spec)) == spec  # faults, nodes, GPU profiles, every service


def test_a_fault_that_overloads_a_stage_while_it_lasts_is_a_transient_warning() -> None:
    spec = parse_spec(
        {
            "run": {"duration_seconds": 60},
            "source": [{"name": "cams", "rate_hz": 150}],
            "stage": [
                {
                    "name": "decode",
                    "inputs": ["cams"],
                    "replicas": 4,
                    "service": {"dist": "exponential", "mean_ms": 20},
                }
            ],
            "fault": [{"at_seconds": 10, "kind": "crash_replica", "stage": "decode"}],
        }
    )
    (w,) = warnings_for(spec)  # 3 replicas carry 150/s x 20 ms = 3.0: exactly full
    assert w["kind"] == "transient_overload" and w["stage"] == "decode" and w["at_seconds"] == 10
    assert w["utilization"] == pytest.approx(1.0, rel=1e-3)


def test_sweep_values_parse() -> None:
    assert parse_sweep("stage.a.replicas=9..14") == ("stage.a.replicas", [9, 10, 11, 12, 13, 14])
    assert parse_sweep("k.x.y=10..20:5") == ("k.x.y", [10, 15, 20])
    assert parse_sweep("k.x.y=0.5..1.5:0.5")[1] == [0.5, 1.0, 1.5]
    assert parse_sweep("k.x.y=3,1,2")[1] == [3, 1, 2]
    for bad in ("k.x.y=5..1", "k.x.y=a..b", "nokey"):
        with pytest.raises(SpecError):
            parse_sweep(bad)


# -- screening ---------------------------------------------------------------------------------


def test_offered_load_follows_fan_out_and_diamonds() -> None:
    spec = parse_spec(
        {
            "run": {"duration_seconds": 10},
            "source": [{"name": "cams", "streams": 4, "rate_hz": 25}],
            "stage": [
                {"name": "a", "inputs": ["cams"], "service": {"dist": "constant", "value_ms": 5}},
                {"name": "b", "inputs": ["cams"], "service": {"dist": "constant", "value_ms": 2}},
                {
                    "name": "c",
                    "inputs": ["a", "b"],
                    "replicas": 2,
                    "service": {"dist": "exponential", "mean_ms": 10},
                },
                {"name": "d", "inputs": ["c"], "service": {"dist": "constant", "value_ms": 1}},
            ],
        }
    )
    loads = {ld.stage: ld for ld in offered_loads(spec)}
    assert loads["a"].utilization == pytest.approx(0.5)  # 100/s x 5 ms
    assert loads["c"].arrival_hz == pytest.approx(200.0)  # a copy through each input
    assert loads["c"].utilization == pytest.approx(0.5)  # each input: 100/s x 10 ms / 2
    assert loads["d"].arrival_hz == pytest.approx(100.0)  # c forwards each frame once
    assert warnings_for(spec) == []
    over = apply_overrides(spec, [("stage.a.service.value_ms", 10)])
    (w,) = warnings_for(over)
    assert w["kind"] == "overload" and w["stage"] == "a" and w["utilization"] == pytest.approx(1.0)


def test_a_single_run_at_overload_warns_in_json_and_in_red(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _spec_file(tmp_path)
    out = tmp_path / "r.json"
    args = ["simulate", str(spec), "-q", "--duration", "3", "--set", "stage.server.replicas=4"]
    assert main([*args, "--json", str(out), "--plot", str(tmp_path / "r.png")]) == 0
    assert (tmp_path / "r.png").stat().st_size > 20_000
    data = json.loads(out.read_text())
    assert data["warnings"][0]["kind"] == "overload" and data["warnings"][0]["stage"] == "server"
    assert data["warnings"][0]["utilization"] == pytest.approx(1.0)
    assert "warning: stage 'server' is offered 1.00" in capsys.readouterr().out
    # today's figures stay where they were; the intervals sit next to them (one run: none)
    e2e = data["end_to_end"]
    assert list(e2e)[:2] == ["latency_ms", "latency_ms_ci"]
    assert e2e["latency_ms_ci"] == dict.fromkeys(("mean", "p50", "p90", "p99", "p999"))
    assert data["run"]["replications"] == 1 and data["run"]["confidence"] == 0.95


# -- replications ------------------------------------------------------------------------------


def test_replications_give_intervals_on_every_figure_and_keep_replication_0() -> None:
    spec = mmc(duration=4.0)
    one = simulate(spec)
    point = simulate(spec, replications=3)
    assert isinstance(point, PointResult) and point.document is not None
    doc = point.document
    assert doc["run"]["replications"] == 3 and doc["run"]["seeds"][0] == spec.run.seed
    assert len(set(doc["run"]["seeds"])) == 3
    assert doc["series"] == one["series"]  # replication 0 is today's run
    e2e = doc["end_to_end"]
    for f in ("mean", "p50", "p90", "p99", "p999"):
        low, high = e2e["latency_ms_ci"][f]
        assert low < e2e["latency_ms"][f] < high
    assert e2e["throughput_hz_ci"][0] < e2e["throughput_hz"] < e2e["throughput_hz_ci"][1]
    assert doc["stages"]["server"]["utilization_ci"] is not None
    assert e2e["frames"] > one["end_to_end"]["frames"] * 2  # counts are totals


def test_precision_adds_replications_until_reached_or_the_budget_is_spent() -> None:
    spec = mmc(duration=4.0)
    fixed = simulate(spec, replications=2, slo=["p99<=500ms"])
    assert fixed.stopped == "fixed"
    tight = simulate(
        spec, replications=2, precision=0.001, max_virtual_seconds=16, slo=["p99<=500ms"]
    )
    assert tight.document["run"]["replications"] == 4  # 16 s of load, 4 s each
    assert tight.document["run"]["precision"]["stopped"] == "budget"
    assert tight.document["run"]["precision"]["budget_spent"] is True


# -- the capacity question against Erlang C ----------------------------------------------------


@pytest.mark.parametrize(
    ("slo", "answer", "runs"),
    [
        ("end_to_end.p99<=140ms", 5, {5}),  # the answer sits next to the unstable 4
        ("end_to_end.p99<=110ms", 6, {5, 6}),
        ("end_to_end.mean<=26ms", 6, {5, 6}),
    ],
)
def test_the_sweep_names_the_erlang_c_answer(slo: str, answer: int, runs: set[int]) -> None:
    result = simulate(
        mmc(duration=20.0),
        sweep="stage.server.replicas=3..8",
        slo=[slo],
        replications=4,
        precision=0.1,
    )
    assert isinstance(result, SweepResult)
    assert result.answer is not None and result.answer.value == answer
    closed = {c: p99_ms(c) for c in range(5, 9)}
    target = parse_slo(slo).target
    if "p99" in slo:  # the closed form is on the side of the target the verdict says
        assert closed[answer] < target < closed.get(answer - 1, math.inf)
        iv = result.answer.interval("p99")
        assert iv is not None and iv.low is not None and iv.high is not None
        assert iv.low <= closed[answer] <= iv.high  # the answer's interval covers Erlang C
    by_value = {p.value: p for p in result.points}
    for c in (3, 4):  # unstable: not met, flagged, never simulated
        assert by_value[c].met is False and by_value[c].document is None
        pruned = by_value[c].pruned
        assert pruned is not None and pruned.startswith("overload")
        assert any(w["kind"] == "overload" for w in by_value[c].warnings)
    assert {p.value for p in result.points if p.document is not None} == runs
    for p in result.points:
        if p.document is None and p.value > answer:
            assert p.pruned is not None and "more replicas only help" in p.pruned


def test_no_answer_says_why() -> None:
    # service alone has p99 = 92 ms: no replica count gets below 80 ms
    result = sweep(
        mmc(duration=10.0),
        "stage.server.replicas",
        [4, 5, 6, 7],
        [parse_slo("p99<=80ms")],
        Plan(replications=3),
        InProcess(),
    )
    assert result.answer is None
    assert (
        result.reason is not None
        and "not met at 7" in result.reason
        and "overloaded at 4" in result.reason
    )
    assert [p.value for p in result.points if p.document is not None] == [7]


# -- executors ---------------------------------------------------------------------------------


def test_results_are_the_same_on_local_processes_and_in_process() -> None:
    args: dict[str, Any] = {
        "sweep": "stage.server.replicas=4..6",
        "slo": ["p99<=300ms"],
        "replications": 2,
    }
    here = simulate(mmc(duration=4.0), executor=InProcess(), **args)
    pool = LocalProcesses(2)
    try:
        there = simulate(mmc(duration=4.0), executor=pool, **args)
    finally:
        pool.close()
    assert here.answer is not None and here.answer.value == 5
    assert _strip_wall(json.loads(to_json(here))) == _strip_wall(json.loads(to_json(there)))


def test_points_of_a_key_without_order_run_at_once_with_the_same_results() -> None:
    args: dict[str, Any] = {"sweep": "stage.server.batch=1..2", "slo": ["p99<=300ms"]}
    args["replications"] = 2
    here = simulate(mmc(duration=3.0), executor=InProcess(), **args)
    pool = LocalProcesses(2)
    try:
        there = simulate(mmc(duration=3.0), executor=pool, **args)
    finally:
        pool.close()
    assert [p.document is not None for p in there.points] == [True, True]
    assert _strip_wall(json.loads(to_json(here))) == _strip_wall(json.loads(to_json(there)))


@pytest.mark.slow
def test_results_are_the_same_on_a_dask_cluster(tmp_path: Path) -> None:
    # a real cluster as docs/simulate.md starts one: `dask scheduler` and two `dask worker`
    # processes on 127.0.0.1 (an in-process LocalCluster hung starting its nannies inside a
    # pytest-xdist worker, whose __main__ is not a file)
    distributed = pytest.importorskip("distributed")
    args: dict[str, Any] = {
        "sweep": "stage.server.replicas=4..6",
        "slo": ["p99<=300ms"],
        "replications": 2,
    }
    here = simulate(mmc(duration=4.0), executor=InProcess(), **args)
    with _dask_cluster(tmp_path, workers=2) as address:
        with distributed.Client(address, timeout=60) as client:
            client.wait_for_workers(2, timeout=60)
        there = simulate(mmc(duration=4.0), executor=address, **args)
    assert there.answer is not None and here.answer is not None
    assert there.answer.value == here.answer.value
    assert _strip_wall(json.loads(to_json(here))) == _strip_wall(json.loads(to_json(there)))


@contextlib.contextmanager
def _dask_cluster(tmp_path: Path, *, workers: int) -> Iterator[str]:
    """A scheduler and ``workers`` single-threaded workers on 127.0.0.1, free ports; its
    address. Every process is killed on the way out."""
    dask = str(Path(sys.executable).with_name("dask"))
    info = tmp_path / "scheduler.json"
    common = ["--scheduler-file", str(info)]
    procs = [
        subprocess.Popen(
            [dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard", *common],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    try:
        deadline = time.monotonic() + 60  # wall-clock: a real process starting
        while not info.exists() or not info.read_text().strip():
            assert procs[0].poll() is None, "dask scheduler exited"
            assert time.monotonic() < deadline, "dask scheduler wrote no address in 60 s"
            time.sleep(0.05)  # a real process: nothing to wait on but its file
        address = json.loads(info.read_text())["address"]
        for _ in range(workers):
            procs.append(
                subprocess.Popen(
                    [
                        dask,
                        "worker",
                        "--host",
                        "127.0.0.1",
                        "--nthreads",
                        "1",
                        "--no-nanny",
                        "--no-dashboard",
                        *common,
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        yield str(address)
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait(timeout=30)


def test_dask_without_distributed_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(__import__("sys").modules, "distributed", None)
    spec = _spec_file(tmp_path)
    code = main(["simulate", str(spec), "-q", "--replications", "2", "--dask", "tcp://127.0.0.1:1"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install 'videoflow-aio[dask]'" in err[0]


# -- the command -------------------------------------------------------------------------------


def _spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "mmc.toml"
    path.write_text(
        f"""
[run]
seed = 3
duration_seconds = 4
warmup_seconds = 1

[[source]]
name = "arrivals"
rate_hz = {LAM}
arrival = "poisson"

[[stage]]
name = "server"
inputs = ["arrivals"]
replicas = 5
service = {{ dist = "exponential", mean_ms = {MEAN_MS} }}
"""
    )
    return path


def test_the_sweep_json_and_the_answer_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _spec_file(tmp_path)
    out = tmp_path / "sweep.json"
    args = [
        "simulate",
        str(spec),
        "-q",
        "--sweep",
        "stage.server.replicas=4..6",
        "--slo",
        "end_to_end.p99<=300ms",
        "--replications",
        "2",
        "--workers",
        "1",
        "--json",
        str(out),
        "--plot",
        str(tmp_path / "sweep.png"),
    ]
    assert main(args) == 0
    assert (tmp_path / "sweep.png").stat().st_size > 20_000
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("answer: stage.server.replicas = 5 (p99 ")
    assert first.endswith("≤ 300 ms, 95 %)") and " ms ± " in first
    data = json.loads(out.read_text())
    sw = data["sweep"]
    assert sw["key"] == "stage.server.replicas" and sw["answer"]["value"] == 5
    assert [p["value"] for p in sw["points"]] == [4, 5, 6]
    p4, p5, p6 = sw["points"]
    assert (
        p4["slo"]["met"] is False and p4["result"] is None and p4["pruned"].startswith("overload")
    )
    assert p5["slo"]["met"] is True and p5["slo"]["checks"][0]["slo"] == "end_to_end.p99<=300ms"
    assert p5["result"]["end_to_end"]["latency_ms_ci"]["p99"][0] < 300
    assert p5["result"]["run"]["replications"] == 2
    assert p6["result"] is None and p6["slo"]["met"] is None and "only help" in p6["pruned"]
    assert sw["pruned"] == [
        {"value": 4, "reason": p4["pruned"]},
        {"value": 6, "reason": p6["pruned"]},
    ]
    assert data["warnings"][0]["value"] == 4 and data["warnings"][0]["kind"] == "overload"


def test_a_spent_budget_is_said_in_the_terminal_and_the_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = _spec_file(tmp_path)
    out = tmp_path / "r.json"
    args = ["simulate", str(spec), "-q", "--workers", "1", "--replications", "2"]
    args += ["--precision", "0.001", "--max-virtual-seconds", "8", "--json", str(out)]
    assert main(args) == 0
    assert "precision 0.1% NOT reached: the --max-virtual-seconds budget (8 s) is spent" in (
        capsys.readouterr().out
    )
    run = json.loads(out.read_text())["run"]
    assert run["replications"] == 2 and run["precision"]["stopped"] == "budget"


def test_a_sweep_without_slo_runs_every_stable_point_and_plots_p99(tmp_path: Path) -> None:
    from videoflow_aio.sim._plot import plot

    result = simulate(mmc(duration=3.0), sweep="stage.server.replicas=4..6", replications=2)
    assert result.answer is None and result.reason == "no --slo: nothing to answer"
    assert [p.document is not None for p in result.points] == [False, True, True]
    plot(result, tmp_path / "s.png")
    assert (tmp_path / "s.png").stat().st_size > 20_000
