"""Exact edges of the messaging model that no real engine can be held to (found by mutation
testing, ``benchmarks/mutation``): the dedup window's end, a byte credit filled exactly, a
channel filled exactly to ``max_bytes``. Engines count per-message overhead and time with
slack, so these are model rules, pinned here rather than in a conformance case."""

from __future__ import annotations

import anyio
import msgspec
import pytest

from _msg_helpers import deadline, setup
from videoflow_aio.contracts.errors import ValidationError
from videoflow_aio.contracts.messaging import (
    Accepted,
    make_channel,
    make_envelope,
    make_subscription,
)
from videoflow_aio.memory.messaging import MemoryMessagingBackend
from videoflow_aio.observe import ObservationLog

pytestmark = pytest.mark.anyio


async def test_dedup_window_ends_exactly_one_window_after_the_first_accept() -> None:
    b, ch, _ = await setup(dedup_window_seconds=20)
    first = await b.publish(make_envelope(ch.channel, "p"), deadline())
    await anyio.sleep(19.999)
    dup = await b.publish(make_envelope(ch.channel, "p"), deadline())
    await anyio.sleep(0.001)  # exactly 20 s after the first accept: the window is over
    new = await b.publish(make_envelope(ch.channel, "p"), deadline())
    assert isinstance(first, Accepted) and isinstance(dup, Accepted) and isinstance(new, Accepted)
    assert dup.duplicate and dup.sequence == first.sequence
    assert not new.duplicate and new.sequence > first.sequence


async def test_bodies_that_exactly_fill_the_byte_credit_are_taken() -> None:
    b, ch, sub = await setup()
    for i in range(4):
        await b.publish(make_envelope(ch.channel, f"p{i}", body=b"z" * 1000), deadline())
    got = await b.receive(sub.id, 10, 2000, deadline())
    assert [d.envelope.publication_id for d in got] == ["p0", "p1"]
    short = await b.receive(sub.id, 10, 1999, deadline())
    assert [d.envelope.publication_id for d in short] == ["p2"]


async def test_a_message_that_exactly_fills_max_bytes_evicts_nothing() -> None:
    b, ch, _ = await setup(max_msgs=10, max_bytes=10, overflow="evict_oldest")
    await b.publish(make_envelope(ch.channel, "a", body=b"x" * 4), deadline())
    await b.publish(make_envelope(ch.channel, "b", body=b"y" * 6), deadline())  # 10 of 10
    assert [e.publication_id for e in b.stored(ch.channel)] == ["a", "b"]
    await b.publish(make_envelope(ch.channel, "c", body=b"z"), deadline())  # 11: a leaves
    assert [e.publication_id for e in b.stored(ch.channel)] == ["b", "c"]


# -- found by cosmic-ray's generated mutants (benchmarks/mutation/cosmic.py) ------------------


def test_an_archive_horizon_under_one_second_is_accepted() -> None:
    assert MemoryMessagingBackend(archive=True, archive_horizon_seconds=0.5).config.archive
    with pytest.raises(ValidationError):
        MemoryMessagingBackend(archive=True, archive_horizon_seconds=0.0)


async def test_ensuring_an_unchanged_channel_records_no_update() -> None:
    log = ObservationLog()
    b, ch, _ = await setup(log=log)
    same = msgspec.structs.replace(ch)  # equal, not the same object
    await b.ensure_channel(same, "op-again")  # nothing to change
    assert log.events("channel_updated") == []
    await b.ensure_channel(msgspec.structs.replace(ch, max_msgs=ch.max_msgs + 1), "op-more")
    assert [e.ident for e in log.events("channel_updated")] == ["op-more"]


async def test_a_max_age_drop_is_stamped_when_the_message_aged_out() -> None:
    log = ObservationLog()
    b, ch, _ = await setup(log=log, max_age_seconds=10.0)
    t0 = anyio.current_time()
    await anyio.sleep(3)
    await b.publish(make_envelope(ch.channel, "p"), deadline())
    await anyio.sleep(30)
    await b.publish(make_envelope(ch.channel, "q"), deadline())  # p left at +13, seen at +33
    (drop,) = log.events("drop")
    assert drop.ident == "p"
    assert drop.at == pytest.approx(t0 + 13.0)


async def test_core_only_deliveries_are_recorded_as_core() -> None:
    log = ObservationLog()
    b = MemoryMessagingBackend(core_only=True, log=log)
    ch = make_channel("f", "r", "n", "work", retention="limits")
    await b.ensure_channel(ch, "op-ch")
    sub = make_subscription(ch.channel, "w")
    await b.ensure_subscription(sub, "op-sub")
    await b.publish(make_envelope(ch.channel, "p"), deadline())
    assert len(await b.receive(sub.id, 1, 1 << 20, deadline())) == 1
    (deliver,) = log.events("deliver")
    assert deliver.attrs.get("core") is True
