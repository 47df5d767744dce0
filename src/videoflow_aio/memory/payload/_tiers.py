"""The two tiers, told apart because the design insists they differ: what an obligation
protects, and what memory pressure does."""

from __future__ import annotations

from ._space import Objects
from ._state import OBJECT, ObligationSet, StoredObject


class DurableObjects(Objects):
    """``tier='durable'``: an object under obligation is never expired or evicted.

    Acquiring an obligation extends the object's life to the obligation's deadline, so its
    TTL never fires while the set holds it; a put over budget is refused
    (:class:`~videoflow_aio.contracts.payload.PayloadBackpressure`), never admitted by
    eviction (backpressure)."""

    tier = "durable"
    evictable = False

    def touch(self, key: str) -> None:
        pass  # no eviction, so no recency order

    # an obligation extends the object's life to the obligation's deadline
    _extend_life = Objects.extend_ttl

    def _outlives_ttl(self, obj: StoredObject, oset: ObligationSet) -> bool:
        # cannot happen while obligations extend life; kept as the rule's guard
        obj.expires_at = max(oset.deadlines.values())
        self.timers.push(obj.expires_at, OBJECT, obj.key, obj.generation)
        return True

    def _victims(self, size: int, replacing: StoredObject | None, over: int) -> list[str] | None:
        return None


class EvictableObjects(Objects):
    """``tier='evictable'``: the Redis ``volatile-lru`` shape.

    Every object's TTL fires regardless of obligations; under memory pressure the
    least-recently-used TTL-bearing object is evicted even if a reader still needs it (its
    obligation set is left dangling, and the ``evict`` event names the obligations it still
    had). That is the finding the reliable profile must reject; this model makes it
    observable."""

    tier = "evictable"
    evictable = True

    def touch(self, key: str) -> None:
        lru = self.lru
        lru.pop(key, None)
        lru[key] = None

    def _extend_life(self, obj: StoredObject, deadline: float) -> None:
        pass  # obligations do not protect the object

    def _outlives_ttl(self, obj: StoredObject, oset: ObligationSet) -> bool:
        return False

    def _victims(self, size: int, replacing: StoredObject | None, over: int) -> list[str] | None:
        """The least recently used TTL-bearing objects (volatile-lru), never the one being
        replaced; None when they cannot free enough (or ``size`` alone is over budget)."""
        assert self.max_bytes is not None
        if size > self.max_bytes:
            return None
        victims: list[str] = []
        for key in self.lru:
            obj = self.objects[key]
            if obj is replacing or obj.expires_at is None:
                continue  # volatile-lru: only TTL-bearing keys are candidates
            victims.append(key)
            over -= len(obj.data)
            if over <= 0:
                return victims
        return None
