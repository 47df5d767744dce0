"""PayloadStore on Redis: objects, metadata and obligation sets as keys, each step one Lua script.

Tiers (each needs its own server configuration; checked on first use when CONFIG is allowed):

- ``durable`` on ``maxmemory-policy noeviction``: an object under obligation never expires
  (acquire/renew extend its TTL to the deadline) and is never evicted; ``max_bytes`` is an
  exact byte budget kept by the put script (Redis' own ``maxmemory`` accounting counts
  request buffers and refuses unpredictably, so it is only the physical backstop). Durable
  across a server restart only with AOF ``appendfsync always`` on a single node.
- ``evictable`` on ``volatile-lru``: TTL fires regardless of obligations; with ``max_bytes``
  the put script evicts the adapter's least-recently-used objects (puts and reads are
  accesses) to make room, obligations notwithstanding; beyond that Redis' own volatile-lru
  evicts approximately.

redis-py's client is asyncio; under trio every method runs whole across
``adapters._trio_bridge`` (a trio-asyncio loop per ``trio.run``; needs ``trio-asyncio``).
Standalone Redis only (scripts touch keys of several hash slots). Barriers
``payload.write.after`` and ``obligation.acquire.after`` sit between the two scripts of a put,
as in the model.
"""

from __future__ import annotations

from collections import Counter
from types import TracebackType
from typing import Any, Unpack

import anyio
import msgspec

