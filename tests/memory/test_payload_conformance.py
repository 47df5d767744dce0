"""The PAY conformance cases have teeth: a model with one rule broken fails the cases that
check it (the faithful model passes them all, under asyncio and trio, in
tests/conformance/test_conformance.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any, ClassVar

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
from videoflow_aio.memory.payload import MemoryPayloadStore
from videoflow_aio.memory.payload._space import Objects
from videoflow_aio.memory.payload._state import ObligationSet, StoredObject
from videoflow_aio.memory.payload._tiers import DurableObjects, EvictableObjects
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
            self._space.reclaim(ref.key, "release")
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


class DurableWithoutExtension(DurableObjects):
    """an obligation does not keep the object past its TTL, and no guard at expiry either"""

    def _extend_life(self, obj: StoredObject, deadline: float) -> None:
        pass

    def _outlives_ttl(self, obj: StoredObject, oset: ObligationSet) -> bool:
        return False


class AcquireDoesNotExtend(MemoryPayloadStore):
    """durable tier bug: an obligation does not keep the object past its TTL."""

    TIERS: ClassVar[Mapping[str, type[Objects]]] = {
        **MemoryPayloadStore.TIERS,
        "durable": DurableWithoutExtension,
    }


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
            self._space.reclaim(ref.key, "release")
        return r


class RefusingEvictable(EvictableObjects):
    """refuses over budget instead of evicting"""

    def _victims(self, size: int, replacing: StoredObject | None, over: int) -> list[str] | None:
        return None


class NeverEvicts(MemoryPayloadStore):
    """evictable tier that refuses instead of evicting."""

    TIERS: ClassVar[Mapping[str, type[Objects]]] = {
        **MemoryPayloadStore.TIERS,
        "evictable": RefusingEvictable,
    }


class PatientEvictable(EvictableObjects):
    """its TTL waits for obligations, as the durable tier's does"""

    def _outlives_ttl(self, obj: StoredObject, oset: ObligationSet) -> bool:
        self.extend_ttl(obj, max(oset.deadlines.values()))
        return True


class TtlRespectsObligations(MemoryPayloadStore):
    """evictable tier whose TTL waits for obligations (the durable rule)."""

    TIERS: ClassVar[Mapping[str, type[Objects]]] = {
        **MemoryPayloadStore.TIERS,
        "evictable": PatientEvictable,
    }


class UnknownAsEmpty(MemoryPayloadStore):
    """a failed listing reported as an empty store."""

    async def inventory(self) -> InventoryObservation:
        if self._inventory_failure is not None:
            return Known(())
        return await super().inventory()


class TransientAsMissing(MemoryPayloadStore):
    """a failed read reported as a missing object."""

    def fail_reads(self, reasons: list[str]) -> None:
        for key in list(self._space.objects):
            self._space.objects.pop(key)


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
