"""Batched service and joins (issue 27): against closed forms where they exist, else against
a SimPy model of the same semantics, with confidence intervals over replications."""

from __future__ import annotations

from typing import Any

import pytest

from _sim_models import contains, simpy_batch_mean, welch_contains_zero
from videoflow_aio.sim import parse_spec
from videoflow_aio.sim._replicate import replication_seed
from videoflow_aio.sim._run import simulate

CONFIDENCE = 0.99


def _spec(stages: list[dict[str, Any]], **run: Any) -> dict[str, Any]:
    source = run.pop("source", {"name": "cam", "rate_hz": 100})
    return {"run": {"seed": 3, **run}, "source": [source], "stage": stages}


def test_a_full_batch_costs_its_fixed_cost_plus_per_item() -> None:
    # one frame every 10 ms; a replica takes the first, waits for 3 more (30 ms < 100 ms
    # max wait), then serves the 4 in 5 + 4 × 1 = 9 ms: latencies 39, 29, 19, 9 ms
    stage = {
        "name": "infer",
        "inputs": ["cam"],
        "batch": {"max_items": 4, "max_wait_ms": 100},
        "service": {"dist": "constant", "value_ms": 5, "per_item_ms": 1},
    }
    r = simulate(parse_spec(_spec([stage], duration_seconds=10.0)))
    e2e = r["end_to_end"]
    assert e2e["completed"] == e2e["frames"] == 1000
    assert e2e["latency_ms"]["mean"] == pytest.approx(24.0, abs=1e-6)
    assert e2e["latency_ms"]["max"] == pytest.approx(39.0, abs=1e-6)
    waiting = r["stages"]["infer"]["waiting_ms"]
    assert waiting["mean"] == pytest.approx(15.0, abs=1e-6)  # 30, 20, 10, 0
    assert r["stages"]["infer"]["batch_service"] == {
        "max_items": 4,
        "max_wait_ms": 100.0,
        "per_item_ms": 1.0,
    }


def test_max_wait_bounds_the_wait_for_a_fuller_batch() -> None:
    # 25 ms max wait at one frame every 10 ms: batches of 3 (the first, +10, +20), served in
    # 2 + 3 × 0 ms; the replica is free again before the next frame: 27, 17, 7 ms
    stage = {
        "name": "infer",
        "inputs": ["cam"],
        "batch": {"max_items": 8, "max_wait_ms": 25},
        "service": {"dist": "constant", "value_ms": 2},
    }
    r = simulate(parse_spec(_spec([stage], duration_seconds=9.0)))  # 900 frames: 300 batches
    assert r["end_to_end"]["completed"] == 900
    assert r["end_to_end"]["latency_ms"]["mean"] == pytest.approx(17.0, abs=1e-6)


def test_the_integer_batch_keeps_per_message_service() -> None:
    # batch = 4 (an integer) is a receive batch: each message still costs a full service
    stage = {
        "name": "infer",
        "inputs": ["cam"],
        "batch": 4,
        "service": {"dist": "constant", "value_ms": 5},
    }
    r = simulate(parse_spec(_spec([stage], duration_seconds=2.0)))
    assert r["stages"]["infer"]["batch"] == 4
    assert r["stages"]["infer"]["batch_service"] is None
    assert r["end_to_end"]["latency_ms"]["mean"] == pytest.approx(5.0, abs=1e-6)


def test_batched_service_matches_a_simpy_bulk_queue() -> None:
    # Poisson arrivals into one replica with an exponential fixed cost: no simple closed
    # form; the same semantics in SimPy, 6 replications each, means compared by Welch
    rate, fixed, per_item, items, wait = 60.0, 0.030, 0.002, 6, 0.004
    stage = {
        "name": "infer",
        "inputs": ["cam"],
        "batch": {"max_items": items, "max_wait_ms": wait * 1000},
        "service": {"dist": "exponential", "mean_ms": fixed * 1000, "per_item_ms": 2},
    }
    source = {"name": "cam", "rate_hz": rate, "arrival": "poisson"}
    ours, theirs = [], []
    for i in range(6):
        doc = _spec(
            [stage],
            duration_seconds=60.0,
            warmup_seconds=5.0,
            source=source,
        )
        doc["run"]["seed"] = replication_seed(11, i)
        ours.append(simulate(parse_spec(doc))["end_to_end"]["latency_ms"]["mean"] / 1000)
        theirs.append(
            simpy_batch_mean(
                rate_hz=rate,
                fixed_mean_s=fixed,
                per_item_s=per_item,
                max_items=items,
                max_wait_s=wait,
                duration_s=60.0,
                warmup_s=5.0,
                seed=1000 + i,
            )
        )
    assert welch_contains_zero(ours, theirs, CONFIDENCE), (ours, theirs)


def _diamond(a_ms: float, b_ms: float, **join: Any) -> list[dict[str, Any]]:
    return [
        {"name": "a", "inputs": ["cam"], "service": {"dist": "constant", "value_ms": a_ms}},
        {"name": "b", "inputs": ["cam"], "service": {"dist": "constant", "value_ms": b_ms}},
        {
            "name": "fuse",
            "inputs": ["a", "b"],
            "service": {"dist": "constant", "value_ms": 1},
            **join,
        },
        {"name": "out", "inputs": ["fuse"], "service": {"dist": "constant", "value_ms": 0}},
    ]


