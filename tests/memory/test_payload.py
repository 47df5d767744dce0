"""MemoryPayloadStore: the behaviours of the reference model, one test per rule."""

from __future__ import annotations

import anyio
import pytest

from _payload_helpers import contract, frame, kinds, store
from videoflow_aio import faults
from videoflow_aio.contracts import Known, Unknown
from videoflow_aio.contracts.errors import (
    BackendUnavailable,
    ConflictError,
    NotFound,
    Unsupported,
)
from videoflow_aio.contracts.payload import (
    Corrupt,
    ImmutablePayloadRef,
    Missing,
    PayloadBackpressure,
    PayloadBytes,
    RetentionContract,
    TransientFailure,
    payload_digest,
)
from videoflow_aio.memory.clock import FakeClock
from videoflow_aio.memory.payload import MemoryPayloadStore, StaticLedger
from videoflow_aio.observe import ObservationLog

pytestmark = pytest.mark.anyio


# -- put, read, digests, generations ---------------------------------------------------------


async def test_put_read_roundtrip_and_log() -> None:
    s, log = store()
    data = frame(1)
    ref = await s.put(data, "k", contract("r/a"))
    assert (ref.key, ref.size, ref.digest, ref.store) == (
        "k",
        len(data),
        payload_digest(data),
        "memory",
    )
    assert ref.generation == "g1" and ref.verifiable
    result = await s.read(ref, reader="r/a")
    assert result == PayloadBytes(ref, data, True)
    assert kinds(log, "k") == ["put", "acquire", "read"]
    assert log.events("read")[0].ident == "r/a"
    assert s.stored_bytes() == len(data) and s.object_count() == 1
    assert ObservationLog.from_jsonl(log.export_jsonl()).events() == log.events()


async def test_digest_memo_is_exact() -> None:
    s, _ = store(forward_unchanged=False)
    a = frame(1)
    b = bytes(bytearray(a))  # equal content, another object
    ra = await s.put(a, "a", contract())
    rb = await s.put(b, "b", contract())
    rc = await s.put(a, "c", contract())  # the same object as the first put: memo
    rd = await s.put(frame(2), "d", contract())
    assert ra.digest == rb.digest == rc.digest == payload_digest(a)
    assert rd.digest == payload_digest(frame(2))


async def test_generations_are_never_reused_at_a_key() -> None:
    s, _ = store(forward_unchanged=False)
    seen = set()
    for _ in range(5):
        ref = await s.put(frame(1), "k", contract())  # no obligations: replaceable
        assert ref.generation not in seen
        seen.add(ref.generation)
    assert s.object_count() == 1 and s.stored_bytes() == len(frame(1))


async def test_replaced_generation_reads_missing_with_reason() -> None:
    s, log = store(forward_unchanged=False)
    old = await s.put(frame(1), "k", contract())
    new = await s.put(frame(2), "k", contract())
    result = await s.read(old)
    assert isinstance(result, Missing) and new.generation in result.reason
    assert log.events("put")[-1].attrs["replaced"] == old.generation


async def test_put_bare_records_the_generation_it_replaced() -> None:
    s, log = store(forward_unchanged=False)
    first = await s.put(frame(1), "k", contract())
    s.put_bare("k", b"bare")
    s.put_bare("k", b"again")
    s.put_bare("fresh", b"x")
    puts = log.events("put")
    assert [e.attrs["replaced"] for e in puts] == [None, first.generation, puts[1].ident, None]
    assert all(e.attrs["generation"] == e.ident for e in puts)


async def test_put_refused_over_live_obligations_changes_nothing() -> None:
    s, _ = store(forward_unchanged=False)
    ref = await s.put(frame(1), "k", contract("r/a"))
    with pytest.raises(ConflictError) as info:
        await s.put(frame(2), "k", contract())
    assert info.value.actual == ref.generation
    assert await s.read(ref) == PayloadBytes(ref, frame(1), True)
    assert s.obligations("k").keys() == {"r/a"}


