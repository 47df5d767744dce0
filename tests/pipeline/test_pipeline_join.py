"""Join (fusion) stages on the memory models, under asyncio and trio on virtual time: one
handler call per frame with every input's part, timeouts, duplicates, end of stream,
crashes and cancellation."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from _pipeline_helpers import CancelAt, Trigger
from videoflow_aio.contracts import Known
from videoflow_aio.contracts.errors import ValidationError
from videoflow_aio.contracts.messaging import Delivery, MessagingBackend
from videoflow_aio.memory.messaging import MemoryMessagingBackend
from videoflow_aio.memory.payload import MemoryPayloadStore
from videoflow_aio.pipeline import (
    Handler,
    JoinHandler,
    JoinWorker,
    Node,
    Output,
    Pipeline,
    Publisher,
    RetryLater,
    ensure_pipeline,
    join_worker,
    plan_pipeline,
    stage_worker,
)

pytestmark = pytest.mark.anyio

DIAMOND = (
    Node(name="cams"),
    Node(name="detect", inputs=("cams",)),
    Node(name="depth", inputs=("cams",)),
    Node(name="fuse", inputs=("detect", "depth")),
    Node(name="sink", inputs=("fuse",)),
)


async def diamond(b: MessagingBackend, **kw: object) -> Pipeline:
    nodes = [n if n.name != "fuse" else Node(name="fuse", inputs=n.inputs, **kw) for n in DIAMOND]  # type: ignore[arg-type]
    return await ensure_pipeline(b, "flow", "r1", nodes)


def branch(seconds: float, tag: bytes) -> Handler:
    async def handle(d: Delivery, data: bytes | None) -> list[Output]:
        await anyio.sleep(seconds)
        return [Output(body=tag, data=tag * 4)]

    return handle


async def publish_frames(b: MessagingBackend, pipe: Pipeline, n: int, every: float) -> None:
    pub = Publisher(b, pipe.channels["cams"])
    for i in range(n):
        await pub.send(f"f{i}", b"frame", event_ts=anyio.current_time())
        await anyio.sleep(every)
    await pub.send("eos@cams", kind="eos")


async def test_a_join_fires_once_per_frame_after_the_slowest_branch() -> None:
    b = MemoryMessagingBackend()
    store = MemoryPayloadStore()
    pipe = await diamond(b)
    calls: list[tuple[str, list[bytes], list[bytes | None], float]] = []
    e2e: list[float] = []

    async def fuse(ds: Sequence[Delivery], datas: Sequence[bytes | None]) -> list[bytes]:
        calls.append(
            (
                ds[0].envelope.event_id,
                [d.envelope.body for d in ds],
                list(datas),
                anyio.current_time(),
            )
        )
        return [b"fused"]

    async def sink(d: Delivery, data: bytes | None) -> None:
        assert d.envelope.event_ts is not None
        e2e.append(anyio.current_time() - d.envelope.event_ts)

    fuse_w = join_worker(b, pipe, "fuse", fuse, payload=store)
    async with anyio.create_task_group() as tg:
        tg.start_soon(stage_worker(b, pipe, "detect", branch(0.010, b"D"), payload=store).run)
        tg.start_soon(stage_worker(b, pipe, "depth", branch(0.030, b"Z"), payload=store).run)
        tg.start_soon(fuse_w.run)
        tg.start_soon(stage_worker(b, pipe, "sink", sink).run)
        await publish_frames(b, pipe, 20, 0.1)
    assert [c[0] for c in calls] == [f"f{i}" for i in range(20)], fuse_w.counters
    assert all(c[1] == [b"D", b"Z"] and c[2] == [b"DDDD", b"ZZZZ"] for c in calls)
    assert e2e == pytest.approx([0.030] * 20)  # the slowest branch, not the fastest
    c = fuse_w.counters
    assert (c.joined, c.completed, c.forwarded, c.join_timeouts) == (20, 40, 20, 0)
    assert store.object_count() == 0  # both branches' payloads released by the join


class Rig:
    """A join ``j`` of sources ``a`` and ``b``: publishers, and a default handler that
    records each call's publication ids."""

    def __init__(self, b: MemoryMessagingBackend, pipe: Pipeline) -> None:
        self.b, self.pipe = b, pipe
        self.pa, self.pb = Publisher(b, pipe.channels["a"]), Publisher(b, pipe.channels["b"])
        self.fired: list[tuple[str, ...]] = []

    async def fuse(self, ds: Sequence[Delivery], datas: Sequence[bytes | None]) -> None:
        self.fired.append(tuple(d.envelope.publication_id for d in ds))

    async def eos(self) -> None:
        await self.pa.send("eos@a", kind="eos")
        await self.pb.send("eos@b", kind="eos")

    @asynccontextmanager
    async def running(
        self, handler: JoinHandler | None = None, **kw: Any
    ) -> AsyncIterator[JoinWorker]:
        """The join worker, running; end of stream is sent when the block ends."""
        w = join_worker(self.b, self.pipe, "j", handler or self.fuse, **kw)
        async with anyio.create_task_group() as tg:
            tg.start_soon(w.run)
            yield w
            await self.eos()


