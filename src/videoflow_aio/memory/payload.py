"""The in-memory PayloadStore: objects with digests and generations, named obligations
instead of a counter, TTL and byte-budget physics on virtual time.

Two tiers are modelled because the design insists they be told apart:

* ``tier='durable'``: an object under obligation is never expired or evicted; acquiring an
  obligation extends the object's life to the obligation deadline; a put over budget is
  refused (:class:`PayloadBackpressure`) rather than admitted by eviction.
* ``tier='evictable'``: the Redis ``volatile-lru`` shape — every object has a TTL that fires
  regardless of obligations, and under memory pressure the least-recently-used TTL-bearing
  object is evicted even if a reader still needs it (its obligation set is left dangling).
  That is the finding the reliable profile must reject; this model makes it observable
  (``evict`` events carry the obligations the object still had).

Release is atomic and idempotent by ``(obligation_id, generation)``; a stale generation
cannot delete a newer object at the same key. An object whose obligation set is absent — a
put that died before attaching it, or a set that expired — is never reclaimed by a release
(BLOB-14 step 2); ``reconcile`` reclaims such an orphan only once it is older than
``orphan_grace_seconds``.

Barriers, in ``put``: ``payload.write.after`` fires once the bytes are stored and before any
obligation is attached; ``obligation.acquire.after`` once the contract's obligations are
attached. A crash between them leaves exactly the counterless, TTL-only object (PAY-007).

Time: TTLs and obligation deadlines are timers on the clock (``clock.monotonic()`` when a
clock is given, else the running loop's ``anyio.current_time()``). They are applied at the
start of every call and control, in due order, and their events are stamped with the time
they were due — so a store left alone while tasks sleep behaves as if the timers had fired
on time. Each call is atomic: it yields only at the two barriers in ``put``.
"""

from __future__ import annotations

from asyncio import _get_running_loop as _running_loop
from collections.abc import Mapping
from typing import Any

import anyio
from trio import current_time as _trio_time