# -- forward_unchanged -------------------------------------------------------------------------


async def test_forward_unchanged_returns_existing_ref_and_unions_obligations() -> None:
    s, log = store()
    ref = await s.put(frame(1), "k", contract("stage/b", ttl=10, hold=5))
    await anyio.sleep(3)
    again = await s.put(frame(1), "k", contract("stage/c", ttl=10, hold=5))
    assert again == ref
    assert set(s.obligations("k")) == {"stage/b", "stage/c"}
    assert [e.attrs["forwarded"] for e in log.events("put")] == [False, True]
    assert s.stored_bytes() == len(frame(1))
    # the forward extended the TTL to its own put time + ttl
    await anyio.sleep(9)  # t=12: past the first put's TTL (10), before the forward's (13)
    assert isinstance(await s.read(ref), PayloadBytes)
    await anyio.sleep(2)
    assert isinstance(await s.read(ref), Missing)


async def test_forward_never_reuses_a_corrupted_object() -> None:
    s, _ = store()
    ref = await s.put(frame(1), "k", contract())
    s.corrupt("k")
    again = await s.put(frame(1), "k", contract())
    assert again.generation != ref.generation
    assert await s.read(again) == PayloadBytes(again, frame(1), True)


async def test_forward_unchanged_false_writes_new_generation() -> None:
    s, _ = store(forward_unchanged=False)
    a = await s.put(frame(1), "k", contract())
    b = await s.put(frame(1), "k", contract())
    assert a.generation != b.generation and a.digest == b.digest


# -- tiers ---------------------------------------------------------------------------------------


async def test_durable_obligation_keeps_object_past_ttl_even_at_equal_deadlines() -> None:
    s, log = store(tier="durable")
    ref = await s.put(frame(1), "k", contract("r/a", ttl=5, hold=5))  # both due at +5
    await anyio.sleep(4.5)
    assert isinstance(await s.read(ref), PayloadBytes)
    await anyio.sleep(1)
    assert isinstance(await s.read(ref), Missing)
    expiries = [(e.attrs["what"], e.at) for e in log.events("expire")]
    assert expiries == [("obligation", 1005.0), ("object", 1005.0)]  # obligation first


async def test_durable_acquire_extends_life_and_receipt_says_so() -> None:
    s, _ = store(tier="durable")
    ref = await s.put(frame(1), "k", contract(ttl=2))
    receipt = await s.acquire_obligation(ref, "r/a", anyio.current_time() + 50)
    assert receipt.protects_object and receipt.expires_at == receipt.deadline == 1050.0
    await anyio.sleep(49)
    assert isinstance(await s.read(ref), PayloadBytes)
    await anyio.sleep(2)
    assert isinstance(await s.read(ref), Missing)


async def test_timers_fire_while_tasks_wait_and_are_stamped_with_due_time() -> None:
    s, log = store()
    await s.put(frame(1), "k", contract("r/a", ttl=30, hold=10))
    await anyio.sleep(100)
    assert s.object_count() == 0  # a control applies due timers
    assert [(e.kind, e.ident, e.at) for e in log.events("expire")] == [
        ("expire", "r/a", 1010.0),
        ("expire", "g1", 1030.0),
    ]


async def test_evictable_ttl_ignores_obligations_and_acquire_does_not_extend() -> None:
    s, log = store(tier="evictable")
    ref = await s.put(frame(1), "k", contract("r/a", ttl=5, hold=100))
    receipt = await s.acquire_obligation(ref, "r/b", anyio.current_time() + 100)
    assert not receipt.protects_object and receipt.expires_at == 1005.0
    await anyio.sleep(6)
    result = await s.read(ref)
    assert isinstance(result, Missing) and result.reason == "expired"
    event = log.events("expire", subject="k")[0]
    assert event.attrs["what"] == "object" and event.attrs["obligations"] == ["r/a", "r/b"]
    assert set(s.obligations("k")) == {"r/a", "r/b"}  # the set dangles, as on Redis


