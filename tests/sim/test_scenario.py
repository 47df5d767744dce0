"""sim.Scenario: one pipeline definition (the toolkit's Node objects) for production and
simulation — built in Python, written as TOML the simulator reads, read back, simulated,
and run in production mode on the memory models with the same topology and counts."""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from videoflow_aio import sim
from videoflow_aio.contracts.messaging import Delivery
from videoflow_aio.memory.messaging import MemoryMessagingBackend
from videoflow_aio.pipeline import (
    BatchWorker,
    JoinWorker,
    Node,
    Publisher,
    StageWorker,
    batch_worker,
    ensure_pipeline,
    join_worker,
    plan_pipeline,
    stage_worker,
)
from videoflow_aio.sim import Scenario, SpecError, Stage, load_spec, simulate
from videoflow_aio.sim._run import pipeline_nodes
from videoflow_aio.vtime import run as vrun

NODES = (
    Node(name="cams", max_msgs=500),
    Node(name="detect", inputs=("cams",), ack_wait_seconds=10.0),
    Node(name="depth", inputs=("cams",)),
    Node(name="fuse", inputs=("detect", "depth"), max_deliver=3),
)


def scenario(**kw: Any) -> Scenario:
    args: dict[str, Any] = {
        "service": {
            "detect": sim.Const(value_ms=20),
            "depth": sim.Const(value_ms=5),
            "fuse": sim.Const(value_ms=1),
        },
        "arrival": sim.Periodic(rate_hz=10),
        "duration_seconds": 2.0,
        "seed": 3,
    }
    return Scenario.from_pipeline(NODES, **{**args, **kw})


def test_a_scenario_round_trips_through_toml_and_the_simulator_reads_it(
    tmp_path: Path,
) -> None:
    sc = scenario(
        service={
            "detect": sim.Exp(mean_ms=20),
            "depth": sim.LogNormal(mean_ms=5, p99_ms=20),
            "fuse": sim.Empirical(samples_ms=(1.0, 2.0, 4.0)),
        },
        arrival={"cams": sim.Poisson(rate_hz=10, streams=2, bytes=1000)},
        stages={"detect": Stage(replicas=3, batch=2, extra={"output_bytes": 100})},
        run={"warmup_seconds": 0.5},
    )
    text = sc.to_toml()
    assert Scenario.from_toml(text) == sc
    path = tmp_path / "spec.toml"
    path.write_text(text)
    assert Scenario.from_toml(path) == sc
    spec = load_spec(path)  # what `videoflow-aio simulate spec.toml` reads
    assert spec == sc.to_spec()
    assert [s.name for s in spec.stages] == ["detect", "depth", "fuse"]
    assert spec.stage("detect").replicas == 3 and spec.stage("fuse").max_deliver == 3
    assert spec.stage("depth").max_queue == 500 and spec.stage("fuse").max_queue == 10000
    a, b = simulate(sc), simulate(spec)
    for r in (a, b):
        r["run"].pop("wall_seconds")
    assert a == b and a["sources"]["cams"]["frames"] > 0


def test_the_simulator_builds_the_same_topology_as_production() -> None:
    sc = scenario()
    sim_nodes = pipeline_nodes(sc.to_spec())
    prod = plan_pipeline("sim", "run", sc.nodes)
    sim = plan_pipeline("sim", "run", sim_nodes)
    assert (prod.channels, prod.subscriptions, prod.readers) == (
        sim.channels,
        sim.subscriptions,
        sim.readers,
    )
    for mine, theirs in zip(sc.nodes, sim_nodes, strict=True):
        fields = ("name", "inputs", "ack_wait_seconds", "max_deliver", "max_msgs", "overflow")
        assert [getattr(mine, f) for f in fields] == [getattr(theirs, f) for f in fields]


def production(sc: Scenario, frames: int) -> dict[str, int]:
    """Run ``sc``'s pipeline in production mode on the memory models: real workers whose
    handlers take the stages' (constant) service times; completed messages per stage."""

    async def main() -> dict[str, int]:
        b = MemoryMessagingBackend()
        pipe = await ensure_pipeline(b, "prod", "r1", sc.nodes)
        workers: dict[str, StageWorker] = {}
        for node in pipe.stages():
            seconds = sc.service[node.name].table()["value_ms"] / 1000

            async def handle(d: Delivery, data: bytes | None, s: float = seconds) -> list[bytes]:
                await anyio.sleep(s)
                return [b"out"]

            workers[node.name] = stage_worker(
                b, pipe, node.name, handle, replicas=sc.stages[node.name].replicas
            )
        async with anyio.create_task_group() as tg:
            for w in workers.values():
                tg.start_soon(w.run)
            for source in (n for n in pipe.nodes if not n.inputs):
                pub = Publisher(b, pipe.channels[source.name])
                rate = sc.arrival[source.name].table()["rate_hz"]
                for i in range(frames):
                    await pub.send(f"{source.name}-{i}", event_ts=anyio.current_time())
                    await anyio.sleep(1 / rate)
                await pub.send(f"eos@{source.name}", kind="eos")
        return {name: w.counters.completed for name, w in workers.items()}

    return vrun(main)


