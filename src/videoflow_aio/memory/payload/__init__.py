"""The in-memory PayloadStore: objects with digests and generations, named obligations
instead of a counter, TTL and byte-budget physics on virtual time.

Two tiers are modelled because the design insists they be told apart:

* ``tier='durable'``: an object under obligation is never expired or evicted; acquiring an
  obligation extends the object's life to the obligation deadline; a put over budget is
  refused (:class:`~videoflow_aio.contracts.payload.PayloadBackpressure`) rather than
  admitted by eviction.
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

Read it in this order, one job per module:

* ``store``: :class:`MemoryPayloadStore`, the contract — put, read, obligations, reconcile,
  inventory — over the objects of its tier;
* ``_controls``: the model controls (corrupt, truncate, delete, expire obligations, fail
  reads or listings, look at what is held), not part of the contract;
* ``_space``: the objects, obligation sets, byte budget and timers both tiers share;
* ``_tiers``: what the durable and the evictable tier decide differently;
* ``_reconcile``: one reconcile pass against an obligation ledger;
* ``ledger``: :class:`StaticLedger`;
* ``_state``: the records (a stored object, an obligation set), the timers and why
  recently removed keys went away.
"""

from __future__ import annotations

from .ledger import StaticLedger
from .store import MemoryPayloadStore

__all__ = ["MemoryPayloadStore", "StaticLedger"]