async def test_evictable_lru_evicts_needed_object_observably() -> None:
    s, log = store(tier="evictable", max_bytes=3072)
    refs = [await s.put(frame(n), f"k{n}", contract(f"r/{n}")) for n in range(3)]
    await s.read(refs[0])  # k1 is now least recently used
    new = await s.put(frame(9), "k9", contract("r/9"))
    evicted = log.events("evict")
    assert [e.subject for e in evicted] == ["k1"]
    assert evicted[0].attrs["needed"] is True and evicted[0].attrs["obligations"] == ["r/1"]
    missing = await s.read(refs[1])
    assert isinstance(missing, Missing) and missing.reason == "evicted"
    assert isinstance(await s.read(new), PayloadBytes)
    assert s.stored_bytes() == 3072


async def test_evictable_refuses_what_eviction_cannot_fit_and_evicts_nothing() -> None:
    s, log = store(tier="evictable", max_bytes=2048)
    await s.put(frame(1), "a", contract())
    with pytest.raises(PayloadBackpressure):
        await s.put(frame(2, 4096), "big", contract())
    assert log.events("evict") == [] and s.object_count() == 1


async def test_evictable_skips_objects_without_ttl() -> None:
    s, log = store(tier="evictable", max_bytes=2048)
    s.put_bare("bare", frame(1))  # no TTL: never an eviction candidate (volatile-lru)
    await s.put(frame(2), "a", contract())
    await s.put(frame(3), "b", contract())
    assert [e.subject for e in log.events("evict")] == ["a"]
    s2, _ = store(tier="evictable", max_bytes=2048)
    s2.put_bare("x", frame(1))
    s2.put_bare("y", frame(2))
    with pytest.raises(PayloadBackpressure):  # volatile-lru with no TTL keys: noeviction
        await s2.put(frame(3), "z", contract())


async def test_durable_backpressure_refuses_and_evicts_nothing() -> None:
    s, log = store(tier="durable", max_bytes=2048)
    await s.put(frame(1), "a", contract())
    await s.put(frame(2), "b", contract())
    with pytest.raises(PayloadBackpressure) as info:
        await s.put(frame(3), "c", contract())
    assert (info.value.used, info.value.size, info.value.budget) == (2048, 1024, 2048)
    assert s.object_count() == 2 and log.events("evict") == [] and log.events("refuse")
    # a replacement of the same size fits: the old generation's bytes are counted as freed
    s2, _ = store(tier="durable", max_bytes=1024, forward_unchanged=False)
    await s2.put(frame(1), "a", contract())
    await s2.put(frame(2), "a", contract())
    assert s2.stored_bytes() == 1024


async def test_required_tier() -> None:
    s, _ = store(tier="evictable")
    with pytest.raises(Unsupported):
        await s.put(frame(1), "k", RetentionContract(required_tier="durable"))
    assert s.object_count() == 0
    d, _ = store(tier="durable")
    await d.put(frame(1), "k", RetentionContract(required_tier="durable"))


async def test_capabilities() -> None:
    s = MemoryPayloadStore(tier="evictable", max_bytes=10, store_id="s1", orphan_grace_seconds=5)
    caps = await s.capabilities()
    assert (caps.store, caps.tier, caps.evicts_under_pressure, caps.ttl_ignores_obligations) == (
        "s1",
        "evictable",
        True,
        True,
    )
    assert (caps.max_bytes, caps.orphan_grace_seconds, caps.durable) == (10, 5.0, False)


# -- obligations and release ------------------------------------------------------------------


async def test_release_outcomes() -> None:
    s, log = store()
    ref = await s.put(frame(1), "k", contract("r/a", "r/b"))
    assert (await s.release_obligation(ref, "r/a", "x")).outcome == "released"
    assert (await s.release_obligation(ref, "r/a", "x")).outcome == "already-released"
    last = await s.release_obligation(ref, "r/b", "y")
    assert (last.outcome, last.remaining, last.changed) == ("reclaimed", 0, True)
    assert (await s.release_obligation(ref, "r/b", "y")).outcome == "object-absent"
    assert log.events("reclaim", subject="k")[0].attrs["by"] == "release"
    new = await s.put(frame(1), "k", contract("r/a"))
    assert (await s.release_obligation(ref, "r/a", "z")).outcome == "stale-generation"
    assert s.obligations("k") == {"r/a": pytest.approx(1300.0)}
    assert new.generation != ref.generation