async def rig(**kw: Any) -> Rig:
    b = MemoryMessagingBackend()
    nodes = [Node(name="a"), Node(name="b"), Node(name="j", inputs=("a", "b"), **kw)]
    return Rig(b, await ensure_pipeline(b, "flow", "r1", nodes))


async def test_parts_out_of_order_join_by_event_id_without_blocking() -> None:
    j = await rig()
    async with j.running() as w:
        for i in range(5):
            await j.pa.send(f"a{i}", event_id=f"e{i}")
        for i in reversed(range(5)):
            await anyio.sleep(0.1)  # each part is received before the next is sent
            await j.pb.send(f"b{i}", event_id=f"e{i}")
    assert j.fired == [(f"a{i}", f"b{i}") for i in reversed(range(5))]
    assert w.counters.joined == 5 and w.waiting() == {}


async def test_join_timeout_drops_the_frame_with_a_reason() -> None:
    j = await rig()
    async with j.running(join_timeout_seconds=2.0) as w:
        await j.pa.send("a0", event_id="e0")
        await anyio.sleep(1.0)
        assert w.waiting() == {"e0": ("flow.r1.b",)}
        await anyio.sleep(1.5)
        assert w.waiting() == {}  # dropped at t = 2
        await j.pb.send("b0", event_id="e0")  # too late: settled as its frame was
        await j.pa.send("a1", event_id="e1")
        await j.pb.send("b1", event_id="e1")
    assert j.fired == [("a1", "b1")]
    c = w.counters
    assert (c.join_timeouts, c.terminal, c.join_duplicates, c.joined) == (1, 2, 1, 1)


async def test_a_duplicate_part_does_not_fire_twice() -> None:
    """A frame sent twice on one input (new publication id, same event id): while the frame
    waits, the newer part replaces the older; after it joined, the late copy is settled as
    the frame was."""
    j = await rig()
    async with j.running() as w:
        await j.pa.send("a0", event_id="e0")
        await j.pa.send("a0-again", event_id="e0")
        await anyio.sleep(1)
        await j.pb.send("b0", event_id="e0")
        await anyio.sleep(1)
        await j.pb.send("b0-late", event_id="e0")
    assert j.fired == [("a0-again", "b0")]
    c = w.counters
    assert (c.joined, c.join_duplicates, c.completed, c.terminal) == (1, 2, 3, 1)


async def test_redelivered_parts_after_an_expired_lease_join_once() -> None:
    """A slow join handler on a short lease: the renewal task keeps parked and handled
    parts leased, so nothing redelivers and the frame joins once."""
    j = await rig(ack_wait_seconds=1.0)

    async def slow(ds: Sequence[Delivery], datas: Sequence[bytes | None]) -> None:
        await j.fuse(ds, datas)
        await anyio.sleep(5)

    async with j.running(slow) as w:
        await j.pa.send("a0", event_id="e0")
        await anyio.sleep(10)  # parked ten leases long
        await j.pb.send("b0", event_id="e0")
    assert j.fired == [("a0", "b0")]
    assert w.counters.redelivered == 0 and w.counters.renewals > 10


