"""Issue 26, items 6-9: a handler's own CancelledError, a handler that never returns, a
run that forgot end-of-stream, and wrong arguments — each ends in the exception policy or a
typed error, never a silent stop or a hang (on virtual time)."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import anyio
import pytest

from _pipeline_helpers import feed, sleeper, three_stage
from videoflow_aio.contracts.errors import ValidationError
from videoflow_aio.contracts.messaging import Delivery
from videoflow_aio.memory.messaging import MemoryMessagingBackend
from videoflow_aio.pipeline import (
    BadHandler,
    ExceptionPolicy,
    HandlerTimeout,
    LatencyHistogram,
    PipelineStalled,
    StageWorker,
    ensure_pipeline,
    run_stage,
    stage_worker,
)
from videoflow_aio.vtime import VirtualClock

pytestmark = pytest.mark.anyio


# -- 6: a bare CancelledError from a handler ---------------------------------------------------
async def test_a_handler_raising_cancelled_error_is_a_handler_failure(anyio_backend: str) -> None:
    # before: run() returned normally with finished=False, frames pending and leased
    if anyio_backend != "asyncio":
        pytest.skip("only asyncio lets code raise its cancellation exception")
    b = MemoryMessagingBackend()
    pipe = await three_stage(b, max_deliver=2)
    await feed(b, pipe, 3)

    async def decode(d: Delivery, data: bytes | None) -> None:
        raise asyncio.CancelledError

    w = stage_worker(b, pipe, "decode", decode)
    with anyio.fail_after(600):
        await w.run()
    assert w.finished
    assert w.counters.retried == 6 and w.counters.completed == 0  # 3 frames × 2 attempts


async def test_the_worker_own_cancellation_still_stops_it(vclock: VirtualClock) -> None:
    b = MemoryMessagingBackend()
    pipe = await three_stage(b)
    await feed(b, pipe, 1, eos=False)
    w = stage_worker(b, pipe, "decode", sleeper(100.0))
    with anyio.move_on_after(10):
        await w.run()
    assert not w.finished and w.counters.retried == 0  # cancelled mid-handler: not settled


# -- 7: a handler deadline ---------------------------------------------------------------------
async def test_a_handler_that_never_returns_is_cancelled_and_retried(vclock: VirtualClock) -> None:
    # before: the message was held (its lease renewed) forever and the stage never finished
    b = MemoryMessagingBackend()
    pipe = await three_stage(b, max_deliver=2)
    await feed(b, pipe, 1, every=0.0)
    calls: list[float] = []

    async def stuck(d: Delivery, data: bytes | None) -> None:
        calls.append(vclock.monotonic())
        await anyio.sleep_forever()

    w = stage_worker(b, pipe, "decode", stuck, handler_timeout_seconds=5.0)
    with anyio.fail_after(600):
        await w.run()
    assert w.finished and w.counters.retried == 2 and len(calls) == 2
    assert calls[1] - calls[0] >= 5.0


async def test_a_handler_timeout_listed_terminal_dead_letters_at_once(
    vclock: VirtualClock,
) -> None:
    b = MemoryMessagingBackend()
    pipe = await three_stage(b)
    await feed(b, pipe, 2, every=0.0)
    w = stage_worker(
        b,
        pipe,
        "decode",
        sleeper(1e6),
        handler_timeout_seconds=30.0,
        policy=ExceptionPolicy(terminal=(HandlerTimeout,)),
    )
    with anyio.fail_after(600):
        await w.run()
    assert w.counters.terminal == 2 and w.counters.retried == 0


@pytest.mark.parametrize("off", [None, math.inf])
async def test_no_handler_deadline_when_disabled(vclock: VirtualClock, off: float | None) -> None:
    b = MemoryMessagingBackend()
    pipe = await three_stage(b)
    await feed(b, pipe, 1, every=0.0)
    w = stage_worker(b, pipe, "decode", sleeper(5000.0), handler_timeout_seconds=off)
    with anyio.fail_after(6000):
        await w.run()
    assert w.counters.completed == 1 and w.counters.retried == 0


# -- 8: no progress on virtual time ------------------------------------------------------------
async def test_a_run_without_end_of_stream_ends_with_an_error_naming_it(
    vclock: VirtualClock,
) -> None:
    # before: the workers polled forever; virtual time never idled, so no deadlock was seen
    b = MemoryMessagingBackend()
    pipe = await three_stage(b)
    await feed(b, pipe, 2, eos=False)
    w = stage_worker(b, pipe, "decode", sleeper(0.01), idle_limit_seconds=120.0)
    with pytest.raises(PipelineStalled) as err:
        await w.run()
    assert err.value.stage == "decode"
    assert err.value.waiting == (pipe.channels["cams"].name,)
    assert err.value.idle_seconds >= 120.0
    assert "end-of-stream" in str(err.value) and "cams" in str(err.value)
    assert vclock.monotonic() < 1000.0 + 200.0


async def test_the_default_idle_limit_is_generous_but_finite(vclock: VirtualClock) -> None:
    b = MemoryMessagingBackend()
    pipe = await three_stage(b)
    w = stage_worker(b, pipe, "decode", sleeper(0.01), poll_seconds=10.0)
    with pytest.raises(PipelineStalled):
        await w.run()
    assert 1000.0 + 3600.0 <= vclock.monotonic() <= 1000.0 + 3700.0


# -- 9: typed errors ----------------------------------------------------------------------------
async def test_bad_worker_arguments_are_validation_errors() -> None:
    b = MemoryMessagingBackend()
    pipe = await three_stage(b)
    sub = pipe.subscriptions["decode"][0]
    handle = sleeper(0)
    bad: list[tuple[dict[str, Any], str]] = [
        ({"replicas": 10**30}, "replicas"),
        ({"batch": 10**30}, "batch"),
        ({"byte_credit": 1 << 70}, "byte_credit"),
        ({"eos": None}, "eos"),
        ({"eos": [None]}, "eos"),
        ({"output": "x"}, "output"),
        ({"readers": "abc"}, "readers"),
        ({"readers": 5}, "readers"),
        ({"readers": None}, "readers"),
        ({"payload": 5}, "payload"),
        ({"policy": 3}, "policy"),
        ({"observe": 3}, "observe"),
        ({"handler_timeout_seconds": -1.0}, "handler_timeout_seconds"),
        ({"idle_limit_seconds": math.nan}, "idle_limit_seconds"),
    ]
    for kw, field in bad:
        with pytest.raises(ValidationError) as err:
            StageWorker(b, sub, handle, **kw)
        assert err.value.field == field, kw
    with pytest.raises(ValidationError) as err:
        StageWorker(None, sub, handle)  # type: ignore[arg-type]
    assert err.value.field == "backend"
    for subscription in (None, "decode", [None], 5):
        with pytest.raises(ValidationError) as err:
            StageWorker(b, subscription, handle)  # type: ignore[arg-type]
        assert err.value.field == "subscription"
    with pytest.raises(ValidationError):
        stage_worker(b, pipe, "nope", handle)
    with pytest.raises(ValidationError):
        stage_worker(b, None, "decode", handle)  # type: ignore[arg-type]


async def test_ensure_pipeline_with_bad_stages_is_a_validation_error() -> None:
    b = MemoryMessagingBackend()
    for stages in (None, "abc", 5):
        with pytest.raises(ValidationError) as err:
            await ensure_pipeline(b, "flow", "r1", stages)  # type: ignore[arg-type]
        assert err.value.field == "stages"
    for flow in (None, "", "a.b", "nul\x00"):
        with pytest.raises(ValidationError):
            await ensure_pipeline(b, flow, "r1", [])  # type: ignore[arg-type]


async def test_a_plain_def_handler_is_refused_at_construction() -> None:
    b = MemoryMessagingBackend()
    pipe = await three_stage(b)

    def plain(d: Delivery, data: bytes | None) -> None:
        return None

    for handler in (plain, lambda d, data: None, 5, None):
        with pytest.raises(ValidationError) as err:
            StageWorker(b, pipe.subscriptions["decode"], handler)  # type: ignore[arg-type]
        assert err.value.field == "handler"


@pytest.mark.parametrize("result", ["frame", 5, b"raw", {"a": 1}, [object()]])
async def test_a_handler_returning_a_wrong_type_fails_the_run(
    vclock: VirtualClock, result: object
) -> None:
    # before: every message was silently retried until unresolved
    b = MemoryMessagingBackend()
    pipe = await three_stage(b)
    await feed(b, pipe, 1)

    async def wrong(d: Delivery, data: bytes | None) -> Any:
        return result

    with pytest.raises(BadHandler) as err:
        await stage_worker(b, pipe, "decode", wrong).run()
    assert isinstance(err.value, TypeError) and err.value.stage == "decode"


async def test_a_callable_returning_no_awaitable_fails_the_run(vclock: VirtualClock) -> None:
    b = MemoryMessagingBackend()
    pipe = await three_stage(b)
    await feed(b, pipe, 1)

    class Sync:
        def __call__(self, d: Delivery, data: bytes | None) -> int:
            return 5

    with pytest.raises(BadHandler, match="not an awaitable"):
        await run_stage(
            b,
            pipe.subscriptions["decode"],
            Sync(),  # type: ignore[arg-type]
            eos=pipe.eos_subscriptions["decode"],
        )


@pytest.mark.parametrize("value", ["1", None, [1.0], True, 1 + 2j, 10**400])
def test_histogram_add_with_a_bad_type_is_a_validation_error(value: Any) -> None:
    h = LatencyHistogram()
    with pytest.raises(ValidationError):
        h.add(value)
    assert h.count == 0


@pytest.mark.parametrize("scale", [math.nan, math.inf, -1.0, 0.0, "1000", None, 10**400])
def test_histogram_summary_with_a_bad_scale_is_a_validation_error(scale: Any) -> None:
    # before: NaN latencies for scale=nan, TypeError for a string
    h = LatencyHistogram()
    h.add(0.5)
    with pytest.raises(ValidationError):
        h.summary(scale)


def test_histogram_other_bad_arguments_are_validation_errors() -> None:
    h = LatencyHistogram()
    h.add(1.0)
    for call in (
        lambda: h.percentiles(["x"]),  # type: ignore[list-item]
        lambda: h.percentiles(None),  # type: ignore[arg-type]
        lambda: h.merge(3),  # type: ignore[arg-type]
        lambda: h.extend(None),  # type: ignore[arg-type]
    ):
        with pytest.raises(ValidationError):
            call()
    assert h.count == 1


def test_an_int_too_large_for_a_float_is_a_validation_error_not_overflow() -> None:
    # found by the sweep (tests/test_robust_sweep.py): OverflowError before
    from videoflow_aio.pipeline import RetryLater

    with pytest.raises(ValidationError):
        RetryLater("why", 10**400)
    with pytest.raises(ValidationError):
        ExceptionPolicy(retry_delay_seconds=10**400)
