"""Arrival processes, failure processes and the SLO outputs (issue 27): counts and
availability against their closed forms, with confidence intervals over replications."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest

from _sim_models import contains
from videoflow_aio.sim import parse_spec
from videoflow_aio.sim import simulate as simulate_api
from videoflow_aio.sim._replicate import replication_seed
from videoflow_aio.sim._run import simulate

CONFIDENCE = 0.99
SINK = {"name": "s", "inputs": ["cam"], "service": {"dist": "constant", "value_ms": 0}}


def _doc(source: dict[str, Any], duration: float = 100.0, **more: Any) -> dict[str, Any]:
    return {
        "run": {"duration_seconds": duration, "seed": 7},
        "source": [{"name": "cam", **source}],
        "stage": [copy.deepcopy(SINK)],
        **more,
    }


def _frames(doc: dict[str, Any], seed: int | None = None) -> int:
    if seed is not None:
        doc["run"]["seed"] = seed
    frames: int = simulate(parse_spec(doc))["end_to_end"]["frames"]
    return frames


def test_a_periodic_rate_schedule_sends_its_integral() -> None:
    # 10 Hz for 50 s then 30 Hz: the rate's integral is 2000 frames a stream
    doc = _doc({"rate_schedule": [[0, 10], [50, 30]], "streams": 3})
    assert _frames(doc) == 6000
    doc = _doc({"rate_schedule": [[0, 10], [20, 0], [60, 5]]})  # a pause in the middle
    assert _frames(doc) == 200 + 200


def test_a_poisson_rate_schedule_has_the_integral_as_mean_and_variance() -> None:
    # a non-homogeneous Poisson count over [0, T) is Poisson with mean ∫ rate: each count's
    # standardised value (n - m)/sqrt(m) has mean 0 and variance 1
    doc = _doc({"arrival": "poisson", "rate_schedule": [[0, 20], [30, 2], [70, 40]]})
    m = 20 * 30 + 2 * 40 + 40 * 30
    z = [(_frames(doc, replication_seed(1, i)) - m) / math.sqrt(m) for i in range(6)]
    assert contains(z, 0.0, CONFIDENCE), z
    assert 0.14 < sum(v * v for v in z) / len(z) < 3.7  # chi-square(6)/6: its 99.8 % range


def test_bursts_mix_the_two_rates_by_the_on_fraction() -> None:
    # on/off periods of means 1 and 4 s: on a fifth of the time; 1 Hz off, 50 Hz on
    doc = _doc(
        {"rate_hz": 1, "burst": {"rate_hz": 50, "mean_on_seconds": 1, "mean_off_seconds": 4}},
        duration=300.0,
    )
    counts = [_frames(doc, replication_seed(2, i)) / 300.0 for i in range(6)]
    assert contains(counts, 0.8 * 1 + 0.2 * 50, CONFIDENCE), counts
    constant = _doc(
        {
            "rate_hz": 0,
            "burst": {
                "rate_hz": 10,
                "mean_on_seconds": 2,
                "mean_off_seconds": 3,
                "dist": "constant",
            },
        },
        duration=50.0,
    )
    assert _frames(constant) == 10 * 20  # ten on periods of 2 s at 10 Hz


def test_a_trace_is_replayed_and_its_errors_never_quote_it(tmp_path: Path) -> None:
    trace = tmp_path / "arrivals.txt"
    trace.write_text("# capture times\n0.5\n0.25\n3\n\n250\n")
    doc = _doc({"arrival": "trace", "trace": str(trace)}, duration=10.0)
    r = simulate(parse_spec(doc))
    assert r["end_to_end"]["frames"] == 3  # 250 s is after the run
    trace.write_text("1\nsecret-token-xyz\n")
    with pytest.raises(Exception, match=r"arrivals\.txt:2") as info:
        parse_spec(doc)
    assert "secret" not in str(info.value)


def test_jitter_delays_each_periodic_frame_within_its_bound() -> None:
    doc = _doc({"rate_hz": 10, "jitter_ms": 40}, duration=20.0)
    doc["stage"][0]["service"] = {"dist": "constant", "value_ms": 1}
    r = simulate(parse_spec(doc))
    assert r["end_to_end"]["frames"] == 200
    assert r["end_to_end"]["latency_ms"]["max"] == pytest.approx(1.0, abs=1e-6)  # no queue
    plain = simulate(parse_spec(_doc({"rate_hz": 10}, duration=20.0)))
    assert plain["end_to_end"]["frames"] == 200


def test_a_failure_process_gives_availability_mtbf_over_mtbf_plus_mttr() -> None:
    mtbf, mttr = 10.0, 2.0
    doc = _doc(
        {"rate_hz": 1},
        duration=1500.0,
        failure=[{"stage": "s", "mtbf_seconds": mtbf, "mttr_seconds": mttr}],
    )
    doc["stage"][0]["replicas"] = 4
    per_replica: list[float] = []
    for i in range(3):
        doc["run"]["seed"] = replication_seed(3, i)
        f = simulate(parse_spec(doc))["failures"][0]
        per_replica += [1.0 - d / 1500.0 for d in f["down_seconds"]]
    assert contains(per_replica, mtbf / (mtbf + mttr), CONFIDENCE), per_replica


def test_failures_are_seeded_and_stop_at_the_run_end() -> None:
    doc = _doc(
        {"rate_hz": 2},
        duration=60.0,
        failure=[{"stage": "s", "mtbf_seconds": 5, "mttr_seconds": 1, "kind": "crash_replica"}],
    )
    doc["stage"][0]["replicas"] = 2
    a = simulate(parse_spec(doc))["failures"][0]
    b = simulate(parse_spec(doc))["failures"][0]
    assert a["failed_at_seconds"] == b["failed_at_seconds"] and sum(a["events"]) > 0
    assert a["failed_at_seconds"][0] != a["failed_at_seconds"][1]  # replicas independent
    doc["run"]["seed"] = 8
    c = simulate(parse_spec(doc))["failures"][0]
    assert c["failed_at_seconds"] != a["failed_at_seconds"]
    # constant up times of exactly the run's length: the failure due at the end is not applied
    doc["failure"] = [{"stage": "s", "mtbf_seconds": 60, "mttr_seconds": 1, "dist": "constant"}]
    d = simulate(parse_spec(doc))["failures"][0]
    assert d["events"] == [0, 0] and d["availability"] == 1.0
    doc["failure"][0]["mtbf_seconds"] = 30  # due at 30 s: applied, down 1 s of 60
    e = simulate(parse_spec(doc))["failures"][0]
    assert e["events"] == [1, 1] and e["availability"] == pytest.approx(59 / 60)


@pytest.mark.parametrize("kind", ["kill_stage", "pause_acceptance", "slow_stage"])
def test_each_failure_kind_runs(kind: str) -> None:
    failure = {"stage": "s", "mtbf_seconds": 5, "mttr_seconds": 1, "kind": kind}
    if kind == "slow_stage":
        failure["factor"] = 3.0
    doc = _doc({"rate_hz": 5}, duration=30.0, failure=[failure])
    doc["stage"][0]["service"] = {"dist": "constant", "value_ms": 10}
    r = simulate(parse_spec(doc))
    assert r["failures"][0]["events"][0] > 0
    assert r["end_to_end"]["completed"] == r["end_to_end"]["frames"]  # nothing lost


def test_pause_payload_failures_stall_the_store() -> None:
    doc = _doc(
        {"rate_hz": 5, "bytes": 100},
        duration=30.0,
        failure=[{"kind": "pause_payload", "mtbf_seconds": 5, "mttr_seconds": 2}],
    )
    r = simulate(parse_spec(doc))
    assert r["failures"][0]["events"][0] > 0
    assert r["end_to_end"]["latency_ms"]["max"] > 500.0  # frames waited out a stall


def test_slo_fractions_match_the_mm1_response_tail() -> None:
    # M/M/1: the response time is exponential of rate μ - λ, P(T > t) = exp(-(μ - λ) t);
    # the waiting time has mean ρ/(μ - λ)
    lam, mu, target = 5.0, 10.0, 0.4
    doc = _doc({"rate_hz": lam, "arrival": "poisson"}, duration=300.0)
    doc["run"]["warmup_seconds"] = 20.0
    doc["stage"][0]["service"] = {"dist": "exponential", "mean_ms": 1000 / mu}
    point = simulate_api(
        parse_spec(doc), replications=6, slo=[f"end_to_end.p99<={target * 1000:g}ms"]
    )
    e2e = point.document["end_to_end"]
    (entry,) = e2e["slo"]
    assert entry["target_ms"] == pytest.approx(400.0)
    low, high = entry["fraction_over_ci"]
    assert low <= math.exp(-(mu - lam) * target) <= high, entry
    wlow, whigh = point.document["stages"]["s"]["waiting_ms_ci"]["mean"]
    assert wlow <= (lam / mu) / (mu - lam) * 1000 <= whigh


def test_slo_fractions_of_one_run_are_exact_counts() -> None:
    doc = _doc({"rate_hz": 10}, duration=10.0)
    doc["run"]["slo_ms"] = [5, 15]
    doc["stage"][0]["service"] = {"dist": "constant", "value_ms": 10}
    r = simulate(parse_spec(doc))
    assert r["end_to_end"]["slo"] == [
        {"target_ms": 5.0, "fraction_over": 1.0},
        {"target_ms": 15.0, "fraction_over": 0.0},
    ]
    assert r["stages"]["s"]["slo"][0]["fraction_over"] == 1.0


def test_a_fault_at_exactly_the_run_end_is_not_applied() -> None:
    doc = _doc({"rate_hz": 10}, duration=10.0)
    doc["stage"][0]["service"] = {"dist": "constant", "value_ms": 200}  # still draining at 10 s
    doc["fault"] = [
        {"kind": "crash_replica", "stage": "s", "at_seconds": 9.9},
        {"kind": "crash_replica", "stage": "s", "at_seconds": 10.0},
    ]
    faults = simulate(parse_spec(doc))["faults"]
    assert "applied_at_seconds" in faults[0]
    assert "applied_at_seconds" not in faults[1]


def test_replications_total_join_drops_and_average_availability() -> None:
    branch = {"dist": "exponential", "mean_ms": 20}
    doc = _doc(
        {"rate_hz": 5},
        duration=60.0,
        failure=[{"stage": "a", "mtbf_seconds": 10, "mttr_seconds": 1}],
    )
    doc["stage"] = [{"name": n, "inputs": ["cam"], "service": branch} for n in "ab"]
    doc["stage"].append(dict(SINK, inputs=["a", "b"], join="all", join_timeout_ms=30, name="j"))
    singles = [
        simulate(parse_spec({**doc, "run": {"duration_seconds": 60.0, "seed": s}}))
        for s in (replication_seed(7, 0), replication_seed(7, 1))
    ]
    d = simulate_api(parse_spec(doc), replications=2).document
    timed_out = sum(r["stages"]["j"]["join"]["timed_out"] for r in singles)
    assert timed_out > 0 and d["stages"]["j"]["join"]["timed_out"] == timed_out
    assert d["end_to_end"]["dropped_reasons"] == {"join_timeout": timed_out}
    f = d["failures"][0]
    assert f["events"] == [sum(r["failures"][0]["events"][0] for r in singles)]
    avail = [r["failures"][0]["availability"] for r in singles]
    assert f["availability"] == pytest.approx(sum(avail) / 2)
    low, high = f["availability_ci"]
    assert low <= f["availability"] <= high
