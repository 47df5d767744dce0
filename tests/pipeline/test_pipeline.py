"""The pipeline toolkit on the memory models, under asyncio and trio on virtual time:
set-up, stage workers (forwarding, settling, exception policy, leases, eos, crashes),
publishing, and the ObservationLog latency helpers."""

from __future__ import annotations

import math

import anyio
import anyio.lowlevel
import pytest
import sniffio

from _pipeline_helpers import THREE, CancelAt, Trigger, feed, sleeper, three_stage
from videoflow_aio.contracts import Known
from videoflow_aio.contracts.errors import IncompatibleProfile, ValidationError
from videoflow_aio.contracts.messaging import (
    Accepted,
    ChannelId,
    Completed,
    Delivery,
    make_channel,
)
from videoflow_aio.memory.messaging import MemoryMessagingBackend
from videoflow_aio.memory.payload import MemoryPayloadStore
from videoflow_aio.observe import ObservationLog, event_key, latencies, percentiles, summarize
from videoflow_aio.pipeline import (
    ExceptionPolicy,
    GiveUp,
    Node,
    Output,
    Publisher,
    RetryLater,
    StageWorker,
    deadline_in,
    ensure_pipeline,
    loop_clock,
    plan_pipeline,
    run_stage,
    sent_at,
    stage_worker,
)

pytestmark = pytest.mark.anyio


async def sub_obs(b: MemoryMessagingBackend, sub: object) -> object:
    got = await b.observe_subscription(sub)  # type: ignore[arg-type]
    assert isinstance(got, Known)
    return got.value


# -- set-up ------------------------------------------------------------------------------------


async def test_ensure_pipeline_creates_names_once() -> None:
    log = ObservationLog()
    b = MemoryMessagingBackend(log=log)
    pipe = await three_stage(b)
    assert sorted(c.name for c in await b.channel_ids()) == ["flow.r1.cams", "flow.r1.decode"]
    assert pipe.output("infer") is None  # nothing reads it: a sink has no channel
    assert [s.name for s in await b.subscription_ids(pipe.channels["cams"])] == [
        "flow.r1.cams/decode",
        "flow.r1.cams/decode-eos",
    ]
    assert pipe.readers == {"cams": ("decode",), "decode": ("infer",), "infer": ()}
    created = len(log.events(["channel_created", "subscription_created"]))
    again = await three_stage(b)
    assert again == pipe
    assert len(log.events(["channel_created", "subscription_created"])) == created
    assert [e.ident for e in log.events("channel_created")] == [
        "ensure:flow.r1.cams",
        "ensure:flow.r1.decode",
    ]


async def test_ensure_pipeline_reports_an_incompatible_existing_channel() -> None:
    b = MemoryMessagingBackend()
    await b.ensure_channel(make_channel("flow", "r1", "cams", "other", "limits"), "op")
    with pytest.raises(IncompatibleProfile):
        await three_stage(b)


@pytest.mark.parametrize(
    ("nodes", "field"),
    [
        ([Node(name="a"), Node(name="a")], "name"),
        ([Node(name="a", inputs=("zz",))], "inputs"),
        ([Node(name="a", inputs=("b",)), Node(name="b", inputs=("a",))], "inputs"),
        ([Node(name="s"), Node(name="a", inputs=("s", "s"))], "inputs"),
    ],
)
async def test_malformed_pipeline_is_refused_before_touching_the_backend(
    nodes: list[Node], field: str
) -> None:
    b = MemoryMessagingBackend()
    with pytest.raises(ValidationError) as err:
        await ensure_pipeline(b, "flow", "r1", nodes)
    assert err.value.field == field
    assert await b.channel_ids() == []


def test_plan_orders_nodes_by_dependency() -> None:
    nodes = [Node(name="c", inputs=("b",)), Node(name="b", inputs=("a",)), Node(name="a")]
    assert [n.name for n in plan_pipeline("f", "r", nodes).nodes] == ["a", "b", "c"]


def test_deadline_in_needs_a_loop_and_a_sane_number() -> None:
    with pytest.raises(ValidationError):
        deadline_in(-1)
    with pytest.raises(ValidationError):
        deadline_in(float("nan"))


async def test_deadline_in_is_relative_to_the_loop_clock() -> None:
    assert deadline_in(5) == anyio.current_time() + 5
    assert deadline_in(math.inf) == math.inf