async def test_a_retried_join_forms_again_and_fires_once_more() -> None:
    j = await rig()

    async def flaky(ds: Sequence[Delivery], datas: Sequence[bytes | None]) -> None:
        await j.fuse(ds, datas)
        if len(j.fired) == 1:
            raise RetryLater("GPU busy", 0.5)

    async with j.running(flaky) as w:
        await j.pa.send("a0", event_id="e0")
        await j.pb.send("b0", event_id="e0")
    c = w.counters
    assert (len(j.fired), c.joined, c.retried, c.completed, c.redelivered) == (2, 1, 2, 2, 2)


async def test_frames_missing_a_part_are_dropped_at_end_of_stream() -> None:
    j = await rig()
    async with j.running() as w:
        await j.pa.send("a0", event_id="e0")
        await j.pa.send("a1", event_id="e1")
        await j.pb.send("b1", event_id="e1")
    c = w.counters
    assert (c.joined, c.join_incomplete, c.terminal) == (1, 1, 1)
    for sub in j.pipe.subscriptions["j"]:
        obs = await j.b.observe_subscription(sub)
        assert isinstance(obs, Known) and obs.value.pending == obs.value.leased == 0


async def test_a_replica_crash_mid_join_lets_the_parts_redeliver_and_join_again() -> None:
    j = await rig(ack_wait_seconds=2.0)
    fired: list[float] = []
    started = anyio.Event()

    async def fuse(ds: Sequence[Delivery], datas: Sequence[bytes | None]) -> None:
        fired.append(anyio.current_time())
        started.set()
        await anyio.sleep(1)

    async with j.running(fuse) as w:
        await j.pa.send("a0", event_id="e0")
        await j.pb.send("b0", event_id="e0")
        await started.wait()
        firing = [i for i, busy in enumerate(w.busy()) if busy]
        assert len(firing) == 1
        w.crash(firing[0])
        await w.wait_dead(firing[0])
        w.restart(firing[0])
    c = w.counters
    assert len(fired) == 2 and fired[1] >= fired[0] + 2.0  # after the leases expired
    assert (c.joined, c.completed, c.crashes, c.redelivered) == (1, 2, 1, 2)


@pytest.mark.parametrize("at", range(1, 12))
async def test_a_join_cancelled_at_any_contract_call_settles_nothing_undone(at: int) -> None:
    """Cancel the join worker at its ``at``-th contract call, then run a fresh worker: the
    frame joins exactly once in all (a handler call may repeat only if nothing settled)."""
    j = await rig(ack_wait_seconds=2.0)
    await j.pa.send("a0", event_id="e0")
    await j.pb.send("b0", event_id="e0")
    with anyio.CancelScope() as scope:
        proxy = CancelAt(j.b, Trigger(scope, at, "before"))
        await JoinWorker(proxy, j.pipe.subscriptions["j"], j.fuse).run()  # type: ignore[arg-type]
    await j.eos()
    with anyio.fail_after(100):
        await join_worker(j.b, j.pipe, "j", j.fuse).run()
    for sub in j.pipe.subscriptions["j"]:
        obs = await j.b.observe_subscription(sub)
        assert isinstance(obs, Known) and obs.value.pending == obs.value.leased == 0
    assert 1 <= len(j.fired) <= 2 and set(j.fired) == {("a0", "b0")}


def test_join_arguments_are_checked() -> None:
    b = MemoryMessagingBackend()
    plan = plan_pipeline(
        "flow", "r1", [Node(name="a"), Node(name="b"), Node(name="j", inputs=("a", "b"))]
    )

    async def fuse(ds: Sequence[Delivery], datas: Sequence[bytes | None]) -> None:
        return None

    with pytest.raises(ValidationError) as err:
        JoinWorker(b, plan.subscriptions["j"][:1], fuse)
    assert err.value.field == "subscription"
    with pytest.raises(ValidationError) as err:
        JoinWorker(b, plan.subscriptions["j"], fuse, join_timeout_seconds=-1)
    assert err.value.field == "join_timeout_seconds"
    with pytest.raises(ValidationError) as err:
        JoinWorker(b, plan.subscriptions["j"], fuse, join_memory=-1)
    assert err.value.field == "join_memory"
    with pytest.raises(ValidationError):
        join_worker(b, plan, "nope", fuse)
