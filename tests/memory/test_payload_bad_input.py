"""Bad input to the payload store: a ValidationError naming the field, and nothing changed."""

from __future__ import annotations

import math
from typing import Any

import pytest

from _payload_helpers import contract, frame, store
from videoflow_aio.contracts.errors import ValidationError
from videoflow_aio.contracts.payload import (
    ImmutablePayloadRef,
    ObligationLedger,
    RetentionContract,
)
from videoflow_aio.memory.payload import MemoryPayloadStore, StaticLedger

pytestmark = pytest.mark.anyio


async def _snapshot(s: MemoryPayloadStore, log: Any) -> tuple[object, ...]:
    return (await s.inventory(), s.obligations("k"), s.stored_bytes(), len(log))


@pytest.mark.parametrize(
    ("data", "content_id", "retention", "field"),
    [
        ("text", "x", contract(), "data"),
        (bytearray(b"x"), "x", contract(), "data"),
        (memoryview(b"x"), "x", contract(), "data"),
        (None, "x", contract(), "data"),
        (b"x", "", contract(), "content_id"),
        (b"x", 7, contract(), "content_id"),
        (b"x", "x", None, "contract"),
        (b"x", "x", {"ttl_seconds": 1.0}, "contract"),
    ],
)
async def test_bad_put(data: Any, content_id: Any, retention: Any, field: str) -> None:
    s, log = store()
    ref = await s.put(frame(1), "k", contract("r/a"))
    before = await _snapshot(s, log)
    with pytest.raises(ValidationError) as info:
        await s.put(data, content_id, retention)
    assert info.value.field == field
    assert await _snapshot(s, log) == before
    assert (await s.read(ref)).data == frame(1)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"ttl_seconds": -1.0}, "ttl_seconds"),
        ({"ttl_seconds": 0.0}, "ttl_seconds"),
        ({"ttl_seconds": math.nan}, "ttl_seconds"),
        ({"ttl_seconds": math.inf}, "ttl_seconds"),
        ({"obligation_seconds": -1.0}, "obligation_seconds"),
        ({"obligations": ("",)}, "obligations[0]"),
        ({"obligations": ("a", "a")}, "obligations"),
        ({"obligations": ["a"]}, "obligations"),
        ({"required_tier": "gold"}, "required_tier"),
    ],
)
def test_bad_retention_contract_is_refused_where_it_is_built(
    kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValidationError) as info:
        RetentionContract(**kwargs)
    assert info.value.field == field


def _refs(ref: ImmutablePayloadRef) -> list[tuple[Any, str]]:
    return [
        (ImmutablePayloadRef(ref.key, ref.size, ref.digest, ref.generation, "other"), "ref.store"),
        (ImmutablePayloadRef("", ref.size, ref.digest, ref.generation, ref.store), "ref.key"),
        (ImmutablePayloadRef(ref.key, -1, ref.digest, ref.generation, ref.store), "ref.size"),
        ("k", "ref"),
        (None, "ref"),
    ]


async def test_bad_refs_everywhere() -> None:
    s, log = store()
    ref = await s.put(frame(1), "k", contract("r/a"))
    before = await _snapshot(s, log)
    for bad, field in _refs(ref):
        calls = [
            s.read(bad),
            s.acquire_obligation(bad, "r/b", 2000.0),
            s.renew_obligation(bad, "r/a", 2000.0),
            s.release_obligation(bad, "r/a", "done"),
        ]
        for call in calls:
            with pytest.raises(ValidationError) as info:
                await call
            assert info.value.field == field
    assert await _snapshot(s, log) == before


@pytest.mark.parametrize(
    ("deadline", "why"),
    [
        (-1.0, "negative"),
        (999.0, "past"),
        (1000.0, "now"),
        (math.inf, "inf"),
        (math.nan, "nan"),
        ("2000", "str"),
        (True, "bool"),
        (None, "none"),
    ],
)
async def test_bad_deadlines(deadline: Any, why: str) -> None:
    s, log = store()
    ref = await s.put(frame(1), "k", contract("r/a"))
    before = await _snapshot(s, log)
    for method in (s.acquire_obligation, s.renew_obligation):
        with pytest.raises(ValidationError) as info:
            await method(ref, "r/a", deadline)
        assert info.value.field == "deadline", why
    assert await _snapshot(s, log) == before


async def test_bad_ids() -> None:
    s, log = store()
    ref = await s.put(frame(1), "k", contract("r/a"))
    before = await _snapshot(s, log)
    cases: list[tuple[Any, str]] = [
        (s.acquire_obligation(ref, "", 2000.0), "obligation_id"),
        (s.acquire_obligation(ref, 5, 2000.0), "obligation_id"),  # type: ignore[arg-type]
        (s.renew_obligation(ref, "", 2000.0), "obligation_id"),
        (s.release_obligation(ref, "", "done"), "obligation_id"),
        (s.release_obligation(ref, "r/a", ""), "completion_receipt"),
        (s.release_obligation(ref, "r/a", None), "completion_receipt"),  # type: ignore[arg-type]
        (s.read(ref, reader=""), "reader"),
        (s.reconcile(StaticLedger({}), ""), "operation_id"),
        (s.reconcile({"k": ()}, "op"), "ledger"),  # type: ignore[arg-type]
        (s.ref_for_key(""), "key"),
    ]
    for call, field in cases:
        with pytest.raises(ValidationError) as info:
            await call
        assert info.value.field == field
    assert await _snapshot(s, log) == before


async def test_ledger_returning_garbage() -> None:
    class Bad(ObligationLedger):
        def required_obligations(self) -> Any:
            return [("k", ())]

    s, log = store()
    await s.put(frame(1), "k", contract("r/a"))
    before = await _snapshot(s, log)
    with pytest.raises(ValidationError):
        await s.reconcile(Bad(), "op")
    assert await _snapshot(s, log) == before


def test_static_ledger_bad_input() -> None:
    with pytest.raises(ValidationError):
        StaticLedger([("k", ())])  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        StaticLedger({"k": ["r/a"]})  # type: ignore[dict-item]
    with pytest.raises(ValidationError):
        StaticLedger({"": ()})
    with pytest.raises(ValidationError):
        StaticLedger({"k": ("",)})
    assert StaticLedger({"k": ("r/a",)}).required_obligations() == {"k": ("r/a",)}


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"tier": "gold"}, "tier"),
        ({"max_bytes": -1}, "max_bytes"),
        ({"max_bytes": 1.5}, "max_bytes"),
        ({"store_id": ""}, "store_id"),
        ({"orphan_grace_seconds": -1.0}, "orphan_grace_seconds"),
        ({"orphan_grace_seconds": math.nan}, "orphan_grace_seconds"),
        ({"orphan_grace_seconds": math.inf}, "orphan_grace_seconds"),
    ],
)
def test_bad_constructor(options: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        MemoryPayloadStore(**options)
    assert info.value.field == field


async def test_bad_controls_change_nothing() -> None:
    s, log = store()
    await s.put(frame(1), "k", contract("r/a"))
    before = await _snapshot(s, log)
    with pytest.raises(ValidationError):
        s.truncate("k", 5000)
    with pytest.raises(ValidationError):
        s.truncate("k", -1)
    with pytest.raises(ValidationError):
        s.fail_reads("boom")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        s.fail_reads([""])
    with pytest.raises(ValidationError):
        s.fail_inventory("")
    with pytest.raises(ValidationError):
        s.put_bare("", b"x")
    with pytest.raises(ValidationError):
        s.put_bare("b", "x")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        s.put_bare("b", b"x", ttl_seconds=0)
    assert await _snapshot(s, log) == before