async def test_loop_clock_sleep_is_the_loops_sleep() -> None:
    """loop_clock()'s sleep waits the virtual delay, returns at once for zero (and, as
    asyncio.sleep, for a negative delay), refuses NaN as the loop does, and a cancelled sleep
    leaves no live timer behind."""
    now, sleep = loop_clock()
    t0 = now()
    await sleep(2.5)
    assert now() == t0 + 2.5
    await sleep(0)
    if sniffio.current_async_library() == "asyncio":  # trio refuses a negative delay
        await sleep(-1)
    assert now() == t0 + 2.5
    with anyio.move_on_after(1):
        await sleep(10)
    assert now() == t0 + 3.5
    await sleep(20)  # the cancelled 10-second timer did not fire into anything
    assert now() == t0 + 23.5
    with pytest.raises(ValueError):
        await sleep(math.nan)


# -- a whole pipeline --------------------------------------------------------------------------


async def test_frames_flow_through_with_event_ts_and_payloads_released() -> None:
    log = ObservationLog()
    b = MemoryMessagingBackend(log=log)
    store = MemoryPayloadStore()
    pipe = await three_stage(b)
    seen: list[tuple[str, float, float]] = []

    async def decode(d: Delivery, data: bytes | None) -> list[Output]:
        assert data == b"J" * 100
        await anyio.sleep(0.010)
        return [Output(data=b"R" * 10, body=b"decoded")]

    async def infer(d: Delivery, data: bytes | None) -> None:
        assert data == b"R" * 10 and d.envelope.body == b"decoded"
        await anyio.sleep(0.020)

    def done(d: Delivery, now: float) -> None:
        assert d.envelope.event_ts is not None
        seen.append((d.envelope.publication_id, now - d.envelope.event_ts, now - sent(d)))

    def sent(d: Delivery) -> float:
        t = sent_at(d.envelope)
        assert t is not None
        return t

    async with anyio.create_task_group() as tg:
        tg.start_soon(stage_worker(b, pipe, "decode", decode, replicas=2, payload=store).run)
        tg.start_soon(stage_worker(b, pipe, "infer", infer, payload=store, observe=done).run)
        ids = await feed(b, pipe, 50, every=0.05, data=b"J" * 100, payload=store)
    assert [pid for pid, _, _ in seen] == [f"{i}@decode" for i in ids]
    # 50 ms apart, 10 ms then 20 ms of work: no queueing anywhere
    assert all(
        e2e == pytest.approx(0.030) and stage == pytest.approx(0.020) for _, e2e, stage in seen
    )
    assert store.object_count() == 0  # every frame and every decoded object released
    for ch in pipe.channels.values():
        obs = await b.observe_channel(ch)
        assert isinstance(obs, Known) and obs.value.messages == 0  # interest: settled = gone
    # the log helpers give the same latencies as the observer
    per_stage = latencies(
        log, "publish", "settle", start_subject="flow.r1.cams", end_subject="flow.r1.cams"
    )
    assert sorted(per_stage) == sorted([*ids, "eos@cams"])
    assert all(per_stage[i] == pytest.approx(0.010) for i in ids)
    e2e = latencies(
        log,
        "publish",
        "settle",
        start_subject="flow.r1.cams",
        end_subject="flow.r1.decode",
        key=event_key,
    )
    assert all(e2e[i] == pytest.approx(0.030) for i in ids)


async def test_eos_waits_for_the_backlog_and_is_forwarded_once() -> None:
    b = MemoryMessagingBackend()
    pipe = await three_stage(b)
    # a backlog of 20 one-second jobs on one replica: eos arrives long before they are done
    await feed(b, pipe, 20, every=0.0)
    counters = await run_stage(  # run_stage: a worker without stage_worker's wiring
        b,
        pipe.subscriptions["decode"][0],
        sleeper(1.0),
        output=pipe.output("decode"),
        eos=pipe.eos_subscriptions["decode"],
    )
    assert counters.completed == 20 and counters.forwarded == 20
    assert anyio.current_time() >= 20.0
    out = b.stored(pipe.channels["decode"])
    assert [e.kind for e in out].count("eos") == 1 and out[-1].kind == "eos"
    assert out[-1].publication_id == "eos@decode"


