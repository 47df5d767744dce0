"""Records and timers of the payload model: one stored object, one obligation set, the
timers, and why recently removed keys went away."""

from __future__ import annotations

import heapq
import math
from collections import deque

import msgspec

# Timer kinds, in the order timers due at the same instant are processed: an obligation due
# at the same time as its object expires first, so the durable rule (never expire an object
# under obligation) holds at the boundary.
OBLIGATION = 0
OBJECT = 1


# The records are msgspec Structs (built in C: one is made per put) without GC tracking (they
# hold only strings, bytes, numbers and a dict of floats, so they cannot be part of a cycle).


class StoredObject(msgspec.Struct, gc=False):
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


class ObligationSet(msgspec.Struct, gc=False):
    """The named obligations on one generation; never empty while it exists."""

    generation: str
    deadlines: dict[str, float] = msgspec.field(default_factory=dict)


Timer = tuple[float, int, int, str, str, str]
"""``(due, kind, seq, key, generation, obligation_id)``: timers fire in this tuple's order."""


class Timers:
    """Timers ``(due, kind, seq, key, generation, obligation_id)``, popped in tuple order: by
    due time, then kind, then the order they were pushed.

    Almost every timer is pushed in due order (a put's TTL and its contract's obligation
    deadlines are ``now + a constant``), so each kind has a *lane*: a FIFO a push is appended
    to while that keeps it in order, at no cost in comparisons with older entries. A push
    that would break its lane's order (an acquire with an earlier deadline, a shorter TTL)
    goes to a heap instead. :meth:`pop` takes the smallest of the heap's top and the lanes'
    heads, so timers fire in the order one heap would give. ``next_at`` is the earliest due
    time (``inf`` when there is none): the owner checks it, one comparison, on every call.

    Entries are never removed when a deadline moves; the owner checks each popped entry
    against the current state and ignores stale ones, and :meth:`rebuild` replaces them with
    the live entries when ``size`` passes ``compact_at``, so memory stays linear in the live
    state.
    """

    __slots__ = ("_seq", "compact_at", "heap", "lanes", "next_at", "size")

    def __init__(self) -> None:
        self.heap: list[Timer] = []
        self.lanes: tuple[deque[Timer], deque[Timer]] = (deque(), deque())  # by kind
        self.next_at = math.inf
        self.size = 0
        self._seq = 0
        self.compact_at = 4096

    def push(
        self, due: float, kind: int, key: str, generation: str, obligation_id: str = ""
    ) -> None:
        self._seq += 1
        timer = (due, kind, self._seq, key, generation, obligation_id)
        lane = self.lanes[kind]
        if not lane or lane[-1][0] <= due:  # same kind, later seq: in order if due is not less
            lane.append(timer)
        else:
            heapq.heappush(self.heap, timer)
        self.size += 1
        if due < self.next_at:
            self.next_at = due

    def pop(self) -> Timer:
        """Remove and return the first timer (``next_at`` says there is one)."""
        heap = self.heap
        first = heap[0] if heap else None
        source: deque[Timer] | None = None
        for lane in self.lanes:
            if lane and (first is None or lane[0] < first):
                first, source = lane[0], lane
        timer = heapq.heappop(heap) if source is None else source.popleft()
        self.size -= 1
        self.next_at = self._earliest()
        return timer

    def _earliest(self) -> float:
        heads = [q[0][0] for q in (self.heap, *self.lanes) if q]
        return min(heads) if heads else math.inf

    def rebuild(self, live: list[tuple[float, int, str, str, str]]) -> None:
        """Replace every timer with ``live`` ``(due, kind, key, generation, obligation_id)``."""
        self.heap = []
        for due, kind, key, gen, oid in live:
            self._seq += 1
            self.heap.append((due, kind, self._seq, key, gen, oid))
        heapq.heapify(self.heap)
        for lane in self.lanes:
            lane.clear()
        self.size = len(self.heap)
        self.next_at = self._earliest()
        self.compact_at = 2 * self.size + 4096

    def __len__(self) -> int:
        return self.size


class RecentReasons:
    """Why recently removed keys went away (expired, evicted, reclaimed, …), bounded: the
    reasons of at least the last ``limit`` keys removed are kept, and at most ``2 * limit``.

    Two generations of plain dicts: a note goes into the new one; when that holds ``limit``
    keys it becomes the old one and the previous old one is dropped. A key put again is not
    forgotten: its reason is only asked for once it is absent, and removing it notes the new
    reason first.
    """

    __slots__ = ("_limit", "_new", "_old")

    def __init__(self, limit: int = 10_000) -> None:
        self._new: dict[str, str] = {}
        self._old: dict[str, str] = {}
        self._limit = limit

    def note(self, key: str, reason: str) -> None:
        new = self._new
        new[key] = reason
        if len(new) >= self._limit:
            self._old = new
            self._new = {}

    def get(self, key: str) -> str:
        reason = self._new.get(key)
        return reason if reason is not None else self._old.get(key, "absent")
