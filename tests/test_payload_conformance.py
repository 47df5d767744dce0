"""The PAY conformance cases have teeth: a model with one rule broken fails the cases that
check it (the faithful model passes them all, under asyncio and trio, in
tests/test_conformance.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from videoflow_aio.conformance import Case, Harness, Provider, run_case, select_cases
from videoflow_aio.contracts import Known
from videoflow_aio.contracts.payload import (
    ImmutablePayloadRef,
    InventoryObservation,
    PayloadBytes,
    PayloadReadResult,
    ReleaseReceipt,
)
from videoflow_aio.memory._payload_state import StoredObject
from videoflow_aio.memory.payload import MemoryPayloadStore
from videoflow_aio.vtime import current_clock

PAY_CASES = select_cases("payload")


def test_case_inventory() -> None:
    ids = [c.id for c in PAY_CASES]
    assert len(ids) >= 16
    assert ids[:3] == ["PAY-001", "PAY-002", "PAY-003"]
    assert "set expires" in {c.id: c.title for c in PAY_CASES}["PAY-008"]
    assert "payload.write.after" in {c.id: c.title for c in PAY_CASES}["PAY-007"]


# -- mutants: each breaks one rule; the named cases must catch it ------------------------------


class BrokenProvider(Provider):
    """The memory provider, but every payload store is ``cls``."""

    name = "broken"

    def __init__(self, cls: type[MemoryPayloadStore]) -> None:
        self.cls = cls

    def contracts(self) -> frozenset[str]:
        return frozenset({"payload"})

    @asynccontextmanager
    async def harness(self, case: Case) -> AsyncIterator[Harness]:
        async def factory(**options: Any) -> Any:
            return self.cls(**options)

        yield Harness(
            provider=self.name,
            contract=case.contract,
            factory=factory,
            clock=current_clock(),
            allowed_controls=case.controls,
            strict_controls=True,
        )


class MissingSetMeansFinished(MemoryPayloadStore):
    """BLOB-14 bug: a release that finds no set reclaims the object."""

    async def release_obligation(
        self, ref: ImmutablePayloadRef, obligation_id: str, completion_receipt: str
    ) -> ReleaseReceipt:
        r = await super().release_obligation(ref, obligation_id, completion_receipt)
        if r.outcome == "no-obligation-set":
            self._reclaim(ref.key, "release")
        return r


class NoGrace(MemoryPayloadStore):
    """reconcile reclaims set-less objects (and cancels intents) at once."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._grace = -1.0


class IntentsWaitForTheOrphanGrace(MemoryPayloadStore):
    """The rule before the seed was followed: an unlisted key's intents are cancelled only on
    objects older than the orphan grace."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._intent_grace = self._intent_grace or self._grace


class IgnoresTheIntentGrace(MemoryPayloadStore):
    """intent_grace_seconds is accepted, but reconcile cancels intents at once."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._intent_grace = 0.0


class AcquireDoesNotExtend(MemoryPayloadStore):
    """durable tier bug: an obligation does not keep the object past its TTL."""

    def _attach(self, obj: StoredObject, oid: str, deadline: float) -> float:
        before = obj.expires_at
        effective = super()._attach(obj, oid, deadline)
        obj.expires_at = before
        return effective

    def _fire_object(self, at: float, key: str, gen: str) -> None:
        saved, self._evictable = self._evictable, True  # and no guard at expiry either
        try:
            super()._fire_object(at, key, gen)
        finally:
            self._evictable = saved


class NoVerify(MemoryPayloadStore):
    """reads return whatever bytes are there."""

    def _verify(self, ref: ImmutablePayloadRef, obj: StoredObject) -> PayloadReadResult:
        return PayloadBytes(ref, obj.data, True)


class StaleReleaseDeletes(MemoryPayloadStore):
    """a release with a stale generation deletes the newer object."""

    async def release_obligation(
        self, ref: ImmutablePayloadRef, obligation_id: str, completion_receipt: str
    ) -> ReleaseReceipt:
        r = await super().release_obligation(ref, obligation_id, completion_receipt)
        if r.outcome == "stale-generation":
            self._reclaim(ref.key, "release")
        return r


class NeverEvicts(MemoryPayloadStore):
    """evictable tier that refuses instead of evicting."""

    def _make_room(self, size: int, replacing: StoredObject | None) -> list[str]:
        saved, self._evictable = self._evictable, False
        try:
            return super()._make_room(size, replacing)
        finally:
            self._evictable = saved


class TtlRespectsObligations(MemoryPayloadStore):
    """evictable tier whose TTL waits for obligations (the durable rule)."""

    def _fire_object(self, at: float, key: str, gen: str) -> None:
        saved, self._evictable = self._evictable, False
        try:
            super()._fire_object(at, key, gen)
        finally:
            self._evictable = saved


class UnknownAsEmpty(MemoryPayloadStore):
    """a failed listing reported as an empty store."""

    async def inventory(self) -> InventoryObservation:
        if self._inventory_failure is not None:
            return Known(())
        return await super().inventory()


class TransientAsMissing(MemoryPayloadStore):
    """a failed read reported as a missing object."""

    def fail_reads(self, reasons: list[str]) -> None:
        for key in list(self._objects):
            self._objects.pop(key)


MUTANTS: list[tuple[type[MemoryPayloadStore], tuple[str, ...]]] = [
    (MissingSetMeansFinished, ("PAY-007", "PAY-008", "PAY-021")),
    (NoGrace, ("PAY-007", "PAY-008", "PAY-018")),
    (IntentsWaitForTheOrphanGrace, ("PAY-019",)),
    (IgnoresTheIntentGrace, ("PAY-018", "PAY-024")),
    (AcquireDoesNotExtend, ("PAY-006", "PAY-017")),
    (NoVerify, ("PAY-012",)),
    (StaleReleaseDeletes, ("PAY-005",)),
    (NeverEvicts, ("PAY-010",)),
    (TtlRespectsObligations, ("PAY-009",)),
    (UnknownAsEmpty, ("PAY-014",)),
    (TransientAsMissing, ("PAY-013",)),
]


@pytest.mark.parametrize(("mutant", "case_ids"), MUTANTS, ids=[m.__name__ for m, _ in MUTANTS])
def test_cases_catch_the_broken_rule(
    mutant: type[MemoryPayloadStore], case_ids: tuple[str, ...]
) -> None:
    by_id = {c.id: c for c in PAY_CASES}
    provider = BrokenProvider(mutant)
    for case_id in case_ids:
        result = run_case(by_id[case_id], provider, "asyncio")
        assert result.outcome == "fail", f"{case_id} did not catch {mutant.__name__}"