async def test_release_without_set_never_creates_it() -> None:
    s, _ = store()
    ref = await s.put(frame(1), "k", contract())  # no obligations at all
    for _ in range(3):
        assert (await s.release_obligation(ref, "r/a", "x")).outcome == "no-obligation-set"
    assert s.obligations("k") == {} and s.object_count() == 1


async def test_crash_between_barriers_leaves_ttl_only_object() -> None:
    s, log = store(orphan_grace_seconds=60)
    with faults.isolated():
        faults.arm("payload.write.after", crash=True)
        with pytest.raises(faults.SimulatedCrash):
            await s.put(frame(1), "k", contract("r/a", ttl=100))
    assert s.obligations("k") == {} and s.object_count() == 1
    ref = await s.ref_for_key("k")
    assert (await s.release_obligation(ref, "r/a", "x")).outcome == "no-obligation-set"
    assert s.object_count() == 1
    await anyio.sleep(101)
    assert s.object_count() == 0 and log.events("expire")[-1].attrs["what"] == "object"


async def test_barriers_see_bytes_first_then_obligations() -> None:
    s, _ = store()
    seen: dict[str, dict[str, float]] = {}
    with faults.isolated():
        for name in ("payload.write.after", "obligation.acquire.after"):
            b = faults.arm(name)
            async with anyio.create_task_group() as tg:
                tg.start_soon(s.put, frame(1), f"k-{name}", contract("r/a"))
                await b.wait_paused()
                assert s.object_count() >= 1
                seen[name] = s.obligations(f"k-{name}")
                assert b.contexts[0]["key"] == f"k-{name}"
                b.release()
    assert seen == {"payload.write.after": {}, "obligation.acquire.after": {"r/a": 1300.0}}


async def test_object_lost_between_barriers_fails_the_put_and_gets_no_set() -> None:
    s, log = store(tier="evictable", max_bytes=1024)
    errors: list[BaseException] = []

    async def put_a() -> None:
        try:
            await s.put(frame(1), "a", contract("r/a"))
        except ConflictError as exc:
            errors.append(exc)

    with faults.isolated():
        b = faults.arm("payload.write.after")
        async with anyio.create_task_group() as tg:
            tg.start_soon(put_a)
            await b.wait_paused()
            await s.put(frame(2), "b", contract())  # evicts "a" while its put is paused
            b.release()
    assert s.obligations("a") == {} and log.events("put.unattached")
    assert len(errors) == 1 and errors[0].actual == ""  # type: ignore[attr-defined]


async def test_forward_racing_the_last_release_fails_the_put() -> None:
    s, _ = store()
    ref = await s.put(frame(1), "k", contract("r/a"))
    errors: list[BaseException] = []

    async def forward() -> None:
        try:
            await s.put(frame(1), "k", contract("r/b"))
        except ConflictError as exc:
            errors.append(exc)

    with faults.isolated():
        b = faults.arm("payload.write.after")
        async with anyio.create_task_group() as tg:
            tg.start_soon(forward)
            await b.wait_paused()
            assert (await s.release_obligation(ref, "r/a", "x")).outcome == "reclaimed"
            b.release()
    assert len(errors) == 1 and s.object_count() == 0  # never a ref to unprotected bytes
    again = await s.put(frame(1), "k", contract("r/b"))  # the retry writes anew
    assert again.generation != ref.generation and set(s.obligations("k")) == {"r/b"}


