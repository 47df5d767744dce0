"""The result's figures where the pipeline is not a single line."""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any, cast

import pytest
from rich.console import Console

from videoflow_aio.contracts.messaging import ChannelId
from videoflow_aio.pipeline import Pipeline
from videoflow_aio.sim import parse_spec, simulate, to_json
from videoflow_aio.sim._e2e import FrameLedger, LossLedger
from videoflow_aio.sim._report import results_table


def _stage(name: str, inputs: list[str], ms: float, **more: Any) -> dict[str, Any]:
    return {
        "name": name,
        "inputs": inputs,
        "service": {"dist": "constant", "value_ms": ms},
        **more,
    }


def _run(*stages: dict[str, Any], **run: Any) -> dict[str, Any]:
    doc = {
        "run": {"seed": 1, "duration_seconds": 10.0, **run},
        "source": [{"name": "cams", "rate_hz": 10}],
        "stage": list(stages),
    }
    return simulate(parse_spec(doc))


def _accounted(e2e: dict[str, Any]) -> None:
    """Every frame is counted exactly once: completed, dropped, unresolved or unfinished."""
    fates = e2e["completed"] + e2e["dropped"] + e2e["unresolved"] + e2e["unfinished"]
    assert fates == e2e["frames"]


def test_fan_out_to_two_sinks_counts_each_frame_once_at_its_last_settle() -> None:
    doc = {
        "run": {"seed": 1, "duration_seconds": 10.0},
        "source": [{"name": "cams", "rate_hz": 10}],
        "stage": [
            {"name": "fast", "inputs": ["cams"], "service": {"dist": "constant", "value_ms": 1}},
            {"name": "slow", "inputs": ["cams"], "service": {"dist": "constant", "value_ms": 50}},
        ],
    }
    e2e = simulate(parse_spec(doc))["end_to_end"]
    assert e2e["frames"] == 100
    assert e2e["completed"] == e2e["measured"] == 100  # was 200: once per sink
    assert e2e["throughput_hz"] == pytest.approx(10.0)  # was 20
    assert e2e["latency_ms"]["p50"] == pytest.approx(50.0, rel=1e-3)  # was 1 ms: the fast sink's
    assert e2e["dropped"] == e2e["unresolved"] == e2e["unfinished"] == 0


def test_a_diamond_into_one_sink_completes_at_the_second_copy() -> None:
    # cams -> a (1 ms), b (5 ms) -> c (1 ms, reads both): c settles two copies of each frame
    r = _run(_stage("a", ["cams"], 1), _stage("b", ["cams"], 5), _stage("c", ["a", "b"], 1))
    assert r["stages"]["c"]["completed"] == 200
    e2e = r["end_to_end"]
    assert e2e["completed"] == 100 and e2e["unfinished"] == 0
    assert e2e["latency_ms"]["p50"] == pytest.approx(6.0, rel=1e-3)  # via b, not a's 2 ms


def test_a_diamond_feeding_a_stage_owes_one_settle() -> None:
    # c forwards each frame under one id: its second copy is deduplicated, d sees one
    r = _run(
        _stage("a", ["cams"], 1),
        _stage("b", ["cams"], 5),
        _stage("c", ["a", "b"], 1),
        _stage("d", ["c"], 1),
    )
    assert r["stages"]["d"]["completed"] == 100
    e2e = r["end_to_end"]
    assert e2e["completed"] == 100 and e2e["unfinished"] == 0  # a count of paths would owe 2
    assert e2e["latency_ms"]["p50"] == pytest.approx(3.0, rel=1e-3)


def test_a_frame_dropped_on_one_branch_is_dropped_once_end_to_end() -> None:
    # the slow sink's queue holds 3: most frames are evicted there; the fast sink gets all
    r = _run(
        _stage("fast", ["cams"], 1),
        _stage("slow", ["cams"], 500, max_queue=3),
    )
    fast, slow, e2e = r["stages"]["fast"], r["stages"]["slow"], r["end_to_end"]
    assert fast["completed"] == 100 and slow["dropped"] > 50
    assert e2e["dropped"] == slow["dropped"]
    assert e2e["completed"] == slow["completed"] == 100 - slow["dropped"]
    _accounted(e2e)