from ... import faults
from ...contracts import Known, Unknown, checked_control
from ...contracts.errors import (
    AccessDenied,
    AuthenticationFailed,
    BackendUnavailable,
    ConflictError,
    IncompatibleProfile,
    NotFound,
    Unsupported,
    ValidationError,
)
from ...contracts.payload import (
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
from .._options import connection_of
from .._trio_bridge import bridged
from . import _payload_lua as lua
from ._client import FENCED, RedisClient, glob_escape, new_request_id
from .connection import DEFAULT_URL, RedisConnection, RedisOptions

_POLICY = {"durable": "noeviction", "evictable": "volatile-lru"}
_SCAN_COUNT = 1000
_DEADLINE_MEMO = 100_000  # (key, generation, obligation) -> (server score, loop deadline)


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def _decode(reply: Any) -> dict[str, Any]:
    if reply == FENCED:
        raise BackendUnavailable(
            "redis payload write: request fenced by an earlier resolution; not applied",
            backend="redis",
            applied=False,
        )
    out: dict[str, Any] = msgspec.json.decode(reply)
    return out


def _list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else []  # cjson encodes {} for []


@bridged
class RedisPayloadStore(PayloadStore):
    """See the module docstring. Constructor arguments follow ``MemoryPayloadStore`` plus the
    connection (``url``, ``namespace``, ``timeout``, ``protocol``, ``max_connections``), its
    security (``tls``: a :class:`~videoflow_aio.adapters.TLSConfig` or ``ssl.SSLContext``, also
    implied by ``rediss://``; ``username``/``password``: the ACL user, also from the URL) and
    replication: ``wait_replicas=N`` makes each write wait (``WAIT``, up to ``wait_timeout``
    s) until N replicas acknowledged it, else raise :class:`ReplicationUnconfirmed`.

    A refused connection raises :class:`~videoflow_aio.contracts.errors.AuthenticationFailed`
    and a command the ACL refuses :class:`~videoflow_aio.contracts.errors.AccessDenied`, from
    every method, ``read`` and ``inventory`` included (a refusal is not transient)."""

    def __init__(
        self,
        url: str | RedisConnection = DEFAULT_URL,
        *,
        tier: Tier = "durable",
        max_bytes: int | None = None,
        forward_unchanged: bool = True,
        log: ObservationLog | None = None,
        store_id: str = "redis",
        orphan_grace_seconds: float = 60.0,
        intent_grace_seconds: float = 0.0,
        namespace: str = "vfp",
        check_policy: bool = True,
        **options: Unpack[RedisOptions],
    ) -> None:
        if tier not in TIERS:
            raise ValidationError(f"tier must be one of {TIERS}", field="tier", value=tier)
        if max_bytes is not None and (
            isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0
        ):
            raise ValidationError(
                "max_bytes must be a non-negative int or None", field="max_bytes", value=max_bytes
            )
        if not isinstance(orphan_grace_seconds, int | float) or orphan_grace_seconds < 0:
            raise ValidationError(
                "orphan_grace_seconds must be >= 0",
                field="orphan_grace_seconds",
                value=orphan_grace_seconds,
            )
        validate_id(store_id, "store_id")
        self.tier: Tier = "durable" if tier == "durable" else "evictable"
        self.max_bytes = max_bytes
        self.forward_unchanged = forward_unchanged
        self.store_id = store_id
        self.orphan_grace_seconds = float(orphan_grace_seconds)
        self.intent_grace_seconds = validate_grace(intent_grace_seconds, "intent_grace_seconds")
        self.log = log
        self._conn = RedisClient(connection_of(RedisConnection, url, options), namespace=namespace)
        self._side = self._conn.side
        ns = self.ns = namespace
        try:
            scripts = [
                lua.render(
                    src,
                    ns=ns,
                    window_ms=self._conn.window_ms,
                    tier=self.tier,
                    budget=-1 if max_bytes is None else max_bytes,
                    forward=forward_unchanged,
                    grace_ms=self.orphan_grace_seconds * 1000.0,
                    intent=INTENT_PREFIX,
                    intent_grace_ms=self.intent_grace_seconds * 1000.0,
                )
                for src in (
                    lua.PUT,
                    lua.OBLIGE,
                    lua.RELEASE,
                    lua.RECONCILE_KEY,
                    lua.DANGLING,
                    lua.STORED_BYTES,
                    lua.READ_TOUCH,
                )
            ]
        except ValueError as exc:
            raise ValidationError(str(exc), field="namespace", value=ns) from None
        (
            self._put,
            self._oblige,
            self._release,
            self._reconcile_key,
            self._dangling,
            self._stored_bytes,
            self._read_touch,
        ) = map(self._conn.script, scripts)
        self._deadlines: dict[tuple[str, str, str], tuple[float, float]] = {}
        self._check_policy = check_policy
        self._policy_checked = False

    # -- plumbing ----------------------------------------------------------------------------
    @property
    def client(self) -> Any:
        """The underlying ``redis.asyncio.Redis`` (tests, benchmarks, controls)."""
        return self._conn.client

    @checked_control
    def obj_key(self, key: str) -> str:
        return f"{self.ns}:o:{key}"

    @checked_control
    def meta_key(self, key: str) -> str:
        return f"{self.ns}:m:{key}"

    @checked_control
    def set_key(self, key: str) -> str:
        return f"{self.ns}:s:{key}"

    @property
    def namespace(self) -> str:
        """The key prefix of every object, metadata, obligation set and marker of this store."""
        return self.ns

    @property
    def resolutions(self) -> Counter[str]:
        """Writes whose reply was lost, by how they were resolved (``applied``,
        ``not_applied``, ``unknown``)."""
        return self._conn.resolutions

    async def aclose(self) -> None:
        await self._conn.aclose()

    async def drop_namespace(self) -> None:
        """Delete every key under this store's namespace (objects, metadata, sets, markers):
        for tests and tear-down; other stores on the same namespace lose their data too."""
        await self._conn.drop_namespace()

    async def __aenter__(self) -> RedisPayloadStore:
        await self.ensure_policy()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def ensure_policy(self) -> None:
        """Raise :class:`IncompatibleProfile` when the server's ``maxmemory-policy``
        contradicts the tier (checked once, when CONFIG is readable; ``put`` calls it)."""
        await self._ensure_policy()

    async def _ensure_policy(self) -> None:
        if self._policy_checked or not self._check_policy:
            return
        try:
            cfg = await self._conn.read("config", self._conn.client.config_get, "maxmemory-policy")
        except AccessDenied:
            # a least-privilege ACL user has no CONFIG (it would read every secret in the
            # configuration): as on a managed server without CONFIG, trust the caller
            self._policy_checked = True
            return
        except BackendUnavailable as exc:
            if "CONFIG" in str(exc).upper() and "unknown" in str(exc).lower():
                self._policy_checked = True  # managed server without CONFIG: trust the caller
                return
            raise
        policy = _text(dict(cfg).get(b"maxmemory-policy", dict(cfg).get("maxmemory-policy", "")))
        want = _POLICY[self.tier]
        if policy != want:
            raise IncompatibleProfile(
                f"tier {self.tier!r} needs maxmemory-policy {want}, the server has {policy}",
                resource=self._conn.url,
                field="maxmemory-policy",
                expected=want,
                actual=policy,
            )
        self._policy_checked = True

    def _check_ref(self, ref: Any) -> ImmutablePayloadRef:
        return validate_ref(ref, self.store_id)

    # -- put ---------------------------------------------------------------------------------
    async def put(
        self, data: bytes, content_id: str, contract: RetentionContract
    ) -> ImmutablePayloadRef:
        contract = validate_put(data, content_id, contract)
        if contract.required_tier is not None and contract.required_tier != self.tier:
            raise Unsupported(
                f"contract requires tier {contract.required_tier!r}; this store is {self.tier!r}",
                capability=f"tier:{contract.required_tier}",
            )
        await self._ensure_policy()
        digest = payload_digest(data)
        rid = new_request_id()
        try:
            reply = await self._conn.write(
                "put",
                self._put,
                (),
                (rid, content_id, data, len(data), digest, _ms(contract.ttl_seconds)),
                rid,
            )
        except BackendUnavailable as exc:
            if "OOM" in str(exc) or "maxmemory" in str(exc):
                raise PayloadBackpressure(
                    f"redis refused the put: server over maxmemory ({exc})",
                    store=self.store_id,
                    used=-1,
                    size=len(data),
                    budget=-1,
                ) from exc
            raise
        res = _decode(reply)
        status = res["s"]
        if status == "budget":
            raise PayloadBackpressure(
                f"payload store over budget: used={res['used']} put={len(data)} "
                f"budget={res['budget']}",
                store=self.store_id,
                used=int(res["used"]),
                size=len(data),
                budget=int(res["budget"]),
            )
        if status == "conflict":
            raise ConflictError(
                f"key {content_id!r} holds generation {res['gen']} with {res['n']} obligation(s)",
                resource=content_id,
                expected=None,
                actual=str(res["gen"]),
            )
        gen = str(res["gen"])
        ref = ImmutablePayloadRef(content_id, len(data), digest, gen, self.store_id)
        for victim in _list(res.get("evicted")):
            self._record("payload.evicted", str(victim), reason="lru")
        await faults.reach("payload.write.after", key=content_id, generation=gen)
        if contract.obligations:
            out = await self._oblige_call(
                ref, "attach", contract.obligation_seconds, contract.obligations
            )
            if out["s"] != "ok":
                raise ConflictError(
                    f"key {content_id!r} changed before obligations were attached ({out['s']})",
                    resource=content_id,
                    expected=gen,
                    actual=str(out.get("gen", "")),
                )
        await faults.reach("obligation.acquire.after", key=content_id, generation=gen)
        self._record("payload.put", content_id, generation=gen, size=len(data))
        return ref

    async def _oblige_call(
        self, ref: ImmutablePayloadRef, mode: str, seconds: float, ids: tuple[str, ...]
    ) -> dict[str, Any]:
        rid = new_request_id()
        reply = await self._conn.write(
            mode,
            self._oblige,
            (),
            (rid, ref.key, ref.generation, seconds * 1000.0, mode, *ids),
            rid,
        )
        return _decode(reply)

    # -- obligations -------------------------------------------------------------------------
    async def acquire_obligation(
        self, ref: ImmutablePayloadRef, obligation_id: str, deadline: float
    ) -> DurableReceipt:
        return await self._obligation(ref, obligation_id, deadline, "acquire")

    async def renew_obligation(
        self, ref: ImmutablePayloadRef, obligation_id: str, deadline: float
    ) -> DurableReceipt:
        return await self._obligation(ref, obligation_id, deadline, "renew")

    async def _obligation(
        self, ref: ImmutablePayloadRef, obligation_id: str, deadline: float, mode: str
    ) -> DurableReceipt:
        ref = self._check_ref(ref)
        validate_id(obligation_id, "obligation_id")
        if not ref.verifiable:
            raise ValidationError(
                "an unverifiable ref (no generation) cannot carry obligations",
                field="ref.generation",
                value=ref.generation,
            )
        now = anyio.current_time()
        deadline = validate_deadline(deadline, now)
        out = await self._oblige_call(ref, mode, deadline - now, (obligation_id,))
        status = out["s"]
        if status == "notfound":
            raise NotFound(f"no object at key {ref.key!r}", kind="payload", name=ref.key)
        if status == "nosuch":
            raise NotFound(
                f"no obligation {obligation_id!r} on {ref.key!r} (expired or released)",
                kind="obligation",
                name=obligation_id,
            )
        if status == "conflict":
            raise ConflictError(
                f"key {ref.key!r} holds generation {out['gen']!r}, not {ref.generation!r}",
                resource=ref.key,
                expected=ref.generation,
                actual=str(out["gen"]),
            )
        # The deadline in force, on the loop clock: the requested one when it won; an earlier
        # deadline this process set, exactly, when the server still holds it; otherwise the
        # server's score converted through this call's clock pair.
        memo_key = (ref.key, ref.generation, obligation_id)
        score = float(out["score"])
        if out["mine"]:
            effective = deadline
            self._deadlines[memo_key] = (score, deadline)
            if len(self._deadlines) > _DEADLINE_MEMO:
                del self._deadlines[next(iter(self._deadlines))]
        else:
            known = self._deadlines.get(memo_key)
            if known is not None and known[0] == score:
                effective = known[1]
            else:
                effective = now + float(out["score_rel"]) / 1000
        exp_rel = float(out["exp_rel"])
        expires_at = None if exp_rel < 0 else now + exp_rel / 1000
        if expires_at is not None and self.tier == "durable":
            expires_at = max(expires_at, effective)  # the server extended it to the deadline
        self._record(f"payload.{mode}", ref.key, obligation_id=obligation_id, deadline=effective)
        return DurableReceipt(
            key=ref.key,
            generation=ref.generation,
            obligation_id=obligation_id,
            deadline=effective,
            expires_at=expires_at,
            protects_object=self.tier == "durable",
        )

    async def release_obligation(
        self, ref: ImmutablePayloadRef, obligation_id: str, completion_receipt: str
    ) -> ReleaseReceipt:
        ref = self._check_ref(ref)
        validate_id(obligation_id, "obligation_id")
        validate_id(completion_receipt, "completion_receipt")
        if not ref.generation:
            return ReleaseReceipt(ref.key, "", obligation_id, completion_receipt, "unverifiable", 0)
        rid = new_request_id()
        reply = await self._conn.write(
            "release",
            self._release,
            (),
            (rid, ref.key, ref.generation, obligation_id),
            rid,
        )
        out = _decode(reply)
        receipt = ReleaseReceipt(
            ref.key,
            ref.generation,
            obligation_id,
            completion_receipt,
            out["s"],
            int(out["n"]),
        )
        self._record(
            "payload.release",
            ref.key,
            obligation_id=obligation_id,
            completion_receipt=completion_receipt,
            outcome=receipt.outcome,
        )
        return receipt

    # -- reads -------------------------------------------------------------------------------
    async def read(self, ref: ImmutablePayloadRef, reader: str | None = None) -> PayloadReadResult:
        ref = self._check_ref(ref)
        if reader is not None:
            validate_id(reader, "reader")
        key = ref.key
        try:
            data, _size, _digest, gen = await self._fetch(key)
        except (AuthenticationFailed, AccessDenied):
            raise  # a refusal, not a transient failure: retrying cannot help
        except BackendUnavailable as exc:
            return TransientFailure(key, str(exc))
        self._record("payload.read", key, reader=reader)
        if data is None:
            return Missing(key, ref.generation, "not in the store (expired, evicted or removed)")
        if ref.generation and gen is not None and gen != ref.generation:
            return Missing(key, ref.generation, f"replaced by generation {gen}")
        if not ref.verifiable:
            return PayloadBytes(ref, data, verified=False)
        actual = payload_digest(data)
        if gen is None and (len(data) != ref.size or actual != ref.digest):
            # metadata gone (evicted or never written) and the bytes are not the ref's
            return Missing(key, ref.generation, "the key holds other bytes without metadata")
        if len(data) != ref.size or actual != ref.digest:
            what = "truncated" if len(data) < ref.size else "digest mismatch"
            if len(data) > ref.size:
                what = "size mismatch"
            return Corrupt(key, ref.generation, what, ref.size, len(data), ref.digest, actual)
        return PayloadBytes(ref, data, verified=True)

    async def _fetch(self, key: str) -> tuple[bytes | None, int | None, str | None, str | None]:
        o, m = self.obj_key(key), self.meta_key(key)
        if self.tier == "evictable":
            reply = await self._conn.read("read", self._read_touch, (), (key,))
        else:

            async def both() -> list[Any]:
                async with self._conn.client.pipeline(transaction=True) as pipe:
                    pipe.get(o)
                    pipe.hmget(m, "size", "digest", "gen")
                    got, meta = await pipe.execute()
                    return [got, *meta]

            reply = await self._conn.read("read", both)
        data, size, digest, gen = reply
        return (
            None if data is None else bytes(data),
            None if size is None else int(size),
            None if digest is None else _text(digest),
            None if gen is None else _text(gen),
        )

    async def ref_for_key(self, key: str) -> ImmutablePayloadRef:
        validate_id(key, "key")
        o, m = self.obj_key(key), self.meta_key(key)

        async def both() -> list[Any]:
            async with self._conn.client.pipeline(transaction=True) as pipe:
                pipe.strlen(o)
                pipe.hmget(m, "size", "digest", "gen")
                n, meta = await pipe.execute()
                return [n, *meta]

        n, size, digest, gen = await self._conn.read("ref_for_key", both)
        if size is not None and digest is not None and gen is not None:
            return ImmutablePayloadRef(key, int(size), _text(digest), _text(gen), self.store_id)
        return ImmutablePayloadRef(key, int(n or 0), "", "", self.store_id)

    async def _object_keys(self) -> list[str]:
        prefix = f"{glob_escape(self.ns)}:o:*"
        cut = len(self.ns) + 3
        keys: list[str] = []

        async def scan_all() -> None:
            async for k in self._conn.client.scan_iter(match=prefix, count=_SCAN_COUNT):
                keys.append(_text(k)[cut:])

        await self._conn.read("scan", scan_all)
        return sorted(set(keys))

    async def inventory(self) -> InventoryObservation:
        try:
            keys = await self._object_keys()
            refs = []
            for key in keys:
                ref = await self.ref_for_key(key)
                if ref.size or ref.verifiable:
                    refs.append(ref)
        except (AuthenticationFailed, AccessDenied):
            raise
        except BackendUnavailable as exc:
            return Unknown(str(exc))
        return Known(tuple(refs))

    # -- reconcile ---------------------------------------------------------------------------
    async def reconcile(
        self, ledger: ObligationLedger, operation_id: str
    ) -> ReclamationObservation:
        validate_id(operation_id, "operation_id")
        required = dict(ledger.required_obligations())
        keys = await self._object_keys()  # BackendUnavailable: nothing changed yet
        examined = 0
        cancelled: list[tuple[str, str]] = []
        reclaimed: list[str] = []
        orphans: dict[str, list[str]] = {"orphan-reclaimed": [], "in-grace": [], "required": []}
        for key in keys:
            listed = key in required
            reply = await self._conn.read(
                "reconcile",
                self._reconcile_key,
                (),
                (key, "1" if listed else "0", *required.get(key, ())),
            )
            out = msgspec.json.decode(reply)
            if not out.get("examined"):
                continue
            examined += 1
            cancelled.extend((key, str(oid)) for oid in _list(out.get("cancelled")))
            outcome = out.get("outcome", "")
            if outcome == "reclaimed":
                reclaimed.append(key)
            elif outcome in orphans:
                orphans[outcome].append(key)
        dangling: list[str] = []
        cut = len(self.ns) + 3
        set_keys: list[str] = []

        async def scan_sets() -> None:
            async for k in self._conn.client.scan_iter(
                match=f"{glob_escape(self.ns)}:s:*", count=_SCAN_COUNT
            ):
                set_keys.append(_text(k)[cut:])

        await self._conn.read("scan", scan_sets)
        for key in sorted(set(set_keys)):
            if await self._conn.read("reconcile", self._dangling, (), (key,)):
                dangling.append(key)
        obs = ReclamationObservation(
            operation_id=operation_id,
            examined=examined,
            cancelled=tuple(sorted(cancelled)),
            reclaimed=tuple(reclaimed),
            orphans_reclaimed=tuple(orphans["orphan-reclaimed"]),
            orphans_in_grace=tuple(orphans["in-grace"]),
            orphans_required=tuple(orphans["required"]),
            dangling_sets_removed=tuple(dangling),
        )
        self._record("payload.reconcile", operation_id, examined=examined)
        return obs

    async def capabilities(self) -> PayloadCapabilities:
        return payload_capabilities(
            self.tier,
            store_id=self.store_id,
            max_bytes=self.max_bytes,
            forward_unchanged=self.forward_unchanged,
            orphan_grace_seconds=self.orphan_grace_seconds,
            intent_grace_seconds=self.intent_grace_seconds,
        )

    # -- helpers -----------------------------------------------------------------------------
    async def stored_bytes(self) -> int:
        """The exact bytes of the objects present (repairs the budget ledger as it goes)."""
        n = await self._conn.read("stored_bytes", self._stored_bytes, (), ())
        return int(n)

    def _record(self, kind: str, subject: str, **attrs: Any) -> None:
        if self.log is not None:
            self.log.record(kind, subject=subject, **attrs)


def payload_capabilities(
    tier: Tier,
    *,
    store_id: str = "redis",
    max_bytes: int | None = None,
    forward_unchanged: bool = True,
    orphan_grace_seconds: float = 60.0,
    intent_grace_seconds: float = 0.0,
) -> PayloadCapabilities:
    """What a :class:`RedisPayloadStore` so configured guarantees (no server asked)."""
    return PayloadCapabilities(
        store=store_id,
        tier=tier,
        evicts_under_pressure=tier == "evictable",
        ttl_ignores_obligations=tier == "evictable",
        max_bytes=max_bytes,
        forward_unchanged=forward_unchanged,
        orphan_grace_seconds=orphan_grace_seconds,
        shared_across_processes=True,
        intent_grace_seconds=intent_grace_seconds,
    )


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


__all__ = ["RedisPayloadStore", "payload_capabilities"]
