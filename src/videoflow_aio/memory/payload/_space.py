"""What a payload store physically holds: objects (one generation per key), their obligation
sets, the byte budget, and the timers that expire them — the physics both tiers share."""

from __future__ import annotations

import abc
from asyncio import _get_running_loop as _running_loop
from typing import ClassVar

import anyio
from trio import current_time as _trio_time

from ...contracts.errors import ConflictError, NotFound
from ...contracts.payload import (
    ImmutablePayloadRef,
    PayloadBackpressure,
    ReleaseOutcome,
    Tier,
)
from ...observe import ObservationLog
from ...vtime import VirtualClock
from ._state import OBJECT, OBLIGATION, ObligationSet, RecentReasons, StoredObject, Timers


class Objects(abc.ABC):
    """The objects of one store and their obligation sets.

    * An object is one **generation** of bytes at a key (``g1``, ``g2``, … never reused); a
      put at a key replaces the previous generation and any set left there.
    * An **obligation set** names who still needs one generation, each obligation with a
      deadline; it is never empty while it exists, and a set of another generation than the
      object's is *dangling*.
    * **Timers**: an object's TTL and each obligation's deadline are timer entries fired in due
      order by :meth:`advance` at the start of every call, recorded at the time they were due
      (so a store left alone while tasks sleep behaves as if they had fired on time); a timer
      whose deadline moved since is stale and skipped.
    * The **byte budget** (``max_bytes``): a put that does not fit makes room as its tier says
      (:meth:`_victims`) or is refused with :class:`PayloadBackpressure`, nothing changed.

    What differs between the tiers — whether an obligation keeps the object alive, whether
    pressure evicts, the LRU order — is in the subclasses (``_tiers``).
    """

    tier: ClassVar[Tier]
    evictable: ClassVar[bool]

    def __init__(
        self,
        clock: VirtualClock | None,
        max_bytes: int | None,
        log: ObservationLog | None,
        store_id: str,
    ) -> None:
        self.objects: dict[str, StoredObject] = {}
        self.sets: dict[str, ObligationSet] = {}
        self.lru: dict[str, None] = {}  # evictable tier: least recently used first
        self.used = 0
        self.max_bytes = max_bytes
        self.timers = Timers()
        self.gone = RecentReasons()
        self.log = log
        self.store_id = store_id
        self._clock = clock
        self._generation = 0

    # -- time and timers -------------------------------------------------------------------
    def now(self) -> float:
        if self._clock is not None:
            return self._clock.monotonic()
        loop = _running_loop()
        if loop is not None:
            return loop.time()  # what anyio.current_time() returns on asyncio, cheaper
        try:
            return _trio_time()  # what it returns on trio
        except RuntimeError:  # not in trio either: let anyio say what is running
            return anyio.current_time()

    def advance(self) -> float:
        """Apply every timer due by now, in due order; return now."""
        clock = self._clock  # now() inlined: this runs at the start of every call
        if clock is not None:
            now = clock.monotonic()
        elif (loop := _running_loop()) is not None:
            now = loop.time()
        else:
            now = self.now()
        timers = self.timers
        while timers.next_at <= now:
            at, kind, _seq, key, gen, oid = timers.pop()
            if kind == OBLIGATION:
                self._fire_obligation(at, key, gen, oid)
            else:
                self._fire_object(at, key, gen)
        if timers.size > timers.compact_at:
            self._compact_timers()
        return now

    def _fire_obligation(self, at: float, key: str, gen: str, oid: str) -> None:
        oset = self.sets.get(key)
        if oset is None or oset.generation != gen or oset.deadlines.get(oid) != at:
            return  # released, renewed or replaced since: a stale timer
        del oset.deadlines[oid]
        if not oset.deadlines:
            del self.sets[key]  # an emptied set no longer exists
        if self.log is not None:
            self.log.record(
                "expire", subject=key, ident=oid, at=at, what="obligation", generation=gen
            )

    def _fire_object(self, at: float, key: str, gen: str) -> None:
        obj = self.objects.get(key)
        if obj is None or obj.generation != gen or obj.expires_at != at:
            return  # replaced, or its life was extended since: a stale timer
        oset = self.set_of(obj)
        if oset is not None and self._outlives_ttl(obj, oset):
            return
        self.remove(key, "expired")
        if self.log is not None:
            self.log.record(
                "expire",
                subject=key,
                ident=gen,
                at=at,
                what="object",
                generation=gen,
                obligations=sorted(oset.deadlines) if oset is not None else [],
            )

    def _compact_timers(self) -> None:
        live: list[tuple[float, int, str, str, str]] = []
        for key, obj in self.objects.items():
            if obj.expires_at is not None:
                live.append((obj.expires_at, OBJECT, key, obj.generation, ""))
        for key, oset in self.sets.items():
            for oid, deadline in oset.deadlines.items():
                live.append((deadline, OBLIGATION, key, oset.generation, oid))
        self.timers.rebuild(live)

    # -- objects ---------------------------------------------------------------------------
    def admit(
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
        if self.max_bytes is not None:
            for victim in self._make_room(size, existing):
                self._evict(victim)
        if existing is not None:
            self.remove(key, "replaced")
        self._generation += 1
        gen = f"g{self._generation}"
        obj = StoredObject(key, data, size, digest, actual_digest, gen, now, expires, bare)
        self.objects[key] = obj
        self.used += size
        self.sets.pop(key, None)  # a dangling set of an older generation goes with it
        self.touch(key)
        if expires is not None:
            self.timers.push(expires, OBJECT, key, gen)
        return obj

    def remove(self, key: str, reason: str) -> StoredObject:
        """Remove the object at ``key`` (bytes and metadata); its set is left as it is."""
        obj = self.objects.pop(key)
        self.used -= len(obj.data)
        if self.lru:
            self.lru.pop(key, None)
        self.gone.note(key, reason)
        return obj

    def reclaim(self, key: str, by: str, operation_id: str = "") -> None:
        """Remove the object at ``key`` and its set: nobody needs it any more."""
        obj = self.remove(key, "reclaimed")
        self.sets.pop(key, None)
        if self.log is not None:
            self.log.record(
                "reclaim",
                subject=key,
                ident=obj.generation,
                by=by,
                generation=obj.generation,
                operation_id=operation_id,
            )

    def _evict(self, key: str) -> None:
        obj = self.remove(key, "evicted")
        oset = self.set_of(obj)
        held = sorted(oset.deadlines) if oset is not None else []
        if self.log is not None:
            self.log.record(
                "evict",
                subject=key,
                ident=obj.generation,
                generation=obj.generation,
                obligations=held,
                needed=bool(held),
            )

    def extend_ttl(self, obj: StoredObject, deadline: float) -> None:
        """Let ``obj`` live until ``deadline`` at least (an object without a TTL stays so)."""
        if obj.expires_at is not None and obj.expires_at < deadline:
            obj.expires_at = deadline
            self.timers.push(deadline, OBJECT, obj.key, obj.generation)

    def set_of(self, obj: StoredObject) -> ObligationSet | None:
        """The obligation set of ``obj``'s generation (a dangling one is not)."""
        oset = self.sets.get(obj.key)
        return oset if oset is not None and oset.generation == obj.generation else None

    def ref(self, obj: StoredObject) -> ImmutablePayloadRef:
        if obj.bare:
            return ImmutablePayloadRef(obj.key, len(obj.data), "", "", self.store_id)
        return ImmutablePayloadRef(obj.key, obj.size, obj.digest, obj.generation, self.store_id)

    def obj_for(self, ref: ImmutablePayloadRef) -> StoredObject:
        """The object of ``ref``'s generation, or NotFound / ConflictError."""
        obj = self.objects.get(ref.key)
        if obj is None:
            raise NotFound(
                f"no object at key {ref.key!r} ({self.gone.get(ref.key)})",
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

    # -- obligations -----------------------------------------------------------------------
    def attach(self, obj: StoredObject, oid: str, deadline: float) -> float:
        """Add or extend ``oid`` on ``obj``'s set; return the effective deadline (deadlines
        never move backwards)."""
        key = obj.key
        oset = self.sets.get(key)
        if oset is None or oset.generation != obj.generation:
            oset = self.sets[key] = ObligationSet(obj.generation)
        old = oset.deadlines.get(oid)
        if old is not None and old >= deadline:
            return old
        oset.deadlines[oid] = deadline
        self.timers.push(deadline, OBLIGATION, key, obj.generation, oid)
        self._extend_life(obj, deadline)
        return deadline

    def release(self, ref: ImmutablePayloadRef, oid: str) -> tuple[ReleaseOutcome, int]:
        """Release ``oid`` on ``ref``'s generation: the outcome and the obligations left.
        Idempotent by (obligation_id, generation); a stale generation changes nothing; a
        missing set is never taken for "everyone finished" (BLOB-14 step 2). On
        ``"reclaimed"`` the caller reclaims the object."""
        obj = self.objects.get(ref.key)
        if not ref.generation:
            return "unverifiable", 0
        if obj is None:
            return "object-absent", 0
        if obj.generation != ref.generation:
            return "stale-generation", 0
        oset = self.sets.get(ref.key)
        if oset is None or oset.generation != obj.generation:
            return "no-obligation-set", 0  # neither created nor "finished"
        deadlines = oset.deadlines
        if oid not in deadlines:
            return "already-released", len(deadlines)
        del deadlines[oid]
        return ("released" if deadlines else "reclaimed"), len(deadlines)

    # -- the byte budget -------------------------------------------------------------------
    def _make_room(self, size: int, replacing: StoredObject | None) -> list[str]:
        """Keys to evict so ``size`` more bytes fit, or PayloadBackpressure (nothing evicted)."""
        budget = self.max_bytes
        if budget is None:
            return []
        freed = len(replacing.data) if replacing is not None else 0
        over = self.used - freed + size - budget
        if over <= 0:
            return []
        victims = self._victims(size, replacing, over)
        if victims is not None:
            return victims
        if self.log is not None:
            self.log.record("refuse", subject=self.store_id, used=self.used, size=size)
        raise PayloadBackpressure(
            f"payload store {self.store_id!r} over budget: used={self.used} put={size} "
            f"budget={budget}",
            store=self.store_id,
            used=self.used,
            size=size,
            budget=budget,
        )

    # -- what the tier decides -------------------------------------------------------------
    @abc.abstractmethod
    def touch(self, key: str) -> None:
        """``key`` was just stored, read or forwarded."""

    @abc.abstractmethod
    def _extend_life(self, obj: StoredObject, deadline: float) -> None:
        """An obligation until ``deadline`` was attached to ``obj``."""

    @abc.abstractmethod
    def _outlives_ttl(self, obj: StoredObject, oset: ObligationSet) -> bool:
        """``obj``'s TTL is due while ``oset`` holds it: True when it stays."""

    @abc.abstractmethod
    def _victims(self, size: int, replacing: StoredObject | None, over: int) -> list[str] | None:
        """Keys whose eviction frees ``over`` bytes for a put of ``size``; None: refuse."""
