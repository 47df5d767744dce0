"""PayloadStore conformance cases (PAY-…): written once against the contract.

Every case opens its own store with ``await h.open(**options)`` using the seed's constructor
options (``tier``, ``max_bytes``, ``forward_unchanged``, ``orphan_grace_seconds``); a provider
that cannot honour one skips the case. All durations go through the harness (``h.seconds``,
``h.deadline``, ``h.sleep``) so a real engine runs them scaled down. Model controls used are
declared in ``controls=``; the extra control ``put_bare(key, data)`` models a publisher that
stores bare bytes without metadata (RFC 0002).

PAY-007 and PAY-008 are fixed by the seed.
"""

from __future__ import annotations

from typing import Any, Final

import anyio
import msgspec

from ... import faults
from ...contracts import Known, Unknown
from ...contracts.errors import (
    BackendUnavailable,
    ConflictError,
    NotFound,
    Unsupported,
    ValidationError,
)
from ...contracts.payload import (
    Corrupt,
    ImmutablePayloadRef,
    Missing,
    ObligationLedger,
    PayloadBackpressure,
    PayloadBytes,
    PayloadReadResult,
    PayloadStore,
    RetentionContract,
    TransientFailure,
    payload_digest,
)
from .._case import case
from .._harness import PayloadHarness as Harness  # every case here is a payload case

PAY: Final = "payload"
KIB = 1024


class _Ledger(ObligationLedger):
    """A ledger from a mapping, written here so the cases depend on the contract only."""

    def __init__(self, required: dict[str, tuple[str, ...]] | None = None) -> None:
        self.required: dict[str, tuple[str, ...]] = dict(required or {})

    def required_obligations(self) -> dict[str, tuple[str, ...]]:
        return self.required


_CYCLE = bytes(range(251))


