"""The PayloadStore contract: frame bytes kept alive by named obligations, not a counter.

A producer ``put``s bytes under a :class:`RetentionContract` and gets an
:class:`ImmutablePayloadRef` (key, size, digest, generation, store). Readers name the ref in
messages, ``acquire_obligation`` while they need the bytes, ``read`` them (verified against
digest and size), and ``release_obligation`` when done. When the last obligation of an
object's set is released the object is reclaimed. ``reconcile`` repairs what crashed
readers and publishers leave behind, against an :class:`ObligationLedger`.

Rules every store follows (the conformance cases PAY-… check them):

* **Keys.** The key of a put is its ``content_id``. A put whose key holds an intact object
  with the same digest returns the existing ref when the store forwards unchanged bytes
  (``capabilities().forward_unchanged``), attaching the contract's obligations to it.
  Otherwise the put writes a new *generation* at the key, replacing the old object — unless
  the old object still has obligations, in which case it raises :class:`ConflictError`
  (a put never destroys bytes a reader holds an obligation on). Generations are opaque,
  non-empty strings never reused at a key.
* **Time.** Deadlines are absolute monotonic times on the running loop's clock
  (``anyio.current_time()``); durations in a :class:`RetentionContract` are relative seconds
  from the put. Obligations vanish at their deadline; an emptied set no longer exists.
* **Tiers.** ``durable``: an object under obligation is never expired or evicted; acquiring
  or renewing extends the object's life to the obligation deadline; a put over the byte
  budget raises :class:`PayloadBackpressure` and evicts nothing. ``evictable`` (Redis
  ``volatile-lru``): the object's TTL fires regardless of obligations, and under memory
  pressure the least-recently-used TTL-bearing object is evicted even if a reader still
  holds an obligation on it (its set is left dangling).
* **Release** is atomic and idempotent by ``(obligation_id, generation)``: see
  :data:`ReleaseOutcome`. A stale generation never touches a newer object at the same key.
  A missing obligation set is never created by a release and never read as "everyone
  finished" (BLOB-14 step 2): the object is kept (``no-obligation-set``).
* **Reconcile**: for a key the ledger lists, its tuple is the whole truth and every other
  obligation is cancelled; for a key it does not list only ``intent/*`` obligations are
  cancelled — whatever the object's age, unless the store was given an
  ``intent_grace_seconds`` (then only on objects older than it). An object whose set is emptied
  by the cancellations is reclaimed. An object with no set (never attached, or expired) is
  reclaimed only once older than ``orphan_grace_seconds`` and only if the ledger does not
  list it as still required. Obligation sets whose object is gone are deleted.
* **Reads** never raise for a missing, corrupt or unreachable object: they return
  :data:`PayloadReadResult`. A ref with an empty digest is *unverifiable*: its bytes are
  returned with ``verified=False``.
* **Bad input** (non-bytes data, empty ids, a ref from another store, negative or
  non-finite deadlines and durations) raises :class:`ValidationError` before any state
  changes. The ``validate_*`` helpers below are shared by every implementation.
"""

from __future__ import annotations

import abc
import hashlib
import math
import sys
from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from .._finite import as_float
from ._base import Known, Unknown
from ._boundary import Boundary
from ._specs import NonEmptyStr, NonNegInt, PositiveFloat, check_fields, checked
from .errors import ValidationError, VideoflowError

Tier = Literal["durable", "evictable"]
"""A payload store's tier: ``durable`` (obligations keep objects alive) or ``evictable``
(TTL and LRU eviction regardless of obligations)."""
TIERS: tuple[Tier, ...] = ("durable", "evictable")
"""Every :data:`Tier`, in order."""
INTENT_PREFIX = "intent/"
"""Obligations whose id starts with this are a publisher's intent (see ``reconcile``)."""
DIGEST_ALGORITHM = "sha256"
"""The digest every store records and checks on read (``"sha256:<hex>"``)."""


