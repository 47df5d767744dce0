"""``MemoryPayloadStore``: the payload contract over the objects of one tier."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

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
    TIERS,
    Corrupt,
    DurableReceipt,
    ImmutablePayloadRef,
    InventoryObservation,
    Missing,
    ObligationLedger,
    PayloadBytes,
    PayloadCapabilities,
    PayloadReadResult,
    PayloadStore,
    ReclamationObservation,
    ReleaseReceipt,
    RetentionContract,
    Tier,
    TransientFailure,
    payload_digest,
    validate_deadline,
    validate_grace,
    validate_id,
    validate_put,
    validate_ref,
)
from ...observe import ObservationLog
from ...vtime import VirtualClock
from ._controls import PayloadControls
from ._reconcile import Reconciliation
from ._space import Objects
from ._state import StoredObject
from ._tiers import DurableObjects, EvictableObjects

WRITE_AFTER = "payload.write.after"
"""The barrier a put reaches once its bytes are stored, before any obligation is attached."""
ACQUIRE_AFTER = "obligation.acquire.after"
"""The barrier a put reaches once the contract's obligations are attached."""


class MemoryPayloadStore(PayloadControls, PayloadStore):
    """The reference PayloadStore (the package docstring says what it models).

    ``tier``: ``'durable'`` or ``'evictable'``. ``max_bytes``: byte budget (None: unlimited).
    ``forward_unchanged``: a put of bytes whose content_id and digest already exist returns
    the existing ref (reference forwarding), attaching the contract's obligations to it.
    ``orphan_grace_seconds``: how long ``reconcile`` leaves an object with no obligation set
    alone, so a put interrupted before attaching obligations is not mistaken for a leak.
    ``intent_grace_seconds``: how old an object must be before ``reconcile`` cancels the
    ``intent/*`` obligations of a key its ledger does not list; 0 (the seed's rule) cancels them
    at once, whatever the age.

    The objects and their physics live in ``_space``, an instance of the tier's class in
    :attr:`TIERS`; this class is the contract over them: arguments checked, timers applied
    at the start of every call, events recorded. Each call is atomic: it yields only at the
    two barriers in ``put``.
    """

    TIERS: ClassVar[Mapping[str, type[Objects]]] = {
        "durable": DurableObjects,
        "evictable": EvictableObjects,
    }
    """The physics each tier name selects."""

    def __init__(
        self,
        clock: VirtualClock | None = None,
        tier: Tier = "durable",
        max_bytes: int | None = None,
        forward_unchanged: bool = True,
        log: ObservationLog | None = None,
        store_id: str = "memory",
        orphan_grace_seconds: float = 60.0,
        intent_grace_seconds: float = 0.0,
    ) -> None:
        if tier not in TIERS:
            raise ValidationError(f"tier must be one of {TIERS}", field="tier", value=tier)
        if max_bytes is not None and (
            isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0
        ):
            raise ValidationError(
                "max_bytes must be a non-negative int or None", field="max_bytes", value=max_bytes
            )
        validate_id(store_id, "store_id")
        grace = validate_grace(orphan_grace_seconds, "orphan_grace_seconds")
        intent_grace = validate_grace(intent_grace_seconds, "intent_grace_seconds")
        self._space: Objects = self.TIERS[tier](clock, max_bytes, log, store_id)
        self._forward = bool(forward_unchanged)
        self._log = log
        self._store = store_id
        self._grace = grace
        self._intent_grace = intent_grace
        self._read_failures: list[str] = []
        self._inventory_failure: str | None = None
        self._memo: tuple[bytes, str] | None = None

    def _digest(self, data: bytes) -> str:
        """The digest of ``data``, remembered for the next put of the same bytes object."""
        digest = payload_digest(data)
        self._memo = (data, digest)
        return digest

    # -- put -------------------------------------------------------------------------------
    async def put(
        self, data: bytes, content_id: str, contract: RetentionContract
    ) -> ImmutablePayloadRef:
        space = self._space
        now = space.advance()
        validate_put(data, content_id, contract)
        if contract.required_tier is not None and contract.required_tier != space.tier:
            raise Unsupported(
                f"contract requires tier {contract.required_tier!r}; store {self._store!r} is "
                f"{space.tier!r}",
                capability=f"tier:{contract.required_tier}",
            )
        key = content_id
        memo = self._memo
        # the same immutable bytes object as the last put: its digest is known
        digest = memo[1] if memo is not None and memo[0] is data else self._digest(data)
        existing = space.objects.get(key)
        if existing is not None:
            if self._forward and _unchanged(existing, digest):
                return await self._forward_put(existing, contract, now)
            self._check_replaceable(existing)
        obj = space.admit(key, data, digest, digest, now, now + contract.ttl_seconds, existing)
        gen = obj.generation
        if self._log is not None:
            self._log.record(
                "put",
                subject=key,
                ident=gen,
                generation=gen,
                size=obj.size,
                forwarded=False,
                replaced=existing.generation if existing is not None else None,
            )
        ref = ImmutablePayloadRef(key, obj.size, digest, gen, self._store)
        barriers = faults.barriers()
        if barriers.armed(WRITE_AFTER) or barriers.armed(ACQUIRE_AFTER):
            await self._attach_contract(obj, contract, now)
        elif contract.obligations:  # every put of a pipeline: no coroutine for the barriers
            self._attach(obj, contract.obligations, now + contract.obligation_seconds)
        return ref

    def _check_replaceable(self, existing: StoredObject) -> None:
        """A put may not replace a generation that still has obligations."""
        oset = self._space.set_of(existing)
        if oset is not None:
            raise ConflictError(
                f"key {existing.key!r} holds generation {existing.generation!r} which still "
                f"has obligations {sorted(oset.deadlines)}",
                resource=existing.key,
                expected=None,
                actual=existing.generation,
            )

    async def _forward_put(
        self, obj: StoredObject, contract: RetentionContract, now: float
    ) -> ImmutablePayloadRef:
        """The same bytes again: extend the TTL, attach the contract's obligations, return
        the existing ref (reference forwarding)."""
        space = self._space
        key, gen = obj.key, obj.generation
        space.extend_ttl(obj, now + contract.ttl_seconds)
        space.touch(key)
        if self._log is not None:
            self._log.record(
                "put", subject=key, ident=gen, generation=gen, size=obj.size, forwarded=True
            )
        ref = space.ref(obj)
        await self._attach_contract(obj, contract, now)
        return ref

    async def _attach_contract(
        self, obj: StoredObject, contract: RetentionContract, now: float
    ) -> None:
        """Attach the contract's obligations to ``obj``, the generation a put just stored,
        between the barriers ``payload.write.after`` (bytes stored, no obligation yet) and
        ``obligation.acquire.after``: a crash between them leaves a TTL-only object (PAY-007).
        A barrier that is not armed is not reached at all (reaching it would do nothing), so
        an unarmed put runs to the end without yielding."""
        barriers = faults.barriers()
        if barriers.armed(WRITE_AFTER):
            await faults.reach(WRITE_AFTER, key=obj.key, generation=obj.generation)
            if contract.obligations:
                # the put yielded: time may have passed and other calls may have run
                now = self._space.advance()
                self._check_still_there(obj.key, obj.generation)
        if contract.obligations:
            self._attach(obj, contract.obligations, now + contract.obligation_seconds)
        if barriers.armed(ACQUIRE_AFTER):
            await faults.reach(ACQUIRE_AFTER, key=obj.key, generation=obj.generation)

    def _attach(self, obj: StoredObject, obligations: tuple[str, ...], deadline: float) -> None:
        """Attach each of ``obligations`` to ``obj`` until ``deadline`` (a put's contract)."""
        space = self._space
        log = self._log
        for oid in obligations:
            effective = space.attach(obj, oid, deadline)
            if log is not None:
                log.record(
                    "acquire",
                    subject=obj.key,
                    ident=oid,
                    generation=obj.generation,
                    deadline=effective,
                    via="put",
                )

    def _check_still_there(self, key: str, gen: str) -> None:
        """ConflictError when generation ``gen`` left ``key`` while a put was between its
        barriers (evicted, reclaimed, deleted, replaced): the ref would name bytes nobody
        protects, so the put fails."""
        obj = self._space.objects.get(key)
        if obj is not None and obj.generation == gen:
            return
        if self._log is not None:
            self._log.record("put.unattached", subject=key, ident=gen, generation=gen)
        raise ConflictError(
            f"key {key!r} changed before the put's obligations were attached "
            f"(generation {gen!r} is gone; retry the put)",
            resource=key,
            expected=gen,
            actual=obj.generation if obj is not None else "",
        )

    # -- read ------------------------------------------------------------------------------
    async def read(self, ref: ImmutablePayloadRef, reader: str | None = None) -> PayloadReadResult:
        space = self._space
        space.advance()
        validate_ref(ref, self._store)
        if reader is not None and (type(reader) is not str or not reader):
            validate_id(reader, "reader")
        key = ref.key
        result: PayloadReadResult
        if self._read_failures:
            result = TransientFailure(key, self._read_failures.pop(0))
        else:
            obj = space.objects.get(key)
            if obj is None:
                result = Missing(key, ref.generation, space.gone.get(key))
            elif ref.generation and obj.generation != ref.generation:
                result = Missing(key, ref.generation, f"replaced by generation {obj.generation}")
            else:
                space.touch(key)
                result = self._verify(ref, obj)
        if self._log is not None:
            self._log.record(
                "read",
                subject=key,
                ident=reader or "",
                generation=ref.generation,
                outcome=type(result).__name__,
            )
        return result

    def _verify(self, ref: ImmutablePayloadRef, obj: StoredObject) -> PayloadReadResult:
        """The bytes, checked against the ref's size and digest (an unverifiable ref, with
        no digest, gets them unchecked)."""
        data = obj.data
        if not ref.digest:
            return PayloadBytes(ref, data, False)
        actual = len(data)
        if actual != ref.size:
            why = f"size mismatch: expected {ref.size} bytes, found {actual}"
        elif obj.actual_digest != ref.digest:
            why = "digest mismatch"
        else:
            return PayloadBytes(ref, data, True)
        return Corrupt(
            ref.key, ref.generation, why, ref.size, actual, ref.digest, obj.actual_digest
        )

    # -- obligations -----------------------------------------------------------------------
    def _check_obligation_args(self, ref: Any, obligation_id: Any, deadline: Any) -> float:
        now = self._space.advance()
        validate_ref(ref, self._store)
        if type(obligation_id) is not str or not obligation_id:
            validate_id(obligation_id, "obligation_id")
        validate_deadline(deadline, now)
        if not ref.generation:
            raise ValidationError(
                "an unverifiable ref (no generation) cannot hold an obligation",
                field="ref.generation",
                value=ref.generation,
            )
        return now

    async def acquire_obligation(
        self, ref: ImmutablePayloadRef, obligation_id: str, deadline: float
    ) -> DurableReceipt:
        self._check_obligation_args(ref, obligation_id, deadline)
        return self._hold("acquire", self._space.obj_for(ref), obligation_id, float(deadline))

    async def renew_obligation(
        self, ref: ImmutablePayloadRef, obligation_id: str, deadline: float
    ) -> DurableReceipt:
        self._check_obligation_args(ref, obligation_id, deadline)
        obj = self._space.obj_for(ref)
        oset = self._space.set_of(obj)
        if oset is None or obligation_id not in oset.deadlines:
            raise NotFound(
                f"no obligation {obligation_id!r} on {ref.key!r}@{obj.generation} "
                "(expired or released)",
                kind="obligation",
                name=obligation_id,
            )
        return self._hold("renew", obj, obligation_id, float(deadline))

    def _hold(self, event: str, obj: StoredObject, oid: str, deadline: float) -> DurableReceipt:
        """Attach or extend ``oid`` on ``obj``, record ``event``, and say what now holds."""
        space = self._space
        effective = space.attach(obj, oid, deadline)
        if self._log is not None:
            self._log.record(
                event, subject=obj.key, ident=oid, generation=obj.generation, deadline=effective
            )
        return DurableReceipt(
            obj.key, obj.generation, oid, effective, obj.expires_at, not space.evictable
        )

    async def release_obligation(
        self, ref: ImmutablePayloadRef, obligation_id: str, completion_receipt: str
    ) -> ReleaseReceipt:
        space = self._space
        space.advance()
        validate_ref(ref, self._store)
        if type(obligation_id) is not str or not obligation_id:
            validate_id(obligation_id, "obligation_id")
        if type(completion_receipt) is not str or not completion_receipt:
            validate_id(completion_receipt, "completion_receipt")
        outcome, remaining = space.release(ref, obligation_id)
        if self._log is not None:
            self._log.record(
                "release",
                subject=ref.key,
                ident=obligation_id,
                generation=ref.generation,
                outcome=outcome,
                receipt=completion_receipt,
            )
        if outcome == "reclaimed":
            space.reclaim(ref.key, "release")
        return ReleaseReceipt(
            ref.key, ref.generation, obligation_id, completion_receipt, outcome, remaining
        )

    # -- reconcile and listing -------------------------------------------------------------
    async def reconcile(
        self, ledger: ObligationLedger, operation_id: str
    ) -> ReclamationObservation:
        now = self._space.advance()
        validate_id(operation_id, "operation_id")
        if not isinstance(ledger, ObligationLedger):
            raise ValidationError(
                "ledger must be an ObligationLedger", field="ledger", value=type(ledger).__name__
            )
        required = ledger.required_obligations()
        if not isinstance(required, Mapping):
            raise ValidationError(
                "required_obligations() must return a mapping", field="ledger", value=required
            )
        if self._inventory_failure is not None:
            raise BackendUnavailable(
                f"cannot list payload store: {self._inventory_failure}", backend=self._store
            )
        return Reconciliation(
            self._space, required, self._grace, self._intent_grace, operation_id, now
        ).run()

    async def inventory(self) -> InventoryObservation:
        space = self._space
        space.advance()
        if self._inventory_failure is not None:
            return Unknown(self._inventory_failure)
        return Known(tuple(space.ref(space.objects[k]) for k in sorted(space.objects)))

    async def ref_for_key(self, key: str) -> ImmutablePayloadRef:
        space = self._space
        space.advance()
        validate_id(key, "key")
        obj = space.objects.get(key)
        if obj is None:
            return ImmutablePayloadRef(key, 0, "", "", self._store)
        return space.ref(obj)

    async def capabilities(self) -> PayloadCapabilities:
        space = self._space
        return PayloadCapabilities(
            store=self._store,
            tier=space.tier,
            evicts_under_pressure=space.evictable,
            ttl_ignores_obligations=space.evictable,
            max_bytes=space.max_bytes,
            forward_unchanged=self._forward,
            orphan_grace_seconds=self._grace,
            intent_grace_seconds=self._intent_grace,
        )


def _unchanged(existing: StoredObject, digest: str) -> bool:
    """Whether ``existing`` holds exactly the bytes of ``digest``, intact and verifiable."""
    return not existing.bare and existing.digest == digest and existing.actual_digest == digest


__all__ = ["ACQUIRE_AFTER", "WRITE_AFTER", "MemoryPayloadStore"]
