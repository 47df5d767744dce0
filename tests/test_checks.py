"""videoflow_aio.checks: the nothing-lost checker on hand-made logs (each broken promise is
caught and named) and on the reference models' own logs (nothing lost, sabotage caught)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import anyio
import pytest

from videoflow_aio import vtime
from videoflow_aio.checks import LossReport, check_nothing_lost
from videoflow_aio.contracts.messaging import (
    Completed,
    SubscriptionId,
    make_channel,
    make_envelope,
)
from videoflow_aio.contracts.payload import RetentionContract
from videoflow_aio.memory.messaging import MemoryMessagingBackend, make_subscription
from videoflow_aio.memory.payload import MemoryPayloadStore
from videoflow_aio.memory.runtime_store import MemoryRuntimeStore
from videoflow_aio.observe import Event, ObservationLog
from videoflow_aio.testing import workload
from videoflow_aio.vtime import VirtualClock


def _log(*events: Spec) -> ObservationLog:
    log = ObservationLog()
    for kind, subject, ident, attrs in events:
        log.record(kind, subject=subject, ident=ident, **attrs)
    return log


Spec = tuple[str, str, str, dict[str, Any]]
SUB: Spec = ("subscription_created", "ch", "w", {})


def _kinds(report: LossReport) -> list[tuple[str, str, str]]:
    return [(v.kind, v.what, v.ident) for v in report.violations]


# -- hand-made logs ---------------------------------------------------------------------------
def test_a_healthy_log_is_ok_and_counted() -> None:
    log = _log(
        SUB,
        ("publish", "ch", "p1", {"duplicate": False, "seq": 1}),
        ("settle", "ch", "p1", {"subscription": "w"}),
        ("publish", "ch", "p2", {"duplicate": False, "seq": 2}),
        ("retained", "ch", "p2", {"subscription": "w"}),
        ("cas", "k", "op1", {"outcome": "ok"}),
        ("cas", "k", "op2", {"outcome": "conflict"}),
        ("cas_final", "k", "", {"applied": ["op1"]}),
        ("put", "obj", "g1", {"generation": "g1"}),
        ("read", "obj", "final", {"generation": "g1", "outcome": "PayloadBytes"}),
        ("fault", "n1", "", {"action": "kill"}),
        ("fault", "n1", "", {"action": "restart"}),
        ("fault", "n2", "", {"action": "pause"}),
    )
    report = check_nothing_lost(log)
    assert report.ok and report.violations == () and report.lost == ()
    assert report.acknowledged == 2 + 1 + 1
    assert report.operations == 2 + 1 + 2 + 1
    assert report.faults == 2  # kill and pause; the restart is a recovery
    text = report.summary()
    assert "acknowledged-and-lost: 0" in text and "faults injected: 2" in text


def test_a_lost_publication() -> None:
    log = _log(SUB, ("publish", "ch", "p1", {"duplicate": False}))
    report = check_nothing_lost(log)
    assert _kinds(report) == [("lost", "publication", "p1")]
    assert not report.ok and len(report.lost) == 1


def test_a_double_fate() -> None:
    log = _log(
        SUB,
        ("publish", "ch", "p1", {"duplicate": False}),
        ("settle", "ch", "p1", {"subscription": "w"}),
        ("settle", "ch", "p1", {"subscription": "w"}),  # an acknowledged ack was undone
    )
    assert _kinds(check_nothing_lost(log)) == [("double_fate", "publication", "p1")]
    log = _log(
        SUB,
        ("publish", "ch", "p1", {"duplicate": False}),
        ("drop", "ch", "p1", {"subscriptions": ["w"]}),
        ("dead_letter", "ch", "p1", {"subscription": "w"}),
    )
    assert _kinds(check_nothing_lost(log)) == [("double_fate", "publication", "p1")]


def test_every_subscription_needs_its_own_fate() -> None:
    log = _log(
        SUB,
        ("subscription_created", "ch", "v", {}),
        ("subscription_created", "ch", "e", {}),
        ("publish", "ch", "p1", {"duplicate": False, "msg_kind": "data"}),
        ("drop", "ch", "p1", {"subscriptions": ["w"]}),
    )
    report = check_nothing_lost(log, kinds={"e": "eos"})
    assert [(v.ident, v.detail) for v in report.violations] == [("p1", "no fate for v")]
    report = check_nothing_lost(log, expected=lambda e: ["w"])
    assert report.ok


def test_a_stored_twice_publication_is_named() -> None:
    log = _log(
        SUB,
        ("publish", "ch", "p1", {"duplicate": False}),
        ("publish", "ch", "p1", {"duplicate": False}),  # the dedup window failed
        ("settle", "ch", "p1", {"subscription": "w"}),
        ("settle", "ch", "p1", {"subscription": "w"}),
    )
    kinds = _kinds(check_nothing_lost(log))
    assert ("duplicate_accept", "publication", "p1") in kinds
    assert ("double_fate", "publication", "p1") in kinds


def test_a_rejected_publication_delivered_is_contradicted() -> None:
    log = _log(
        SUB,
        ("reject", "ch", "p1", {}),
        ("deliver", "ch", "p1", {"subscription": "w"}),
    )
    assert _kinds(check_nothing_lost(log)) == [("contradicted", "publication", "p1")]


def test_a_lost_confirmed_cas_and_the_other_cas_violations() -> None:
    log = _log(
        ("cas", "k", "op1", {"outcome": "ok"}),
        ("cas", "k", "op2", {"outcome": "ok"}),
        ("cas", "k", "op3", {"outcome": "not_applied"}),
        ("cas", "k", "op4", {"outcome": "conflict"}),
        ("cas_final", "k", "", {"applied": ["op2", "op3", "op9"]}),
    )
    assert _kinds(check_nothing_lost(log)) == [
        ("lost", "cas", "op1"),
        ("contradicted", "cas", "op3"),
        ("phantom", "cas", "op9"),
    ]


def test_an_unreadable_acknowledged_put() -> None:
    log = _log(
        ("put", "a", "g1", {"generation": "g1"}),
        ("put", "b", "g2", {"generation": "g2"}),
        ("put", "c", "g3", {"generation": "g3"}),
        ("read", "a", "final", {"generation": "g1", "outcome": "Missing"}),
        ("evict", "b", "g2", {}),  # a recorded fate: not lost
        ("read", "b", "final", {"generation": "g2", "outcome": "Missing"}),
    )
    report = check_nothing_lost(log)
    assert _kinds(report) == [("lost", "put", "g1")]
    assert report.unverified == ("put g3 of c",)  # never read: neither lost nor kept


def test_a_release_in_doubt_explains_a_missing_object() -> None:
    log = _log(
        ("put", "a", "g1", {}),
        ("release_unknown", "a", "reader", {"generation": "g1"}),
        ("read", "a", "final", {"generation": "g1", "outcome": "Missing"}),
        ("put", "b", "g2", {}),
        ("release_unknown", "b", "reader", {"generation": "g2"}),
        ("read", "b", "final", {"generation": "g2", "outcome": "PayloadBytes"}),
    )
    report = check_nothing_lost(log)
    assert report.ok
    assert report.resolutions() == {"release": {"applied": 1, "not_applied": 1}}


def test_a_put_of_a_generation_replaced_later_is_not_lost() -> None:
    log = _log(
        ("put", "a", "g1", {}),
        ("put", "a", "g2", {"replaced": "g1"}),
        ("read", "a", "final", {"generation": "g2", "outcome": "PayloadBytes"}),
    )
    assert check_nothing_lost(log).ok


def test_ambiguous_outcomes_and_how_they_resolved() -> None:
    log = _log(
        SUB,
        ("publication_unknown", "ch", "p1", {}),
        ("publish", "ch", "p1", {"duplicate": True}),  # the retry found it stored…
        ("settle", "ch", "p1", {"subscription": "w"}),
        ("publication_unknown", "ch", "p2", {}),  # …this one never arrived
        ("publication_unknown", "ch", "p3", {}),
        ("publish", "ch", "p3", {"duplicate": False}),
        ("settle_unknown", "ch", "p3", {"subscription": "w"}),  # redelivered, settled again
        ("settle", "ch", "p3", {"subscription": "w"}),
        ("publish", "ch", "p4", {"duplicate": False}),
        ("settle_unknown", "ch", "p4", {"subscription": "w"}),  # it did apply: no redelivery
        ("cas", "k", "c1", {"outcome": "unknown"}),
        ("cas", "k", "c2", {"outcome": "unknown"}),
        ("cas_final", "k", "", {"applied": ["c1"]}),
        ("put_unknown", "o1", "", {}),
        ("read", "o1", "final", {"outcome": "PayloadBytes"}),
        ("put_unknown", "o2", "", {}),
        ("read", "o2", "final", {"outcome": "Missing"}),
    )
    report = check_nothing_lost(log)
    assert report.ok, report.summary()
    assert report.resolutions() == {
        "cas": {"applied": 1, "not_applied": 1},
        "publication": {"applied": 2, "not_applied": 1},
        "put": {"applied": 1, "not_applied": 1},
        "settle": {"applied": 1, "not_applied": 1},
    }
    assert "ambiguous: 9" in report.summary()


def test_the_report_survives_a_jsonl_round_trip() -> None:
    log = _log(SUB, ("publish", "ch", "p1", {"duplicate": False}))
    again = ObservationLog.from_jsonl(log.export_jsonl())
    assert check_nothing_lost(again) == check_nothing_lost(log)


# -- the reference models' own logs -----------------------------------------------------------
def _without(log: ObservationLog, drop: Callable[[Event], bool]) -> ObservationLog:
    """``log`` without the events ``drop`` picks: fates that happened unrecorded."""
    out = ObservationLog()
    for e in log:
        if not drop(e):
            out.record(e.kind, subject=e.subject, ident=e.ident, at=e.at, **e.attrs)
    return out


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_messaging_model_loses_nothing(backend: Literal["asyncio", "trio"]) -> None:
    async def main() -> ObservationLog:
        log = ObservationLog()
        b = MemoryMessagingBackend(log=log)
        spec = make_channel("f", "r", "n", "work", "limits", max_msgs=20)
        await b.ensure_channel(spec, "op")
        for name in ("a", "b"):
            await b.ensure_subscription(make_subscription(spec.channel, name), f"op-{name}")
        now = anyio.current_time
        for i in range(40):  # half of them evicted unread: a drop for both subscriptions
            await b.publish(make_envelope(spec.channel, f"p{i}"), now() + 1)
        for name in ("a", "b"):
            sid = SubscriptionId(spec.channel, name)
            while batch := await b.receive(sid, 8, 1 << 20, now() + 1):
                for d in batch:
                    await b.settle(d.token, Completed(), f"s-{name}-{d.token.lease_id}")
        return log

    log = vtime.run(main, backend=backend, clock=VirtualClock())
    report = check_nothing_lost(log)
    assert report.ok, report.summary()
    assert report.acknowledged == 2 * 40
    kinds = {e.kind for e in log}
    assert {"drop", "settle"} <= kinds
    first = next(e for e in log if e.kind == "settle")
    sabotaged = check_nothing_lost(_without(log, lambda e: e is first))
    assert [v.kind for v in sabotaged.violations] == ["lost"]


def test_the_payload_model_loses_nothing() -> None:
    async def main() -> ObservationLog:
        log = ObservationLog()
        store = MemoryPayloadStore(log=log)
        refs = []
        for i in range(10):
            contract = RetentionContract(
                ttl_seconds=5 if i % 3 == 0 else 600, obligations=(f"r{i}",)
            )
            refs.append(await store.put(b"frame %d" % i, f"k{i}", contract))
        for ref in refs[::2]:
            await store.release_obligation(ref, f"r{ref.key[1:]}", "done")
        await anyio.sleep(1000)  # TTLs of the released short-lived objects fire
        for ref in refs:
            await store.read(ref, "final")
        return log

    log = vtime.run(main, backend="asyncio", clock=VirtualClock())
    report = check_nothing_lost(log)
    assert report.ok, report.summary()
    assert report.acknowledged == 10 and not report.unverified
    # the fates of one reclaimed object go unrecorded
    key = next(e.subject for e in log if e.kind == "reclaim")
    sabotaged = check_nothing_lost(
        _without(log, lambda e: e.subject == key and e.kind in ("reclaim", "release", "expire"))
    )
    assert [(v.kind, v.subject) for v in sabotaged.violations] == [("lost", key)]


# -- the workloads on the models --------------------------------------------------------------
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_workloads_on_the_models_lose_nothing(backend: Literal["asyncio", "trio"]) -> None:
    async def main() -> LossReport:
        log = ObservationLog()
        deadline = anyio.current_time() + 3600
        await workload.cas_workload(MemoryRuntimeStore(), log, deadline=deadline)
        await workload.payload_workload(MemoryPayloadStore(), log, deadline=deadline)
        b = MemoryMessagingBackend()
        spec = make_channel("f", "r", "n", "work", "limits", max_msgs=1000)
        await b.ensure_channel(spec, "op")
        sub = make_subscription(spec.channel, "w", ack_wait_seconds=5, max_deliver=-1)
        await b.ensure_subscription(sub, "op-sub")

        b.pause_acceptance(spec.channel)  # the first publications meet a broker that is mute

        async def stall() -> None:
            await anyio.sleep(3.5)
            b.resume_acceptance(spec.channel)

        async with anyio.create_task_group() as tg:
            tg.start_soon(stall)
            await workload.messaging_workload(
                b, log, sub, publications=40, publish_seconds=1.0, deadline=deadline
            )
        # each consumer says when it saw the subscription drained (a failed verdict quotes it)
        assert sorted(str(e.attrs["consumer"]) for e in log.events("drained")) == ["0", "1"]
        return check_nothing_lost(log)

    report = vtime.run(main, backend=backend, clock=VirtualClock())
    assert report.ok, report.summary()
    assert not report.unverified
    assert report.acknowledged >= 40 + 10  # publications, confirmed puts and CAS
    res = report.resolutions()
    assert res["publication"].get("applied", 0) >= 1  # late acceptance, resolved as stored
    assert "unresolved" not in str(res)


def test_a_failed_fault_verdict_quotes_the_fault_the_drain_and_the_final_observation() -> None:
    from videoflow_aio.conformance.cases import members

    log = ObservationLog()
    log.record("publish", subject="ch", ident="p0", at=10.0, seq=1, duplicate=False)
    log.record("fault", subject="n3", at=11.0, action="kill")
    log.record("deliver", subject="ch", ident="p0", at=12.0, subscription="w", attempt=1)
    log.record("drained", subject="ch", ident="w", at=19.5, consumer=0)
    log.record("final_observation", subject="ch", ident="w", at=20.0, pending=581, leased=0)
    lines = members._evidence(log).splitlines()
    assert lines[0].startswith("evidence")
    assert [line.split()[:4] for line in lines[1:]] == [
        ["1.000", "s", "fault", "n3"],
        ["9.500", "s", "drained", "ch"],
        ["10.000", "s", "final_observation", "ch"],
    ]
    assert "'pending': 581" in lines[-1]