def payload_digest(data: bytes | bytearray | memoryview) -> str:
    """The digest every store records for ``data``: ``"sha256:<hex>"``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


# -- Structs that cross the contract ----------------------------------------------------------


class ImmutablePayloadRef(msgspec.Struct, frozen=True):
    """A reference to one generation of one object.

    ``digest`` and ``generation`` are empty for an *unverifiable* ref (the store has no
    metadata for the key): it can be read, but not verified, and releases against nothing.
    """

    key: NonEmptyStr
    size: NonNegInt
    digest: str
    generation: str
    store: str

    @property
    def verifiable(self) -> bool:
        return bool(self.digest) and bool(self.generation)


@checked
class RetentionContract(msgspec.Struct, frozen=True):
    """What a put asks of the store.

    ``ttl_seconds``: the object's time to live from the put (in ``durable`` obligations extend
    it; in ``evictable`` it fires regardless). ``obligations``: obligation ids attached at the
    put, each with deadline ``put time + obligation_seconds``. ``required_tier``: ``"durable"``
    makes a put on a store of another tier raise :class:`Unsupported` (the reliable profile
    refuses the evictable tier); None accepts any tier.
    """

    ttl_seconds: PositiveFloat = 3600.0
    obligations: tuple[NonEmptyStr, ...] = ()
    obligation_seconds: PositiveFloat = 300.0
    required_tier: Tier | None = None

    def __post_init__(self) -> None:
        check_fields(self)
        if len(set(self.obligations)) != len(self.obligations):
            raise ValidationError(
                "obligations has duplicates", field="obligations", value=self.obligations
            )


class DurableReceipt(msgspec.Struct, frozen=True):
    """An obligation recorded by ``acquire_obligation``/``renew_obligation``.

    ``deadline``: the obligation's effective deadline (deadlines never move backwards).
    ``expires_at``: when the object itself expires, as far as the store knows (None: no TTL).
    ``protects_object``: True when the obligation keeps the object alive (durable tier);
    False in the evictable tier, where TTL and eviction ignore obligations.
    """

    key: str
    generation: str
    obligation_id: str
    deadline: float
    expires_at: float | None
    protects_object: bool


ReleaseOutcome = Literal[
    "released",
    "reclaimed",
    "already-released",
    "stale-generation",
    "object-absent",
    "no-obligation-set",
    "unverifiable",
]
"""What a release did.

