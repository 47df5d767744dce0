"""The same pipeline code on the memory model (virtual time) and on NATS JetStream (real
time): the toolkit is written against the contract, so both give the same outcome."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from _nats_helpers import backend as nats_backend
from _pipeline_helpers import feed, three_stage
from videoflow_aio import vtime
from videoflow_aio.contracts import Known
from videoflow_aio.contracts.messaging import Delivery, MessagingBackend
from videoflow_aio.memory.messaging import MemoryMessagingBackend
from videoflow_aio.memory.payload import MemoryPayloadStore
from videoflow_aio.pipeline import Output, stage_worker
from videoflow_aio.testing.servers import ServerProcess

pytestmark = pytest.mark.server

FRAMES = 20
FAST = 0.2  # poll_seconds: idle workers look again often, the server's clock is real


async def run_pipeline(b: MessagingBackend) -> dict[str, Any]:
    """Frames → decode (2 replicas, payload in and out, one retry) → infer; what came out."""
    store = MemoryPayloadStore()
    pipe = await three_stage(b, ack_wait_seconds=5.0)
    out: list[tuple[str, str, int, float]] = []
    failed_once: set[str] = set()

    async def decode(d: Delivery, data: bytes | None) -> list[Output]:
        assert data == b"JPEG"
        await anyio.sleep(0.002)
        if d.envelope.publication_id == "f3" and "f3" not in failed_once:
            failed_once.add("f3")
            raise RuntimeError("transient")  # settled Retry: redelivered with attempt 2
        return [Output(data=b"RGB:" + d.envelope.publication_id.encode())]

    async def infer(d: Delivery, data: bytes | None) -> None:
        await anyio.sleep(0.001)
        assert data == b"RGB:" + d.envelope.event_id.encode()

    def done(d: Delivery, now: float) -> None:
        assert d.envelope.event_ts is not None
        out.append((d.envelope.publication_id, d.envelope.event_id, d.attempt, now))

    decode_worker = stage_worker(
        b, pipe, "decode", decode, replicas=2, payload=store, poll_seconds=FAST
    )
    infer_worker = stage_worker(
        b, pipe, "infer", infer, payload=store, observe=done, poll_seconds=FAST
    )
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(decode_worker.run)
            tg.start_soon(infer_worker.run)
            await feed(b, pipe, FRAMES, every=0.005, data=b"JPEG", payload=store)
    remaining = {}
    for name, ch in pipe.channels.items():
        obs = await b.observe_channel(ch)
        assert isinstance(obs, Known)
        remaining[name] = obs.value.messages
    c = decode_worker.counters
    return {
        "outputs": sorted(pid for pid, _, _, _ in out),
        "event_ids": sorted(eid for _, eid, _, _ in out),
        "decode": (c.received, c.completed, c.retried, c.redelivered, c.forwarded),
        "remaining": remaining,
        "objects": store.object_count(),
    }


def test_the_same_pipeline_runs_unchanged_on_memory_and_nats(nats_srv: ServerProcess) -> None:
    async def on_memory() -> dict[str, Any]:
        return await run_pipeline(MemoryMessagingBackend())

    async def on_nats() -> dict[str, Any]:
        b = nats_backend(nats_srv)
        try:
            return await run_pipeline(b)
        finally:
            await b.aclose()

    memory = vtime.run(on_memory, backend="asyncio")
    nats = anyio.run(on_nats, backend="asyncio")  # real time: the server's clock is real
    frames = [f"f{i}" for i in range(FRAMES)]
    assert memory["outputs"] == sorted(f"{f}@decode" for f in frames)
    assert memory["event_ids"] == sorted(frames)
    assert memory["decode"] == (FRAMES + 1, FRAMES, 1, 1, FRAMES)
    assert memory["remaining"] == {"cams": 0, "decode": 0} and memory["objects"] == 0
    assert nats == memory
