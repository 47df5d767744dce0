"""Random programs against MemoryPayloadStore, checking the invariants after every step.

Invariants: bytes accounted = bytes listed; the budget holds; in the durable tier no object
with obligations is ever gone; a release that reports no change changes nothing and never
creates a set; a reclaiming release removes the object; a refused put changes nothing;
generations never repeat at a key; reconcile never reclaims a set-less object inside the
grace.
"""

from __future__ import annotations

from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from videoflow_aio.contracts import Known
from videoflow_aio.contracts.errors import ConflictError, NotFound
from videoflow_aio.contracts.payload import (
    ImmutablePayloadRef,
    Missing,
    PayloadBackpressure,
    RetentionContract,
    Tier,
)
from videoflow_aio.memory.payload import MemoryPayloadStore, StaticLedger
from videoflow_aio.vtime import VirtualClock, run

KEYS = ("k0", "k1", "k2", "k3")
OIDS = ("r/a", "r/b", "intent/p")
GRACE = 20.0

op = st.one_of(
    st.tuples(
        st.just("put"),
        st.sampled_from(KEYS),
        st.integers(0, 3),
        st.sets(st.sampled_from(OIDS), max_size=2),
        st.sampled_from([5.0, 30.0, 200.0]),
        st.sampled_from([3.0, 40.0]),
    ),
    st.tuples(
        st.just("acquire"),
        st.sampled_from(KEYS),
        st.sampled_from(OIDS),
        st.sampled_from([1.0, 50.0]),
    ),
    st.tuples(
        st.just("renew"), st.sampled_from(KEYS), st.sampled_from(OIDS), st.sampled_from([1.0, 80.0])
    ),
    st.tuples(st.just("release"), st.sampled_from(KEYS), st.sampled_from(OIDS), st.booleans()),
    st.tuples(st.just("sleep"), st.sampled_from([0.5, 4.0, 25.0])),
    st.tuples(
        st.just("reconcile"),
        st.dictionaries(
            st.sampled_from(KEYS), st.sets(st.sampled_from(OIDS)).map(tuple), max_size=3
        ),
    ),
    st.tuples(st.just("expire_set"), st.sampled_from(KEYS)),
)


async def _listed(s: MemoryPayloadStore) -> tuple[ImmutablePayloadRef, ...]:
    inv = await s.inventory()
    assert isinstance(inv, Known)
    return inv.value


async def program(tier: Tier, ops: list[tuple[Any, ...]]) -> None:
    budget = 3 * 256
    s = MemoryPayloadStore(
        tier=tier, max_bytes=budget, forward_unchanged=True, orphan_grace_seconds=GRACE
    )
    refs: dict[str, list[ImmutablePayloadRef]] = {k: [] for k in KEYS}
    born: dict[tuple[str, str], float] = {}
    for step in ops:
        kind = step[0]
        before = await _listed(s)
        if kind == "put":
            _, key, n, oids, ttl, hold = step
            data = bytes([n]) * (64 * (n + 1))
            contract = RetentionContract(
                ttl_seconds=ttl, obligations=tuple(sorted(oids)), obligation_seconds=hold
            )
            try:
                ref = await s.put(data, key, contract)
            except (PayloadBackpressure, ConflictError):
                assert await _listed(s) == before, "a refused put changed the store"
            else:
                if ref.generation not in [r.generation for r in refs[key]]:
                    born[(key, ref.generation)] = anyio.current_time()
                elif refs[key][-1].generation != ref.generation:
                    raise AssertionError(f"generation {ref.generation} reused at {key}")
                refs[key].append(ref)
        elif kind in ("acquire", "renew"):
            _, key, oid, dt = step
            ref = await s.ref_for_key(key)
            if not ref.generation:
                continue
            method = s.acquire_obligation if kind == "acquire" else s.renew_obligation
            try:
                await method(ref, oid, anyio.current_time() + dt)
            except NotFound:
                assert kind == "renew"
        elif kind == "release":
            _, key, oid, stale = step
            if not refs[key]:
                continue
            ref = refs[key][0] if stale else refs[key][-1]
            obligations_before = s.obligations(key)
            count_before = s.object_count()
            receipt = await s.release_obligation(ref, oid, "done")
            if receipt.outcome == "reclaimed":
                assert isinstance(await s.read(ref), Missing)
                assert s.object_count() == count_before - 1
            elif receipt.outcome == "released":
                assert oid not in s.obligations(key) and s.obligations(key)
            else:
                assert s.obligations(key) == obligations_before, receipt
                assert s.object_count() == count_before
        elif kind == "sleep":
            await anyio.sleep(step[1])
        elif kind == "reconcile":
            obs = await s.reconcile(StaticLedger(step[1]), "op")
            now = anyio.current_time()
            for key in obs.orphans_reclaimed:
                gen = next(r.generation for r in before if r.key == key)
                assert now - born[(key, gen)] > GRACE, f"{key} reclaimed inside the grace"
        elif kind == "expire_set" and s.obligations(step[1]):
            s.expire_obligation_set(step[1])
        listed = await _listed(s)
        assert s.stored_bytes() == sum(r.size for r in listed)
        assert s.stored_bytes() <= budget
        if tier == "durable":
            present = {r.key for r in listed}
            for key in KEYS:
                if s.obligations(key):
                    assert key in present, f"durable object {key} gone while under obligation"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tier=st.sampled_from(["durable", "evictable"]), ops=st.lists(op, min_size=8, max_size=40))
def test_random_programs_keep_the_invariants(tier: Tier, ops: list[tuple[Any, ...]]) -> None:
    run(program, tier, ops, backend="asyncio", clock=VirtualClock())


@settings(max_examples=25, deadline=None)
@given(ops=st.lists(op, max_size=30))
def test_random_programs_on_trio(ops: list[tuple[Any, ...]]) -> None:
    run(program, "durable", ops, backend="trio", clock=VirtualClock())
