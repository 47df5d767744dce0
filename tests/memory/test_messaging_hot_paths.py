"""The messaging model's paths a pipeline drives hard: receivers waiting (each on its own
wake-up, one woken per new message, every one when credit frees up, on time for every timer)
and interest retention under competing replicas (memory stays flat)."""

from __future__ import annotations

import math

import anyio
import pytest

from videoflow_aio.contracts.messaging import (
    Completed,
    Retry,
    make_channel,
    make_envelope,
    make_subscription,
)
from videoflow_aio.memory.messaging import MemoryMessagingBackend
from videoflow_aio.memory.messaging._waiters import Waiters

pytestmark = pytest.mark.anyio


async def test_notify_wakes_the_longest_waiting_first_and_deadlines_expire() -> None:
    w = Waiters()
    order: list[tuple[str, bool, float]] = []
    t0 = anyio.current_time()

    async def park(name: str, deadline: float) -> None:
        woken = await w.wait(deadline)
        order.append((name, woken, anyio.current_time() - t0))

    async with anyio.create_task_group() as tg:
        tg.start_soon(park, "a", t0 + 10)
        await anyio.sleep(1)
        tg.start_soon(park, "b", t0 + 5)
        tg.start_soon(park, "c", math.inf)
        await anyio.sleep(1)
        assert len(w) == 3 and w.earliest == t0 + 5
        assert w.notify(1) == 1
        await anyio.sleep(4)  # b's deadline passes
        assert w.earliest == math.inf and len(w) == 1
        assert w.notify_all() == 1
    assert order == [("a", True, 2.0), ("b", False, 5.0), ("c", True, 6.0)]
    assert not w and w.notify() == 0


async def test_no_wake_up_is_lost_when_a_woken_waiter_is_cancelled() -> None:
    w = Waiters()
    got: list[str] = []
    scopes: list[anyio.CancelScope] = []

    async def park(name: str) -> None:
        with anyio.CancelScope() as scope:
            scopes.append(scope)
            if await w.wait(math.inf):
                got.append(name)

    async with anyio.create_task_group() as tg:
        tg.start_soon(park, "a")
        await anyio.sleep(0.1)
        tg.start_soon(park, "b")
        await anyio.sleep(0.1)
        w.notify(1)  # a is woken ...
        scopes[0].cancel()  # ... and cancelled: anyio delivers that at a's next checkpoint
        await anyio.sleep(0.1)
        assert got == ["a"] and len(w) == 1  # a used its wake-up; b still waits
        w.notify_all()
    assert got == ["a", "b"]


def test_a_waiter_cancelled_after_its_wake_up_passes_it_on() -> None:
    import asyncio

    async def main() -> list[str]:
        w = Waiters()
        got: list[str] = []

        async def park(name: str) -> None:
            if await w.wait(math.inf):
                got.append(name)

        a = asyncio.create_task(park("a"))
        b = asyncio.create_task(park("b"))
        await asyncio.sleep(0)
        w.notify(1)  # a's future is done ...
        a.cancel()  # ... and the task is cancelled before it ran: CancelledError at the await
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert a.cancelled() and b.done()
        return got

    assert asyncio.run(main()) == ["b"]


async def _setup(**sub_kw: object) -> tuple[MemoryMessagingBackend, object, object]:
    b = MemoryMessagingBackend()
    ch = make_channel("f", "r", "n", "work", "limits")
    await b.ensure_channel(ch, "op")
    sub = make_subscription(ch.channel, "w", **sub_kw)  # type: ignore[arg-type]
    await b.ensure_subscription(sub, "op2")
    return b, ch.channel, sub.id


async def test_one_message_wakes_one_waiting_receiver() -> None:
    b, cid, sid = await _setup()
    returned: list[int] = []

    async def receiver() -> None:
        got = await b.receive(sid, 1, 1 << 20, anyio.current_time() + 100)  # type: ignore[arg-type]
        returned.append(len(got))

    waiters = b._broker.subs[sid].waiters  # type: ignore[index]
    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(receiver)
        await anyio.sleep(1)
        assert len(waiters) == 3
        await b.publish(make_envelope(cid, "p1"), anyio.current_time() + 1)  # type: ignore[arg-type]
        assert len(waiters) == 2  # one woken, not all three for one message
        await anyio.sleep(1)
        assert returned == [1]
        await b.publish(make_envelope(cid, "p2"), anyio.current_time() + 1)  # type: ignore[arg-type]
        await b.publish(make_envelope(cid, "p3"), anyio.current_time() + 1)  # type: ignore[arg-type]
    assert returned == [1, 1, 1]


