"""Real handlers, modelled compute: :func:`run_scenario` runs a :class:`Scenario` on the
pipeline toolkit's own workers — the production code path — with the user's async handlers,
on the memory models on virtual time; inside a handler, ``await work()`` spends the stage's
modelled service time instead of real compute. The handlers' outputs are real (they flow
downstream as in production); only time is modelled.

Each stage runs the worker its :class:`~videoflow_aio.sim.Stage` settings name: a
:class:`~videoflow_aio.pipeline.JoinWorker` for ``join = "all"``, a
:class:`~videoflow_aio.pipeline.BatchWorker` for a :class:`~videoflow_aio.sim.Batch`, else a
:class:`~videoflow_aio.pipeline.StageWorker`. A stage without a handler gets one that only
calls ``work()`` (for a batch: ``work(items=n)``) and forwards one output per message.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from typing import Any, Literal

import anyio

from ..contracts.errors import ValidationError
from ..contracts.messaging import Delivery
from ..memory.messaging import MemoryMessagingBackend
from ..memory.payload import MemoryPayloadStore
from ..pipeline import (
    BatchWorker,
    JoinWorker,
    LatencyHistogram,
    Pipeline,
    Publisher,
    StageWorker,
    ensure_pipeline,
    stage_wiring,
)
from ..vtime import run as vrun
from ._dist import Sampler, sampler
from ._scenario import Batch, Periodic, Poisson, Scenario, Service, Stage
from ._spec import service_spec
from ._spec_types import SpecError

_cost: ContextVar[tuple[Sampler, float] | None] = ContextVar("videoflow_sim_work", default=None)


async def work(ms: float | None = None, *, items: int = 1) -> float:
    """Spend modelled compute time on the running loop's clock; the seconds spent.

    ``ms``: that many milliseconds. None: a sample of the service model of the stage whose
    handler is running under :func:`run_scenario` — plus its ``per_item_ms`` × ``items``
    (a batch handler passes its batch size). ValidationError outside such a handler.
    """
    if ms is not None:
        if isinstance(ms, bool) or not isinstance(ms, int | float) or not 0 <= ms < math.inf:
            raise ValidationError("ms must be a finite number >= 0", field="ms", value=ms)
        seconds = ms / 1000.0
    else:
        cost = _cost.get()
        if cost is None:
            raise ValidationError(
                "work() without ms runs only inside a handler that run_scenario calls",
                field="ms",
                value=None,
            )
        draw, per_item = cost
        seconds = draw() + per_item * items
    await anyio.sleep(seconds)
    return seconds


def run_scenario(
    scenario: Scenario,
    handlers: Mapping[str, Callable[..., Awaitable[Any]]] | None = None,
    *,
    backend: Literal["asyncio", "trio"] = "asyncio",
) -> dict[str, Any]:
    """Run ``scenario`` with ``handlers`` (per stage; others get the default) for its
    ``run.duration_seconds`` of arrivals, until every stage drained; what it did:
    ``frames`` per source, per stage the worker's counters (and ``batches`` / ``joined``),
    ``end_to_end`` latency in ms at the stages nothing reads (a ``LatencyHistogram``
    summary and its ``count``), ``virtual_seconds``. Seeded by ``run.seed``: the same
    scenario and handlers give the same result. SpecError for a stage or source the
    scenario does not have, or an arrival other than periodic or Poisson.
    """
    if not isinstance(scenario, Scenario):
        raise TypeError(f"scenario must be a Scenario, not {scenario!r:.80}")
    handlers = dict(handlers or {})
    for name in handlers:
        if name not in scenario.service:
            raise SpecError(
                f"handlers.{name}: no stage {name!r} in the scenario",
                field=f"handlers.{name}",
                value=name,
            )
    for name, arrival in scenario.arrival.items():
        if not isinstance(arrival, Periodic | Poisson):
            raise SpecError(
                f"arrival.{name}: run_scenario runs periodic and Poisson sources only",
                field=f"arrival.{name}",
                value=type(arrival).__name__,
            )
    seed = int(scenario.run.get("seed", 0))
    costs = {
        name: (_sampler(name, model, random.Random(f"{seed}:{name}")), model.per_item_ms / 1000)
        for name, model in scenario.service.items()
    }
    return vrun(_main, scenario, handlers, costs, seed, backend=backend)


def _sampler(name: str, model: Service, rng: random.Random) -> Sampler:
    table = {k: v for k, v in model.table().items() if k != "per_item_ms"}
    return sampler(service_spec(table, f"service.{name}", None), rng)


async def _main(
    scenario: Scenario,
    handlers: dict[str, Callable[..., Awaitable[Any]]],
    costs: dict[str, tuple[Sampler, float]],
    seed: int,
) -> dict[str, Any]:
    broker, store = MemoryMessagingBackend(), MemoryPayloadStore()
    pipe = await ensure_pipeline(broker, "scenario", "run", scenario.nodes)
    e2e = LatencyHistogram()
    sinks = {name for name, readers in pipe.readers.items() if not readers}
    workers = {
        n.name: _worker(
            broker,
            store,
            pipe,
            n.name,
            scenario.stages.get(n.name, Stage()),
            handlers.get(n.name),
            costs[n.name],
            e2e if n.name in sinks else None,
        )
        for n in pipe.stages()
    }
    frames: dict[str, int] = {}
    duration = float(scenario.run.get("duration_seconds", 60.0))
    start = anyio.current_time()
    async with anyio.create_task_group() as tg:
        for w in workers.values():
            tg.start_soon(w.run)
        for i, n in enumerate(x for x in pipe.nodes if not x.inputs):
            arrival = scenario.arrival[n.name]
            assert isinstance(arrival, Periodic | Poisson)
            channel, readers = pipe.channels[n.name], pipe.readers[n.name]
            publisher = Publisher(broker, channel, payload=store, readers=readers)
            rng = random.Random(f"{seed}:source:{i}")
            tg.start_soon(_source, n.name, arrival, publisher, rng, start + duration, frames)
    stages: dict[str, Any] = {}
    for name, w in workers.items():
        stats = w.counters.as_dict()
        stats.pop("busy_seconds")
        if isinstance(w, BatchWorker):
            stats["batches"] = w.batches
        stages[name] = stats
    return {
        "frames": frames,
        "stages": stages,
        "end_to_end": {"count": e2e.count, **e2e.summary(1000.0)} if e2e.count else {"count": 0},
        "virtual_seconds": anyio.current_time() - start,
    }


async def _source(
    name: str,
    arrival: Periodic | Poisson,
    publisher: Publisher,
    rng: random.Random,
    end: float,
    frames: dict[str, int],
) -> None:
    """``arrival``'s frames until ``end`` in time order (``event_ts`` = capture time), then
    ``eos``; each periodic stream starts at a random phase in its first period."""
    rate = arrival.rate_hz
    poisson = isinstance(arrival, Poisson)
    now = anyio.current_time()
    heap = [
        (now + (rng.expovariate(rate) if poisson else rng.random() / rate), k, 0)
        for k in range(arrival.streams)
    ]
    heapq.heapify(heap)
    data = b"\0" * arrival.bytes if arrival.bytes else None
    sent = 0
    while heap and heap[0][0] < end:
        at, k, n = heapq.heappop(heap)
        if at > anyio.current_time():
            await anyio.sleep(at - anyio.current_time())
        await publisher.send(f"{name}-{k}-{n}", b"frame", event_ts=at, data=data)
        sent += 1
        heapq.heappush(heap, (at + (rng.expovariate(rate) if poisson else 1 / rate), k, n + 1))
    frames[name] = sent
    await publisher.send(f"eos@{name}", kind="eos")


def _worker(
    broker: MemoryMessagingBackend,
    store: MemoryPayloadStore,
    pipe: Pipeline,
    name: str,
    stage: Stage,
    handler: Callable[..., Awaitable[Any]] | None,
    cost: tuple[Sampler, float],
    e2e: LatencyHistogram | None,
) -> StageWorker:
    """The worker ``stage`` names, serving ``handler`` (or the default) with ``cost`` as
    its ``work()`` model and, at a sink, recording end-to-end latency."""
    subs, wiring = stage_wiring(pipe, name)
    joins, batch = stage.join is not None, stage.batch
    batched = not joins and isinstance(batch, Batch)
    user = handler or (_default_join if joins else _default_batch if batched else _default_one)

    async def modelled(first: Any, second: Any) -> Any:
        token = _cost.set(cost)
        try:
            result = await user(first, second)
        finally:
            _cost.reset(token)
        if e2e is not None:  # per frame: a join's parts are one frame, a batch's items many
            now = anyio.current_time()
            served = first if batched else first[:1] if joins else (first,)
            for d in served:
                e2e.add(now - d.envelope.event_ts)
        return result

    options: dict[str, Any] = {"replicas": stage.replicas, "payload": store}
    if joins:
        timeout = stage.join_timeout_ms
        return JoinWorker(
            broker,
            subs,
            modelled,
            join_timeout_seconds=None if timeout is None else timeout / 1000,
            **wiring,
            **options,
        )
    if isinstance(batch, Batch):
        return BatchWorker(
            broker,
            subs,
            modelled,
            max_items=batch.max_items,
            max_wait_seconds=batch.max_wait_ms / 1000,
            **wiring,
            **options,
        )
    return StageWorker(broker, subs, modelled, batch=batch, **wiring, **options)


async def _default_one(d: Delivery, data: bytes | None) -> list[bytes]:
    await work()
    return [b"out"]


async def _default_batch(ds: list[Delivery], datas: list[bytes | None]) -> list[Any]:
    await work(items=len(ds))
    return [[b"out"] for _ in ds]


async def _default_join(ds: list[Delivery], datas: list[bytes | None]) -> list[bytes]:
    await work()
    return [b"out"]


__all__ = ["run_scenario", "work"]