``released``: the obligation was removed and others remain. ``reclaimed``: it was the last,
and the object was deleted. ``already-released``: the set at this generation no longer holds
it (a repeat). ``stale-generation``: the key holds another generation; nothing changed.
``object-absent``: no object at the key. ``no-obligation-set``: the object exists but its set
does not (never attached, or expired) — the object is kept, never reclaimed by a release.
``unverifiable``: the ref has no generation; nothing was released.
"""


class ReleaseReceipt(msgspec.Struct, frozen=True):
    """The outcome of one release. ``remaining``: obligations left in the set afterwards."""

    key: str
    generation: str
    obligation_id: str
    completion_receipt: str
    outcome: ReleaseOutcome
    remaining: int

    @property
    def changed(self) -> bool:
        """True when this release changed the store."""
        return self.outcome in ("released", "reclaimed")


class ReclamationObservation(msgspec.Struct, frozen=True):
    """What one ``reconcile`` pass did.

    ``cancelled``: ``(key, obligation_id)`` pairs removed. ``reclaimed``: keys whose set was
    emptied by the cancellations, so the object was deleted. ``orphans_reclaimed``: set-less
    objects older than the grace, deleted. ``orphans_in_grace``: set-less objects left alone
    because they are younger than the grace. ``orphans_required``: set-less objects kept
    because the ledger lists obligations still required for them. ``dangling_sets_removed``:
    keys whose obligation set outlived its object and was deleted. ``examined``: objects
    looked at.
    """

    operation_id: str
    examined: int
    cancelled: tuple[tuple[str, str], ...] = ()
    reclaimed: tuple[str, ...] = ()
    orphans_reclaimed: tuple[str, ...] = ()
    orphans_in_grace: tuple[str, ...] = ()
    orphans_required: tuple[str, ...] = ()
    dangling_sets_removed: tuple[str, ...] = ()


class PayloadCapabilities(msgspec.Struct, frozen=True):
    """What a PayloadStore guarantees.

    ``tier``: ``durable`` or ``evictable``. ``evicts_under_pressure``: a put over budget evicts
    (least recently used, TTL-bearing) objects instead of being refused.
    ``ttl_ignores_obligations``: the object TTL fires even while obligations remain.
    ``max_bytes``: the byte budget (None: unlimited). ``forward_unchanged``: identical bytes
    under the same content id return the existing ref. ``orphan_grace_seconds``: how old a
    set-less object must be before ``reconcile`` reclaims it. ``shared_across_processes``:
    other processes see the same objects. ``intent_grace_seconds``: how old an object must be
    before ``reconcile`` cancels the intents of a key its ledger does not list (0: at once).
    """

    store: str
    tier: Tier
    evicts_under_pressure: bool
    ttl_ignores_obligations: bool
    max_bytes: int | None
    forward_unchanged: bool
    orphan_grace_seconds: float
    digest_algorithm: str = DIGEST_ALGORITHM
    shared_across_processes: bool = False
    intent_grace_seconds: float = 0.0

    @property
    def durable(self) -> bool:
        return self.tier == "durable"


# -- read results (tagged union) --------------------------------------------------------------


class PayloadBytes(msgspec.Struct, frozen=True, tag=True):
    """The bytes of ``ref``. ``verified``: digest and size were checked (False for an
    unverifiable ref, whose bytes are whatever the key holds)."""

    ref: ImmutablePayloadRef
    data: bytes
    verified: bool = True


class TransientFailure(msgspec.Struct, frozen=True, tag=True):
    """The store could not answer now; the object may well exist. Retry later."""

    key: str
    reason: str


class Missing(msgspec.Struct, frozen=True, tag=True):
    """The object this ref names is not in the store (never stored, expired, evicted,
    reclaimed, deleted, or replaced by another generation — ``reason`` says which when the
    store knows)."""

    key: str
    generation: str
    reason: str


class Corrupt(msgspec.Struct, frozen=True, tag=True):
    """Bytes are present but do not match the ref: wrong size (truncation) or wrong digest."""

    key: str
    generation: str
    reason: str
    expected_size: int
    actual_size: int
    expected_digest: str
    actual_digest: str


PayloadReadResult = PayloadBytes | TransientFailure | Missing | Corrupt
"""What ``read`` returns; it never raises for a missing, corrupt or unreachable object."""

InventoryObservation = Known[tuple[ImmutablePayloadRef, ...]] | Unknown
"""What ``inventory`` answers: every stored ref, or ``Unknown`` when it cannot be read."""


# -- errors -----------------------------------------------------------------------------------


class PayloadBackpressure(VideoflowError):
    """A put was refused because the store's byte budget would be exceeded; nothing stored.

    Fields: ``store``, ``used``, ``size`` (of the refused put), ``budget``.
    """

    store: str
    used: int
    size: int
    budget: int

    def __init__(self, message: str, *, store: str, used: int, size: int, budget: int) -> None:
        super().__init__(message, store=store, used=used, size=size, budget=budget)


# -- the ledger and the store -----------------------------------------------------------------


class ObligationLedger(abc.ABC):
    """The runtime's truth about who still needs which object (for ``reconcile``)."""

    @abc.abstractmethod
    def required_obligations(self) -> Mapping[str, tuple[str, ...]]:
        """ref key -> obligation ids still required."""


