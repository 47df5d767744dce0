"""ObservationLog: ordered events on virtual time, queries, JSON-lines round trip."""

from __future__ import annotations

import anyio
import pytest

from videoflow_aio.observe import Event, ObservationLog


@pytest.mark.anyio
async def test_events_carry_virtual_time_and_order() -> None:
    log = ObservationLog()
    t0 = anyio.current_time()
    log.record("publish", subject="ch", ident="p1")
    await anyio.sleep(30)
    log.record("deliver", subject="ch", ident="p1", attempt=1)
    events = log.events()
    assert [e.kind for e in events] == ["publish", "deliver"]
    assert [e.seq for e in events] == [0, 1]
    assert events[1].at - events[0].at == 30
    assert events[0].at == t0
    assert events[1].attrs == {"attempt": 1}


def test_query_by_kind_subject_ident() -> None:
    log = ObservationLog()
    log.record("publish", subject="a", ident="1", at=1.0)
    log.record("publish", subject="b", ident="2", at=2.0)
    log.record("drop", subject="a", ident="1", at=3.0, subscriptions=["s1", "s2"])
    assert [e.ident for e in log.events("publish")] == ["1", "2"]
    assert [e.kind for e in log.events(["drop", "publish"], subject="a")] == ["publish", "drop"]
    assert log.events("drop")[0].attrs["subscriptions"] == ["s1", "s2"]
    assert log.events("settle") == []
    assert log.kinds() == ["publish", "drop"]
    assert len(log) == 3


def test_outside_a_loop_time_defaults_to_zero() -> None:
    assert ObservationLog().record("x").at == 0.0


def test_jsonl_round_trip(tmp_path: object) -> None:
    log = ObservationLog()
    log.record("put", subject="store", ident="k", at=1.5, size=10, digest="abc", ok=True)
    log.record("release", subject="store", ident="k", at=2.5, generation=None)
    data = log.export_jsonl()
    assert data.count(b"\n") == 2
    again = ObservationLog.from_jsonl(data)
    assert again.events() == log.events()
    assert isinstance(again.events()[0], Event)
    assert again.events("release")[0].attrs == {"generation": None}