def test_a_join_follows_the_slowest_branch() -> None:
    src = {"name": "cam", "rate_hz": 10}
    joined = simulate(
        parse_spec(_spec(_diamond(10, 50, join="all"), duration_seconds=5.0, source=src))
    )
    assert joined["end_to_end"]["completed"] == 50
    assert joined["end_to_end"]["latency_ms"]["mean"] == pytest.approx(51.0, abs=1e-6)
    assert joined["end_to_end"]["latency_ms"]["max"] == pytest.approx(51.0, abs=1e-6)
    assert joined["stages"]["fuse"]["completed"] == 50  # served once per frame
    assert joined["stages"]["fuse"]["join"] == {"timed_out": 0, "incomplete": 0, "timeout_ms": None}
    # without the join the first copy to arrive wins downstream
    first = simulate(parse_spec(_spec(_diamond(10, 50), duration_seconds=5.0, source=src)))
    assert first["end_to_end"]["latency_ms"]["mean"] < 50.0


def test_a_join_timeout_drops_the_frame_with_its_reason() -> None:
    src = {"name": "cam", "rate_hz": 10}
    doc = _spec(_diamond(10, 50, join="all", join_timeout_ms=30), duration_seconds=5.0, source=src)
    r = simulate(parse_spec(doc))
    e2e = r["end_to_end"]
    assert e2e["completed"] == 0
    assert e2e["dropped"] == e2e["frames"] == 50
    assert e2e["dropped_reasons"] == {"join_timeout": 50}
    assert r["stages"]["fuse"]["join"]["timed_out"] == 50
    assert r["run"]["drained"]
    doc["stage"][2]["join_timeout_ms"] = 45  # the slow copy arrives 40 ms after the fast one
    r = simulate(parse_spec(doc))
    assert r["end_to_end"]["completed"] == 50 and r["end_to_end"]["dropped"] == 0


def test_a_fork_join_of_two_mm1_branches_matches_flatto_hahn() -> None:
    # Poisson λ forks into two exponential μ servers joined by a zero-time stage: the
    # fork-join response of two M/M/1 queues has mean (12 - ρ)/8 · 1/(μ - λ) (Flatto & Hahn,
    # Nelson & Tantawi); each branch's waiting time is M/M/1's, ρ/(μ - λ)
    lam, mu = 5.0, 10.0
    stages = [
        {"name": "a", "inputs": ["cam"], "service": {"dist": "exponential", "mean_ms": 100}},
        {"name": "b", "inputs": ["cam"], "service": {"dist": "exponential", "mean_ms": 100}},
        {
            "name": "fuse",
            "inputs": ["a", "b"],
            "join": "all",
            "service": {"dist": "constant", "value_ms": 0},
        },
    ]
    src = {"name": "cam", "rate_hz": lam, "arrival": "poisson"}
    means, waits = [], []
    for i in range(6):
        doc = _spec(stages, duration_seconds=200.0, warmup_seconds=20.0, source=src)
        doc["run"]["seed"] = replication_seed(5, i)
        r = simulate(parse_spec(doc))
        means.append(r["end_to_end"]["latency_ms"]["mean"] / 1000)
        waits.append(r["stages"]["a"]["waiting_ms"]["mean"] / 1000)
    rho = lam / mu
    assert contains(means, (12 - rho) / 8 / (mu - lam), CONFIDENCE), means
    assert contains(waits, rho / (mu - lam), CONFIDENCE), waits


def test_a_join_replica_that_dies_lets_its_copies_redeliver_and_join_again() -> None:
    stages = _diamond(10, 20, join="all", replicas=2, ack_wait_seconds=2)
    doc = _spec(stages, duration_seconds=30.0, source={"name": "cam", "rate_hz": 20})
    doc["stage"][2]["service"] = {"dist": "constant", "value_ms": 40}  # busy: dies holding one
    doc["fault"] = [{"kind": "crash_replica", "stage": "fuse", "at_seconds": 10}]
    r = simulate(parse_spec(doc))
    e2e = r["end_to_end"]
    assert e2e["completed"] == e2e["frames"] == 600
    assert r["stages"]["fuse"]["crashes"] == 1
    assert r["stages"]["fuse"]["redeliveries"] >= 2  # both copies of the frame it held
    assert e2e["latency_ms"]["max"] > 2000.0  # that frame waited out its lease


def test_the_screen_counts_a_batched_stage_at_full_batches() -> None:
    from videoflow_aio.sim import offered_loads

    stage = {
        "name": "infer",
        "inputs": ["cam"],
        "batch": {"max_items": 8},
        "service": {"dist": "constant", "value_ms": 30, "per_item_ms": 1},
    }
    (load,) = offered_loads(parse_spec(_spec([stage], duration_seconds=10.0)))
    assert load.utilization == pytest.approx(100 * (0.030 + 8 * 0.001) / 8)
