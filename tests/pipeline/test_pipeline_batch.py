"""Batched stages on the memory models, under asyncio and trio on virtual time: batches
fill up to max_items or max_wait, settle per item, renew long leases, and a cancelled or
crashed batch settles nothing undone."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest

from _pipeline_helpers import CancelAt, Trigger, feed, three_stage
from videoflow_aio import pipeline as vp
from videoflow_aio.contracts import Known
from videoflow_aio.contracts.errors import ValidationError
from videoflow_aio.contracts.messaging import Delivery
from videoflow_aio.memory.messaging import MemoryMessagingBackend
from videoflow_aio.memory.payload import MemoryPayloadStore
from videoflow_aio.pipeline import BatchWorker, ItemResult, batch_worker

pytestmark = pytest.mark.anyio


async def test_batches_fill_to_max_items_or_wait_at_most_max_wait() -> None:
    b = MemoryMessagingBackend()
    store = MemoryPayloadStore()
    pipe = await three_stage(b)
    sizes: list[tuple[float, int]] = []

    async def infer(ds: Sequence[Delivery], datas: Sequence[bytes | None]) -> list[ItemResult]:
        sizes.append((anyio.current_time(), len(ds)))
        assert all(x == b"J" for x in datas)
        await anyio.sleep(0.010 + 0.001 * len(ds))  # a fixed cost plus a per-item cost
        return [[vp.Output(body=d.envelope.publication_id.encode())] for d in ds]

    w = batch_worker(b, pipe, "decode", infer, max_items=4, max_wait_seconds=0.005, payload=store)
    async with anyio.create_task_group() as tg:
        tg.start_soon(w.run)
        # a burst of 10 at once, then 3 frames 100 ms apart (each waits 5 ms, then goes alone)
        await feed(b, pipe, 10, every=0.0, data=b"J", payload=store, eos=False)
        await anyio.sleep(1)
        pub = vp.Publisher(b, pipe.channels["cams"], payload=store, readers=("decode",))
        for i in range(3):
            await pub.send(f"g{i}", data=b"J")
            await anyio.sleep(0.1)
        await pub.send("eos@cams", kind="eos")
    assert [n for _, n in sizes] == [4, 4, 2, 1, 1, 1]
    t_single = [t for t, n in sizes if n == 1]
    assert all(t % 0.1 == pytest.approx(0.005, abs=1e-9) for t in t_single)  # waited 5 ms
    c = w.counters
    assert (w.batches, c.completed, c.forwarded) == (6, 13, 13)
    out = [e.body for e in b.stored(pipe.channels["decode"]) if e.kind == "data"]
    assert out == [f"f{i}".encode() for i in range(10)] + [f"g{i}".encode() for i in range(3)]
    assert store.object_count() == 0


async def test_each_item_is_settled_with_its_own_outcome() -> None:
    b = MemoryMessagingBackend()
    pipe = await three_stage(b, max_deliver=2)
    attempts: dict[str, int] = {}

    async def infer(ds: Sequence[Delivery], datas: Sequence[bytes | None]) -> list[ItemResult]:
        out: list[ItemResult] = []
        for d in ds:
            pid = d.envelope.publication_id
            attempts[pid] = attempts.get(pid, 0) + 1
            if pid == "f1":
                out.append(vp.GiveUp("unreadable frame"))
            elif pid == "f2" and attempts[pid] == 1:
                out.append(vp.RetryLater("later", 0.1))
            else:
                out.append([b"ok"])
        return out

    w = batch_worker(b, pipe, "decode", infer, max_items=8, max_wait_seconds=0.01)
    async with anyio.create_task_group() as tg:
        tg.start_soon(w.run)
        await feed(b, pipe, 4, every=0.0)
    assert attempts == {"f0": 1, "f1": 1, "f2": 2, "f3": 1}
    c = w.counters
    assert (w.batches, c.completed, c.terminal, c.retried, c.forwarded) == (2, 3, 1, 1, 3)


async def test_a_handler_that_raises_settles_the_whole_batch_per_policy() -> None:
    b = MemoryMessagingBackend()
    pipe = await three_stage(b, max_deliver=2)

    async def infer(ds: Sequence[Delivery], datas: Sequence[bytes | None]) -> None:
        raise RuntimeError("CUDA error")

    w = batch_worker(b, pipe, "decode", infer, max_items=8, max_wait_seconds=0.01)
    async with anyio.create_task_group() as tg:
        tg.start_soon(w.run)
        await feed(b, pipe, 3, every=0.0)
    c = w.counters
    assert (c.retried, c.completed, c.received) == (6, 0, 6)  # 2 attempts of all 3


async def test_a_batch_with_the_wrong_number_of_results_is_a_bad_handler() -> None:
    b = MemoryMessagingBackend()
    pipe = await three_stage(b)

    async def infer(ds: Sequence[Delivery], datas: Sequence[bytes | None]) -> list[ItemResult]:
        return [None]

    await feed(b, pipe, 3, every=0.0)
    with pytest.raises(vp.BadHandler, match="1 results for 3 items"):
        await batch_worker(b, pipe, "decode", infer, max_items=8).run()


async def test_a_long_batch_keeps_every_lease_by_renewing() -> None:
    b = MemoryMessagingBackend()
    pipe = await three_stage(b, ack_wait_seconds=1.0)

    async def infer(ds: Sequence[Delivery], datas: Sequence[bytes | None]) -> None:
        await anyio.sleep(5.0)  # five leases long

    w = batch_worker(b, pipe, "decode", infer, max_items=4, max_wait_seconds=0.5)
    async with anyio.create_task_group() as tg:
        tg.start_soon(w.run)
        await feed(b, pipe, 4, every=0.1)
    c = w.counters
    assert (w.batches, c.completed, c.redelivered, c.stale) == (1, 4, 0, 0)
    assert c.renewals >= 4 * 8


@pytest.mark.parametrize("at", range(1, 10))
async def test_a_batch_cancelled_at_any_contract_call_settles_nothing_undone(at: int) -> None:
    b = MemoryMessagingBackend()
    pipe = await three_stage(b, ack_wait_seconds=2.0)
    handled: list[str] = []

    async def infer(ds: Sequence[Delivery], datas: Sequence[bytes | None]) -> list[ItemResult]:
        handled.extend(d.envelope.publication_id for d in ds)
        return [[b"out"] for _ in ds]

    await feed(b, pipe, 3, every=0.0)
    with anyio.CancelScope() as scope:
        sub, out = pipe.subscriptions["decode"], pipe.output("decode")
        await BatchWorker(CancelAt(b, Trigger(scope, at, "before")), sub, infer, output=out).run()  # type: ignore[arg-type]
    w = batch_worker(b, pipe, "decode", infer, max_items=8)
    with anyio.fail_after(100):
        await w.run()
    obs = await b.observe_subscription(pipe.subscriptions["decode"][0])
    assert isinstance(obs, Known) and obs.value.pending == obs.value.leased == 0
    out_ids = [e.publication_id for e in b.stored(pipe.channels["decode"]) if e.kind == "data"]
    assert out_ids == ["f0@decode", "f1@decode", "f2@decode"]  # each forwarded once
    assert set(handled) == {"f0", "f1", "f2"}


async def test_a_crashed_replica_leaves_its_whole_batch_to_redeliver() -> None:
    b = MemoryMessagingBackend()
    pipe = await three_stage(b, ack_wait_seconds=2.0)
    seen: list[list[str]] = []

    async def infer(ds: Sequence[Delivery], datas: Sequence[bytes | None]) -> None:
        seen.append([d.envelope.publication_id for d in ds])
        await anyio.sleep(1)

    w = batch_worker(b, pipe, "decode", infer, max_items=8, max_wait_seconds=0.01, replicas=2)
    # all three are queued before either replica receives: the first receive takes them all
    # (fed while the replicas wait, the two could split them, as trio's random order did)
    await feed(b, pipe, 3, every=0.0, eos=False)
    async with anyio.create_task_group() as tg:
        tg.start_soon(w.run)
        await anyio.sleep(0.5)
        busy = [i for i, x in enumerate(w.busy()) if x]
        w.crash(busy[0])
        await feed(b, pipe, 0)
    assert seen[0] == ["f0", "f1", "f2"] and sorted(seen[1]) == ["f0", "f1", "f2"]
    c = w.counters
    assert (c.completed, c.redelivered, c.crashes) == (3, 3, 1)


def test_batch_arguments_are_checked() -> None:
    b = MemoryMessagingBackend()

    async def infer(ds: Sequence[Delivery], datas: Sequence[bytes | None]) -> None:
        return None

    from _pipeline_helpers import THREE
    from videoflow_aio.pipeline import plan_pipeline

    sub = plan_pipeline("flow", "r1", THREE).subscriptions["decode"]
    for kw, field in (
        ({"max_items": 0}, "max_items"),
        ({"max_items": True}, "max_items"),
        ({"max_wait_seconds": -1.0}, "max_wait_seconds"),
        ({"batch": 2}, "batch"),
    ):
        with pytest.raises(ValidationError) as err:
            BatchWorker(b, sub, infer, **kw)  # type: ignore[arg-type]
        assert err.value.field == field
