"""The payload model's bookkeeping behind its cheap per-frame path: timer lanes fire in the
order one heap would, the bounded memory of why keys went away, the contract fast path,
and a put that pauses at its first barrier."""

from __future__ import annotations

import heapq

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _payload_helpers import contract, frame, store
from videoflow_aio import faults
from videoflow_aio.contracts.errors import ValidationError
from videoflow_aio.contracts.payload import Missing, RetentionContract, validate_put
from videoflow_aio.memory.payload._state import OBJECT, OBLIGATION, RecentReasons, Timers

# -- timers ----------------------------------------------------------------------------------

# a step: push (due, kind), pop everything due by a time, or rebuild; few due times, so ties
_step = st.one_of(
    st.tuples(st.just("push"), st.integers(0, 8), st.sampled_from((OBLIGATION, OBJECT))),
    st.tuples(st.just("pop"), st.integers(0, 8), st.just(0)),
    st.tuples(st.just("rebuild"), st.just(0), st.just(0)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_step, max_size=60).map(lambda s: [*s, ("pop", 9, 0)]))
def test_timers_fire_in_the_order_of_one_heap(steps: list[tuple[str, int, int]]) -> None:
    """Lanes or heap, every timer pops in (due, kind, push order) order, ``next_at`` is the
    earliest due time, and a rebuild keeps exactly the timers it is given."""
    timers = Timers()
    ref: list[tuple[float, int, int, str]] = []  # (due, kind, push number, name)
    n = 0
    for op, due, kind in steps:
        if op == "push":
            n += 1
            timers.push(float(due), kind, f"k{n}", "g1")
            heapq.heappush(ref, (float(due), kind, n, f"k{n}"))
        elif op == "pop":
            got = []
            while timers.next_at <= due:
                t = timers.pop()
                got.append((t[0], t[1], t[3]))
            want = []
            while ref and ref[0][0] <= due:
                d, k, _, name = heapq.heappop(ref)
                want.append((d, k, name))
            assert got == want
        else:  # rebuild from what is left, in the order it would fire
            live = sorted(ref)
            timers.rebuild([(d, k, name, "g1", "") for d, k, _, name in live])
            ref = [(d, k, i, name) for i, (d, k, _, name) in enumerate(live)]
        assert timers.next_at == (ref[0][0] if ref else float("inf"))
        assert len(timers) == len(ref)


def test_out_of_order_pushes_go_to_the_heap_and_still_fire_first() -> None:
    timers = Timers()
    timers.push(100.0, OBJECT, "late", "g1")
    timers.push(50.0, OBJECT, "early", "g2")  # earlier than its lane's tail
    timers.push(50.0, OBLIGATION, "due-with-early", "g2", "r/a")
    assert timers.heap and timers.next_at == 50.0
    assert [timers.pop()[3] for _ in range(3)] == ["due-with-early", "early", "late"]
    assert timers.next_at == float("inf") and len(timers) == 0


# -- why keys went away ----------------------------------------------------------------------


def test_recent_reasons_keep_at_least_the_last_limit_keys_and_at_most_twice() -> None:
    gone = RecentReasons(limit=4)
    for i in range(11):
        gone.note(f"k{i}", f"why{i}")
        remembered = [k for k in range(i + 1) if gone.get(f"k{k}") != "absent"]
        assert set(range(max(0, i - 3), i + 1)) <= set(remembered)  # the last 4, always
        assert len(remembered) <= 8
        assert all(gone.get(f"k{k}") == f"why{k}" for k in remembered)
    assert gone.get("never") == "absent"


def test_recent_reasons_latest_reason_wins() -> None:
    gone = RecentReasons(limit=2)
    gone.note("k", "expired")
    gone.note("x", "evicted")  # "k" moves to the old generation
    gone.note("k", "reclaimed")
    assert gone.get("k") == "reclaimed" and gone.get("x") == "evicted"


@pytest.mark.anyio
async def test_a_key_put_again_then_removed_reads_its_new_reason() -> None:
    s, _ = store()
    ref = await s.put(frame(1), "k", contract("r/a"))
    assert (await s.release_obligation(ref, "r/a", "x")).outcome == "reclaimed"
    again = await s.put(frame(2), "k", contract(ttl=10))
    assert (await s.read(again)).verified  # type: ignore[union-attr]
    await anyio.sleep(11)
    assert await s.read(again) == Missing("k", again.generation, "expired")


# -- the contract fast path ------------------------------------------------------------------


def test_a_contract_checked_once_does_not_let_bad_data_or_keys_through() -> None:
    c = RetentionContract(ttl_seconds=10.0, obligations=("r/a",))
    assert validate_put(b"x", "k", c) is c
    assert validate_put(b"x", "k", c) is c  # the fast path
    for data, key in (("text", "k"), (b"x", ""), (b"x", 3), (bytearray(b"x"), "k")):
        with pytest.raises(ValidationError):
            validate_put(data, key, c)


# -- a put paused at its first barrier ---------------------------------------------------------


@pytest.mark.anyio
async def test_obligation_deadline_counts_from_when_the_paused_put_attaches() -> None:
    s, _ = store()
    start = anyio.current_time()
    with faults.isolated():
        b = faults.arm("payload.write.after")
        async with anyio.create_task_group() as tg:
            tg.start_soon(s.put, frame(1), "k", contract("r/a", hold=100))
            await b.wait_paused()
            await anyio.sleep(40)
            b.release()
    assert s.obligations("k") == {"r/a": start + 40 + 100}


@pytest.mark.anyio
async def test_a_put_without_obligations_still_reaches_both_barriers() -> None:
    s, _ = store()
    with faults.isolated():
        first = faults.arm("payload.write.after")
        second = faults.arm("obligation.acquire.after")
        async with anyio.create_task_group() as tg:
            tg.start_soon(s.put, frame(1), "k", contract())
            await first.wait_paused()
            first.release()
            await second.wait_paused()
            second.release()
    assert s.object_count() == 1 and s.obligations("k") == {}
