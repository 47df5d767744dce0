"""Exact instants of the payload model that a real store cannot be held to (found by mutation
testing, ``benchmarks/mutation``): what is due at ``now`` has happened at ``now``."""

from __future__ import annotations

import anyio
import pytest

from _payload_helpers import contract, frame, store
from videoflow_aio.contracts.payload import Missing

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
