"""Model controls of the payload store: damage, outside deletions, expiring obligation
records, failing reads and listings, and a look at what is held — not part of the contract.
A conformance case that uses one declares it in ``controls=``."""

from __future__ import annotations

from ...contracts import checked_control
from ...contracts.errors import NotFound, ValidationError
from ...contracts.payload import payload_digest, validate_id
from ...observe import ObservationLog
from ._space import Objects
from ._state import StoredObject


class PayloadControls:
    """The controls of :class:`~videoflow_aio.memory.payload.MemoryPayloadStore`. Each
    applies due timers first, as every call does."""

    _space: Objects
    _log: ObservationLog | None
    _read_failures: list[str]
    _inventory_failure: str | None

    def _present(self, key: str) -> StoredObject:
        space = self._space
        space.advance()
        obj = space.objects.get(key)
        if obj is None:
            raise NotFound(f"no object at key {key!r}", kind="payload", name=key)
        return obj

    # -- damage and outside actions ---------------------------------------------------------
    @checked_control
    def corrupt(self, key: str) -> None:
        """Model bit rot: flip the first byte (or add one to an empty object)."""
        obj = self._present(key)
        data = obj.data
        damaged = bytes([data[0] ^ 0xFF]) + data[1:] if data else b"\x00"
        self._space.used += len(damaged) - len(data)
        obj.data = damaged
        obj.actual_digest = payload_digest(damaged)
        if self._log is not None:
            self._log.record("corrupt", subject=key, ident=obj.generation)

    @checked_control
    def truncate(self, key: str, size: int) -> None:
        """Model a truncated object: the bytes are cut short, the metadata still names the
        original."""
        obj = self._present(key)
        if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size < len(obj.data):
            raise ValidationError(
                f"size must be an int in [0, {len(obj.data)})", field="size", value=size
            )
        self._space.used -= len(obj.data) - size
        obj.data = obj.data[:size]
        obj.actual_digest = payload_digest(obj.data)
        if self._log is not None:
            self._log.record("truncate", subject=key, ident=obj.generation, size=size)

    @checked_control
    def delete(self, key: str) -> None:
        """Model an outside deletion of the object (bytes and metadata); an obligation set
        it had is left dangling, as a ``DEL`` of the object key leaves it on the server."""
        obj = self._present(key)
        self._space.remove(key, "deleted")
        if self._log is not None:
            self._log.record("delete", subject=key, ident=obj.generation)

    @checked_control
    def expire_obligation(self, key: str, obligation_id: str) -> None:
        """Model one obligation record vanishing; an emptied set no longer exists, as on the
        server."""
        space = self._space
        space.advance()
        oset = space.sets.get(key)
        if oset is None or obligation_id not in oset.deadlines:
            raise NotFound(
                f"no obligation {obligation_id!r} at key {key!r}",
                kind="obligation",
                name=obligation_id,
            )
        del oset.deadlines[obligation_id]
        if not oset.deadlines:
            del space.sets[key]
        if self._log is not None:
            self._log.record(
                "expire", subject=key, ident=obligation_id, what="obligation", forced=True
            )

    @checked_control
    def expire_obligation_set(self, key: str) -> None:
        """Model the whole obligation set expiring or being evicted while the bytes remain
        (PAY-008)."""
        space = self._space
        space.advance()
        oset = space.sets.pop(key, None)
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

    @checked_control
    def put_bare(self, key: str, data: bytes, ttl_seconds: float | None = None) -> None:
        """Model an RFC 0002 publisher: bare bytes at ``key``, no metadata, no obligation set
        (refs to it are unverifiable). Extra control, beyond the seed's list."""
        space = self._space
        now = space.advance()
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
        existing = space.objects.get(key)
        obj = space.admit(key, data, "", payload_digest(data), now, expires, existing, bare=True)
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

    # -- failures --------------------------------------------------------------------------
    @checked_control
    def fail_inventory(self, reason: str | None) -> None:
        """Make ``inventory`` return ``Unknown(reason)`` (and ``reconcile`` raise) until
        called with None."""
        if reason is not None:
            validate_id(reason, "reason")
        self._inventory_failure = reason

    @checked_control
    def fail_reads(self, reasons: list[str]) -> None:
        """The next ``len(reasons)`` reads return ``TransientFailure`` with these reasons."""
        if not isinstance(reasons, list | tuple):
            raise ValidationError(
                "reasons must be a list of strings", field="reasons", value=reasons
            )
        for r in reasons:
            validate_id(r, "reasons")
        self._read_failures = list(reasons)

    # -- a look at what is held ------------------------------------------------------------
    def object_count(self) -> int:
        """Objects present now (after applying due timers)."""
        space = self._space
        space.advance()
        return len(space.objects)

    @checked_control
    def obligations(self, key: str) -> dict[str, float]:
        """Obligation id -> deadline of the set at ``key`` (a dangling one too); {} if none."""
        space = self._space
        space.advance()
        oset = space.sets.get(key)
        return dict(oset.deadlines) if oset is not None else {}

    def stored_bytes(self) -> int:
        """Bytes physically held now (after applying due timers)."""
        space = self._space
        space.advance()
        return space.used