async def test_renew_and_acquire_never_move_deadlines_back() -> None:
    s, _ = store()
    ref = await s.put(frame(1), "k", contract("r/a", hold=50))
    r = await s.acquire_obligation(ref, "r/a", 1010.0)
    assert r.deadline == 1050.0
    r = await s.renew_obligation(ref, "r/a", 1100.0)
    assert r.deadline == 1100.0 and s.obligations("k")["r/a"] == 1100.0
    r = await s.renew_obligation(ref, "r/a", 1020.0)
    assert r.deadline == 1100.0
    await anyio.sleep(60)  # the stale 1050 timer must not expire the renewed obligation
    assert "r/a" in s.obligations("k")
    await anyio.sleep(45)
    assert s.obligations("k") == {}
    with pytest.raises(NotFound):
        await s.renew_obligation(ref, "r/a", anyio.current_time() + 10)


async def test_acquire_errors() -> None:
    s, _ = store()
    with pytest.raises(NotFound):
        await s.acquire_obligation(
            ImmutablePayloadRef("nope", 1, "sha256:x", "g9", "memory"), "r/a", 2000.0
        )
    ref = await s.put(frame(1), "k", contract())
    stale = ImmutablePayloadRef(ref.key, ref.size, ref.digest, "g999", ref.store)
    with pytest.raises(ConflictError):
        await s.acquire_obligation(stale, "r/a", 2000.0)
    assert s.obligations("k") == {}


# -- reads ---------------------------------------------------------------------------------------


async def test_corrupt_truncate_and_fail_reads() -> None:
    s, log = store()
    ref = await s.put(frame(1), "k", contract())
    s.fail_reads(["reset"])
    assert await s.read(ref) == TransientFailure("k", "reset")
    assert isinstance(await s.read(ref), PayloadBytes)
    s.truncate("k", 10)
    bad = await s.read(ref)
    assert isinstance(bad, Corrupt) and (bad.expected_size, bad.actual_size) == (1024, 10)
    assert s.stored_bytes() == 10
    assert (await s.ref_for_key("k")).size == 1024  # metadata still names the original
    ref2 = await s.put(frame(2), "k2", contract())
    s.corrupt("k2")
    bad2 = await s.read(ref2)
    assert isinstance(bad2, Corrupt) and bad2.reason == "digest mismatch"
    empty = await s.put(b"", "e", contract())
    s.corrupt("e")
    assert isinstance(await s.read(empty), Corrupt)
    assert [e.attrs["outcome"] for e in log.events("read")][:2] == [
        "TransientFailure",
        "PayloadBytes",
    ]


async def test_missing_reasons() -> None:
    s, _ = store()
    a = await s.put(frame(1), "a", contract("r/a"))
    b = await s.put(frame(2), "b", contract(ttl=1))
    s.delete("a")
    await anyio.sleep(2)
    assert (await s.read(a)) == Missing("a", a.generation, "deleted")
    assert (await s.read(b)) == Missing("b", b.generation, "expired")
    assert s.obligations("a") == {"r/a": 1300.0}  # delete leaves the set dangling
    never = await s.ref_for_key("never")
    assert (await s.read(never)) == Missing("never", "", "absent")


async def test_ref_for_key_and_bare_objects() -> None:
    s, _ = store()
    s.put_bare("legacy", b"abc")
    ref = await s.ref_for_key("legacy")
    assert (ref.size, ref.digest, ref.generation, ref.verifiable) == (3, "", "", False)
    assert await s.read(ref) == PayloadBytes(ref, b"abc", False)
    assert (await s.release_obligation(ref, "r", "x")).outcome == "unverifiable"
    inv = await s.inventory()
    assert isinstance(inv, Known) and inv.value == (ref,)


# -- reconcile -----------------------------------------------------------------------------------