async def test_a_receiver_waiting_before_a_lease_existed_sees_it_expire_on_time() -> None:
    b, cid, sid = await _setup(ack_wait_seconds=30.0)
    t0 = anyio.current_time()
    seen: list[tuple[str, int, float]] = []

    async def receiver(name: str) -> None:
        got = await b.receive(sid, 1, 1 << 20, t0 + 1e6)  # type: ignore[arg-type]
        seen.append((name, got[0].attempt, anyio.current_time() - t0))
        # and then this receiver's holder dies: it never settles

    async with anyio.create_task_group() as tg:
        tg.start_soon(receiver, "first")
        await anyio.sleep(1)
        tg.start_soon(receiver, "second")  # waiting before any lease exists
        await anyio.sleep(1)
        await b.publish(make_envelope(cid, "p1"), t0 + 10)  # type: ignore[arg-type]
    # the first took it at 2 s; its lease expired at 32 s and the second, waiting all along
    # with a far deadline, took the redelivery then — not at its deadline
    assert seen == [("first", 1, 2.0), ("second", 2, 32.0)]


async def test_a_short_retry_wakes_a_receiver_waiting_longer() -> None:
    b, cid, sid = await _setup()
    t0 = anyio.current_time()
    seen: list[float] = []

    async def receiver() -> None:
        got = await b.receive(sid, 1, 1 << 20, t0 + 100)  # type: ignore[arg-type]
        assert got and got[0].attempt == 2
        seen.append(anyio.current_time() - t0)

    await b.publish(make_envelope(cid, "p1"), t0 + 1)  # type: ignore[arg-type]
    [d] = await b.receive(sid, 1, 1 << 20, t0 + 1)  # type: ignore[arg-type]
    async with anyio.create_task_group() as tg:
        tg.start_soon(receiver)
        await anyio.sleep(1)
        await b.settle(d.token, Retry(0.5), "s")
    assert seen == [1.5]


async def test_settle_wakes_receivers_only_when_credit_was_exhausted() -> None:
    b, cid, sid = await _setup(item_credit=1)
    t0 = anyio.current_time()
    for i in range(2):
        await b.publish(make_envelope(cid, f"p{i}"), t0 + 1)  # type: ignore[arg-type]
    [d] = await b.receive(sid, 1, 1 << 20, t0 + 1)  # type: ignore[arg-type]
    seen: list[float] = []

    async def receiver() -> None:
        got = await b.receive(sid, 1, 1 << 20, t0 + 100)  # type: ignore[arg-type]
        assert [x.envelope.publication_id for x in got] == ["p1"]
        seen.append(anyio.current_time() - t0)

    async with anyio.create_task_group() as tg:
        tg.start_soon(receiver)  # p1 is there, but the shared credit (1) is used up
        await anyio.sleep(3)
        assert seen == []
        await b.settle(d.token, Completed(), "s")
    assert seen == [3.0]


async def test_a_receiver_whose_byte_credit_is_too_small_passes_the_message_on() -> None:
    b, cid, sid = await _setup()
    got: dict[str, list[str]] = {}

    async def receiver(name: str, byte_credit: int) -> None:
        out = await b.receive(sid, 1, byte_credit, anyio.current_time() + 100)  # type: ignore[arg-type]
        got[name] = [d.envelope.publication_id for d in out]

    async with anyio.create_task_group() as tg:
        tg.start_soon(receiver, "small", 4)
        await anyio.sleep(0.1)
        tg.start_soon(receiver, "large", 1 << 20)
        await anyio.sleep(0.1)
        await b.publish(make_envelope(cid, "big", body=b"x" * 100), anyio.current_time() + 1)  # type: ignore[arg-type]
    assert got == {"small": [], "large": ["big"]}


@pytest.mark.parametrize("per_subject", [False, True])
async def test_out_of_order_settles_leave_no_trace_behind(per_subject: bool) -> None:
    b = MemoryMessagingBackend()
    ch = make_channel("f", "r", "n", "work", "interest", per_subject_limits=per_subject)
    sub = make_subscription(ch.channel, "w", item_credit=64)
    ch = make_channel(
        "f", "r", "n", "work", "interest", required=[sub.id], per_subject_limits=per_subject
    )
    await b.ensure_channel(ch, "op")
    await b.ensure_subscription(sub, "op2")
    now = anyio.current_time
    for round_ in range(50):
        for i in range(4):
            await b.publish(make_envelope(ch.channel, f"p{round_}-{i}"), now() + 1)
        got = await b.receive(sub.id, 4, 1 << 20, now() + 1)
        for d in reversed(got):  # competing replicas finish in any order
            await b.settle(d.token, Completed(), f"s{d.sequence}")
    state = b._broker.channels[ch.channel]
    assert state.msgs == {}
    assert len(state.order) == 0
    assert all(len(q) == 0 for q in state.kind_order.values())