async def test_a_stage_with_two_inputs_stops_after_both_eos() -> None:
    b = MemoryMessagingBackend()
    nodes = [Node(name="a"), Node(name="b"), Node(name="join", inputs=("a", "b"))]
    pipe = await ensure_pipeline(b, "flow", "r1", nodes)
    pa = Publisher(b, pipe.channels["a"])
    pb = Publisher(b, pipe.channels["b"])
    got: list[str] = []

    async def handle(d: Delivery, data: bytes | None) -> None:
        got.append(d.envelope.publication_id)
        await anyio.sleep(0.1)

    async with anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: run_stage(
                b, pipe.subscriptions["join"], handle, eos=pipe.eos_subscriptions["join"]
            )
        )
        await pa.send("a1")
        await pa.send("eos@a", kind="eos")
        await anyio.sleep(10)
        assert got == ["a1"]  # a's eos alone does not stop the stage
        await pb.send("b1")
        await pb.send("eos@b", kind="eos")
    assert sorted(got) == ["a1", "b1"]


# -- settling ---------------------------------------------------------------------------------


async def test_exception_policy_retry_terminal_and_unresolved() -> None:
    b = MemoryMessagingBackend()
    pipe = await three_stage(b, max_deliver=3)
    attempts: dict[str, list[int]] = {}

    async def handle(d: Delivery, data: bytes | None) -> None:
        pid = d.envelope.publication_id
        attempts.setdefault(pid, []).append(d.attempt)
        if pid == "f0" and d.attempt == 1:
            raise RetryLater("not yet", 5.0)
        if pid == "f1":
            raise GiveUp("bad frame")
        if pid == "f2":
            raise KeyError("always")  # policy: terminal
        if pid == "f3":
            raise RuntimeError("flaky forever")  # policy: retry until max_deliver

    policy = ExceptionPolicy(terminal=(KeyError,), retry_delay_seconds=0.5)
    worker = StageWorker(b, pipe.subscriptions["decode"][0], handle, policy=policy)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        await feed(b, pipe, 5, eos=False)
        await anyio.sleep(60)
        tg.cancel_scope.cancel()
    assert attempts == {"f0": [1, 2], "f1": [1], "f2": [1], "f3": [1, 2, 3], "f4": [1]}
    obs = await sub_obs(b, pipe.subscriptions["decode"][0])
    assert obs.unresolved == 1 and obs.dead_lettered == 2 and obs.pending == 0  # type: ignore[attr-defined]
    c = worker.counters
    assert (c.completed, c.terminal, c.retried, c.redelivered) == (2, 2, 4, 3)
    dead = [e for e in b.stored(pipe.channels["cams"]) if e.kind == "dlq"]
    assert sorted(e.headers["dlq-reason"] for e in dead) == ["KeyError: 'always'", "bad frame"]


