"""reconcile follows the seed: an unlisted key loses its intents whatever its age; an intent
grace is an explicit option (``intent_grace_seconds``), off by default."""

from __future__ import annotations

import math
from typing import Any

import anyio
import pytest

from _payload_helpers import contract, frame, store
from videoflow_aio.contracts.errors import ValidationError
from videoflow_aio.contracts.payload import Missing
from videoflow_aio.memory.payload import MemoryPayloadStore, StaticLedger

pytestmark = pytest.mark.anyio


async def test_an_unlisted_key_loses_its_intents_at_once() -> None:
    s, _ = store()  # orphan_grace_seconds=60: the grace is not the intents' business
    young = await s.put(frame(1), "k/young", contract("intent/p", "reader/a"))
    only = await s.put(frame(2), "k/only", contract("intent/q"))
    obs = await s.reconcile(StaticLedger({}), "now")
    assert sorted(obs.cancelled) == [("k/only", "intent/q"), ("k/young", "intent/p")]
    assert obs.reclaimed == ("k/only",)
    assert s.obligations("k/young") == {"reader/a": pytest.approx(1300.0, abs=1e3)}
    assert isinstance(await s.read(only), Missing)
    assert (await s.read(young)).data == frame(1)  # type: ignore[union-attr]
    assert (await s.capabilities()).intent_grace_seconds == 0.0


async def test_an_intent_grace_keeps_young_intents_when_asked_for() -> None:
    s, _ = store(intent_grace_seconds=10.0)
    await s.put(frame(1), "k", contract("intent/p", "reader/a"))
    assert (await s.reconcile(StaticLedger({}), "young")).cancelled == ()
    await anyio.sleep(10.5)
    assert (await s.reconcile(StaticLedger({}), "old")).cancelled == (("k", "intent/p"),)
    assert (await s.capabilities()).intent_grace_seconds == 10.0


async def test_a_listed_key_is_reduced_to_the_ledger_whatever_the_grace() -> None:
    s, _ = store(intent_grace_seconds=10.0)
    await s.put(frame(1), "k", contract("intent/p", "reader/a", "reader/b"))
    obs = await s.reconcile(StaticLedger({"k": ("reader/a",)}), "op")
    assert sorted(obs.cancelled) == [("k", "intent/p"), ("k", "reader/b")]


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, "1", True, None])
def test_the_intent_grace_must_be_finite_and_non_negative(bad: Any) -> None:
    with pytest.raises(ValidationError) as info:
        MemoryPayloadStore(intent_grace_seconds=bad)
    assert info.value.field == "intent_grace_seconds"