def test_one_definition_runs_in_production_and_in_simulation_with_the_same_counts() -> None:
    sc = scenario()
    sim = simulate(sc)
    frames = sim["sources"]["cams"]["frames"]
    assert frames == 20  # 10 Hz for 2 s
    prod = production(sc, frames)
    assert prod == {name: st["completed"] for name, st in sim["stages"].items()}
    assert prod == {"detect": 20, "depth": 20, "fuse": 40}  # no join today: both copies


def test_join_and_batch_settings_are_written_as_the_spec_keys() -> None:
    sc = scenario(
        service={
            "detect": sim.Const(value_ms=8, per_item_ms=1.5),
            "depth": sim.Exp(mean_ms=5),
            "fuse": sim.Const(value_ms=1),
        },
        arrival={
            "cams": sim.Schedule(steps=((0, 25), (600, 50)), streams=4, extra={"jitter_ms": 2.0})
        },
        stages={
            "detect": Stage(batch=sim.Batch(max_items=8, max_wait_ms=5)),
            "fuse": Stage(join="all", join_timeout_ms=250),
        },
        extra={"failure": [{"stage": "detect", "mtbf_seconds": 600, "mttr_seconds": 30}]},
    )
    text = sc.to_toml()
    assert "batch = { max_items = 8, max_wait_ms = 5 }" in text
    assert 'service = { dist = "constant", value_ms = 8, per_item_ms = 1.5 }' in text
    assert 'join = "all"' in text and "join_timeout_ms = 250" in text
    assert "rate_schedule = [[0, 25], [600, 50]]" in text and "jitter_ms = 2.0" in text
    assert "[[failure]]" in text and "mtbf_seconds = 600" in text
    assert Scenario.from_doc(tomllib.loads(text)) == sc  # the keys read back as written
    trace = scenario(arrival=sim.Trace(file="frames.txt"))
    assert 'arrival = "trace"' in trace.to_toml() and 'trace = "frames.txt"' in trace.to_toml()
    assert Scenario.from_doc(tomllib.loads(trace.to_toml())) == trace


def test_a_stage_takes_its_settings_from_the_production_worker() -> None:
    pipe = plan_pipeline("f", "r", NODES)
    b = MemoryMessagingBackend()

    async def many(ds: Sequence[Delivery], datas: Sequence[bytes | None]) -> None:
        return None

    join = join_worker(b, pipe, "fuse", many, join_timeout_seconds=0.25, replicas=2)
    batch = batch_worker(b, pipe, "detect", many, max_items=8, max_wait_seconds=0.005)
    assert isinstance(join, JoinWorker) and isinstance(batch, BatchWorker)
    assert Stage.of_worker(join) == Stage(replicas=2, join="all", join_timeout_ms=250)
    assert Stage.of_worker(batch) == Stage(batch=sim.Batch(max_items=8, max_wait_ms=5))

    async def one(d: Delivery, data: bytes | None) -> None:
        return None

    assert Stage.of_worker(stage_worker(b, pipe, "depth", one, batch=4)) == Stage(batch=4)


def test_a_scenario_missing_a_model_is_refused_naming_the_key() -> None:
    exp = sim.Exp(mean_ms=1)
    cases: dict[str, dict[str, Any]] = {
        "service.fuse": {"service": {"detect": exp, "depth": exp}},
        "service.cams": {"service": {"cams": exp}},
        "arrival.cams": {"arrival": {}},
        "stages.nope": {"stages": {"nope": Stage()}},
    }
    for field, kw in cases.items():
        with pytest.raises(SpecError, match=f"^{field}: ") as err:
            scenario(**kw)
        assert err.value.field == field


def test_bad_values_and_bad_toml_are_one_line_spec_errors(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as err:
        scenario(
            service={
                "detect": sim.Exp(mean_ms=-1),
                "depth": sim.Exp(mean_ms=1),
                "fuse": sim.Exp(mean_ms=1),
            }
        ).to_spec()
    assert err.value.field == "stage[0].service.mean_ms"
    with pytest.raises(SpecError) as err:
        Scenario.from_toml("[run\nduration_seconds = 1")
    assert err.value.field == "toml" and "\n" not in str(err.value)
    with pytest.raises(SpecError) as err:
        Scenario.from_toml(tmp_path / "missing.toml")
    assert err.value.field == "path"
    with pytest.raises(SpecError) as err:
        Scenario.from_pipeline([Node(name="a", inputs=("a",))], service={}, arrival={})
    assert err.value.field == "nodes"
    with pytest.raises(SpecError) as err:
        Scenario.from_toml(scenario().to_toml().replace("rate_hz = 10", "rate_hz = -10"))
    assert err.value.field == "source[0].rate_hz"
