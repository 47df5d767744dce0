"""Exact instants of the payload model that a real store cannot be held to (found by mutation
testing, ``benchmarks/mutation``): what is due at ``now`` has happened at ``now``."""

from __future__ import annotations

import anyio
import pytest

from _payload_helpers import contract, frame, store
from videoflow_aio.contracts.errors import ValidationError
from videoflow_aio.contracts.payload import Missing, PayloadBytes

pytestmark = pytest.mark.anyio


async def test_an_obligation_due_exactly_now_has_expired() -> None:
    s, _ = store(tier="durable", orphan_grace_seconds=600.0)
    ref = await s.put(frame(1), "k", contract("r/a", ttl=120.0, hold=5.0))
    await anyio.sleep(4.999)
    assert (await s.release_obligation(ref, "r/a", "early")).outcome == "reclaimed"
    ref = await s.put(frame(2), "k", contract("r/b", ttl=120.0, hold=5.0))
    await anyio.sleep(5.0)  # exactly the deadline
    assert (await s.release_obligation(ref, "r/b", "late")).outcome == "no-obligation-set"


async def test_an_object_due_exactly_now_has_expired() -> None:
    s, _ = store(tier="durable")
    ref = await s.put(frame(1), "k", contract(ttl=3.0))
    await anyio.sleep(3.0)
    assert isinstance(await s.read(ref), Missing)


# -- found by cosmic-ray's generated mutants (benchmarks/mutation/cosmic.py) ------------------


async def test_volatile_lru_evicts_until_the_new_object_fits_and_no_further() -> None:
    s, log = store(tier="evictable", max_bytes=3072)
    refs = [await s.put(frame(n), f"k{n}", contract()) for n in range(3)]
    new = await s.put(frame(9, 2048), "big", contract())  # needs two of the three to leave
    assert [e.subject for e in log.events("evict")] == ["k0", "k1"]
    assert isinstance(await s.read(refs[2]), PayloadBytes)
    assert isinstance(await s.read(new), PayloadBytes)
    assert s.stored_bytes() == 3072


async def test_corrupt_damages_any_body_and_keeps_its_size() -> None:
    s, _ = store()
    for key, body in (("k", frame(1)), ("mirror", b"\x00\xff")):  # last byte flipped == first
        ref = await s.put(body, key, contract())
        s.corrupt(key)
        assert await s.read(ref) != PayloadBytes(ref, body, True), key
    assert s.stored_bytes() == len(frame(1)) + 2


async def test_truncate_to_nothing_and_a_bare_put_with_a_ttl_are_accepted() -> None:
    s, _ = store()
    await s.put(frame(1), "k", contract())
    s.truncate("k", 0)
    assert s.stored_bytes() == 0
    s.put_bare("bare", b"x", ttl_seconds=5.0)
    assert s.object_count() == 2
    with pytest.raises(ValidationError):
        s.put_bare("never", b"x", ttl_seconds=float("inf"))