def _frame(n: int, size: int = 4 * KIB) -> bytes:
    """Distinct, deterministic bytes for frame ``n``: byte ``i`` is ``(31 n + i) mod 251``
    (one rotated cycle, repeated: a generator over every byte cost the explore run a third
    of its time)."""
    start = n * 31 % 251
    cycle = _CYCLE[start:] + _CYCLE[:start]
    return (cycle * (size // 251 + 1))[:size]


def _contract(
    h: Harness, *obligations: str, ttl: float = 600.0, hold: float = 300.0
) -> RetentionContract:
    return RetentionContract(
        ttl_seconds=h.seconds(ttl), obligations=obligations, obligation_seconds=h.seconds(hold)
    )


def _is_bytes(result: PayloadReadResult, data: bytes) -> bool:
    return isinstance(result, PayloadBytes) and result.data == data and result.verified


async def _present(
    h: Harness, store: PayloadStore, ref: ImmutablePayloadRef, data: bytes, what: str
) -> None:
    result = await store.read(ref)
    h.check(_is_bytes(result, data), f"{what}: expected the verified bytes, got {result!r}")


async def _missing(h: Harness, store: PayloadStore, ref: ImmutablePayloadRef, what: str) -> None:
    result = await store.read(ref)
    h.check(isinstance(result, Missing), f"{what}: expected Missing, got {result!r}")


@case("PAY-001", "put returns a complete ref; read returns the verified bytes", contract=PAY)
async def put_read(h: Harness) -> None:
    store = await h.open()
    caps = await store.capabilities()
    data = _frame(1)
    ref = await store.put(data, "cam1/f1", _contract(h, "reader/a"))
    h.equal(ref.key, "cam1/f1", "key of the ref (the content id)")
    h.equal(ref.size, len(data), "size")
    h.equal(ref.digest, payload_digest(data), "digest")
    h.check(isinstance(ref.generation, str) and ref.generation, "generation is a non-empty str")
    h.equal(ref.store, caps.store, "store named in the ref")
    result = await store.read(ref, reader="reader/a")
    h.check(_is_bytes(result, data), f"read: {result!r}")
    assert isinstance(result, PayloadBytes)
    h.equal(result.ref, ref, "ref echoed by the read")
    empty = await store.put(b"", "cam1/empty", _contract(h))
    h.equal(empty.size, 0, "an empty object is stored with size 0")
    await _present(h, store, empty, b"", "read of the empty object")


@case(
    "PAY-002",
    "forward_unchanged: identical bytes and content id return the existing ref and attach "
    "the new contract's obligations",
    contract=PAY,
)
async def forward_unchanged(h: Harness) -> None:
    store = await h.open(forward_unchanged=True)
    h.equal((await store.capabilities()).forward_unchanged, True, "capabilities.forward_unchanged")
    data = _frame(2)
    first = await store.put(data, "cam1/f2", _contract(h, "stage/b"))
    again = await store.put(bytes(data), "cam1/f2", _contract(h, "stage/c"))
    h.equal(again, first, "the forwarded ref is the existing one")
    r1 = await store.release_obligation(first, "stage/b", "b-done")
    h.equal((r1.outcome, r1.remaining), ("released", 1), "stage/c (attached by forwarding) remains")
    await _present(h, store, first, data, "after stage/b released")
    r2 = await store.release_obligation(first, "stage/c", "c-done")
    h.equal(r2.outcome, "reclaimed", "the last obligation reclaims the object")
    await _missing(h, store, first, "after the last release")


@case(
    "PAY-003",
    "without forwarding a re-put writes a new generation, never over live obligations",
    contract=PAY,
)
async def no_forward_generations(h: Harness) -> None:
    store = await h.open(forward_unchanged=False)
    data = _frame(3)
    first = await store.put(data, "cam1/f3", _contract(h, "reader/a"))
    with h.raises(ConflictError, "re-put over an object that still has obligations"):
        await store.put(data, "cam1/f3", _contract(h, "reader/b"))
    await _present(h, store, first, data, "the first generation after the refused re-put")
    r = await store.release_obligation(first, "reader/a", "done")
    h.equal(r.outcome, "reclaimed", "release of the only obligation")
    second = await store.put(data, "cam1/f3", _contract(h))  # no obligations
    h.check(second.generation != first.generation, "a re-put gets a new generation")
    third = await store.put(_frame(33), "cam1/f3", _contract(h, "reader/c"))
    h.check(
        third.generation not in (first.generation, second.generation),
        "a set-less object is replaced by a new generation",
    )
    result = await store.read(second)
    h.check(isinstance(result, Missing), f"the replaced generation reads as Missing: {result!r}")
    await _present(h, store, third, _frame(33), "the newest generation")


@case("PAY-004", "release is atomic and idempotent by (obligation_id, generation)", contract=PAY)
async def release_idempotent(h: Harness) -> None:
    store = await h.open()
    data = _frame(4)
    ref = await store.put(data, "cam1/f4", _contract(h, "reader/a", "reader/b"))
    r = await store.release_obligation(ref, "reader/a", "a1")
    h.equal((r.outcome, r.remaining, r.changed), ("released", 1, True), "first release of a")
    r = await store.release_obligation(ref, "reader/a", "a1")
    h.equal((r.outcome, r.changed), ("already-released", False), "repeat release of a")
    await _present(h, store, ref, data, "after the repeat")
    results = []
    async with anyio.create_task_group() as tg:

        async def release_b(n: int) -> None:
            results.append(await store.release_obligation(ref, "reader/b", f"b{n}"))

        for n in range(3):
            tg.start_soon(release_b, n)
    outcomes = sorted(x.outcome for x in results)
    h.check(
        outcomes.count("reclaimed") == 1
        and all(o in ("reclaimed", "object-absent") for o in outcomes),
        f"three concurrent releases of the last obligation: exactly one reclaims ({outcomes})",
    )
    await _missing(h, store, ref, "after the last obligation")
    r = await store.release_obligation(ref, "reader/b", "late")
    h.equal(r.outcome, "object-absent", "release after reclamation")


@case("PAY-005", "a stale generation never touches a newer object at the same key", contract=PAY)
async def stale_generation(h: Harness) -> None:
    store = await h.open()
    data = _frame(5)
    old = await store.put(data, "cam1/f5", _contract(h, "reader/a"))
    h.equal((await store.release_obligation(old, "reader/a", "x")).outcome, "reclaimed", "release")
    new = await store.put(data, "cam1/f5", _contract(h, "reader/a"))
    h.check(new.generation != old.generation, "a re-put after reclamation is a new generation")
    r = await store.release_obligation(old, "reader/a", "duplicate")
    h.equal(
        (r.outcome, r.changed), ("stale-generation", False), "late release of the old generation"
    )
    with h.raises(ConflictError, "acquire with the stale ref"):
        await store.acquire_obligation(old, "reader/z", h.deadline(60))
    with h.raises(ConflictError, "renew with the stale ref"):
        await store.renew_obligation(old, "reader/a", h.deadline(60))
    result = await store.read(old)
    h.check(isinstance(result, Missing), f"read of the stale ref: {result!r}")
    await _present(h, store, new, data, "the newer object")
    r = await store.release_obligation(new, "reader/a", "y")
    h.equal(r.outcome, "reclaimed", "the newer generation still releases normally")


@case(
    "PAY-006",
    "durable: an object under obligation never expires; acquiring extends its life",
    contract=PAY,
)
async def durable_obligation_extends(h: Harness) -> None:
    store = await h.open(tier="durable")
    caps = await store.capabilities()
    h.equal((caps.tier, caps.ttl_ignores_obligations), ("durable", False), "durable capabilities")
    data = _frame(6)
    # times count from the end of the put; on real engines each window gets the provider's
    # slack, as the TTL starts at the write and the put (write, attach) takes time under load
    ttl = h.at_most(2)
    hold = ttl + h.at_most(4)  # reader/a's obligation outlasts the TTL
    contract = RetentionContract(
        ttl_seconds=ttl, obligations=("reader/a",), obligation_seconds=hold
    )
    ref = await store.put(data, "cam1/f6", contract)
    written = h.now()
    await h.sleep_until(written + ttl)
    await h.sleep(1)  # past the TTL, inside the obligation
    await _present(h, store, ref, data, "past its TTL while under obligation")
    held_until = written + hold + h.at_most(4)
    receipt = await store.acquire_obligation(ref, "reader/b", held_until)
    h.equal(receipt.protects_object, True, "a durable receipt protects the object")
    h.check(
        receipt.expires_at is None or receipt.expires_at >= receipt.deadline,
        f"object life extended to the obligation deadline: {receipt!r}",
    )
    await h.sleep_until(written + hold)
    await h.sleep(1)  # reader/a expired; reader/b holds
    await _present(h, store, ref, data, "held by the acquired obligation alone")
    await h.sleep_until(held_until)
    await h.sleep(2)  # past reader/b's deadline and the TTL
    await _missing(h, store, ref, "after every obligation and the TTL passed")


@case(
    "PAY-007",
    "a crash between payload.write.after and obligation.acquire.after leaves a counterless, "
    "TTL-only object: no release reclaims it, reconcile only past the grace",
    contract=PAY,
)
async def crash_between_barriers(h: Harness) -> None:
    store = await h.open(tier="durable", orphan_grace_seconds=h.seconds(60))
    data = _frame(7)
    faults.arm("payload.write.after", crash=True)
    with h.raises(faults.SimulatedCrash, "put crashes at payload.write.after"):
        await store.put(data, "cam1/f7", _contract(h, "reader/a", ttl=600))
    faults.disarm()
    ref = await store.ref_for_key("cam1/f7")
    h.equal((ref.size, ref.digest), (len(data), payload_digest(data)), "metadata of the orphan")
    await _present(h, store, ref, data, "the orphan's bytes")
    r = await store.release_obligation(ref, "reader/a", "reader finished")
    h.equal((r.outcome, r.changed), ("no-obligation-set", False), "release finds no set (BLOB-14)")
    await _present(h, store, ref, data, "after the release: not treated as everyone finished")
    obs = await store.reconcile(_Ledger(), "pay007-early")
    h.check("cam1/f7" in obs.orphans_in_grace, f"young orphan left alone: {obs!r}")
    h.check("cam1/f7" not in obs.orphans_reclaimed, "not reclaimed inside the grace")
    await _present(h, store, ref, data, "after the early reconcile")
    await h.sleep(61)
    obs = await store.reconcile(_Ledger(), "pay007-late")
    h.check("cam1/f7" in obs.orphans_reclaimed, f"orphan reclaimed past the grace: {obs!r}")
    await _missing(h, store, ref, "after the late reconcile")
    # the same crash, left alone: the TTL is the only thing that ends it
    faults.arm("payload.write.after", crash=True)
    with h.raises(faults.SimulatedCrash, "second put crashes"):
        await store.put(data, "cam1/f7b", _contract(h, "reader/a", ttl=5))
    faults.disarm()
    ref_b = await store.ref_for_key("cam1/f7b")
    await _present(h, store, ref_b, data, "second orphan before its TTL")
    await h.sleep(6)
    await _missing(h, store, ref_b, "second orphan after its TTL")


@case(
    "PAY-008",
    "the whole obligation set expires while the bytes remain",
    contract=PAY,
    controls=("expire_obligation_set",),
)
async def obligation_set_expires(h: Harness) -> None:
    store = await h.open(tier="durable", orphan_grace_seconds=h.seconds(60))
    ctl = h.controls(store)
    data = _frame(8)
    ref = await store.put(data, "cam1/f8", _contract(h, "reader/a", "reader/b", ttl=600))
    await ctl.expire_obligation_set("cam1/f8")
    await _present(h, store, ref, data, "bytes after the set expired")
    r = await store.release_obligation(ref, "reader/a", "done")
    h.equal(r.outcome, "no-obligation-set", "release against the expired set")
    r = await store.release_obligation(ref, "reader/b", "done")
    h.equal(r.outcome, "no-obligation-set", "second release: the set is never recreated")
    await _present(h, store, ref, data, "still kept: a missing set is not 'everyone finished'")
    obs = await store.reconcile(_Ledger(), "pay008-early")
    h.check("cam1/f8" in obs.orphans_in_grace, f"inside the grace: {obs!r}")
    await h.sleep(61)
    obs = await store.reconcile(_Ledger(), "pay008-late")
    h.check("cam1/f8" in obs.orphans_reclaimed, f"reclaimed past the grace: {obs!r}")
    await _missing(h, store, ref, "after reconcile")


@case(
    "PAY-009",
    "evictable: the TTL fires regardless of obligations",
    contract=PAY,
    needs=("evictable",),
)
async def evictable_ttl(h: Harness) -> None:
    store = await h.open(tier="evictable")
    caps = await store.capabilities()
    h.equal((caps.tier, caps.ttl_ignores_obligations), ("evictable", True), "capabilities")
    data = _frame(9)
    # the TTL runs from the write; the put's attach and the acquire must land inside it, so
    # on real engines it gets the provider's slack (a replicated put also waits for a replica)
    ttl = h.at_most(3)
    contract = RetentionContract(
        ttl_seconds=ttl, obligations=("reader/a",), obligation_seconds=h.seconds(60)
    )
    ref = await store.put(data, "cam1/f9", contract)
    written = h.now()  # the TTL started before this
    receipt = await store.acquire_obligation(ref, "reader/b", h.deadline(60))
    h.equal(receipt.protects_object, False, "an evictable receipt does not protect the object")
    await h.sleep(1)
    await _present(h, store, ref, data, "before the TTL")
    await h.sleep_until(written + ttl)
    await h.sleep(1)
    await _missing(h, store, ref, "after the TTL, although two readers hold obligations")
    r = await store.release_obligation(ref, "reader/a", "late")
    h.equal(r.outcome, "object-absent", "a release finds the object gone")


@case(
    "PAY-010",
    "evictable: under memory pressure an object is evicted even though a reader needs it",
    contract=PAY,
    needs=("evictable",),
)
async def evictable_lru(h: Harness) -> None:
    size = 64 * KIB
    store = await h.open(tier="evictable", max_bytes=4 * size)
    caps = await store.capabilities()
    h.equal(caps.evicts_under_pressure, True, "capabilities.evicts_under_pressure")
    refs = []
    for n in range(4):
        refs.append(await store.put(_frame(n, size), f"cam1/e{n}", _contract(h, f"reader/{n}")))
    for n in (0, 2, 3):
        await store.read(refs[n], reader="hot")
    newest = await store.put(_frame(9, size), "cam1/e9", _contract(h, "reader/9"))
    await _present(h, store, newest, _frame(9, size), "the put that caused the pressure")
    gone = [n for n in range(4) if isinstance(await store.read(refs[n]), Missing)]
    h.check(gone, "at least one object was evicted although its reader held an obligation")
    inv = await store.inventory()
    h.check(isinstance(inv, Known), f"inventory: {inv!r}")
    assert isinstance(inv, Known)
    h.check(sum(r.size for r in inv.value) <= 4 * size, "what remains fits the budget")
    if h.virtual:  # the model's LRU is exact; Redis samples
        h.equal(gone, [1], "the least recently used object is the one evicted")


@case("PAY-011", "durable: a put over budget is refused, nothing is evicted", contract=PAY)
async def durable_backpressure(h: Harness) -> None:
    size = 64 * KIB
    store = await h.open(tier="durable", max_bytes=3 * size)
    refs = [
        await store.put(_frame(n, size), f"cam1/d{n}", _contract(h, "reader/a")) for n in range(3)
    ]
    with h.raises(PayloadBackpressure, "a fourth object over the budget"):
        await store.put(_frame(7, size), "cam1/d7", _contract(h, "reader/a"))
    for n, ref in enumerate(refs):
        await _present(h, store, ref, _frame(n, size), f"object {n} after the refusal")
    await _missing(
        h, store, await store.ref_for_key("cam1/d7"), "the refused object was not stored"
    )
    r = await store.release_obligation(refs[0], "reader/a", "done")
    h.equal(r.outcome, "reclaimed", "release frees room")
    ref = await store.put(_frame(7, size), "cam1/d7", _contract(h, "reader/a"))
    await _present(h, store, ref, _frame(7, size), "the retried put after room was freed")


@case(
    "PAY-012",
    "reads verify digest and size: corruption and truncation read as Corrupt",
    contract=PAY,
    controls=("corrupt", "truncate"),
)
async def corrupt_reads(h: Harness) -> None:
    store = await h.open()
    ctl = h.controls(store)
    data = _frame(12)
    a = await store.put(data, "cam1/c1", _contract(h, "reader/a"))
    b = await store.put(data, "cam1/c2", _contract(h, "reader/a"))
    await ctl.corrupt("cam1/c1")
    result = await store.read(a)
    h.check(isinstance(result, Corrupt), f"corrupted object: {result!r}")
    assert isinstance(result, Corrupt)
    h.equal(result.expected_digest, a.digest, "Corrupt names the expected digest")
    h.check(result.actual_digest != a.digest, "and a different actual digest")
    await ctl.truncate("cam1/c2", 100)
    result = await store.read(b)
    h.check(isinstance(result, Corrupt), f"truncated object: {result!r}")
    assert isinstance(result, Corrupt)
    h.equal((result.expected_size, result.actual_size), (len(data), 100), "sizes in Corrupt")
    meta = await store.ref_for_key("cam1/c2")
    h.equal(meta.size, len(data), "metadata still names the original size")


@case(
    "PAY-013",
    "fail_reads: a read the store cannot answer is a TransientFailure, not Missing",
    contract=PAY,
    controls=("fail_reads",),
)
async def transient_reads(h: Harness) -> None:
    store = await h.open()
    ctl = h.controls(store)
    data = _frame(13)
    ref = await store.put(data, "cam1/t1", _contract(h, "reader/a"))
    await ctl.fail_reads(["connection reset", "timeout"])
    first = await store.read(ref)
    second = await store.read(ref)
    h.check(isinstance(first, TransientFailure), f"first failing read: {first!r}")
    h.check(isinstance(second, TransientFailure), f"second failing read: {second!r}")
    assert isinstance(first, TransientFailure)
    h.check(first.reason, "a TransientFailure carries a reason")
    await _present(h, store, ref, data, "the read after the failures")


@case(
    "PAY-014",
    "fail_inventory: inventory is Unknown (never empty) and reconcile changes nothing",
    contract=PAY,
    controls=("fail_inventory",),
)
async def unknown_inventory(h: Harness) -> None:
    store = await h.open(orphan_grace_seconds=h.seconds(1))
    ctl = h.controls(store)
    data = _frame(14)
    ref = await store.put(data, "cam1/i1", _contract(h, "intent/p1"))
    inv = await store.inventory()
    h.check(isinstance(inv, Known) and ref in inv.value, f"inventory lists the object: {inv!r}")
    await ctl.fail_inventory("listing failed")
    inv = await store.inventory()
    h.check(isinstance(inv, Unknown), f"failed inventory is Unknown: {inv!r}")
    await h.sleep(2)
    with h.raises(BackendUnavailable, "reconcile cannot list the store"):
        await store.reconcile(_Ledger(), "pay014")
    await _present(h, store, ref, data, "nothing reclaimed by the failed reconcile")
    await ctl.fail_inventory(None)
    inv = await store.inventory()
    h.check(isinstance(inv, Known) and ref in inv.value, f"inventory after recovery: {inv!r}")


@case(
    "PAY-015",
    "ref_for_key completes a ref from the store's metadata",
    contract=PAY,
)
async def ref_from_metadata(h: Harness) -> None:
    store = await h.open()
    data = _frame(15)
    ref = await store.put(data, "cam1/k1", _contract(h, "reader/a"))
    completed = await store.ref_for_key("cam1/k1")
    h.equal(completed, ref, "the completed ref equals the put's ref")
    await _present(h, store, completed, data, "read through the completed ref")
    r = await store.release_obligation(completed, "reader/a", "done")
    h.equal(r.outcome, "reclaimed", "release against the completed ref's generation")
    gone = await store.ref_for_key("cam1/k1")
    h.equal((gone.digest, gone.generation), ("", ""), "without metadata the ref is unverifiable")
    await _missing(h, store, gone, "reading an unverifiable ref of nothing")


@case(
    "PAY-016",
    "without metadata a ref is readable, unverifiable, and released against nothing",
    contract=PAY,
    controls=("put_bare",),
)
async def ref_unverifiable(h: Harness) -> None:
    store = await h.open()
    ctl = h.controls(store)
    data = _frame(16)
    await ctl.put_bare("legacy/f1", data)
    ref = await store.ref_for_key("legacy/f1")
    h.equal((ref.digest, ref.generation), ("", ""), "no digest or generation")
    result = await store.read(ref)
    h.check(
        isinstance(result, PayloadBytes) and result.data == data and not result.verified,
        f"readable but not verified: {result!r}",
    )
    r = await store.release_obligation(ref, "reader/a", "done")
    h.equal((r.outcome, r.changed), ("unverifiable", False), "release against nothing")
    with h.raises(ValidationError, "an unverifiable ref cannot hold an obligation"):
        await store.acquire_obligation(ref, "reader/a", h.deadline(60))
    result = await store.read(ref)
    h.check(isinstance(result, PayloadBytes), f"still there after the release: {result!r}")


@case("PAY-017", "renew moves an obligation's deadline forward, never back", contract=PAY)
async def renew(h: Harness) -> None:
    store = await h.open(tier="durable")
    data = _frame(17)
    # the TTL is shorter than every deadline below; on real engines it gets the provider's
    # slack, as the acquire must land inside it and a (replicated) put takes time under load
    ttl = h.at_most(3)
    ref = await store.put(data, "cam1/r1", RetentionContract(ttl_seconds=ttl))
    written = h.now()
    first = await store.acquire_obligation(ref, "reader/a", written + ttl + h.seconds(2))
    later = written + ttl + h.seconds(17)
    renewed = await store.renew_obligation(ref, "reader/a", later)
    h.check(renewed.deadline >= later - 1e-3, f"renewed deadline: {renewed!r} (asked {later})")
    h.check(renewed.deadline > first.deadline, "the deadline moved forward")
    back = await store.renew_obligation(ref, "reader/a", written + ttl - h.seconds(1))
    h.check(back.deadline >= renewed.deadline - 1e-3, f"a shorter renew keeps the later: {back!r}")
    await h.sleep_until(first.deadline)
    await h.sleep(5)  # past the first deadline and the TTL
    await _present(h, store, ref, data, "held by the renewed obligation")
    r = await store.release_obligation(ref, "reader/a", "done")
    h.equal(r.outcome, "reclaimed", "the renewed obligation was still there")
    with h.raises(NotFound, "renew of a released obligation"):
        await store.renew_obligation(ref, "reader/a", h.deadline(30))


@case(
    "PAY-018",
    "concurrent put and reconcile racing at the barriers: a put in progress is not a leak",
    contract=PAY,
)
async def put_reconcile_race(h: Harness) -> None:
    # without an intent grace the seed's rule cancels a put's intents at once: PAY-019
    store = await h.open(orphan_grace_seconds=h.seconds(60), intent_grace_seconds=h.seconds(60))
    data = _frame(18)
    refs: dict[str, ImmutablePayloadRef] = {}

    async def put(key: str) -> None:
        refs[key] = await store.put(data, key, _contract(h, "intent/p", "reader/a"))

    for barrier in ("payload.write.after", "obligation.acquire.after"):
        key = f"cam1/{barrier}"
        b = faults.arm(barrier)
        async with anyio.create_task_group() as tg:
            tg.start_soon(put, key)
            with h.fail_after(30):
                await b.wait_paused()
            obs = await store.reconcile(_Ledger(), f"race-{barrier}")
            h.check(
                key not in obs.reclaimed and key not in obs.orphans_reclaimed,
                f"reconcile with the put paused at {barrier} reclaims nothing: {obs!r}",
            )
            h.check(
                not any(k == key for k, _ in obs.cancelled), f"no obligation cancelled: {obs!r}"
            )
            b.release()
        faults.disarm()
        await _present(h, store, refs[key], data, f"object of the put paused at {barrier}")
        r = await store.release_obligation(refs[key], "reader/a", "done")
        h.equal((r.outcome, r.remaining), ("released", 1), f"the put at {barrier} attached both")


@case(
    "PAY-019",
    "reconcile: a listed key's tuple is the whole truth; unlisted keys lose their intents",
    contract=PAY,
)
async def reconcile_ledger(h: Harness) -> None:
    store = await h.open(orphan_grace_seconds=h.seconds(30))
    refs = await _four_objects(h, store)
    obs = await store.reconcile(_Ledger(_LEDGER), "first")
    h.equal(
        sorted(obs.cancelled),
        [
            ("k/a", "intent/p"),
            ("k/a", "reader/y"),
            ("k/b", "intent/q"),
            ("k/c", "intent/r"),
            ("k/d", "reader/w"),
        ],
        "listed keys reduced to the ledger; unlisted keys lose their intents, however young",
    )
    h.equal(sorted(obs.reclaimed), ["k/c", "k/d"], "keys left with nothing are reclaimed")
    await _after_reconcile(h, store, refs)


_LEDGER = {"k/a": ("reader/x",), "k/d": ()}


async def _four_objects(h: Harness, store: PayloadStore) -> list[ImmutablePayloadRef]:
    """k/a: two readers and an intent; k/b: a reader and an intent; k/c: an intent; k/d: a
    reader (for PAY-019 and PAY-024, against :data:`_LEDGER`)."""
    obligations = [
        ("reader/x", "reader/y", "intent/p"),
        ("reader/z", "intent/q"),
        ("intent/r",),
        ("reader/w",),
    ]
    return [
        await store.put(_frame(i + 1), f"k/{'abcd'[i]}", _contract(h, *held))
        for i, held in enumerate(obligations)
    ]


async def _after_reconcile(
    h: Harness, store: PayloadStore, refs: list[ImmutablePayloadRef]
) -> None:
    """What every reconcile of :func:`_four_objects` against :data:`_LEDGER` ends with."""
    a, b, cc, d = refs
    await _present(h, store, a, _frame(1), "k/a (ledger requires reader/x)")
    await _present(h, store, b, _frame(2), "k/b (reader/z belongs to an unseen reader)")
    await _missing(h, store, cc, "k/c")
    await _missing(h, store, d, "k/d")
    r = await store.release_obligation(a, "reader/x", "done")
    h.equal(r.outcome, "reclaimed", "k/a held only reader/x after reconcile")
    again = await store.reconcile(_Ledger(_LEDGER), "repeat")
    h.equal((again.cancelled, again.reclaimed), ((), ()), "reconcile is idempotent")


@case(
    "PAY-020",
    "bad input is a ValidationError and changes nothing",
    contract=PAY,
)
async def bad_input(h: Harness) -> None:
    store = await h.open()
    data = _frame(20)
    ref = await store.put(data, "cam1/b1", _contract(h, "reader/a"))
    bad_puts: list[tuple[str, Any, Any, Any]] = [
        ("str data", "text", "cam1/x", _contract(h)),
        ("bytearray data", bytearray(b"x"), "cam1/x", _contract(h)),
        ("empty content id", b"x", "", _contract(h)),
        ("not a contract", b"x", "cam1/x", {"ttl_seconds": 1}),
    ]
    for what, d, cid, contract in bad_puts:
        with h.raises(ValidationError, what):
            await store.put(d, cid, contract)
    bad_contracts: list[tuple[str, dict[str, Any]]] = [
        ("negative TTL", {"ttl_seconds": -1.0}),
        ("NaN TTL", {"ttl_seconds": float("nan")}),
        ("negative hold", {"obligation_seconds": -5.0}),
        ("empty obligation id", {"obligations": ("",)}),
    ]
    for what, fields in bad_contracts:  # refused where the contract is built
        with h.raises(ValidationError, what):
            await store.put(b"x", "cam1/x", RetentionContract(**fields))
    foreign = ImmutablePayloadRef(ref.key, ref.size, ref.digest, ref.generation, "elsewhere")
    with h.raises(ValidationError, "read of a foreign ref"):
        await store.read(foreign)
    with h.raises(ValidationError, "release with a foreign ref"):
        await store.release_obligation(foreign, "reader/a", "done")
    with h.raises(ValidationError, "negative deadline"):
        await store.acquire_obligation(ref, "reader/b", -1.0)
    with h.raises(ValidationError, "deadline in the past"):
        await store.acquire_obligation(ref, "reader/b", h.now() - h.seconds(1))
    with h.raises(ValidationError, "infinite deadline"):
        await store.acquire_obligation(ref, "reader/b", float("inf"))
    with h.raises(ValidationError, "empty obligation id"):
        await store.acquire_obligation(ref, "", h.deadline(60))
    with h.raises(ValidationError, "empty completion receipt"):
        await store.release_obligation(ref, "reader/a", "")
    with h.raises(ValidationError, "empty operation id"):
        await store.reconcile(_Ledger(), "")
    with h.raises(ValidationError, "empty key"):
        await store.ref_for_key("")
    inv = await store.inventory()
    h.check(isinstance(inv, Known) and inv.value == (ref,), f"only the good object: {inv!r}")
    r = await store.release_obligation(ref, "reader/a", "done")
    h.equal(r.outcome, "reclaimed", "reader/a was untouched by the refused calls")


@case(
    "PAY-021",
    "an obligation vanishes at its deadline; an emptied set is gone, not 'everyone finished'",
    contract=PAY,
    controls=("expire_obligation",),
)
async def obligation_deadline(h: Harness) -> None:
    store = await h.open(tier="durable", orphan_grace_seconds=h.seconds(600))
    ctl = h.controls(store)
    data = _frame(21)
    ref = await store.put(data, "cam1/o1", _contract(h, "reader/a", ttl=120, hold=5))
    await h.sleep(7)
    r = await store.release_obligation(ref, "reader/a", "too late")
    h.equal(r.outcome, "no-obligation-set", "release after the only obligation expired")
    await _present(h, store, ref, data, "the bytes remain until their TTL")
    await store.acquire_obligation(ref, "reader/b", h.deadline(60))
    await store.acquire_obligation(ref, "reader/c", h.deadline(60))
    await ctl.expire_obligation("cam1/o1", "reader/b")
    r = await store.release_obligation(ref, "reader/b", "done")
    h.equal(r.outcome, "already-released", "the expired record is simply gone")
    await ctl.expire_obligation("cam1/o1", "reader/c")
    r = await store.release_obligation(ref, "reader/c", "done")
    h.equal(r.outcome, "no-obligation-set", "the emptied set no longer exists")
    await _present(h, store, ref, data, "never reclaimed by a release")


@case(
    "PAY-022",
    "a contract that requires the durable tier is refused by an evictable store",
    contract=PAY,
    needs=("evictable",),
)
async def required_tier(h: Harness) -> None:
    store = await h.open(tier="evictable")
    strict = RetentionContract(
        ttl_seconds=h.seconds(60), obligations=("reader/a",), required_tier="durable"
    )
    with h.raises(Unsupported, "put requiring durable on an evictable store"):
        await store.put(_frame(22), "cam1/t22", strict)
    await _missing(h, store, await store.ref_for_key("cam1/t22"), "nothing stored")
    loose = RetentionContract(ttl_seconds=h.seconds(60), required_tier="evictable")
    ref = await store.put(_frame(22), "cam1/t22", loose)
    await _present(h, store, ref, _frame(22), "a contract accepting the tier")


@case("PAY-023", "capabilities reflect the options the store was opened with", contract=PAY)
async def capabilities(h: Harness) -> None:
    store = await h.open(
        tier="durable",
        max_bytes=1024 * KIB,
        forward_unchanged=False,
        orphan_grace_seconds=h.seconds(30),
    )
    caps = await store.capabilities()
    h.equal(caps.tier, "durable", "tier")
    h.equal(caps.durable, True, "durable")
    h.equal(caps.evicts_under_pressure, False, "a durable store does not evict")
    h.equal(caps.max_bytes, 1024 * KIB, "max_bytes")
    h.equal(caps.forward_unchanged, False, "forward_unchanged")
    h.check(abs(caps.orphan_grace_seconds - h.seconds(30)) < 1e-6, f"grace: {caps!r}")
    h.equal(caps.digest_algorithm, "sha256", "digest algorithm")


@case(
    "PAY-024",
    "reconcile with intent_grace_seconds: unlisted keys lose only intents older than the grace",
    contract=PAY,
)
async def reconcile_intent_grace(h: Harness) -> None:
    store = await h.open(orphan_grace_seconds=h.seconds(30), intent_grace_seconds=h.seconds(30))
    refs = await _four_objects(h, store)
    ledger = _Ledger(_LEDGER)
    obs = await store.reconcile(ledger, "early")
    h.equal(
        sorted(obs.cancelled),
        [("k/a", "intent/p"), ("k/a", "reader/y"), ("k/d", "reader/w")],
        "early pass: listed keys reduced to the ledger; young intents kept",
    )
    h.equal(sorted(obs.reclaimed), ["k/d"], "a listed key with () is reclaimed")
    await h.sleep(31)
    obs = await store.reconcile(ledger, "late")
    h.equal(
        sorted(obs.cancelled),
        [("k/b", "intent/q"), ("k/c", "intent/r")],
        "late pass: only intents of unlisted keys",
    )
    h.equal(sorted(obs.reclaimed), ["k/c"], "an unlisted key left with nothing is reclaimed")
    await _after_reconcile(h, store, refs)


@case(
    "PAY-025",
    "durable budget: a put replacing a generation counts the replaced bytes as freed",
    contract=PAY,
)
async def budget_counts_replaced(h: Harness) -> None:
    size = 64 * KIB
    store = await h.open(tier="durable", max_bytes=3 * size, forward_unchanged=False)
    for n in range(3):  # the budget is full; no obligation holds them
        await store.put(_frame(n, size), f"cam1/b{n}", _contract(h))
    ref = await store.put(_frame(10, size), "cam1/b0", _contract(h))
    await _present(h, store, ref, _frame(10, size), "the replacing generation fits")
    with h.raises(PayloadBackpressure, "a new key is still over the budget"):
        await store.put(_frame(11, size), "cam1/b3", _contract(h))
    await _present(h, store, ref, _frame(10, size), "the replacement after the refusal")


@case(
    "PAY-026",
    "consecutive puts of different bodies each carry their own digest and read back verified",
    contract=PAY,
)
async def own_digest_per_put(h: Harness) -> None:
    store = await h.open()
    high, low = b"\xff" * 1024, b"\x00" * 1024  # the second sorts before the first
    first = await store.put(high, "cam1/d1", _contract(h))
    second = await store.put(low, "cam1/d2", _contract(h))
    h.check(first.digest != second.digest, f"different bodies, one digest: {first.digest}")
    await _present(h, store, second, low, "the second body")
    await _present(h, store, first, high, "the first body")


@case(
    "PAY-027",
    "a ref decoded from its wire form is as good as the original: read, acquire, renew, release",
    contract=PAY,
)
async def decoded_ref(h: Harness) -> None:
    store = await h.open()
    data = _frame(27)
    ref = await store.put(data, "cam1/w", _contract(h, "reader/a"))
    wire = msgspec.json.decode(msgspec.json.encode(ref), type=ImmutablePayloadRef)
    h.equal(wire, ref, "the decoded ref")
    await _present(h, store, wire, data, "read with the decoded ref")
    await store.acquire_obligation(wire, "reader/b", h.deadline(60))
    await store.renew_obligation(wire, "reader/a", h.deadline(120))
    outcomes = []
    for oid in ("reader/a", "reader/b"):
        outcomes.append((oid, (await store.release_obligation(wire, oid, f"rel-{oid}")).outcome))
    h.equal(
        outcomes,
        [("reader/a", "released"), ("reader/b", "reclaimed")],
        "both released with the decoded ref, the last one out reclaiming",
    )


@case(
    "PAY-028",
    "a release of a stale generation reports nothing remaining, not the newer set's count",
    contract=PAY,
)
async def stale_release_remaining(h: Harness) -> None:
    store = await h.open()
    data = _frame(28)
    old = await store.put(data, "cam1/s", _contract(h, "reader/a"))
    h.equal((await store.release_obligation(old, "reader/a", "x")).outcome, "reclaimed", "release")
    await store.put(data, "cam1/s", _contract(h, "reader/a", "reader/b"))
    r = await store.release_obligation(old, "reader/a", "late")
    h.equal(
        (r.outcome, r.changed, r.remaining),
        ("stale-generation", False, 0),
        "a late release of the old generation",
    )


# cases register themselves by ID (``case``) and run through the registry: none is imported by
# name, so the module exports nothing
__all__: list[str] = []