def test_frames_given_up_on_are_unresolved_end_to_end() -> None:
    doc = {
        "run": {"seed": 1, "duration_seconds": 10.0},
        "source": [{"name": "cams", "rate_hz": 10, "bytes": 64}],
        "stage": [
            _stage("decode", ["cams"], 1, max_deliver=1),
            _stage("infer", ["decode"], 1),
        ],
        "fault": [{"at_seconds": 5.0, "kind": "fail_payload_reads", "count": 3}],
    }
    r = simulate(parse_spec(doc))
    e2e = r["end_to_end"]
    assert r["stages"]["decode"]["unresolved"] == 3
    assert e2e["unresolved"] == 3 and e2e["completed"] == 97 and e2e["dropped"] == 0
    _accounted(e2e)


def test_frames_left_behind_a_killed_stage_are_unfinished() -> None:
    doc = {
        "run": {"seed": 1, "duration_seconds": 40.0, "drain_seconds": 5.0},
        "source": [{"name": "cams", "rate_hz": 10}],
        "stage": [_stage("decode", ["cams"], 1), _stage("infer", ["decode"], 1)],
        "fault": [{"at_seconds": 2.0, "kind": "kill_stage", "stage": "infer"}],
    }
    r = simulate(parse_spec(doc))
    e2e, infer = r["end_to_end"], r["stages"]["infer"]
    assert e2e["frames"] == 400 and e2e["completed"] == 20
    assert e2e["unfinished"] == 380 and e2e["dropped"] == e2e["unresolved"] == 0
    assert infer["unfinished"] == 380 and r["stages"]["decode"]["unfinished"] == 0
    _accounted(e2e)
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(results_table(r))
    lines = console.export_text().splitlines()
    assert "unfinished" in lines[2]
    [row] = [line for line in lines if line.startswith("│ end to end")]
    assert row.split("│")[-3].strip() == "380"
    assert "20 of 400 frames completed in all" in " ".join(lines)


def test_the_ledger_forgets_a_frame_once_it_completed() -> None:
    ledger = FrameLedger({"cams": 2}, 0.0, (0.0, 10.0), 1.0, 10)
    for n in range(3):
        ledger.published(f"cams-0-{n}", "cams")
    ledger.settled("cams-0-0", 0.0, 0.5)
    assert ledger.unfinished == 3 and ledger.completed == 0  # one of two copies
    ledger.settled("cams-0-0", 0.0, 0.7)
    ledger.refused("cams-0-1")
    assert ledger.inflight == {"cams-0-2": 2}
    ledger.settled("cams-0-0", 0.0, 0.9)  # later news of a completed frame changes nothing
    assert (ledger.completed, ledger.dropped, ledger.unfinished) == (1, 1, 1)
    assert ledger.histogram.count == 1 and ledger.histogram.max == pytest.approx(0.7)


