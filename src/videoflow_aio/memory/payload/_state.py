"""Records and timers of the payload model: one stored object, one obligation set, the timer
heap, and why recently removed keys went away."""

from __future__ import annotations

import heapq
from collections import OrderedDict
from dataclasses import dataclass, field

# Timer kinds, in the order timers due at the same instant are processed: an obligation due
# at the same time as its object expires first, so the durable rule (never expire an object
# under obligation) holds at the boundary.
OBLIGATION = 0
OBJECT = 1


@dataclass(slots=True)
class StoredObject:
    """One generation of one object. ``size``/``digest`` are the metadata recorded at put;
    ``data``/``actual_digest`` are what the store physically holds (controls may damage it).
    ``bare``: stored without metadata (an RFC 0002 publisher): refs to it are unverifiable."""

    key: str
    data: bytes
    size: int
    digest: str
    actual_digest: str
    generation: str
    created_at: float
    expires_at: float | None
    bare: bool = False


@dataclass(slots=True)
class ObligationSet:
    """The named obligations on one generation; never empty while it exists."""

    generation: str
    deadlines: dict[str, float] = field(default_factory=dict)


class Timers:
    """A heap of ``(due, kind, seq, key, generation, obligation_id)``.

    Entries are never removed when a deadline moves; the owner checks each popped entry
    against the current state and ignores stale ones. ``compact`` rebuilds the heap from the
    live entries when stale ones dominate, so memory stays linear in the live state.
    """

    __slots__ = ("_seq", "compact_at", "heap")

    def __init__(self) -> None:
        self.heap: list[tuple[float, int, int, str, str, str]] = []
        self._seq = 0
        self.compact_at = 4096

    def push(
        self, due: float, kind: int, key: str, generation: str, obligation_id: str = ""
    ) -> None:
        self._seq += 1
        heapq.heappush(self.heap, (due, kind, self._seq, key, generation, obligation_id))

    def next_due(self) -> float | None:
        return self.heap[0][0] if self.heap else None

    def pop(self) -> tuple[float, int, int, str, str, str]:
        return heapq.heappop(self.heap)

    def needs_compaction(self) -> bool:
        return len(self.heap) > self.compact_at

    def rebuild(self, live: list[tuple[float, int, str, str, str]]) -> None:
        """Replace the heap with ``live`` ``(due, kind, key, generation, obligation_id)``."""
        self.heap = []
        for due, kind, key, gen, oid in live:
            self._seq += 1
            self.heap.append((due, kind, self._seq, key, gen, oid))
        heapq.heapify(self.heap)
        self.compact_at = 2 * len(self.heap) + 4096

    def __len__(self) -> int:
        return len(self.heap)


class RecentReasons:
    """Why recently removed keys went away (expired, evicted, …), bounded to ``limit``."""

    __slots__ = ("_limit", "_reasons")

    def __init__(self, limit: int = 10_000) -> None:
        # an OrderedDict: dropping the oldest is O(1) (a dict's next(iter()) is not, after
        # many deletions at its front)
        self._reasons: OrderedDict[str, str] = OrderedDict()
        self._limit = limit

    def note(self, key: str, reason: str) -> None:
        reasons = self._reasons
        reasons[key] = reason
        reasons.move_to_end(key)
        if len(reasons) > self._limit:
            reasons.popitem(last=False)

    def forget(self, key: str) -> None:
        self._reasons.pop(key, None)

    def get(self, key: str) -> str:
        return self._reasons.get(key, "absent")
