"""The pipeline toolkit used adversarially: wrong arguments get a typed error and change
nothing; end of stream survives a full downstream channel."""

from __future__ import annotations

import math
from typing import Any

import anyio
import pytest

from _pipeline_helpers import THREE, feed, sleeper
from videoflow_aio.contracts.errors import ValidationError
from videoflow_aio.contracts.messaging import Delivery
from videoflow_aio.memory.messaging import MemoryMessagingBackend
from videoflow_aio.observe import percentiles
from videoflow_aio.pipeline import (
    ExceptionPolicy,
    LatencyHistogram,
    Node,
    Publisher,
    StageWorker,
    ensure_pipeline,
    plan_pipeline,
    stage_worker,
)

pytestmark = pytest.mark.anyio


async def test_eos_waits_for_a_full_reject_channel_downstream_instead_of_crashing() -> None:
    """decode's output holds one message and refuses more (``reject``); decode drains (its
    other frames exhaust max_deliver) while the channel is still full: its eos is refused
    until infer catches up. Before: the stage died with RetryLater in an ExceptionGroup and
    its eos was never forwarded."""
    b = MemoryMessagingBackend()
    nodes = [
        Node(name="cams"),
        Node(name="decode", inputs=("cams",), max_msgs=1, overflow="reject", max_deliver=2),
        Node(name="infer", inputs=("decode",)),
    ]
    pipe = await ensure_pipeline(b, "flow", "r1", nodes)
    await feed(b, pipe, 3, every=0.0)
    seen: list[str] = []

    async def infer(d: Delivery, data: bytes | None) -> None:
        seen.append(d.envelope.publication_id)

    decode = stage_worker(b, pipe, "decode", sleeper(0.01), poll_seconds=0.5)
    downstream = stage_worker(b, pipe, "infer", infer, poll_seconds=0.5)
    with anyio.fail_after(600):
        async with anyio.create_task_group() as tg:
            tg.start_soon(decode.run)
            await anyio.sleep(30)  # decode is stuck on the full channel meanwhile
            assert [e.kind for e in b.stored(pipe.channels["decode"])] == ["data"]
            tg.start_soon(downstream.run)
    assert seen == ["f0@decode"]  # f1 and f2 were refused twice: unresolved, so decode drained
    assert decode.counters.retried == 4
    assert decode.finished and downstream.finished  # infer returned: it got decode's eos
    assert b.stored(pipe.channels["decode"]) == []  # and settled everything


def test_histogram_refuses_an_infinite_sample_with_a_typed_error() -> None:
    h = LatencyHistogram()
    h.add(0.5)
    for bad in (math.inf, -math.inf, math.nan, -1.0):
        with pytest.raises(ValidationError):
            h.add(bad)
    assert h.count == 1 and h.max == 0.5  # nothing recorded


def test_histogram_and_exact_percentiles_agree_on_bad_quantiles() -> None:
    h = LatencyHistogram()
    h.extend([1.0, 2.0])
    for q in (-0.1, 1.5, math.nan):
        with pytest.raises(ValidationError):
            percentiles([1.0, 2.0], [q])
        with pytest.raises(ValidationError):
            h.percentiles([q])
    assert all(math.isnan(v) for v in percentiles([], [0.0, 0.5, 1.0]))
    assert LatencyHistogram().summary(1000.0) == dict.fromkeys(
        ("mean", "p50", "p90", "p99", "p999", "max")
    )


@pytest.mark.parametrize("terminal", [ValueError, ("ValueError",), (KeyboardInterrupt,), None])
def test_exception_policy_terminal_must_be_exception_types(terminal: Any) -> None:
    # before: a bare class was a TypeError; a string passed, then broke isinstance inside a
    # running worker at the first handler failure
    with pytest.raises(ValidationError):
        ExceptionPolicy(terminal=terminal)


@pytest.mark.parametrize("attempts", [1.5, "3", 0, True])
async def test_publisher_max_attempts_must_be_a_positive_int(attempts: Any) -> None:
    b = MemoryMessagingBackend()
    pipe = await ensure_pipeline(b, "flow", "r1", THREE)
    with pytest.raises(ValidationError):
        Publisher(b, pipe.channels["cams"], max_attempts=attempts)


@pytest.mark.parametrize("replica", [-1, 2, 1.0, True, "0"])
async def test_crash_restart_and_wait_dead_refuse_a_replica_the_stage_lacks(replica: Any) -> None:
    # before: -1 silently crashed the last replica; 2 raised IndexError
    b = MemoryMessagingBackend()
    pipe = await ensure_pipeline(b, "flow", "r1", THREE)
    w = stage_worker(b, pipe, "decode", sleeper(0.01), replicas=2)
    for call in (lambda: w.crash(replica), lambda: w.restart(replica)):
        with pytest.raises(ValidationError):
            call()
    with pytest.raises(ValidationError):
        await w.wait_dead(replica)
    assert w.alive() == [False, False] and w.counters.crashes == 0


@pytest.mark.parametrize(
    "node",
    [
        Node(name=""),
        Node(name="a.b"),
        Node(name="a@b"),
        Node(name="a/b"),
        Node(name="a b"),
        Node(name="x", inputs="cams"),  # type: ignore[arg-type]
        Node(name="x", inputs=("ca.ms",)),
    ],
)
async def test_a_node_name_that_breaks_the_derived_names_is_refused(node: Node) -> None:
    b = MemoryMessagingBackend()
    with pytest.raises(ValidationError):
        plan_pipeline("flow", "r1", [Node(name="cams"), node])
    with pytest.raises(ValidationError):
        await ensure_pipeline(b, "flow", "r1", [Node(name="cams"), node])
    assert await b.channel_ids() == []


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("replicas", "2"),
        ("replicas", 2.0),
        ("replicas", 0),
        ("batch", None),
        ("batch", True),
        ("call_timeout", math.inf),
        ("call_timeout", math.nan),
        ("poll_seconds", -1.0),
        ("poll_seconds", 0),
    ],
)
async def test_worker_options_with_wrong_types(option: str, value: Any) -> None:
    b = MemoryMessagingBackend()
    pipe = await ensure_pipeline(b, "flow", "r1", THREE)
    with pytest.raises(ValidationError):
        StageWorker(b, pipe.subscriptions["decode"], sleeper(0.01), **{option: value})


async def test_ensure_pipeline_concurrently_and_twice_creates_each_name_once() -> None:
    b = MemoryMessagingBackend()
    async with anyio.create_task_group() as tg:
        for _ in range(4):
            tg.start_soon(ensure_pipeline, b, "flow", "r1", THREE)
    again = await ensure_pipeline(b, "flow", "r1", THREE)
    assert sorted(c.name for c in await b.channel_ids()) == ["flow.r1.cams", "flow.r1.decode"]
    assert again == plan_pipeline("flow", "r1", THREE)
