"""Records and timers behind MemoryPayloadStore (private)."""

from __future__ import annotations

import heapq
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

    __slots__ = ("_compact_at", "_heap", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, str, str, str]] = []
        self._seq = 0
        self._compact_at = 4096

    def push(
        self, due: float, kind: int, key: str, generation: str, obligation_id: str = ""
    ) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (due, kind, self._seq, key, generation, obligation_id))

    def next_due(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def pop(self) -> tuple[float, int, int, str, str, str]:
        return heapq.heappop(self._heap)

    def needs_compaction(self) -> bool:
        return len(self._heap) > self._compact_at

    def rebuild(self, live: list[tuple[float, int, str, str, str]]) -> None:
        """Replace the heap with ``live`` ``(due, kind, key, generation, obligation_id)``."""
        self._heap = []
        for due, kind, key, gen, oid in live:
            self._seq += 1
            self._heap.append((due, kind, self._seq, key, gen, oid))
        heapq.heapify(self._heap)
        self._compact_at = 2 * len(self._heap) + 4096

    def __len__(self) -> int:
        return len(self._heap)


class RecentReasons:
    """Why recently removed keys went away (expired, evicted, …), bounded to ``limit``."""

    __slots__ = ("_limit", "_reasons")

    def __init__(self, limit: int = 10_000) -> None:
        self._reasons: dict[str, str] = {}
        self._limit = limit

    def note(self, key: str, reason: str) -> None:
        self._reasons.pop(key, None)
        self._reasons[key] = reason
        if len(self._reasons) > self._limit:
            del self._reasons[next(iter(self._reasons))]

    def forget(self, key: str) -> None:
        self._reasons.pop(key, None)

    def get(self, key: str) -> str:
        return self._reasons.get(key, "absent")