class PayloadStore(Boundary, abc.ABC):
    """Immutable objects with digests and generations, kept alive by named obligations."""

    @abc.abstractmethod
    async def put(
        self, data: bytes, content_id: NonEmptyStr, contract: RetentionContract
    ) -> ImmutablePayloadRef:
        """Store ``data`` at key ``content_id`` and attach ``contract.obligations``.

        Raises, with nothing stored: :class:`ValidationError` (bad input),
        :class:`Unsupported` (the contract's ``required_tier`` is not this store's),
        :class:`PayloadBackpressure` (over budget in a store that does not evict),
        :class:`ConflictError` (the key holds another object that still has obligations).
        Also raises :class:`ConflictError` when the object vanished or was replaced between
        the write and the attaching of its obligations (evicted, reclaimed by a concurrent
        last release of a forwarded object, deleted): the put did not take; retry it.
        """

    @abc.abstractmethod
    async def read(
        self, ref: ImmutablePayloadRef, reader: NonEmptyStr | None = None
    ) -> PayloadReadResult:
        """The bytes of ``ref``, verified against its digest and size; ``reader`` is recorded."""

    @abc.abstractmethod
    async def acquire_obligation(
        self, ref: ImmutablePayloadRef, obligation_id: NonEmptyStr, deadline: float
    ) -> DurableReceipt:
        """Add ``obligation_id`` to the object's set (creating the set if absent) until
        ``deadline``; an existing obligation keeps the later of the two deadlines.

        Raises :class:`NotFound` (no object at the key), :class:`ConflictError` (the key
        holds another generation), :class:`ValidationError` (bad input, an unverifiable ref,
        or a deadline not in the future).
        """

    @abc.abstractmethod
    async def renew_obligation(
        self, ref: ImmutablePayloadRef, obligation_id: NonEmptyStr, deadline: float
    ) -> DurableReceipt:
        """Move an existing obligation's deadline to ``deadline`` (never backwards).

        Raises :class:`NotFound` (no object, or no such obligation — it expired or was
        released), :class:`ConflictError` (another generation), :class:`ValidationError`.
        """

    @abc.abstractmethod
    async def release_obligation(
        self, ref: ImmutablePayloadRef, obligation_id: NonEmptyStr, completion_receipt: NonEmptyStr
    ) -> ReleaseReceipt:
        """Remove ``obligation_id`` from the set of ``ref``'s generation, reclaiming the object
        when the set empties. Atomic and idempotent; see :data:`ReleaseOutcome`.
        ``completion_receipt`` (non-empty) says what the reader completed; it is recorded.
        Raises only :class:`ValidationError` (bad input, a foreign ref)."""

    @abc.abstractmethod
    async def reconcile(
        self, ledger: ObligationLedger, operation_id: NonEmptyStr
    ) -> ReclamationObservation:
        """Cancel obligations the ledger no longer requires and reclaim what that empties,
        plus orphans past the grace (see the module docstring). ``operation_id`` labels the
        pass. Raises :class:`BackendUnavailable` when the store cannot be listed (nothing
        changed)."""

    @abc.abstractmethod
    async def inventory(self) -> InventoryObservation:
        """Every object present, as refs in key order, or ``Unknown`` when listing failed."""

    @abc.abstractmethod
    async def ref_for_key(self, key: NonEmptyStr) -> ImmutablePayloadRef:
        """The ref for a wire key, completed from the store's metadata (size, digest,
        generation as recorded at put); without metadata, an unverifiable ref (empty digest
        and generation; size of the bytes present, 0 if none)."""

    @abc.abstractmethod
    async def capabilities(self) -> PayloadCapabilities:
        """What this store guarantees."""


# -- shared validation (every implementation raises the same errors) --------------------------