async def test_a_rejected_forward_retries_the_input() -> None:
    b = MemoryMessagingBackend()
    nodes = [
        Node(name="cams"),
        Node(name="decode", inputs=("cams",), max_msgs=1, overflow="reject"),
        Node(name="infer", inputs=("decode",)),
    ]
    pipe = await ensure_pipeline(b, "flow", "r1", nodes)
    worker = StageWorker(
        b, pipe.subscriptions["decode"][0], sleeper(0.0), output=pipe.output("decode")
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        await feed(b, pipe, 2, eos=False)
        await anyio.sleep(0.5)
        tg.cancel_scope.cancel()
    # decode's channel holds one message; the second forward is rejected → Retry(1 s)
    assert worker.counters.completed == 1 and worker.counters.retried >= 1
    obs = await sub_obs(b, pipe.subscriptions["decode"][0])
    assert obs.pending == 1  # type: ignore[attr-defined]


async def test_long_handler_keeps_its_lease_by_renewing() -> None:
    b = MemoryMessagingBackend()
    pipe = await three_stage(b, ack_wait_seconds=30.0)
    worker = StageWorker(b, pipe.subscriptions["decode"][0], sleeper(100.0), replicas=2)
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        await feed(b, pipe, 1, eos=False)
        await anyio.sleep(200)
        tg.cancel_scope.cancel()
    c = worker.counters
    assert c.completed == 1 and c.redelivered == 0 and c.stale == 0 and c.renewals >= 3


async def test_without_renewal_the_lease_would_expire() -> None:
    # the same long handler on a bare receive/settle (no renewal): the settle is stale
    b = MemoryMessagingBackend()
    pipe = await three_stage(b, ack_wait_seconds=30.0)
    await feed(b, pipe, 1, eos=False)
    sub = pipe.subscriptions["decode"][0]
    [d] = await b.receive(sub, 1, 1 << 20, deadline_in(1))
    await anyio.sleep(100)
    answer = await b.settle(d.token, Completed(), "s")
    assert type(answer).__name__ == "SettleStale"


# -- crashes and cancellation ------------------------------------------------------------------


async def test_crashed_replica_leaves_its_message_to_redeliver() -> None:
    b = MemoryMessagingBackend()
    pipe = await three_stage(b, ack_wait_seconds=30.0)
    done: list[tuple[str, int]] = []

    def observe(d: Delivery, now: float) -> None:
        done.append((d.envelope.publication_id, d.attempt))

    worker = StageWorker(
        b, pipe.subscriptions["decode"][0], sleeper(1.0), replicas=2, observe=observe
    )
    with anyio.fail_after(1000):
        async with anyio.create_task_group() as tg:
            tg.start_soon(worker.run)
            await anyio.lowlevel.checkpoint()
            worker.crash(0)  # idle: it dies at its next message, holding it
            await feed(b, pipe, 2, every=0.0, eos=False)  # one message for each replica
            await worker.wait_dead(0)
            assert worker.alive() == [False, True]
            await anyio.sleep(28)
            assert len(done) == 1  # the other message is still leased by the dead replica
            await anyio.sleep(5)
            # the lease expired at 30 s; replica 1 took the message again (attempt 2)
            assert len(done) == 2 and done[1][1] == 2 and done[0][0] != done[1][0]
            assert worker.restart(0) and not worker.restart(0)
            await anyio.lowlevel.checkpoint()
            assert worker.alive() == [True, True]
            tg.cancel_scope.cancel()
    assert worker.counters.crashes == 1 and worker.counters.redelivered == 1


async def test_crash_of_a_busy_replica_is_immediate() -> None:
    b = MemoryMessagingBackend()
    pipe = await three_stage(b, ack_wait_seconds=10.0)
    worker = StageWorker(b, pipe.subscriptions["decode"][0], sleeper(5.0))
    async with anyio.create_task_group() as tg:
        tg.start_soon(worker.run)
        await feed(b, pipe, 1, every=0.0, eos=False)
        t0 = anyio.current_time()
        await anyio.sleep(1)
        assert worker.busy() == [True]
        worker.crash(0)
        await worker.wait_dead(0)
        assert worker.alive() == [False]
        assert anyio.current_time() - t0 == 1.0  # at once: nothing waited for
        worker.restart(0)
        await anyio.sleep(20)
        tg.cancel_scope.cancel()
    assert worker.counters.completed == 1 and worker.counters.redelivered == 1


async def _cancel_run(at: int, when: str) -> tuple[Trigger, bool]:
    """Three frames through decode (payload in, payload out) on a worker cancelled at its
    ``at``-th contract call; then a fresh worker finishes the job. Checks that nothing was
    settled that was not done, and that the outputs come out exactly once."""
    log = ObservationLog()
    b = MemoryMessagingBackend(log=log)
    store = MemoryPayloadStore()
    pipe = await three_stage(b, ack_wait_seconds=30.0)
    await feed(b, pipe, 3, every=0.0, data=b"J", payload=store)
    handled: set[str] = set()

    async def decode(d: Delivery, data: bytes | None) -> list[Output]:
        assert data == b"J"
        await anyio.sleep(0.5)
        handled.add(d.envelope.publication_id)
        return [Output(data=b"R")]

    def worker(messaging: object, payload: object) -> StageWorker:
        return stage_worker(messaging, pipe, "decode", decode, payload=payload)  # type: ignore[arg-type]

    with anyio.CancelScope() as scope:
        trigger = Trigger(scope, at, when)
        await worker(CancelAt(b, trigger), CancelAt(store, trigger)).run()
    settled = {e.ident for e in log.events("settle", subject="flow.r1.cams")}
    frames = {f"f{i}" for i in range(3)}
    forwarded = {e.ident for e in log.events("publish", subject="flow.r1.decode")}
    # nothing settled that was not done: a settled frame was handled and forwarded
    assert settled & frames <= handled
    assert {f"{f}@decode" for f in settled & frames} <= forwarded
    finished = "eos@cams" in settled
    if not finished:  # else the first worker finished the whole job
        with anyio.fail_after(3600):
            await worker(b, store).run()  # redeliveries once the dead worker's leases expire
    outs = [e for e in log.events("publish", subject="flow.r1.decode") if e.ident != "eos@decode"]
    assert sorted(e.ident for e in outs if not e.attrs["duplicate"]) == [
        "f0@decode",
        "f1@decode",
        "f2@decode",
    ]
    stored = [e for e in b.stored(pipe.channels["decode"]) if e.kind == "data"]
    assert sorted(e.publication_id for e in stored) == ["f0@decode", "f1@decode", "f2@decode"]
    await anyio.sleep(4000)  # TTLs: what a dead worker left behind does not stay forever
    assert store.object_count() == 0
    return trigger, finished


@pytest.mark.parametrize("when", ["before", "after"])
async def test_a_worker_cancelled_at_any_contract_call_settles_nothing_undone(when: str) -> None:
    full, finished = await _cancel_run(0, when)  # how many calls a whole run makes
    assert finished and not full.fired and full.calls > 20
    for at in range(1, full.calls + 1):
        trigger, finished = await _cancel_run(at, when)
        # not fired: the run made fewer calls (trio orders same-instant tasks at random) or
        # the call was still waiting when the stage stopped (an idle receive never returns)
        assert trigger.fired or finished, at


def test_worker_arguments_are_checked() -> None:
    b = MemoryMessagingBackend()
    sub = plan_pipeline("f", "r", THREE).subscriptions["decode"][0]
    for kw in ({"replicas": 0}, {"batch": 0}, {"call_timeout": 0}, {"poll_seconds": -1}):
        with pytest.raises(ValidationError):
            StageWorker(b, sub, sleeper(0), **kw)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        StageWorker(b, [], sleeper(0))
    with pytest.raises(ValidationError):
        RetryLater("x", -1)


# -- publishing --------------------------------------------------------------------------------


async def test_ambiguous_publish_is_retried_with_the_same_id() -> None:
    b = MemoryMessagingBackend()
    pipe = await three_stage(b)
    cams = pipe.channels["cams"]
    pub = Publisher(b, cams, timeout=2.0)
    b.pause_acceptance(cams)
    outcome: list[object] = []

    async def send() -> None:
        outcome.append(await pub.send("f0", b"x"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(send)
        await anyio.sleep(7)  # three attempts time out
        assert outcome == []
        b.resume_acceptance(cams)  # every held attempt is stored late (deduplicated)
    assert outcome and isinstance(outcome[0], Accepted)
    assert [e.publication_id for e in b.stored(cams)] == ["f0"]
    assert pub.counters.retried == 3 and pub.counters.duplicates == 1


async def test_publisher_arguments_are_checked() -> None:
    b = MemoryMessagingBackend()
    cid = ChannelId("f", "r", "n")
    with pytest.raises(ValidationError):
        Publisher(b, cid, timeout=0)
    with pytest.raises(ValidationError):
        Publisher(b, cid, max_attempts=0)
    with pytest.raises(ValidationError):
        await Publisher(b, cid).send("p", data=b"no store")


# -- latency helpers ---------------------------------------------------------------------------


def test_percentiles_are_nearest_rank() -> None:
    data = [float(i) for i in range(1, 101)]
    assert percentiles(data, [0.0, 0.5, 0.9, 0.99, 1.0]) == [1.0, 50.0, 90.0, 99.0, 100.0]
    assert all(math.isnan(v) for v in percentiles([], [0.5]))
    with pytest.raises(ValueError):
        percentiles(data, [1.5])
    s = summarize([0.001, 0.002, 0.003], scale=1000)
    assert s["count"] == 3 and s["mean"] == pytest.approx(2.0) and s["max"] == 3.0
    assert summarize([])["p99"] is None


def test_latencies_pair_first_start_with_first_end_after_it() -> None:
    log = ObservationLog()
    log.record("publish", subject="c", ident="a", at=1.0)
    log.record("publish", subject="c", ident="a", at=2.0)  # a duplicate: the first counts
    log.record("settle", subject="c", ident="a", at=4.0)
    log.record("settle", subject="c", ident="a", at=9.0)
    log.record("publish", subject="c", ident="b", at=5.0)  # never settled: absent
    log.record("settle", subject="other", ident="a", at=3.0)
    assert latencies(log, "publish", "settle", start_subject="c", end_subject="c") == {"a": 3.0}