from .. import faults
from ..contracts._base import Known, Unknown
from ..contracts.errors import (
    BackendUnavailable,
    ConflictError,
    NotFound,
    Unsupported,
    ValidationError,
)
from ..contracts.payload import (
    INTENT_PREFIX,
    TIERS,
    Corrupt,
    DurableReceipt,
    ImmutablePayloadRef,
    InventoryObservation,
    Missing,
    ObligationLedger,
    PayloadBackpressure,
    PayloadBytes,
    PayloadCapabilities,
    PayloadReadResult,
    PayloadStore,
    ReclamationObservation,
    ReleaseOutcome,
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
from ..observe import ObservationLog
from ..vtime import VirtualClock
from ._payload_state import OBJECT, OBLIGATION, ObligationSet, RecentReasons, StoredObject, Timers


class StaticLedger(ObligationLedger):
    """A ledger built from a mapping, for tests and simple runtimes."""

    def __init__(self, required: Mapping[str, tuple[str, ...]]) -> None:
        if not isinstance(required, Mapping):
            raise ValidationError("required must be a mapping", field="required", value=required)
        checked: dict[str, tuple[str, ...]] = {}
        for key, ids in required.items():
            validate_id(key, "required key")
            if not isinstance(ids, tuple) or not all(isinstance(i, str) and i for i in ids):
                raise ValidationError(
                    "required values must be tuples of non-empty strings",
                    field=f"required[{key!r}]",
                    value=ids,
                )
            checked[key] = ids
        self._required = checked

    def required_obligations(self) -> Mapping[str, tuple[str, ...]]:
        """ref key -> obligation ids still required."""
        return self._required


class MemoryPayloadStore(PayloadStore):
    """The reference PayloadStore (see the module docstring for the physics it models).

    ``tier``: ``'durable'`` or ``'evictable'``. ``max_bytes``: byte budget (None: unlimited).
    ``forward_unchanged``: a put of bytes whose content_id and digest already exist returns
    the existing ref (reference forwarding), attaching the contract's obligations to it.
    ``orphan_grace_seconds``: how long ``reconcile`` leaves an object with no obligation set
    alone, so a put interrupted before attaching obligations is not mistaken for a leak.
    ``intent_grace_seconds``: how old an object must be before ``reconcile`` cancels the
    ``intent/*`` obligations of a key its ledger does not list; 0 (the seed's rule) cancels them
    at once, whatever the age.
    """

    def __init__(
        self,
        clock: VirtualClock | None = None,
        tier: str = "durable",
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
        if (
            isinstance(orphan_grace_seconds, bool)
            or not isinstance(orphan_grace_seconds, int | float)
            or not orphan_grace_seconds >= 0
            or orphan_grace_seconds == float("inf")
        ):
            raise ValidationError(
                "orphan_grace_seconds must be finite and non-negative",
                field="orphan_grace_seconds",
                value=orphan_grace_seconds,
            )
        self._clock = clock
        self._tier: Tier = "durable" if tier == "durable" else "evictable"
        self._evictable = self._tier == "evictable"
        self._max_bytes = max_bytes
        self._forward = bool(forward_unchanged)
        self._log = log
        self._store = store_id
        self._grace = float(orphan_grace_seconds)
        self._intent_grace = validate_grace(intent_grace_seconds, "intent_grace_seconds")
        self._objects: dict[str, StoredObject] = {}
        self._sets: dict[str, ObligationSet] = {}
        self._lru: dict[str, None] = {}  # evictable tier: least recently used first
        self._used = 0
        self._generation = 0
        self._timers = Timers()
        self._gone = RecentReasons()
        self._read_failures: list[str] = []
        self._inventory_failure: str | None = None
        self._memo: tuple[bytes, str] | None = None

    # -- time and timers -------------------------------------------------------------------
    def _now(self) -> float:
        if self._clock is not None:
            return self._clock.monotonic()
        loop = _running_loop()
        if loop is not None:
            return loop.time()  # what anyio.current_time() returns on asyncio, cheaper
        try:
            return _trio_time()  # what it returns on trio
        except RuntimeError:  # not in trio either: let anyio say what is running
            return anyio.current_time()

    def _advance(self) -> float:
        """Apply every timer due by now, in due order; return now."""
        if self._clock is None and (loop := _running_loop()) is not None:
            now = loop.time()  # _now() inlined: this runs at the start of every call
        else:
            now = self._now()
        timers = self._timers
        heap = timers.heap
        if not heap or heap[0][0] > now:
            if len(heap) > timers.compact_at:
                self._compact_timers()
            return now
        due: float | None = heap[0][0]
        while due is not None and due <= now:
            at, kind, _seq, key, gen, oid = timers.pop()
            if kind == OBLIGATION:
                self._fire_obligation(at, key, gen, oid)
            else:
                self._fire_object(at, key, gen)
            due = timers.next_due()
        if timers.needs_compaction():
            self._compact_timers()
        return now

    def _fire_obligation(self, at: float, key: str, gen: str, oid: str) -> None:
        oset = self._sets.get(key)
        if oset is None or oset.generation != gen or oset.deadlines.get(oid) != at:
            return  # released, renewed or replaced since: a stale timer
        del oset.deadlines[oid]
        if not oset.deadlines:
            del self._sets[key]  # an emptied set no longer exists
        if self._log is not None:
            self._log.record(
                "expire", subject=key, ident=oid, at=at, what="obligation", generation=gen
            )

    def _fire_object(self, at: float, key: str, gen: str) -> None:
        obj = self._objects.get(key)
        if obj is None or obj.generation != gen or obj.expires_at != at:
            return
        oset = self._sets.get(key)
        held = oset is not None and oset.generation == gen
        if held and not self._evictable:
            # durable: never expire under obligation (cannot happen: obligations extend life)
            assert oset is not None
            obj.expires_at = max(oset.deadlines.values())
            self._timers.push(obj.expires_at, OBJECT, key, gen)
            return
        self._remove(key, "expired")
        if self._log is not None:
            self._log.record(
                "expire",
                subject=key,
                ident=gen,
                at=at,
                what="object",
                generation=gen,
                obligations=sorted(oset.deadlines) if held and oset is not None else [],
            )

    def _compact_timers(self) -> None:
        live: list[tuple[float, int, str, str, str]] = []
        for key, obj in self._objects.items():
            if obj.expires_at is not None:
                live.append((obj.expires_at, OBJECT, key, obj.generation, ""))
        for key, oset in self._sets.items():
            for oid, deadline in oset.deadlines.items():
                live.append((deadline, OBLIGATION, key, oset.generation, oid))
        self._timers.rebuild(live)

    # -- internal state changes ------------------------------------------------------------
    def _remove(self, key: str, reason: str) -> StoredObject:
        """Remove the object at ``key`` (bytes and metadata); its set is left as it is."""
        obj = self._objects.pop(key)
        self._used -= len(obj.data)
        if self._evictable:
            self._lru.pop(key, None)
        self._gone.note(key, reason)
        return obj

    def _reclaim(self, key: str, by: str, operation_id: str = "") -> None:
        obj = self._remove(key, "reclaimed")
        self._sets.pop(key, None)
        if self._log is not None:
            self._log.record(
                "reclaim",
                subject=key,
                ident=obj.generation,
                by=by,
                generation=obj.generation,
                operation_id=operation_id,
            )

    def _touch(self, key: str) -> None:
        lru = self._lru
        lru.pop(key, None)
        lru[key] = None

    def _ref(self, obj: StoredObject) -> ImmutablePayloadRef:
        if obj.bare:
            return ImmutablePayloadRef(obj.key, len(obj.data), "", "", self._store)
        return ImmutablePayloadRef(obj.key, obj.size, obj.digest, obj.generation, self._store)

    def _attach(self, obj: StoredObject, oid: str, deadline: float) -> float:
        """Add or extend ``oid`` on ``obj``'s set; return the effective deadline."""
        key = obj.key
        oset = self._sets.get(key)
        if oset is None or oset.generation != obj.generation:
            oset = ObligationSet(obj.generation)
            self._sets[key] = oset
        old = oset.deadlines.get(oid)
        if old is not None and old >= deadline:
            return old
        oset.deadlines[oid] = deadline
        self._timers.push(deadline, OBLIGATION, key, obj.generation, oid)
        if not self._evictable and obj.expires_at is not None and obj.expires_at < deadline:
            obj.expires_at = deadline
            self._timers.push(deadline, OBJECT, key, obj.generation)
        return deadline

    def _make_room(self, size: int, replacing: StoredObject | None) -> list[str]:
        """Keys to evict so ``size`` more bytes fit, or PayloadBackpressure (nothing evicted)."""
        budget = self._max_bytes
        if budget is None:
            return []
        freed = len(replacing.data) if replacing is not None else 0
        over = self._used - freed + size - budget
        if over <= 0:
            return []
        if self._evictable and size <= budget:
            victims: list[str] = []
            for key in self._lru:
                obj = self._objects[key]
                if obj is replacing or obj.expires_at is None:
                    continue  # volatile-lru: only TTL-bearing keys are candidates
                victims.append(key)
                over -= len(obj.data)
                if over <= 0:
                    return victims
        if self._log is not None:
            self._log.record("refuse", subject=self._store, used=self._used, size=size)
        raise PayloadBackpressure(
            f"payload store {self._store!r} over budget: used={self._used} put={size} "
            f"budget={budget}",
            store=self._store,
            used=self._used,
            size=size,
            budget=budget,
        )

    def _evict(self, key: str) -> None:
        obj = self._remove(key, "evicted")
        oset = self._sets.get(key)
        held = (
            sorted(oset.deadlines) if oset is not None and oset.generation == obj.generation else []
        )
        if self._log is not None:
            self._log.record(
                "evict",
                subject=key,
                ident=obj.generation,
                generation=obj.generation,
                obligations=held,
                needed=bool(held),
            )

    def _digest(self, data: bytes) -> str:
        memo = self._memo
        if memo is not None and memo[0] is data:
            return memo[1]  # the same immutable bytes object as the last put
        digest = payload_digest(data)
        self._memo = (data, digest)
        return digest

    def _obj_for(self, ref: ImmutablePayloadRef) -> StoredObject:
        """The object of ``ref``'s generation, or NotFound / ConflictError."""
        obj = self._objects.get(ref.key)
        if obj is None:
            raise NotFound(
                f"no object at key {ref.key!r} ({self._gone.get(ref.key)})",
                kind="payload",
                name=ref.key,
            )
        if obj.generation != ref.generation:
            raise ConflictError(
                f"key {ref.key!r} holds generation {obj.generation!r}, not {ref.generation!r}",
                resource=ref.key,
                expected=ref.generation,
                actual=obj.generation,
            )
        return obj

    # -- the contract ----------------------------------------------------------------------
    async def put(
        self, data: bytes, content_id: str, contract: RetentionContract
    ) -> ImmutablePayloadRef:
        now = self._advance()
        validate_put(data, content_id, contract)
        if contract.required_tier is not None and contract.required_tier != self._tier:
            raise Unsupported(
                f"contract requires tier {contract.required_tier!r}; store {self._store!r} is "
                f"{self._tier!r}",
                capability=f"tier:{contract.required_tier}",
            )
        key = content_id
        digest = self._digest(data)
        existing = self._objects.get(key)
        if (
            self._forward
            and existing is not None
            and not existing.bare
            and existing.digest == digest
            and existing.actual_digest == digest
        ):
            return await self._forward_put(existing, contract, now)
        if existing is not None:
            oset = self._sets.get(key)
            if oset is not None and oset.generation == existing.generation:
                raise ConflictError(
                    f"key {key!r} holds generation {existing.generation!r} which still has "
                    f"obligations {sorted(oset.deadlines)}",
                    resource=key,
                    expected=None,
                    actual=existing.generation,
                )
        obj = self._admit(key, data, digest, digest, now, now + contract.ttl_seconds, existing)
        gen, size = obj.generation, obj.size
        if self._log is not None:
            self._log.record(
                "put",
                subject=key,
                ident=gen,
                generation=gen,
                size=size,
                forwarded=False,
                replaced=existing.generation if existing is not None else None,
            )
        ref = ImmutablePayloadRef(key, size, digest, gen, self._store)
        await faults.reach("payload.write.after", key=key, generation=gen)
        self._attach_contract(key, gen, contract)
        await faults.reach("obligation.acquire.after", key=key, generation=gen)
        return ref

    def _admit(
        self,
        key: str,
        data: bytes,
        digest: str,
        actual_digest: str,
        now: float,
        expires: float | None,
        existing: StoredObject | None,
        bare: bool = False,
    ) -> StoredObject:
        """Store ``data`` at ``key`` as a new generation: room made first (evicting, or
        PayloadBackpressure with nothing changed), then ``existing`` replaced, any set left
        at ``key`` dropped, and the TTL timer set."""
        size = len(data)
        if self._max_bytes is not None:
            for victim in self._make_room(size, existing):
                self._evict(victim)
        if existing is not None:
            self._remove(key, "replaced")
        self._generation += 1
        gen = f"g{self._generation}"
        obj = StoredObject(key, data, size, digest, actual_digest, gen, now, expires, bare)
        self._objects[key] = obj
        self._used += size
        self._sets.pop(key, None)  # a dangling set of an older generation goes with it
        self._gone.forget(key)
        if self._evictable:
            self._lru[key] = None
        if expires is not None:
            self._timers.push(expires, OBJECT, key, gen)
        return obj

    async def _forward_put(
        self, obj: StoredObject, contract: RetentionContract, now: float
    ) -> ImmutablePayloadRef:
        key, gen = obj.key, obj.generation
        expires = now + contract.ttl_seconds
        if obj.expires_at is not None and expires > obj.expires_at:
            obj.expires_at = expires
            self._timers.push(expires, OBJECT, key, gen)
        if self._evictable:
            self._touch(key)
        if self._log is not None:
            self._log.record(
                "put", subject=key, ident=gen, generation=gen, size=obj.size, forwarded=True
            )
        ref = self._ref(obj)
        await faults.reach("payload.write.after", key=key, generation=gen)
        self._attach_contract(key, gen, contract)
        await faults.reach("obligation.acquire.after", key=key, generation=gen)
        return ref

    def _attach_contract(self, key: str, gen: str, contract: RetentionContract) -> None:
        if not contract.obligations:
            return
        now = self._advance()
        obj = self._objects.get(key)
        if obj is None or obj.generation != gen:
            # gone while the put was between its barriers (evicted, reclaimed, deleted,
            # replaced): the ref would name bytes nobody protects, so the put fails
            if self._log is not None:
                self._log.record("put.unattached", subject=key, ident=gen, generation=gen)
            raise ConflictError(
                f"key {key!r} changed before the put's obligations were attached "
                f"(generation {gen!r} is gone; retry the put)",
                resource=key,
                expected=gen,
                actual=obj.generation if obj is not None else "",
            )
        deadline = now + contract.obligation_seconds
        for oid in contract.obligations:
            effective = self._attach(obj, oid, deadline)
            if self._log is not None:
                self._log.record(
                    "acquire", subject=key, ident=oid, generation=gen, deadline=effective, via="put"
                )

    async def read(self, ref: ImmutablePayloadRef, reader: str | None = None) -> PayloadReadResult:
        self._advance()
        validate_ref(ref, self._store)
        if reader is not None:
            validate_id(reader, "reader")
        key = ref.key
        result: PayloadReadResult
        if self._read_failures:
            result = TransientFailure(key, self._read_failures.pop(0))
        else:
            obj = self._objects.get(key)
            if obj is None:
                result = Missing(key, ref.generation, self._gone.get(key))
            elif ref.generation and obj.generation != ref.generation:
                result = Missing(key, ref.generation, f"replaced by generation {obj.generation}")
            else:
                if self._evictable:
                    self._touch(key)
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
        data = obj.data
        if not ref.digest:
            return PayloadBytes(ref, data, False)
        actual = len(data)
        if actual != ref.size:
            return Corrupt(
                ref.key,
                ref.generation,
                f"size mismatch: expected {ref.size} bytes, found {actual}",
                ref.size,
                actual,
                ref.digest,
                obj.actual_digest,
            )
        if obj.actual_digest != ref.digest:
            return Corrupt(
                ref.key,
                ref.generation,
                "digest mismatch",
                ref.size,
                actual,
                ref.digest,
                obj.actual_digest,
            )
        return PayloadBytes(ref, data, True)

    def _check_obligation_args(self, ref: Any, obligation_id: Any, deadline: Any) -> float:
        now = self._advance()
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
        return self._hold("acquire", self._obj_for(ref), obligation_id, float(deadline))

    async def renew_obligation(
        self, ref: ImmutablePayloadRef, obligation_id: str, deadline: float
    ) -> DurableReceipt:
        self._check_obligation_args(ref, obligation_id, deadline)
        obj = self._obj_for(ref)
        oset = self._sets.get(ref.key)
        if oset is None or oset.generation != obj.generation or obligation_id not in oset.deadlines:
            raise NotFound(
                f"no obligation {obligation_id!r} on {ref.key!r}@{obj.generation} "
                "(expired or released)",
                kind="obligation",
                name=obligation_id,
            )
        return self._hold("renew", obj, obligation_id, float(deadline))

    def _hold(self, event: str, obj: StoredObject, oid: str, deadline: float) -> DurableReceipt:
        """Attach or extend ``oid`` on ``obj``, record ``event``, and say what now holds."""
        effective = self._attach(obj, oid, deadline)
        if self._log is not None:
            self._log.record(
                event, subject=obj.key, ident=oid, generation=obj.generation, deadline=effective
            )
        return DurableReceipt(
            obj.key, obj.generation, oid, effective, obj.expires_at, not self._evictable
        )

    async def release_obligation(
        self, ref: ImmutablePayloadRef, obligation_id: str, completion_receipt: str
    ) -> ReleaseReceipt:
        self._advance()
        validate_ref(ref, self._store)
        if type(obligation_id) is not str or not obligation_id:
            validate_id(obligation_id, "obligation_id")
        if type(completion_receipt) is not str or not completion_receipt:
            validate_id(completion_receipt, "completion_receipt")
        key = ref.key
        outcome: ReleaseOutcome
        remaining = 0
        obj = self._objects.get(key)
        if not ref.generation:
            outcome = "unverifiable"
        elif obj is None:
            outcome = "object-absent"
        elif obj.generation != ref.generation:
            outcome = "stale-generation"
        else:
            oset = self._sets.get(key)
            if oset is None or oset.generation != obj.generation:
                outcome = "no-obligation-set"  # BLOB-14 step 2: neither created nor "finished"
            elif obligation_id not in oset.deadlines:
                outcome = "already-released"
                remaining = len(oset.deadlines)
            else:
                del oset.deadlines[obligation_id]
                remaining = len(oset.deadlines)
                outcome = "released" if remaining else "reclaimed"
        if self._log is not None:
            self._log.record(
                "release",
                subject=key,
                ident=obligation_id,
                generation=ref.generation,
                outcome=outcome,
                receipt=completion_receipt,
            )
        if outcome == "reclaimed":
            self._reclaim(key, "release")
        return ReleaseReceipt(
            key, ref.generation, obligation_id, completion_receipt, outcome, remaining
        )

    async def reconcile(
        self, ledger: ObligationLedger, operation_id: str
    ) -> ReclamationObservation:
        now = self._advance()
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
        grace, intent_grace = self._grace, self._intent_grace
        cancelled: list[tuple[str, str]] = []
        reclaimed: list[str] = []
        orphans: list[str] = []
        in_grace: list[str] = []
        kept_required: list[str] = []
        sets = self._sets
        examined = 0
        for key, obj in list(self._objects.items()):
            examined += 1
            old = now - obj.created_at > grace
            oset = sets.get(key)
            listed = required.get(key)
            if oset is not None and oset.generation == obj.generation:
                deadlines = oset.deadlines
                if listed is not None:
                    drop = [oid for oid in deadlines if oid not in listed]
                elif not intent_grace or now - obj.created_at > intent_grace:
                    drop = [oid for oid in deadlines if oid.startswith(INTENT_PREFIX)]
                else:
                    continue  # younger than the intent grace: a put may still be in progress
                for oid in drop:
                    del deadlines[oid]
                    cancelled.append((key, oid))
                if drop and not deadlines:
                    self._reclaim(key, "reconcile", operation_id)
                    reclaimed.append(key)
            elif listed:
                kept_required.append(key)  # the ledger says readers still need it
            elif old:
                self._reclaim(key, "orphan", operation_id)
                orphans.append(key)
            else:
                in_grace.append(key)
        dangling = [
            k
            for k, s in sets.items()
            if k not in self._objects or self._objects[k].generation != s.generation
        ]
        for key in dangling:
            del sets[key]
        observation = ReclamationObservation(
            operation_id,
            examined,
            tuple(cancelled),
            tuple(reclaimed),
            tuple(orphans),
            tuple(in_grace),
            tuple(kept_required),
            tuple(dangling),
        )
        if self._log is not None:
            for key, oid in cancelled:
                self._log.record("cancel", subject=key, ident=oid, operation_id=operation_id)
            self._log.record(
                "reconcile",
                subject=self._store,
                ident=operation_id,
                examined=examined,
                cancelled=len(cancelled),
                reclaimed=len(reclaimed),
                orphans_reclaimed=len(orphans),
                orphans_in_grace=len(in_grace),
                dangling_sets_removed=len(dangling),
            )
        return observation

    async def inventory(self) -> InventoryObservation:
        self._advance()
        if self._inventory_failure is not None:
            return Unknown(self._inventory_failure)
        return Known(tuple(self._ref(self._objects[k]) for k in sorted(self._objects)))

    async def ref_for_key(self, key: str) -> ImmutablePayloadRef:
        self._advance()
        validate_id(key, "key")
        obj = self._objects.get(key)
        if obj is None:
            return ImmutablePayloadRef(key, 0, "", "", self._store)
        return self._ref(obj)

    async def capabilities(self) -> PayloadCapabilities:
        return PayloadCapabilities(
            store=self._store,
            tier=self._tier,
            evicts_under_pressure=self._evictable,
            ttl_ignores_obligations=self._evictable,
            max_bytes=self._max_bytes,
            forward_unchanged=self._forward,
            orphan_grace_seconds=self._grace,
            intent_grace_seconds=self._intent_grace,
        )

    # -- model controls (not part of the contract) -----------------------------------------
    def _present(self, key: str) -> StoredObject:
        self._advance()
        obj = self._objects.get(key)
        if obj is None:
            raise NotFound(f"no object at key {key!r}", kind="payload", name=key)
        return obj

    def corrupt(self, key: str) -> None:
        """Model bit rot: flip the first byte (or add one to an empty object)."""
        obj = self._present(key)
        data = obj.data
        damaged = bytes([data[0] ^ 0xFF]) + data[1:] if data else b"\x00"
        self._used += len(damaged) - len(data)
        obj.data = damaged
        obj.actual_digest = payload_digest(damaged)
        if self._log is not None:
            self._log.record("corrupt", subject=key, ident=obj.generation)

    def truncate(self, key: str, size: int) -> None:
        """Model a truncated object: the bytes are cut short, the metadata still names the
        original."""
        obj = self._present(key)
        if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size < len(obj.data):
            raise ValidationError(
                f"size must be an int in [0, {len(obj.data)})", field="size", value=size
            )
        self._used -= len(obj.data) - size
        obj.data = obj.data[:size]
        obj.actual_digest = payload_digest(obj.data)
        if self._log is not None:
            self._log.record("truncate", subject=key, ident=obj.generation, size=size)

    def delete(self, key: str) -> None:
        """Model an outside deletion of the object (bytes and metadata); an obligation set
        it had is left dangling, as a ``DEL`` of the object key leaves it on the server."""
        obj = self._present(key)
        self._remove(key, "deleted")
        if self._log is not None:
            self._log.record("delete", subject=key, ident=obj.generation)

    def expire_obligation(self, key: str, obligation_id: str) -> None:
        """Model one obligation record vanishing; an emptied set no longer exists, as on the
        server."""
        self._advance()
        oset = self._sets.get(key)
        if oset is None or obligation_id not in oset.deadlines:
            raise NotFound(
                f"no obligation {obligation_id!r} at key {key!r}",
                kind="obligation",
                name=obligation_id,
            )
        del oset.deadlines[obligation_id]
        if not oset.deadlines:
            del self._sets[key]
        if self._log is not None:
            self._log.record(
                "expire", subject=key, ident=obligation_id, what="obligation", forced=True
            )

    def expire_obligation_set(self, key: str) -> None:
        """Model the whole obligation set expiring or being evicted while the bytes remain
        (PAY-008)."""
        self._advance()
        oset = self._sets.pop(key, None)
        if oset is None:
            raise NotFound(f"no obligation set at key {key!r}", kind="obligation_set", name=key)
        if self._log is not None:
            self._log.record(
                "expire",
                subject=key,
                ident=oset.generation,
                what="obligation_set",
                forced=True,
                obligations=sorted(oset.deadlines),
            )

    def fail_inventory(self, reason: str | None) -> None:
        """Make ``inventory`` return ``Unknown(reason)`` (and ``reconcile`` raise) until
        called with None."""
        if reason is not None:
            validate_id(reason, "reason")
        self._inventory_failure = reason

    def fail_reads(self, reasons: list[str]) -> None:
        """The next ``len(reasons)`` reads return ``TransientFailure`` with these reasons."""
        if not isinstance(reasons, list | tuple):
            raise ValidationError(
                "reasons must be a list of strings", field="reasons", value=reasons
            )
        for r in reasons:
            validate_id(r, "reasons")
        self._read_failures = list(reasons)

    def object_count(self) -> int:
        """Objects present now (after applying due timers)."""
        self._advance()
        return len(self._objects)

    def obligations(self, key: str) -> dict[str, float]:
        """Obligation id -> deadline of the set at ``key`` (a dangling one too); {} if none."""
        self._advance()
        oset = self._sets.get(key)
        return dict(oset.deadlines) if oset is not None else {}

    def stored_bytes(self) -> int:
        """Bytes physically held now (after applying due timers)."""
        self._advance()
        return self._used

    def put_bare(self, key: str, data: bytes, ttl_seconds: float | None = None) -> None:
        """Model an RFC 0002 publisher: bare bytes at ``key``, no metadata, no obligation set
        (refs to it are unverifiable). Extra control, beyond the seed's list."""
        now = self._advance()
        validate_id(key, "key")
        if not isinstance(data, bytes):
            raise ValidationError("data must be bytes", field="data", value=type(data).__name__)
        if ttl_seconds is not None and (
            isinstance(ttl_seconds, bool)
            or not isinstance(ttl_seconds, int | float)
            or not 0 < ttl_seconds < float("inf")
        ):
            raise ValidationError(
                "ttl_seconds must be positive and finite", field="ttl_seconds", value=ttl_seconds
            )
        expires = None if ttl_seconds is None else now + ttl_seconds
        existing = self._objects.get(key)
        obj = self._admit(key, data, "", payload_digest(data), now, expires, existing, bare=True)
        if self._log is not None:
            self._log.record(
                "put",
                subject=key,
                ident=obj.generation,
                generation=obj.generation,
                size=len(data),
                bare=True,
                replaced=existing.generation if existing is not None else None,
            )


__all__ = ["MemoryPayloadStore", "StaticLedger"]