def _nonempty_str(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValidationError(f"{field} must be a non-empty string", field=field, value=value)
    return value


_MAX = sys.float_info.max


def _finite_nonneg(value: Any, field: str, *, positive: bool = False) -> float:
    kind = type(value)
    if (kind is float or kind is int) and (value > 0 if positive else value >= 0) and value < _MAX:
        return float(value)  # fast path; NaN and everything else take the checks below
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(f"{field} must be a number", field=field, value=value)
    v = as_float(value)
    if not math.isfinite(v) or v < 0 or (positive and v == 0):
        need = "positive" if positive else "non-negative"
        raise ValidationError(f"{field} must be finite and {need}", field=field, value=value)
    return v


_VALID_CONTRACTS: dict[RetentionContract, None] = {}
_LAST_VALID_CONTRACT: list[RetentionContract] = [RetentionContract()]
"""The contract most recently found well-formed: a put that passes the same (frozen) object
again is not re-checked (a publisher passes one contract for every put)."""


def validate_contract(contract: Any) -> RetentionContract:
    """``contract`` as a well-formed :class:`RetentionContract`, or ValidationError."""
    if (
        type(contract) is RetentionContract
        and type(contract.ttl_seconds) is float
        and type(contract.obligation_seconds) is float
    ):
        try:
            if contract in _VALID_CONTRACTS:  # frozen and equal by value: checked before
                _LAST_VALID_CONTRACT[0] = contract
                return contract  # type: ignore[no-any-return]
        except TypeError:  # unhashable fields (a list of obligations): checked below
            pass
    _check_contract(contract)
    checked: RetentionContract = contract
    if len(_VALID_CONTRACTS) >= 256:
        _VALID_CONTRACTS.clear()
    _VALID_CONTRACTS[checked] = None
    _LAST_VALID_CONTRACT[0] = checked
    return checked


def _check_contract(contract: Any) -> None:
    if not isinstance(contract, RetentionContract):
        raise ValidationError(
            "contract must be a RetentionContract", field="contract", value=type(contract).__name__
        )
    _finite_nonneg(contract.ttl_seconds, "contract.ttl_seconds", positive=True)
    _finite_nonneg(contract.obligation_seconds, "contract.obligation_seconds", positive=True)
    if not isinstance(contract.obligations, tuple):
        raise ValidationError(
            "contract.obligations must be a tuple",
            field="contract.obligations",
            value=contract.obligations,
        )
    for oid in contract.obligations:
        _nonempty_str(oid, "contract.obligations")
    if len(set(contract.obligations)) != len(contract.obligations):
        raise ValidationError(
            "contract.obligations has duplicates",
            field="contract.obligations",
            value=contract.obligations,
        )
    if contract.required_tier is not None and contract.required_tier not in TIERS:
        raise ValidationError(
            f"contract.required_tier must be one of {TIERS} or None",
            field="contract.required_tier",
            value=contract.required_tier,
        )


def validate_put(data: Any, content_id: Any, contract: Any) -> RetentionContract:
    """Check a put's arguments (before any state changes)."""
    if (
        type(data) is bytes
        and type(content_id) is str
        and content_id
        and contract is _LAST_VALID_CONTRACT[0]
    ):
        # fast path (the same well-formed contract again): the checks below name what is wrong
        return contract  # type: ignore[no-any-return]
    if not isinstance(data, bytes):
        raise ValidationError("data must be bytes", field="data", value=type(data).__name__)
    _nonempty_str(content_id, "content_id")
    return validate_contract(contract)


def validate_ref(ref: Any, store: str) -> ImmutablePayloadRef:
    """``ref`` as a ref of ``store``, or ValidationError (wrong type, empty key, foreign)."""
    if (
        type(ref) is ImmutablePayloadRef
        and ref.store == store
        and type(ref.key) is str
        and ref.key
        and type(ref.size) is int
        and ref.size >= 0
    ):
        return ref  # fast path: the checks below name what is wrong
    if not isinstance(ref, ImmutablePayloadRef):
        raise ValidationError(
            "ref must be an ImmutablePayloadRef", field="ref", value=type(ref).__name__
        )
    _nonempty_str(ref.key, "ref.key")
    if ref.store != store:
        raise ValidationError(
            f"ref belongs to store {ref.store!r}, not {store!r}", field="ref.store", value=ref.store
        )
    if isinstance(ref.size, bool) or not isinstance(ref.size, int) or ref.size < 0:
        raise ValidationError(
            "ref.size must be a non-negative int", field="ref.size", value=ref.size
        )
    return ref


def validate_deadline(deadline: Any, now: float) -> float:
    """An absolute deadline that is finite, non-negative and later than ``now``."""
    d = _finite_nonneg(deadline, "deadline")
    if d <= now:
        raise ValidationError(
            f"deadline {d} is not in the future (now {now})", field="deadline", value=deadline
        )
    return d


def validate_grace(value: Any, field: str) -> float:
    """A grace period in seconds (``orphan_grace_seconds``, ``intent_grace_seconds``): a
    finite, non-negative number, as a float."""
    return _finite_nonneg(value, field)


def validate_id(value: Any, field: str) -> str:
    """A non-empty string identifier (obligation id, operation id, key, completion receipt)."""
    return _nonempty_str(value, field)


__all__ = [
    "DIGEST_ALGORITHM",
    "INTENT_PREFIX",
    "TIERS",
    "Corrupt",
    "DurableReceipt",
    "ImmutablePayloadRef",
    "InventoryObservation",
    "Missing",
    "ObligationLedger",
    "PayloadBackpressure",
    "PayloadBytes",
    "PayloadCapabilities",
    "PayloadReadResult",
    "PayloadStore",
    "ReclamationObservation",
    "ReleaseOutcome",
    "ReleaseReceipt",
    "RetentionContract",
    "Tier",
    "TransientFailure",
    "payload_digest",
    "validate_contract",
    "validate_deadline",
    "validate_grace",
    "validate_id",
    "validate_put",
    "validate_ref",
]