async def test_reconcile_rules() -> None:
    s, log = store(orphan_grace_seconds=30)
    await s.put(frame(1), "listed", contract("r/x", "r/y", "intent/p"))
    await s.put(frame(2), "unlisted", contract("r/z", "intent/q"))
    await s.put(frame(3), "intent-only", contract("intent/r"))
    await s.put(frame(4), "orphan", contract())
    await s.put(frame(5), "required-orphan", contract())
    await s.put(frame(6), "deleted", contract("r/d"))
    s.delete("deleted")  # leaves a dangling set
    ledger = StaticLedger({"listed": ("r/x",), "required-orphan": ("r/q",), "ghost": ("r/g",)})
    early = await s.reconcile(ledger, "op1")
    assert sorted(early.cancelled) == [
        ("intent-only", "intent/r"),  # unlisted: its intents go at once, whatever its age
        ("listed", "intent/p"),
        ("listed", "r/y"),
        ("unlisted", "intent/q"),
    ]
    assert early.reclaimed == ("intent-only",)
    assert early.orphans_in_grace == ("orphan",)
    assert early.orphans_required == ("required-orphan",)
    assert early.dangling_sets_removed == ("deleted",)
    assert early.examined == 5
    await anyio.sleep(31)
    late = await s.reconcile(ledger, "op2")
    assert late.cancelled == ()
    assert late.reclaimed == ()
    assert late.orphans_reclaimed == ("orphan",)
    assert late.orphans_required == ("required-orphan",)
    assert set(s.obligations("listed")) == {"r/x"} and set(s.obligations("unlisted")) == {"r/z"}
    by = {e.subject: e.attrs["by"] for e in log.events("reclaim")}
    assert by == {"intent-only": "reconcile", "orphan": "orphan"}
    assert log.events("reconcile")[-1].ident == "op2"


async def test_reconcile_after_evictable_eviction_removes_dangling_sets() -> None:
    s, _ = store(tier="evictable", max_bytes=1024)
    await s.put(frame(1), "a", contract("r/a"))
    await s.put(frame(2), "b", contract("r/b"))  # evicts a; its set dangles
    assert s.obligations("a") == {"r/a": 1300.0}
    obs = await s.reconcile(StaticLedger({}), "op")
    assert obs.dangling_sets_removed == ("a",) and s.obligations("a") == {}


async def test_inventory_failure() -> None:
    s, _ = store()
    ref = await s.put(frame(1), "k", contract())
    s.fail_inventory("down")
    assert await s.inventory() == Unknown("down")
    with pytest.raises(BackendUnavailable):
        await s.reconcile(StaticLedger({}), "op")
    s.fail_inventory(None)
    assert await s.inventory() == Known((ref,))


# -- clock and timers -------------------------------------------------------------------------


async def test_explicit_fake_clock_drives_the_model() -> None:
    clock = FakeClock(start=50.0)
    s = MemoryPayloadStore(clock=clock)
    ref = await s.put(frame(1), "k", contract(ttl=10))
    await anyio.sleep(1000)  # the loop's time does not matter
    assert isinstance(await s.read(ref), PayloadBytes)
    await clock.advance(11)
    assert isinstance(await s.read(ref), Missing)


async def test_timer_heap_stays_bounded_over_many_cycles() -> None:
    s, _ = store()
    c = contract("r/a")
    for n in range(20_000):
        ref = await s.put(b"x", f"k{n}", c)
        await s.release_obligation(ref, "r/a", "done")
    assert s.object_count() == 0
    assert len(s._space.timers) <= 2 * 4096 + 4096 + 10


async def test_expire_obligation_controls() -> None:
    s, log = store()
    ref = await s.put(frame(1), "k", contract("r/a", "r/b"))
    s.expire_obligation("k", "r/a")
    assert set(s.obligations("k")) == {"r/b"}
    s.expire_obligation("k", "r/b")
    assert s.obligations("k") == {}
    assert (await s.release_obligation(ref, "r/b", "x")).outcome == "no-obligation-set"
    with pytest.raises(NotFound):
        s.expire_obligation("k", "r/b")
    with pytest.raises(NotFound):
        s.expire_obligation_set("k")
    await s.acquire_obligation(ref, "r/c", 2000.0)
    s.expire_obligation_set("k")
    assert s.obligations("k") == {} and s.object_count() == 1
    assert log.events("expire")[-1].attrs["what"] == "obligation_set"
