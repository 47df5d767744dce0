"""What the explorer counts as a failure: the log invariants, the properties (each catches a
planted model bug), and a case that fails after an injected fault ("faulted") versus one
whose failure no fault explains."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from videoflow_aio import explore, faults
from videoflow_aio.conformance import Case, RuntimeStoreHarness
from videoflow_aio.contracts.runtime_store import CAS_READ_AFTER
from videoflow_aio.explore.properties import cas, obligations
from videoflow_aio.memory._allocation_cluster import Cluster
from videoflow_aio.memory.messaging._channel import Channel
from videoflow_aio.memory.payload import MemoryPayloadStore
from videoflow_aio.memory.runtime_store import MemoryRuntimeStore
from videoflow_aio.observe import ObservationLog
from videoflow_aio.vtime import Backend


def _log(*events: tuple[str, str, dict[str, Any]]) -> ObservationLog:
    log = ObservationLog()
    for kind, ident, attrs in events:
        log.record(kind, subject="ch", ident=ident, at=1.0, **attrs)
    return log


PUB = ("publish", "p1", {"seq": 1, "duplicate": False})


def test_a_clean_messaging_log_has_no_violation() -> None:
    log = _log(
        ("subscription_created", "ch/a", {}),
        PUB,
        ("deliver", "p1", {"seq": 1, "subscription": "ch/a"}),
        ("unresolved", "p1", {"seq": 1, "subscription": "ch/a"}),
        ("drop", "p1", {"seq": 1, "subscriptions": ["ch/a"]}),
        ("channel_closed", "g", {}),
        PUB,  # a new channel of the same name starts afresh
        ("settle", "p1", {"seq": 1, "subscription": "ch/a"}),
    )
    assert explore.messaging_violations(log) == []


@pytest.mark.parametrize(
    ("events", "text"),
    [
        (
            [("settle", "p1", {"seq": 1, "subscription": "a"})] * 2,
            "a second fate for a, after settle",
        ),
        (
            [
                ("settle", "p1", {"seq": 1, "subscription": "a"}),
                ("drop", "p1", {"seq": 1, "subscriptions": ["a", "b"]}),
            ],
            "a second fate for a, after settle",
        ),
        (
            [
                ("dead_letter", "p1", {"seq": 1, "subscription": "a"}),
                ("deliver", "p1", {"seq": 1, "subscription": "a"}),
            ],
            "delivered to a after dead_letter",
        ),
        ([("unresolved", "p1", {"seq": 1, "subscription": "a"})] * 2, "unresolved twice"),
        (
            [("settle", "p9", {"seq": 9, "subscription": "a"})],
            "a fate for a sequence the channel never accepted",
        ),
    ],
)
def test_messaging_violations_are_named(
    events: list[tuple[str, str, dict[str, Any]]], text: str
) -> None:
    found = explore.messaging_violations(_log(PUB, *events))
    assert found and text in found[0], found


# -- every property catches a planted bug ----------------------------------------------------
def _fails(target_id: str, seeds: int = 60, **kw: Any) -> list[explore.Run]:
    target = explore.find_target(target_id)
    found = explore.explore([target], range(seeds), ["asyncio"], stop_after=1, **kw)
    return found.failures


class _NoRecheck(MemoryRuntimeStore):
    """A CAS that compares the version it read before the barrier: the lost-update bug."""

    async def cas(self, key: str, expected_version: str | None, value: bytes) -> bool:
        rec = self._records.get(key)
        current = None if rec is None else rec[1]
        if faults.barriers().armed(CAS_READ_AFTER):
            await faults.reach(CAS_READ_AFTER, key=key)
        if current != expected_version:
            return False
        n = len(self._records) + self._counters.get(key, (0, ""))[0] + 1
        self._counters[key] = (n, "t")
        self._records[key] = (value, f"t.{n}")
        return True


def test_the_cas_property_catches_a_cas_that_does_not_recheck(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert not _fails("PROP-RTS-CAS-ONE-WINNER", fault_rate=0.3)
    monkeypatch.setattr(cas, "MemoryRuntimeStore", _NoRecheck)
    failures = _fails("PROP-RTS-CAS-ONE-WINNER", fault_rate=0.3)
    assert failures and "winners from one version" in failures[0].reason


def test_the_nothing_lost_property_catches_an_unrecorded_drop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = Channel.record

    def forgetful(self: Channel, event: str, ident: str, *args: Any, **kw: Any) -> None:
        if event != "drop":
            record(self, event, ident, *args, **kw)

    monkeypatch.setattr(Channel, "record", forgetful)
    failures = _fails("PROP-MSG-NOTHING-LOST")
    assert failures
    assert "dropped" in failures[0].reason or "without a fate" in failures[0].reason


def test_the_obligations_property_catches_a_tier_that_expires_what_readers_hold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    evictable = functools.partial(MemoryPayloadStore, tier="evictable")
    monkeypatch.setattr(obligations, "MemoryPayloadStore", evictable)
    failures = _fails("PROP-PAY-OBLIGATIONS")
    assert failures and "holds an obligation" in failures[0].reason


# -- faulted or failed -----------------------------------------------------------------------
def _case(body: str) -> Case:
    async def func(h: RuntimeStoreHarness) -> None:
        store = await h.open()
        await store.cas("k", None, b"v")  # reaches the CAS barrier
        if body == "check":
            h.check(False, "the case expected no fault")
        else:
            raise KeyError("a model bug")

    return Case("RTS-999", "a test case", "runtime_store", func)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_case_failing_after_an_injected_fault_is_faulted_not_failed(backend: Backend) -> None:
    run = explore.run_target(_case("check"), backend, 1, fault_rate=1.0)
    assert run.injected and run.outcome == "faulted", run.reason
    assert explore.run_target(_case("check"), backend, 1).outcome == "fail"
    bug = explore.run_target(_case("keyerror"), backend, 2, fault_rate=1.0)
    crashed = [f for f in bug.injected if f.kind == "crash"]
    assert bug.outcome == ("faulted" if crashed else "fail"), (bug.injected, bug.reason)
    paused = next(
        s
        for s in range(50)
        if all(
            f.kind == "pause"
            for f in explore.run_target(_case("check"), backend, s, fault_rate=1.0).injected
        )
    )
    unexplained = explore.run_target(_case("keyerror"), backend, paused, fault_rate=1.0)
    assert unexplained.outcome == "fail" and "KeyError" in unexplained.reason


def test_the_ownership_property_catches_a_node_write_without_cas(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert not _fails("PROP-ALC-ONE-OWNER", fault_rate=0.3)
    cas_node = Cluster.cas_node

    def blind(self: Cluster, node: Any, expected: int, *args: Any) -> int:
        return cas_node(self, node, node.resource_version, *args)  # ignores what was read

    monkeypatch.setattr(Cluster, "cas_node", blind)
    failures = _fails("PROP-ALC-ONE-OWNER", fault_rate=0.3)
    assert failures, "a blind CAS went unnoticed"
    assert "held by" in failures[0].reason or "does not own" in failures[0].reason
