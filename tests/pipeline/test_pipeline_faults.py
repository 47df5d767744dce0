"""Issue 26 item 11: fault barriers in the messaging model and the stage workers, so seeded
fault injection (``explore --faults``) reaches pipeline code: a replica dies mid-message, a
settle reply is lost; the summary counts what was injected."""

from __future__ import annotations

import anyio
import pytest

from _pipeline_helpers import feed, sleeper, three_stage
from videoflow_aio import explore, faults
from videoflow_aio.contracts.messaging import Completed, SettleConfirmed
from videoflow_aio.memory.messaging import MemoryMessagingBackend
from videoflow_aio.pipeline import stage_worker
from videoflow_aio.vtime import VirtualClock

pytestmark = pytest.mark.anyio


async def test_a_replica_crashed_mid_message_leaves_its_lease_to_redeliver(
    vclock: VirtualClock,
) -> None:
    b = MemoryMessagingBackend()
    pipe = await three_stage(b, ack_wait_seconds=10.0)
    await feed(b, pipe, 2, every=0.0)
    with faults.isolated():
        barrier = faults.arm("pipeline.handle.before", crash=True)
        w = stage_worker(b, pipe, "decode", sleeper(0.01), replicas=2)
        with anyio.fail_after(600):
            await w.run()
    assert barrier.hits == 1 and barrier.contexts[0]["stage"] == "decode"
    assert w.counters.crashes == 1
    assert w.counters.completed == 2  # the other replica took the redelivered frame
    assert w.counters.redelivered == 1


async def test_a_settle_applied_whose_reply_is_lost(vclock: VirtualClock) -> None:
    b = MemoryMessagingBackend()
    pipe = await three_stage(b)
    await feed(b, pipe, 1, every=0.0, eos=False)
    sub = pipe.subscriptions["decode"][0]
    (d,) = await b.receive(sub, 1, 1 << 20, anyio.current_time() + 1)
    with faults.isolated():
        faults.arm("messaging.settle.after", crash=True)
        with pytest.raises(faults.SimulatedCrash):
            await b.settle(d.token, Completed(), "s1")
    # it was applied: the same settlement id is confirmed again, and nothing redelivers
    assert type(await b.settle(d.token, Completed(), "s1")) is SettleConfirmed
    assert await b.receive(sub, 1, 1 << 20, anyio.current_time() + 60) == []


def test_explore_injects_faults_into_a_pipeline_program_and_counts_them() -> None:
    @explore.program("TEST-PIPELINE-FAULTS", "a two-stage pipeline under injected faults")
    async def pipeline_program(ctx: explore.Context) -> None:
        b = MemoryMessagingBackend()
        pipe = await three_stage(b, run_id=f"s{ctx.seed}")
        async with anyio.create_task_group() as tg:
            tg.start_soon(feed, b, pipe, 5)
            for stage in ("decode", "infer"):
                w = stage_worker(b, pipe, stage, sleeper(0.01), replicas=2)
                tg.start_soon(w.run)
            await anyio.sleep(120)
            tg.cancel_scope.cancel()

    try:
        target = explore.find_target("TEST-PIPELINE-FAULTS")
        found = explore.explore([target], range(20), ["asyncio"], fault_rate=0.2, stop_after=20)
    finally:
        from videoflow_aio.explore._program import PROGRAMS

        PROGRAMS.pop("TEST-PIPELINE-FAULTS", None)
    # before: 0 — the messaging model and the stage workers had no barriers
    assert found.injected > 0
    assert found.runs == 20