def test_the_loss_ledger_follows_every_copy_of_a_frame() -> None:
    cams, decode = ChannelId("f", "r", "cams"), ChannelId("f", "r", "decode")
    pipe = SimpleNamespace(
        channels={"cams": cams, "decode": decode},
        readers={"cams": ("decode",), "decode": ("infer",), "infer": ()},
        subscriptions={"infer": (SimpleNamespace(name="infer-in"),)},
    )
    ledger = LossLedger({"cams": 1}, 0.0, (0.0, 10.0), 1.0, 10)
    ledger.wire(cast(Pipeline, pipe))
    for frame in "ABCDE":
        ledger.published(frame, "cams")
        ledger.event("publish", cams.name, frame, {"duplicate": False})
    # A: dropped from the source channel before decode took it
    ledger.event("drop", cams.name, "A", {"subscriptions": ["decode-in"]})
    # B: evicted while decode worked on it, forwarded all the same, settled by the sink
    ledger.event("publish", decode.name, "B@decode", {"duplicate": False})
    ledger.event("drop", cams.name, "B", {"subscriptions": ["decode-in"]})
    assert ledger.dropped == 1 and "B" in ledger.frames  # a copy of B is alive
    ledger.settled("B", 0.0, 0.25)
    # C: decode gave up on it; its later eviction is the same loss, not a second one
    ledger.event("unresolved", cams.name, "C", {"subscription": "decode-in"})
    ledger.event("drop", cams.name, "C", {"subscriptions": ["decode-in"]})
    # D: forwarded, then its input copy given up on: lost, though a copy is still queued
    ledger.event("publish", decode.name, "D@decode", {"duplicate": False})
    ledger.event("publish", decode.name, "D@decode", {"duplicate": True})
    ledger.event("unresolved", cams.name, "D", {"subscription": "decode-in"})
    assert set(ledger.frames) == {"D", "E"}
    # F, G: evicted while a decode replica holds them (delivered, not settled): F's replica
    # then settles stale without forwarding (the message is gone: its ident is "#<seq>");
    # G's forwards first and the sink completes it
    for seq, frame in ((6, "F"), (7, "G")):
        ledger.published(frame, "cams")
        ledger.event("publish", cams.name, frame, {"duplicate": False, "seq": seq})
        ledger.event("deliver", cams.name, frame, {"seq": seq, "subscription": "decode-in"})
        ledger.event("drop", cams.name, frame, {"seq": seq, "subscriptions": ["decode-in"]})
    assert {"F", "G"} <= set(ledger.frames)  # their replicas may still forward them
    ledger.event("settle_stale", cams.name, "#6", {"seq": 6, "subscription": "decode-in"})
    assert "F" not in ledger.frames and ledger.dropped == 2
    ledger.event("publish", decode.name, "G@decode", {"duplicate": False, "seq": 1})
    ledger.event("settle_stale", cams.name, "#7", {"seq": 7, "subscription": "decode-in"})
    ledger.settled("G", 0.0, 0.5)
    ledger.close()
    assert (ledger.completed, ledger.dropped, ledger.unresolved) == (2, 2, 2)
    assert ledger.unfinished == 1  # E: published, never heard of again
    assert ledger.histogram.count == 2 and ledger.histogram.max == pytest.approx(0.5)


def test_frames_evicted_while_a_replica_works_on_them_count_once() -> None:
    # both queues overflow (evict_oldest): a decode replica's message is often evicted while
    # it works on it; its output is still forwarded, so the stages' drops add up to more
    # than the frames lost — end to end each frame counts once: completed if the sink
    # settled it, else dropped
    doc: dict[str, Any] = {
        "run": {"seed": 1, "duration_seconds": 20.0},
        "source": [{"name": "cams", "rate_hz": 50}],
        "stage": [
            _stage("decode", ["cams"], 40, max_queue=3),
            _stage("infer", ["decode"], 15, max_queue=2),
        ],
    }
    for st in doc["stage"]:
        st["service"] = {"dist": "exponential", "mean_ms": st["service"]["value_ms"]}
    r = simulate(parse_spec(doc))
    e2e, stages = r["end_to_end"], r["stages"]
    assert r["run"]["passes"] == 2  # messages were lost: run again, frame by frame
    assert r["stages"]["decode"]["stale_settles"] > 0
    assert sum(st["dropped"] for st in stages.values()) > e2e["dropped"] > 0
    # frames whose decode message was evicted mid-service still reached the sink: completed
    # (on one line of stages: exactly the frames the sink settled)
    assert e2e["completed"] == stages["infer"]["completed"] > stages["decode"]["completed"]
    _accounted(e2e)
    again = simulate(parse_spec(doc))
    again["run"]["wall_seconds"] = r["run"]["wall_seconds"]
    assert to_json(again) == to_json(r)


def test_a_run_without_losses_runs_once() -> None:
    r = _run(_stage("fast", ["cams"], 1), _stage("slow", ["cams"], 50))
    assert r["run"]["passes"] == 1
