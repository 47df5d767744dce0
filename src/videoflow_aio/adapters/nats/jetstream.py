"""``JetStreamMessagingBackend``: the messaging contract on NATS JetStream (nats-py, asyncio).

A channel is a stream (subjects per kind under the node's prefix, see ``_names``), a
subscription a durable pull consumer filtered to one kind (and partition). Where JetStream is
silent or permissive, this adapter keeps its own ledger rather than report a guess:

* unresolved messages (past ``max_deliver``, which the server reports as nothing pending) come
  from ``MAX_DELIVERIES`` advisories captured durably by the channel's ``__adv`` stream, plus
  this client's own final-attempt leases that expired unsettled;
* drops: a message deleted while leased comes from ``MSG_TERMINATED`` advisories; one evicted
  before delivery from the stream's first sequence against the consumer's delivered position,
  attributed by this client's publish index (``Unknown`` when a gap holds sequences it cannot
  attribute);
* a settle on a superseded or expired lease is ``SettleStale`` from this client's lease
  generations (the server accepts late acks); ``Completed`` is a confirmed double ack;
* a pull that returns nothing is never read as "no messages": statuses are inspected, and a
  deleted consumer is ``NotFound``;
* a publish whose deadline passes is ``PublicationUnknown``, a settle without confirmation
  ``SettleUnknown``, a failed info call ``Unknown``.

nats-py is asyncio-only: called from trio, every method runs on the run's trio-asyncio loop
(``_bridge``), where the connection, its subscriptions and the advisory follower live.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
from collections.abc import Sequence
from typing import Any

import anyio
import msgspec
import nats
import nats.errors
import sniffio

from ...contracts import Known, Unknown
from ...contracts.errors import (
    BackendUnavailable,
    IncompatibleProfile,
    NotFound,
    OutcomeUnknown,
    Unsupported,
    ValidationError,
)
from ...contracts.messaging import (
    IMMUTABLE_CHANNEL_FIELDS,
    IMMUTABLE_SUBSCRIPTION_FIELDS,
    LATEST_PER_KEY_PROFILE,
    Accepted,
    ChannelId,
    ChannelObservation,
    ChannelSpec,
    CleanupObservation,
    Completed,
    Delivery,
    DeliveryToken,
    Envelope,
    LeaseObservation,
    MessagingBackend,
    MessagingCapabilities,
    PublicationUnknown,
    PublicationUnresolvable,
    PublishOutcome,
    Rejected,
    Retry,
    SettleAnswer,
    SettleConfirmed,
    SettleOutcome,
    SettleStale,
    SettleUnknown,
    SubscriptionId,
    SubscriptionObservation,
    SubscriptionSpec,
    Terminal,
    VerifiedChannel,
    VerifiedSubscription,
    check_immutable,
    validate_control_write,
)
from .._trio_bridge import Affinity
from . import _api, _profiles
from ._api import ApiError, NoAnswer, NoResponders, NotSent
from ._bridge import bridged
from ._names import ADV_TERMINATED, Names
from ._state import Bounded, ChanState, Pull, SubState

NS = 1_000_000_000
INDEX_LIMIT = 1 << 20
"""Most sequences kept in a channel's publish index / a subscription's delivered set; past it
the oldest half is forgotten (their drops, if evicted later, become unattributable: Unknown)."""
LEASE_MEMORY = 10.0
"""Seconds past its deadline an expired lease is still remembered (for SettleStale)."""
# observe_subscription re-reads a consumer that visibly trails its stream, this often, this apart
CONSUMER_CATCH_UP_TRIES = 20
CONSUMER_CATCH_UP_PAUSE = 0.005
# how far back from the stream's last sequence that check looks
CONSUMER_CATCH_UP_WINDOW = 256
LINGER = 0.002
"""How long a pull that got some messages waits for the rest of the burst."""
STRAGGLERS = 0.02
"""How long a pull ended by a status without messages waits for deliveries that status
overtook (a cluster routes them from the consumer's leader)."""
CREATED_BY = "videoflow.created_by"
DELETED_REASON = "Unacknowledged message was deleted"
TERM_PREFIX = "videoflow: "
MIXED = (
    "this NATS backend was first used from asyncio: its connection lives on that loop, "
    "so it cannot be used from trio (use one backend per async library)"
)


class _Meta(msgspec.Struct, omit_defaults=True):
    """Envelope fields beyond id/kind/partition, carried in the ``Vf`` header."""

    e: str | None = None
    ts: float | None = None
    ep: str | None = None
    off: int | None = None
    h: dict[str, str] = {}


_meta_enc = msgspec.json.Encoder().encode
_meta_dec = msgspec.json.Decoder(_Meta).decode


def _on_asyncio_side() -> None:
    """Refuse to touch nats-py outside asyncio (a backend first used from asyncio, then
    called from trio, is not bridged: its connection belongs to the asyncio loop)."""
    try:
        lib = sniffio.current_async_library()
    except sniffio.AsyncLibraryNotFoundError:
        lib = ""
    if lib != "asyncio":
        raise Unsupported(MIXED, capability="trio")


def _meta_get(meta: dict[str, str] | None, key: str, default: str = "") -> str:
    return default if meta is None else str(meta.get(key, default))


@bridged
class JetStreamMessagingBackend(MessagingBackend):
    """The messaging contract on a NATS JetStream server (or cluster) at ``url``.

    * ``url``: one or more server URLs (``nats://h1:4222,nats://h2:4222`` or a list).
    * ``stream_prefix`` / ``subject_prefix``: the namespace of streams and subjects.
    * ``request_timeout``: seconds to wait for the server's answer to management calls,
      observations, settles and renewals (publish and receive use their deadlines).
    * ``max_payload_bytes``: the largest body accepted (further capped by the server's
      ``max_payload``); a larger one is ``Rejected`` before anything is sent.
    * ``dedup_window_seconds``: the longest dedup window a channel gets.
    * ``latest_per_key``: offer ``latest_per_key`` channels (``max_msgs_per_subject=1``).
    * ``durable_control``: offer versioned control records (``commit_control``).
    * ``archive`` / ``archive_horizon_seconds``: copy every accepted publication to an archive
      stream that outlives ``close`` and expires after the horizon (``replay``).
    * ``buffer_while_disconnected``: False (default) makes a publish or settle attempted while
      disconnected fail at once (definitely not sent); True lets nats-py buffer it and replay
      it after a reconnect, which turns a reported failure into a possible late acceptance.
    * ``replication_factor``: the most replicas a channel may ask for (the cluster's size).
    """

    def __init__(
        self,
        url: str | Sequence[str] = "nats://127.0.0.1:4222",
        *,
        stream_prefix: str = "VF",
        subject_prefix: str = "vf",
        request_timeout: float = 5.0,
        max_payload_bytes: int = 8388608,
        dedup_window_seconds: int = 120,
        latest_per_key: bool = False,
        durable_control: bool = False,
        archive: bool = False,
        archive_horizon_seconds: float = 3600.0,
        replication_factor: int = 1,
        buffer_while_disconnected: bool = False,
        connect_options: dict[str, Any] | None = None,
    ) -> None:
        if request_timeout <= 0:
            raise ValidationError("request_timeout must be > 0", field="request_timeout")
        if max_payload_bytes < 1:
            raise ValidationError("max_payload_bytes must be >= 1", field="max_payload_bytes")
        if dedup_window_seconds < 0:
            raise ValidationError("dedup_window_seconds must be >= 0", field="dedup_window_seconds")
        if replication_factor < 1:
            raise ValidationError("replication_factor must be >= 1", field="replication_factor")
        self.servers = [url] if isinstance(url, str) else list(url)
        self.names = Names(stream_prefix, subject_prefix)
        self.request_timeout = float(request_timeout)
        self.max_payload_bytes = max_payload_bytes
        self.dedup_window_seconds = dedup_window_seconds
        self.latest_per_key = latest_per_key
        self.durable_control = durable_control
        self.archive = archive
        if archive_horizon_seconds <= 0:
            raise ValidationError(
                "archive_horizon_seconds must be > 0", field="archive_horizon_seconds"
            )
        self.archive_horizon_seconds = float(archive_horizon_seconds)
        self.archive_errors: list[str] = []
        self.replication_factor = replication_factor
        self.buffer_while_disconnected = buffer_while_disconnected
        self._connect_options = dict(connect_options or {})
        self._nc: Any = None
        self._connect_lock: anyio.Lock | None = None
        self._inbox = ""
        self._inbox_sub: Any = None
        self._pulls: dict[str, Pull] = {}
        self._pull_ids = itertools.count(1)
        self._chans: dict[ChannelId, ChanState] = {}
        self._subs: dict[SubscriptionId, SubState] = {}
        self._by_consumer: dict[tuple[str, str], SubState] = {}
        self.lease_margin = 0.01
        self._pubs = Bounded()  # publication id -> (outcome, first attempt time, envelope)
        self.connection_errors: list[str] = []
        self._side = Affinity()  # asyncio: direct; trio: across the trio-asyncio bridge

    # -- connection --------------------------------------------------------------------------
    async def _conn(self) -> Any:
        _on_asyncio_side()
        nc = self._nc
        if nc is not None and not nc.is_closed:
            return nc
        if self._connect_lock is None:
            self._connect_lock = anyio.Lock()
        async with self._connect_lock:
            if self._nc is not None and not self._nc.is_closed:
                return self._nc
            opts: dict[str, Any] = {
                "servers": self.servers,
                "max_reconnect_attempts": -1,
                "reconnect_time_wait": 0.2,
                "connect_timeout": self.request_timeout,
                "allow_reconnect": True,
                "error_cb": self._on_error,
            }
            if not self.buffer_while_disconnected:
                opts["pending_size"] = 0
            opts.update(self._connect_options)
            nc = await connect(opts, self.servers, 2 * self.request_timeout)
            self._inbox = nc.new_inbox()
            try:
                self._inbox_sub = await nc.subscribe(f"{self._inbox}.*", cb=self._on_pull_reply)
            except nats.errors.Error as exc:
                with contextlib.suppress(Exception):
                    await nc.close()
                raise BackendUnavailable(
                    f"cannot subscribe to the inbox: {exc}", backend="nats"
                ) from exc
            self._nc = nc
            return nc

    async def _on_error(self, exc: Exception) -> None:
        self.connection_errors.append(f"{type(exc).__name__}: {exc}")
        del self.connection_errors[:-32]

    @property
    def max_payload(self) -> int:
        nc = self._nc
        server = int(getattr(nc, "max_payload", 0) or 0) if nc is not None else 0
        return min(self.max_payload_bytes, server) if server else self.max_payload_bytes

    async def aclose(self) -> None:
        nc, self._nc = self._nc, None
        if nc is None:
            return
        with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
            with anyio.move_on_after(self.request_timeout):
                await nc.drain()
            if not nc.is_closed:
                await nc.close()

    async def _api(self, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        nc = await self._conn()
        return await _api.api(nc, f"$JS.API.{subject}", body, self.request_timeout)

    # -- channel config ------------------------------------------------------------------------
    def _stream_config(self, spec: ChannelSpec) -> dict[str, Any]:
        ch = spec.channel
        window = min(spec.dedup_window_seconds, self.dedup_window_seconds)
        if spec.max_age_seconds is not None:
            window = min(window, int(spec.max_age_seconds))
        per_key = spec.profile == LATEST_PER_KEY_PROFILE
        cfg: dict[str, Any] = {
            "name": self.names.stream(ch),
            "subjects": self.names.slot_subjects(ch),
            "retention": spec.retention,
            "storage": "file" if spec.persistence else "memory",
            "num_replicas": spec.replicas,
            "max_msgs": -1 if spec.per_subject_limits else spec.max_msgs,
            "max_bytes": -1 if spec.max_bytes is None else spec.max_bytes,
            "max_age": 0 if spec.max_age_seconds is None else int(spec.max_age_seconds * NS),
            "max_msgs_per_subject": (
                spec.max_msgs if spec.per_subject_limits else (1 if per_key else -1)
            ),
            "discard": "new" if spec.overflow == "reject" else "old",
            "discard_new_per_subject": spec.overflow == "reject" and spec.per_subject_limits,
            "duplicate_window": max(window, 0) * NS if window > 0 else NS // 1000,
            "metadata": {
                "videoflow.profile": spec.profile,
                "videoflow.max_msgs": str(spec.max_msgs),
                "videoflow.per_subject": "1" if spec.per_subject_limits else "0",
                "videoflow.persistence": "1" if spec.persistence else "0",
                "videoflow.dedup": str(window),
                "videoflow.required": msgspec.json.encode(
                    [s.consumer for s in spec.required]
                ).decode(),
                **{f"videoflow.owner.{k}": v for k, v in spec.owner_labels.items()},
            },
        }
        return cfg

    def _spec_from(self, ch: ChannelId, cfg: dict[str, Any]) -> ChannelSpec:
        """The effective ChannelSpec read back from a stream's configuration."""
        meta = cfg.get("metadata") or {}
        per_subject = meta.get("videoflow.per_subject") == "1"
        max_msgs = int(cfg.get("max_msgs", -1))
        if per_subject or max_msgs < 0:
            max_msgs = int(meta.get("videoflow.max_msgs", cfg.get("max_msgs_per_subject", 1)))
        max_bytes = int(cfg.get("max_bytes", -1))
        max_age = int(cfg.get("max_age", 0))
        required = msgspec.json.decode(meta.get("videoflow.required", "[]") or "[]")
        owner = {
            k[len("videoflow.owner.") :]: v
            for k, v in meta.items()
            if k.startswith("videoflow.owner.")
        }
        return ChannelSpec(
            channel=ch,
            profile=meta.get("videoflow.profile", "work"),
            retention=str(cfg.get("retention", "limits")),
            required=tuple(SubscriptionId(ch, c) for c in required),
            max_msgs=max_msgs,
            max_bytes=None if max_bytes < 0 else max_bytes,
            max_age_seconds=None if max_age <= 0 else max_age / NS,
            overflow="reject" if cfg.get("discard") == "new" else "evict_oldest",
            dedup_window_seconds=int(meta.get("videoflow.dedup", 0)),
            replicas=int(cfg.get("num_replicas", 1)),
            persistence=meta.get("videoflow.persistence") == "1" or cfg.get("storage") == "file",
            per_subject_limits=per_subject,
            owner_labels=owner,
        )

    def _effective(self, spec: ChannelSpec) -> ChannelSpec:
        """What ``spec`` becomes on this server (dedup window capped by ours and max_age)."""
        return self._spec_from(spec.channel, self._stream_config(spec))

    async def _stream_info(self, name: str) -> dict[str, Any] | None:
        try:
            return await self._api(f"STREAM.INFO.{name}")
        except ApiError as exc:
            if exc.err_code == _api.STREAM_NOT_FOUND:
                return None
            raise

    async def ensure_channel(self, spec: ChannelSpec, operation_id: str) -> VerifiedChannel:
        if not isinstance(spec, ChannelSpec):
            raise ValidationError("spec must be a ChannelSpec", field="spec")
        if spec.profile == LATEST_PER_KEY_PROFILE and not self.latest_per_key:
            raise Unsupported(
                "latest_per_key channels are not offered", capability="latest_per_key"
            )
        if spec.replicas > self.replication_factor:
            raise Unsupported(
                f"replicas={spec.replicas} exceeds replication_factor {self.replication_factor}",
                capability="replicas",
            )
        ch = spec.channel
        name = self.names.stream(ch)
        want = self._stream_config(spec)
        effective = self._spec_from(ch, want)
        try:
            info = await self._stream_info(name)
            created = updated = False
            if info is None:
                try:
                    # the creating operation is stamped in the metadata: a concurrent create of
                    # the same spec by another operation then differs (10058) instead of both
                    # being told did_create (the server answers an identical create as created)
                    info = await self._api(f"STREAM.CREATE.{name}", _stamped(want, operation_id))
                    created = True
                except ApiError as exc:
                    if exc.err_code != _api.STREAM_NAME_IN_USE:
                        raise
                    info = await self._stream_info(name)  # lost a race: inspect the winner
                    if info is None:
                        raise
            current = self._spec_from(ch, info["config"])
            if not created:
                check_immutable(IMMUTABLE_CHANNEL_FIELDS, current, effective, "channel", ch)
                if current != effective:
                    stamp = (info["config"].get("metadata") or {}).get(CREATED_BY, "")
                    info = await self._api(f"STREAM.UPDATE.{name}", _stamped(want, stamp))
                    updated = True
                    current = self._spec_from(ch, info["config"])
            await self._ensure_side_streams(spec)
            for req in spec.required:
                await self._placeholder(ch, req)
        except ApiError as exc:
            if exc.err_code in (10052, 10058):
                raise IncompatibleProfile(
                    f"channel {ch}: the server refused the configuration: {exc.description}",
                    resource=ch.name,
                    field="config",
                    expected=None,
                    actual=exc.description,
                ) from exc
            if exc.code == 400 and "replicas" in exc.description:
                raise Unsupported(exc.description, capability="replicas") from exc
            raise BackendUnavailable(f"ensure_channel {ch}: {exc}", backend="nats") from exc
        except (NoAnswer, NotSent, NoResponders) as exc:
            raise OutcomeUnknown(f"ensure_channel {ch}: {exc}", operation="ensure_channel") from exc
        st = self._chans.get(ch)
        if st is None:
            st = self._chans[ch] = ChanState(
                ch, current, name, self.names.dlq_stream(ch), self.names.adv_stream(ch)
            )
        st.spec = current
        return VerifiedChannel(current, created=created, updated=updated)

    async def _ensure_side_streams(self, spec: ChannelSpec) -> None:
        ch = spec.channel
        storage = "file" if spec.persistence else "memory"
        owner = {f"videoflow.owner.{k}": v for k, v in spec.owner_labels.items()}
        cfgs: list[dict[str, Any]] = [
            {
                "name": name,
                "subjects": subjects,
                "retention": "limits",
                "storage": storage,
                "num_replicas": spec.replicas,
                "discard": "old",
                "duplicate_window": NS,
                "metadata": owner,
            }
            for name, subjects in (
                (self.names.dlq_stream(ch), self.names.dlq_subjects(ch)),
                (self.names.adv_stream(ch), self.names.adv_subjects(ch)),
            )
        ]
        horizon = self.archive_horizon_seconds if self.archive else None
        cfgs += _profiles.stream_configs(
            self.names, ch, spec.replicas, self.durable_control, horizon
        )
        for cfg in cfgs:
            name = cfg["name"]
            if await self._stream_info(name) is None:
                try:
                    await self._api(f"STREAM.CREATE.{name}", cfg)
                except ApiError as exc:
                    if exc.err_code != _api.STREAM_NAME_IN_USE:
                        raise

    async def _placeholder(self, ch: ChannelId, sid: SubscriptionId) -> None:
        """Create the durable a ``required`` subscription will use, if it does not exist, so
        interest exists before the first publish (JetStream drops a message no consumer wants).
        It filters every slot kind until ``ensure_subscription`` narrows it."""
        stream = self.names.stream(ch)
        cfg = {
            "durable_name": self.names.consumer(sid),
            "ack_policy": "explicit",
            "deliver_policy": "all",
            "filter_subjects": self.names.slot_subjects(ch),
            "metadata": {"videoflow.placeholder": "1"},
        }
        try:
            await self._api(
                f"CONSUMER.CREATE.{stream}.{cfg['durable_name']}",
                {"stream_name": stream, "config": cfg, "action": "create"},
            )
        except ApiError as exc:
            if exc.err_code != _api.CONSUMER_EXISTS:
                raise

    async def _chan(self, ch: ChannelId) -> ChanState:
        st = self._chans.get(ch)
        if st is not None:
            return st
        try:
            info = await self._stream_info(self.names.stream(ch))
        except (ApiError, NoAnswer, NotSent, NoResponders) as exc:
            raise BackendUnavailable(f"cannot read channel {ch}: {exc}", backend="nats") from exc
        if info is None:
            raise NotFound(f"no channel {ch}", kind="channel", name=ch.name)
        spec = self._spec_from(ch, info["config"])
        st = ChanState(
            ch, spec, self.names.stream(ch), self.names.dlq_stream(ch), self.names.adv_stream(ch)
        )
        self._chans[ch] = st
        return st

    def _forget_channel(self, ch: ChannelId) -> None:
        self._chans.pop(ch, None)
        for sid in [s for s in self._subs if s.channel == ch]:
            st = self._subs.pop(sid)
            self._by_consumer.pop((st.stream, st.consumer), None)

    # -- subscriptions -------------------------------------------------------------------------
    def _consumer_config(self, spec: SubscriptionSpec, start_seq: int) -> dict[str, Any]:
        ch = spec.channel
        cfg: dict[str, Any] = {
            "durable_name": self.names.consumer(spec.id),
            "ack_policy": "explicit",
            "ack_wait": int(spec.ack_wait_seconds * NS),
            "max_deliver": spec.max_deliver,
            "max_ack_pending": spec.item_credit,
            "filter_subject": self.names.filter(ch, spec.kind, spec.partition),
            "deliver_policy": "by_start_sequence" if start_seq > 1 else "all",
            "metadata": {
                "videoflow.kind": spec.kind,
                "videoflow.partition": "" if spec.partition is None else str(spec.partition),
                "videoflow.competing": "1" if spec.competing else "0",
                "videoflow.byte_credit": str(spec.byte_credit),
            },
        }
        if start_seq > 1:
            cfg["opt_start_seq"] = start_seq
        return cfg

    def _sub_spec_from(self, sid: SubscriptionId, cfg: dict[str, Any]) -> SubscriptionSpec | None:
        meta = cfg.get("metadata") or {}
        if meta.get("videoflow.placeholder") == "1" or "videoflow.kind" not in meta:
            return None
        part = meta.get("videoflow.partition", "")
        return SubscriptionSpec(
            id=sid,
            competing=meta.get("videoflow.competing", "1") == "1",
            partition=int(part) if part else None,
            ack_wait_seconds=int(cfg.get("ack_wait", 30 * NS)) / NS,
            max_deliver=int(cfg.get("max_deliver", -1)),
            item_credit=int(cfg.get("max_ack_pending", 1000)),
            byte_credit=int(meta.get("videoflow.byte_credit", 67108864)),
            kind=meta["videoflow.kind"],
        )

    def _stream_for(self, chs: ChanState, kind: str) -> str:
        return chs.dlq if kind == "dlq" else chs.stream

    async def _consumer_info(self, stream: str, consumer: str) -> dict[str, Any] | None:
        try:
            return await self._api(f"CONSUMER.INFO.{stream}.{consumer}")
        except ApiError as exc:
            if exc.err_code in (_api.CONSUMER_NOT_FOUND, _api.STREAM_NOT_FOUND):
                return None
            raise

    async def ensure_subscription(
        self, spec: SubscriptionSpec, operation_id: str
    ) -> VerifiedSubscription:
        if not isinstance(spec, SubscriptionSpec):
            raise ValidationError("spec must be a SubscriptionSpec", field="spec")
        ch = spec.channel
        chs = await self._chan(ch)
        stream = self._stream_for(chs, spec.kind)
        consumer = self.names.consumer(spec.id)
        try:
            info = await self._consumer_info(stream, consumer)
            created = updated = False
            if info is None:
                si = await self._stream_info(stream)
                if si is None:
                    self._forget_channel(ch)
                    raise NotFound(f"no channel {ch}", kind="channel", name=ch.name)
                first = int(si["state"].get("first_seq", 0) or 0)
                last = int(si["state"].get("last_seq", 0) or 0)
                start = first if first > 0 else last + 1
                cfg = _stamped(self._consumer_config(spec, start), operation_id)
                try:
                    info = await self._api(
                        f"CONSUMER.CREATE.{stream}.{consumer}",
                        {"stream_name": stream, "config": cfg, "action": "create"},
                    )
                    created = True
                except ApiError as exc:
                    if exc.err_code != _api.CONSUMER_EXISTS:
                        raise
                    info = await self._consumer_info(stream, consumer)
                    if info is None:
                        raise
            current = self._sub_spec_from(spec.id, info["config"])
            if not created:
                if current is not None:
                    check_immutable(
                        IMMUTABLE_SUBSCRIPTION_FIELDS, current, spec, "subscription", spec.id
                    )
                if current != spec:
                    start = int(info["config"].get("opt_start_seq", 1) or 1)
                    stamp = (info["config"].get("metadata") or {}).get(CREATED_BY, "")
                    cfg = _stamped(self._consumer_config(spec, start), stamp)
                    if current is None:  # a placeholder: keep its start, narrow its filter
                        cfg["deliver_policy"] = info["config"].get("deliver_policy", "all")
                        cfg.pop("opt_start_seq", None)
                        if "opt_start_seq" in info["config"]:
                            cfg["opt_start_seq"] = info["config"]["opt_start_seq"]
                    info = await self._api(
                        f"CONSUMER.CREATE.{stream}.{consumer}",
                        {"stream_name": stream, "config": cfg, "action": "update"},
                    )
                    updated = True
                    current = self._sub_spec_from(spec.id, info["config"])
        except ApiError as exc:
            raise IncompatibleProfile(
                f"subscription {spec.id}: the server refused the configuration: {exc.description}",
                resource=spec.id.name,
                field="config",
                expected=None,
                actual=exc.description,
            ) from exc
        except (NoAnswer, NotSent, NoResponders) as exc:
            raise OutcomeUnknown(
                f"ensure_subscription {spec.id}: {exc}", operation="ensure_subscription"
            ) from exc
        if current is None:  # pragma: no cover - the server dropped our metadata
            raise OutcomeUnknown(
                f"subscription {spec.id} did not read back", operation="ensure_subscription"
            )
        self._remember_sub(chs, current, stream, consumer, info["config"])
        return VerifiedSubscription(current, created=created, updated=updated)

    def _remember_sub(
        self,
        chs: ChanState,
        spec: SubscriptionSpec,
        stream: str,
        consumer: str,
        cfg: dict[str, Any],
    ) -> SubState:
        st = self._subs.get(spec.id)
        start = int(cfg.get("opt_start_seq", 1) or 1)
        if st is None:
            st = SubState(spec.id, spec, stream, consumer, chs, start_seq=start)
            self._subs[spec.id] = st
            self._by_consumer[(stream, consumer)] = st
        st.spec = spec
        st.chan = chs
        return st

    async def _sub(self, sid: SubscriptionId) -> SubState:
        st = self._subs.get(sid)
        if st is not None:
            return st
        chs = await self._chan(sid.channel)
        consumer = self.names.consumer(sid)
        for stream in (chs.stream, chs.dlq):
            try:
                info = await self._consumer_info(stream, consumer)
            except (ApiError, NoAnswer, NotSent, NoResponders) as exc:
                raise BackendUnavailable(f"cannot read {sid}: {exc}", backend="nats") from exc
            if info is None:
                continue
            spec = self._sub_spec_from(sid, info["config"])
            if spec is None:
                break
            return self._remember_sub(chs, spec, stream, consumer, info["config"])
        raise NotFound(f"no subscription {sid}", kind="subscription", name=sid.name)

    # -- publish ---------------------------------------------------------------------------------
    def _headers(self, env: Envelope, window: int) -> dict[str, str]:
        hdrs = {"Nats-Msg-Id" if window > 0 else "Vf-Pid": env.publication_id}
        meta = _Meta(
            e=None if env.event_id == env.publication_id else env.event_id,
            ts=env.event_ts,
            ep=env.source_epoch,
            off=env.source_offset,
            h=env.headers,
        )
        if meta != _Meta():
            hdrs["Vf"] = _meta_enc(meta).decode()
        return hdrs

    async def publish(self, envelope: Envelope, deadline: float) -> PublishOutcome:
        pid = envelope.publication_id
        if envelope.kind == "dlq":
            raise ValidationError(
                "dead letters are stored by settle(Terminal), not published",
                field="kind",
                value="dlq",
            )
        nc = await self._conn()
        chs = await self._chan(envelope.channel)
        size = len(envelope.body)
        limit = self.max_payload
        if size > limit:
            return Rejected(pid, f"payload {size} bytes exceeds max_payload_bytes {limit}")
        now = anyio.current_time()
        if deadline <= now:
            return Rejected(pid, "deadline passed before the publication was sent")
        out = await self._send(nc, chs, envelope, deadline - now)
        first = self._pubs.get(pid)
        self._pubs.put(pid, (out, now if first is None else first[1], envelope))
        if isinstance(out, Accepted) and not out.duplicate:
            chs.index[out.sequence] = (envelope.kind, envelope.partition_key, size)
            if len(chs.index) > INDEX_LIMIT:
                chs.trim_index(INDEX_LIMIT // 2)
            if self.archive:
                await self._archive_copy(nc, chs, envelope)
        return out

    async def _archive_copy(self, nc: Any, chs: ChanState, env: Envelope) -> None:
        """Copy an accepted publication to the channel's archive (one per event id). A failed
        copy does not undo the publication; it is kept in ``archive_errors``."""
        subject = _profiles.arc_subject(self.names, chs.id, env.event_id)
        hdrs = _profiles.archive_headers(env, self._headers(env, 0))
        try:
            msg = await _api.request(nc, subject, env.body, self.request_timeout, headers=hdrs)
            err = _api.decode(msg.data).get("error")
        except (NoAnswer, NotSent, NoResponders, msgspec.DecodeError) as exc:
            err = str(exc)
        if err:
            self.archive_errors.append(f"{env.publication_id}: {err}")
            del self.archive_errors[:-64]

    async def _send(self, nc: Any, chs: ChanState, env: Envelope, seconds: float) -> PublishOutcome:
        pid = env.publication_id
        subject = self.names.subject(chs.id, env.kind, env.partition_key)
        hdrs = self._headers(env, chs.spec.dedup_window_seconds)
        try:
            msg = await _api.request(nc, subject, env.body, seconds, headers=hdrs)
        except NoAnswer as exc:
            return PublicationUnknown(
                pid, f"no acknowledgement before the deadline ({exc}); it may still be stored"
            )
        except NotSent as exc:
            return Rejected(pid, f"not sent: {exc}")
        except NoResponders as exc:
            self._forget_channel(chs.id)
            raise NotFound(
                f"no channel {chs.id} (no stream answers)", kind="channel", name=chs.id.name
            ) from exc
        try:
            ack = _api.decode(msg.data)
        except msgspec.DecodeError:
            return PublicationUnknown(pid, f"undecodable acknowledgement {msg.data[:80]!r}")
        err = ack.get("error")
        if err:
            desc = str(err.get("description", ""))
            return Rejected(pid, f"{desc} ({err.get('code')}/{err.get('err_code')})")
        return Accepted(pid, int(ack["seq"]), bool(ack.get("duplicate", False)))

    async def observe_publication(self, envelope: Envelope) -> PublishOutcome:
        """What this client knows about ``envelope.publication_id``.

        An ``Accepted``/``Rejected`` outcome it recorded is returned as is. A
        ``PublicationUnknown`` is resolved by re-publishing the same envelope with the same
        ``Nats-Msg-Id`` while the dedup window surely still covers the first attempt: the
        server answers ``duplicate`` if it had stored it, or stores it now — either way the
        answer is ``Accepted`` with the stored sequence (the publication is completed, not just
        observed). Past the window, or for a publication this client never sent, the answer is
        ``PublicationUnresolvable``: JetStream has no lookup by publication id.
        """
        pid = envelope.publication_id
        chs = await self._chan(envelope.channel)
        entry = self._pubs.get(pid)
        if entry is None:
            return PublicationUnresolvable(
                pid, "this client never sent it; JetStream has no lookup by publication id"
            )
        out, first_at, env = entry
        if not isinstance(out, PublicationUnknown):
            return out  # type: ignore[no-any-return]
        window = chs.spec.dedup_window_seconds
        now = anyio.current_time()
        if window <= 0 or now >= first_at + window:
            return PublicationUnresolvable(
                pid, "outside the dedup window: a re-publish would store a second copy"
            )
        nc = await self._conn()
        timeout = min(self.request_timeout, first_at + window - now)
        res = await self._send(nc, chs, env, timeout)
        if isinstance(res, Accepted):
            self._pubs.put(pid, (res, first_at, env))
            # stored at res.sequence is our own envelope (first write wins, and it was ours)
            chs.index[res.sequence] = (env.kind, env.partition_key, len(env.body))
            return Accepted(pid, res.sequence, False)
        if isinstance(res, Rejected) and res.reason.startswith("not sent"):
            return PublicationUnknown(pid, f"still unknown: {res.reason}")
        return res

    # -- receive -----------------------------------------------------------------------------------
    async def _on_pull_reply(self, msg: Any) -> None:
        hdrs = msg.headers
        status = hdrs.get("Status") if hdrs else None
        if status and not msg.reply:  # a status ends the pull named by the reply subject
            token = msg.subject.rsplit(".", 1)[-1]
            pull = self._pulls.pop(token, None)
            if pull is not None:
                pull.status = (status, str(hdrs.get("Description", "")))
                pull.first.set()
                pull.done.set()
            return
        # a delivery arrives on its original subject: route it by its ack reply subject
        try:
            md = msg.metadata
            st = self._by_consumer.get((md.stream, md.consumer))
        except Exception:
            return
        if st is None:
            return  # not ours any more: the lease expires and the server redelivers
        pull = st.current
        if pull is None or pull.closed:
            sent = st.last_sent
            with contextlib.suppress(Exception):
                st.late.append(self._delivery(st, msg, sent))
            return
        pull.msgs.append(msg)
        pull.first.set()
        if len(pull.msgs) >= pull.want:
            pull.done.set()

    def _delivery(self, st: SubState, msg: Any, sent_at: float) -> Delivery:
        md = msg.metadata
        seq = int(md.sequence.stream)
        attempt = int(md.num_delivered)
        ch = st.id.channel
        kind, pk = self.names.kind_of(ch, msg.subject)
        hdrs = msg.headers or {}
        pid = hdrs.get("Nats-Msg-Id") or hdrs.get("Vf-Pid") or f"#{seq}"
        raw = hdrs.get("Vf")
        meta = _meta_dec(raw) if raw else _Meta()
        env = Envelope(
            channel=ch,
            publication_id=pid,
            body=bytes(msg.data),
            event_id=pid if meta.e is None else meta.e,
            kind=kind,
            partition_key=pk,
            event_ts=meta.ts,
            source_epoch=meta.ep,
            source_offset=meta.off,
            headers=meta.h,
        )
        # the server started the lease between our request and this arrival: count it from
        # the arrival minus a margin for the one-way latency, never before the request
        start = max(sent_at, anyio.current_time() - self.lease_margin)
        deadline = start + st.spec.ack_wait_seconds
        st.leases[seq] = (attempt, deadline)
        st.delivered_seqs.add(seq)
        if len(st.delivered_seqs) > INDEX_LIMIT:
            st.trim_delivered(INDEX_LIMIT // 2)
        st.retry_wait.pop(seq, None)
        lease_id = f"{attempt}.{md.sequence.consumer}"
        token = DeliveryToken(st.id, seq, attempt, lease_id, msg.reply)
        return Delivery(env, seq, attempt, token, deadline)

    async def _pull(
        self, nc: Any, st: SubState, batch: int, max_bytes: int, deadline: float
    ) -> Pull:
        """One pull request: ``no_wait`` with ``expires`` at the deadline, so the server
        answers at once with what is available (then ``404``), or waits for the first message
        until it expires (``408``). The caller holds ``st.lock``: one open pull per
        subscription in this client, so every delivery belongs to the pull open when it
        arrives (later ones land in ``st.late``)."""
        now = anyio.current_time()
        token = str(next(self._pull_ids))
        expires = max(deadline - now - 0.005, 0.001)
        pull = Pull(st, batch, now, now + expires)
        self._pulls[token] = pull
        st.current = pull
        st.last_sent = now
        body = {
            "batch": batch,
            "max_bytes": max_bytes,
            "no_wait": True,
            "expires": int(expires * NS),
        }
        subject = f"$JS.API.CONSUMER.MSG.NEXT.{st.stream}.{st.consumer}"
        limit = now + expires + self.request_timeout
        try:
            await nc.publish(subject, _api.encode(body), reply=f"{self._inbox}.{token}")
            with anyio.CancelScope(deadline=limit):
                await pull.first.wait()
            if pull.status is None and pull.msgs and len(pull.msgs) < batch:
                # the rest of a burst arrives together; a request blocked by the shared credit
                # (max_ack_pending) would wait for its expiry, so do not wait for its status
                with anyio.CancelScope(deadline=min(limit, anyio.current_time() + LINGER)):
                    await pull.done.wait()
        except nats.errors.Error as exc:
            pull.status = ("error", f"{type(exc).__name__}: {exc}")
        finally:
            pull.closed = True
            st.current = None
            if pull.status is not None or len(self._pulls) > 4096:
                self._pulls.pop(token, None)
        return pull

    def _take_late(self, st: SubState, n: int, budget: int) -> list[Delivery]:
        out: list[Delivery] = []
        now = anyio.current_time()
        keep = []
        while st.late:
            d = st.late.popleft()
            cur = st.leases.get(d.sequence)
            if d.lease_deadline <= now or cur is None or cur[0] != d.attempt:
                continue  # expired or superseded: the server redelivers it
            if len(out) < n and len(d.envelope.body) <= budget:
                budget -= len(d.envelope.body)
                out.append(d)
            else:
                keep.append(d)
        st.late.extend(keep)
        return out

    async def _check_status(self, st: SubState, pull: Pull) -> None:
        if pull.status is None:
            return
        code, desc = pull.status
        if code == "503":  # no responders: the consumer is gone, or JetStream is down
            await self._confirm_consumer(st)
            raise BackendUnavailable(f"receive on {st.id}: no responders", backend="nats")
        if code == "409" and "Consumer Deleted" in desc:
            self._subs.pop(st.id, None)
            self._by_consumer.pop((st.stream, st.consumer), None)
            raise NotFound(
                f"subscription {st.id} was deleted", kind="subscription", name=st.id.name
            )
        if code == "error":
            raise BackendUnavailable(f"receive on {st.id}: {desc}", backend="nats")

    async def receive(
        self, subscription: SubscriptionId, item_credit: int, byte_credit: int, deadline: float
    ) -> list[Delivery]:
        if item_credit < 1:
            raise ValidationError(
                "item_credit must be >= 1", field="item_credit", value=item_credit
            )
        if byte_credit < 1:
            raise ValidationError(
                "byte_credit must be >= 1", field="byte_credit", value=byte_credit
            )
        nc = await self._conn()
        st = await self._sub(subscription)
        if st.lock is None:
            st.lock = anyio.Lock()
        async with st.lock:
            return await self._receive(nc, st, item_credit, byte_credit, deadline)

    async def _receive(
        self, nc: Any, st: SubState, item_credit: int, byte_credit: int, deadline: float
    ) -> list[Delivery]:
        budget = min(byte_credit, st.spec.byte_credit)
        if st.chan.live_adv is None:
            await self._watch_deletions(nc, st.chan)
        out = self._take_late(st, item_credit, budget)
        if out:
            return out
        while True:
            pull = await self._pull(nc, st, item_credit, budget, deadline)
            await self._check_status(st, pull)
            out = [self._delivery(st, m, pull.sent_at) for m in pull.msgs]
            if out:
                return out
            if pull.status is None:  # the server never answered: not "no messages"
                await self._confirm_consumer(st)  # NotFound when the consumer is gone
                raise BackendUnavailable(
                    f"receive on {st.id}: no answer from the server within "
                    f"{self.request_timeout:g} s after the deadline",
                    backend="nats",
                )
            code, desc = pull.status
            if code in ("404", "408", "409"):
                out = await self._stragglers(st, item_credit, budget, deadline)
                if out:
                    return out
            if code == "409" and "MaxBytes" in desc:
                return out  # the head does not fit this byte credit
            if anyio.current_time() >= deadline - 0.006:
                return out
            if code not in ("404", "408"):
                await anyio.sleep(0.01)  # e.g. 409 Exceeded MaxWaiting: back off briefly

    async def _stragglers(
        self, st: SubState, item_credit: int, budget: int, deadline: float
    ) -> list[Delivery]:
        """On a cluster a pull's status can overtake the deliveries it ends (they come from
        the consumer's leader by another route, and land in ``late``): wait for them a little
        (``STRAGGLERS``, never past the deadline), then for the rest of their burst."""
        end = min(deadline, anyio.current_time() + STRAGGLERS)
        while not st.late and anyio.current_time() < end:  # noqa: ASYNC110 - filled by a callback
            await anyio.sleep(0.001)
        if st.late:
            await anyio.sleep(LINGER)
        return self._take_late(st, item_credit, budget)

    async def _watch_deletions(self, nc: Any, chs: ChanState) -> None:
        """Follow the channel's ``MSG_TERMINATED`` advisories live (a fast path beside the
        durable ``__adv`` ledger), so a settle on a message deleted while leased is answered
        ``SettleStale`` without waiting for the next observation."""

        async def on_advisory(msg: Any) -> None:
            with contextlib.suppress(Exception):
                adv = _api.decode(msg.data)
                if adv.get("reason") == DELETED_REASON:
                    chs.deleted_for(str(adv["consumer"])).add(int(adv["stream_seq"]))

        try:
            chs.live_adv = await nc.subscribe(f"{ADV_TERMINATED}.{chs.stream}.*", cb=on_advisory)
        except nats.errors.Error:
            chs.live_adv = False  # the durable ledger still has them; do not retry each time

    async def _confirm_consumer(self, st: SubState) -> None:
        """After an empty receive: NotFound when the consumer is gone (nats-py would hide
        it behind a timeout); silence otherwise — an unreachable server is not "no messages"."""
        try:
            info = await self._consumer_info(st.stream, st.consumer)
        except (ApiError, NoAnswer, NotSent, NoResponders) as exc:
            raise BackendUnavailable(
                f"receive on {st.id} got nothing and the consumer cannot be read: {exc}",
                backend="nats",
            ) from exc
        if info is None:
            self._subs.pop(st.id, None)
            self._by_consumer.pop((st.stream, st.consumer), None)
            raise NotFound(
                f"subscription {st.id} no longer exists", kind="subscription", name=st.id.name
            )

    # -- settle and renew --------------------------------------------------------------------------
    def _stale(self, st: SubState, token: DeliveryToken, now: float) -> str | None:
        seq = token.sequence
        if seq in st.chan.deleted_for(st.consumer):
            return "message no longer retained (deleted while leased)"
        done = st.settled.get(seq)
        if done is not None:
            return "already settled"
        if seq in st.retry_wait:
            return "lease released by Retry; the message awaits redelivery"
        cur = st.leases.get(seq)
        if cur is None:
            return None  # a token from another client: the server is the only judge
        if cur[0] != token.attempt:
            return f"lease superseded by attempt {cur[0]}"
        if now >= cur[1]:
            return "lease expired; message awaits redelivery"
        return None

    async def settle(
        self, token: DeliveryToken, outcome: SettleOutcome, settlement_id: str
    ) -> SettleAnswer:
        if not settlement_id:
            raise ValidationError("settlement_id must be non-empty", field="settlement_id")
        if not isinstance(outcome, (Completed, Retry, Terminal)):
            raise ValidationError(f"unknown settle outcome {outcome!r}", field="outcome")
        if not token.opaque.startswith("$JS.ACK."):
            raise ValidationError("token was not issued by a JetStream receive", field="token")
        nc = await self._conn()
        st = await self._sub(token.subscription)
        seq = token.sequence
        prior = st.settlements.get(settlement_id)
        if prior is not None:
            if prior != seq:
                raise ValidationError(
                    f"settlement_id {settlement_id!r} was used for sequence {prior}",
                    field="settlement_id",
                )
            return SettleConfirmed(seq, duplicate=True)
        now = anyio.current_time()
        stale = self._stale(st, token, now)
        if stale is not None:
            return SettleStale(stale)
        if isinstance(outcome, Completed):
            payload = b"+ACK"
        elif isinstance(outcome, Retry):
            payload = b"-NAK"
            if outcome.delay_seconds > 0:
                payload += b" " + _api.encode({"delay": int(outcome.delay_seconds * NS)})
        else:
            dead = await self._dead_letter(nc, st, token, outcome.reason)
            if dead is not None:
                return SettleUnknown(f"dead letter not stored ({dead}); nothing settled")
            payload = b"+TERM " + (TERM_PREFIX + outcome.reason).encode()
        try:
            await _api.request(nc, token.opaque, payload, self.request_timeout)
        except NoAnswer as exc:
            return SettleUnknown(f"no confirmation: {exc}")
        except NotSent as exc:
            return SettleUnknown(f"not sent: {exc}")
        except NoResponders:
            return SettleStale("the subscription's consumer no longer exists")
        if seq in st.chan.deleted_for(st.consumer):
            return SettleStale("message no longer retained (deleted while leased)")
        st.leases.pop(seq, None)
        if isinstance(outcome, Retry):
            st.retry_wait[seq] = now + outcome.delay_seconds
        else:
            st.settled.put(seq, token.attempt)
        st.settlements.put(settlement_id, seq)
        return SettleConfirmed(seq)

    async def _dead_letter(
        self, nc: Any, st: SubState, token: DeliveryToken, reason: str
    ) -> str | None:
        """Store the dead letter (dedup by consumer and sequence); None when stored."""
        chs = st.chan
        try:
            got = await self._api(f"STREAM.MSG.GET.{chs.stream}", {"seq": token.sequence})
        except ApiError as exc:
            return f"original message unreadable: {exc.description}"
        except (NoAnswer, NotSent, NoResponders) as exc:
            return str(exc)
        m = got["message"]
        body = base64.b64decode(m.get("data", "") or "")
        hdr_raw = base64.b64decode(m.get("hdrs", "") or "")
        src = _parse_headers(hdr_raw)
        kind, pk = self.names.kind_of(chs.id, m["subject"])
        pid = src.get("Nats-Msg-Id") or src.get("Vf-Pid") or f"#{token.sequence}"
        meta = _meta_dec(src["Vf"]) if "Vf" in src else _Meta()
        h = dict(meta.h)
        h.update(
            {
                "dlq-reason": reason,
                "dlq-origin-seq": str(token.sequence),
                "dlq-origin-kind": kind,
                "dlq-consumer": token.subscription.consumer,
            }
        )
        env = Envelope(
            channel=chs.id,
            publication_id=f"{pid}~dlq~{token.subscription.consumer}",
            body=body,
            event_id=pid if meta.e is None else meta.e,
            kind="dlq",
            partition_key=pk,
            event_ts=meta.ts,
            source_epoch=meta.ep,
            source_offset=meta.off,
            headers=h,
        )
        subject = self.names.subject(chs.id, "dlq", pk)
        hdrs = {
            "Nats-Msg-Id": env.publication_id,
            "Vf": _meta_enc(
                _Meta(
                    e=env.event_id, ts=env.event_ts, ep=env.source_epoch, off=env.source_offset, h=h
                )
            ).decode(),
        }
        try:
            msg = await _api.request(nc, subject, body, self.request_timeout, headers=hdrs)
            ack = _api.decode(msg.data)
        except (NoAnswer, NotSent, NoResponders, msgspec.DecodeError) as exc:
            return str(exc)
        if ack.get("error"):
            return str(ack["error"].get("description"))
        return None

    async def renew(self, token: DeliveryToken) -> LeaseObservation:
        if not token.opaque.startswith("$JS.ACK."):
            raise ValidationError("token was not issued by a JetStream receive", field="token")
        nc = await self._conn()
        st = await self._sub(token.subscription)
        now = anyio.current_time()
        stale = self._stale(st, token, now)
        if stale is not None:
            return LeaseObservation(False, None, token.attempt, stale)
        try:
            await _api.request(nc, token.opaque, b"+WPI", self.request_timeout)
        except (NoAnswer, NotSent) as exc:
            return LeaseObservation(False, None, token.attempt, f"renewal unconfirmed: {exc}")
        except NoResponders:
            return LeaseObservation(False, None, token.attempt, "consumer no longer exists")
        deadline = now + st.spec.ack_wait_seconds
        st.leases[token.sequence] = (token.attempt, deadline)
        return LeaseObservation(True, deadline, token.attempt)

    # -- observation -------------------------------------------------------------------------------
    async def _read_advisories(self, chs: ChanState) -> None:
        """Fold new advisories from the channel's ``__adv`` stream into its ledger."""
        info = await self._stream_info(chs.adv)
        if info is None:
            return
        last = int(info["state"].get("last_seq", 0) or 0)
        while chs.adv_next <= last:
            seq = chs.adv_next
            try:
                got = await self._api(f"STREAM.MSG.GET.{chs.adv}", {"seq": seq})
            except ApiError as exc:
                if exc.err_code != _api.NO_MESSAGE_FOUND:
                    raise
                chs.adv_next = seq + 1
                continue
            m = got["message"]
            adv = _api.decode(base64.b64decode(m.get("data", "") or "") or b"{}")
            consumer = str(adv.get("consumer", ""))
            sseq = int(adv.get("stream_seq", 0))
            if m["subject"].startswith(ADV_TERMINATED):
                reason = str(adv.get("reason", ""))
                if reason == DELETED_REASON:
                    chs.deleted_for(consumer).add(sseq)
                elif reason.startswith(TERM_PREFIX):
                    chs.termed[consumer] = chs.termed.get(consumer, 0) + 1
            else:
                chs.exhausted.setdefault(consumer, set()).add(sseq)
            chs.adv_next = seq + 1

    async def _caught_up_infos(self, st: SubState) -> tuple[dict[str, Any], dict[str, Any]]:
        """Consumer and stream info, re-read briefly while the consumer visibly trails."""
        sid = st.id
        for attempt in range(CONSUMER_CATCH_UP_TRIES):
            ci = await self._consumer_info(st.stream, st.consumer)
            if ci is None:
                self._subs.pop(sid, None)
                raise NotFound(f"no subscription {sid}", kind="subscription", name=sid.name)
            si = await self._stream_info(st.stream)
            if si is None:
                self._forget_channel(sid.channel)
                raise NotFound(f"no channel {sid.channel}", kind="channel", name=sid.channel.name)
            if attempt + 1 == CONSUMER_CATCH_UP_TRIES or not self._consumer_lags(st, ci, si):
                return ci, si
            await anyio.sleep(CONSUMER_CATCH_UP_PAUSE)
        raise AssertionError("unreachable")

    def _consumer_lags(self, st: SubState, ci: dict[str, Any], si: dict[str, Any]) -> bool:
        """True when the consumer's counts visibly trail the stream this client knows.

        The server confirms a publish (and the eviction it causes) before it updates the
        consumers: for a moment a consumer can still count an evicted message as leased, or
        not yet count a message this client saw stored. Two signs, both impossible once the
        consumer has caught up: a message below the stream's first sequence still ack-pending
        (the ack floor sits below it), or fewer pending than the messages this client published
        past the consumer's delivered position that match it and are still retained (among the
        last ``CONSUMER_CATCH_UP_WINDOW`` sequences, which is where a lag can be).
        """
        state = si["state"]
        last = int(state.get("last_seq", 0) or 0)
        first = int(state.get("first_seq", 0) or 0) or last + 1
        if int(ci.get("num_ack_pending", 0)) > 0 and int(ci["ack_floor"]["stream_seq"]) < first - 1:
            return True
        delivered = max(int(ci["delivered"]["stream_seq"]), first - 1)
        spec = st.spec
        pstr = None if spec.partition is None else str(spec.partition)
        known = 0
        for seq in range(max(delivered + 1, last - CONSUMER_CATCH_UP_WINDOW + 1), last + 1):
            entry = st.chan.index.get(seq)
            if entry is not None and entry[0] == spec.kind and (pstr is None or entry[1] == pstr):
                known += 1
        return int(ci.get("num_pending", 0)) < known

    def _count_evicted_unseen(self, st: SubState, delivered: int, first: int) -> str | None:
        """Add drops of matching messages evicted before delivery; a reason when a gap holds
        sequences this client cannot attribute.

        A sequence evicted since the last accounting (``acc < s < first``) had been delivered
        if this client delivered it, or if the consumer's delivered position had passed it at
        the previous observation (when it was still retained). Otherwise it is a drop.
        """
        chs = st.chan
        start = st.start_seq - 1
        acc = chs.accounted.get(st.consumer, start)
        mark = chs.watermark.get(st.consumer, start)
        lo = acc + 1
        if first > lo:
            spec = st.spec
            pstr = None if spec.partition is None else str(spec.partition)
            seen = st.delivered_seqs
            n = 0
            for s in range(lo, first):
                if s <= mark or s in seen:
                    continue
                if s <= st.forgot_upto:
                    return f"the delivery record of sequence {s} was trimmed: drops unknown"
                entry = chs.index.get(s)
                if entry is None:
                    return (
                        f"sequence {s} was evicted before this client could attribute it "
                        "(not published here): drops cannot be counted"
                    )
                kind, pk, _ = entry
                if kind == spec.kind and (pstr is None or pk == pstr):
                    n += 1
            chs.evicted_unseen[st.consumer] = chs.evicted_unseen.get(st.consumer, 0) + n
            chs.accounted[st.consumer] = first - 1
        new_mark = max(mark, delivered)
        chs.watermark[st.consumer] = new_mark
        for s in [s for s in seen_iter(st) if s <= new_mark]:
            st.delivered_seqs.discard(s)
        return None

    async def observe_subscription(
        self, subscription: SubscriptionId
    ) -> Known[SubscriptionObservation] | Unknown:
        st = await self._sub(subscription)
        chs = st.chan
        try:
            ci, si = await self._caught_up_infos(st)
            await self._read_advisories(chs)
        except (ApiError, NoAnswer, NotSent, NoResponders) as exc:
            return Unknown(f"cannot read {subscription}: {exc}")
        now = anyio.current_time()
        state = si["state"]
        first = int(state.get("first_seq", 0) or 0)
        last = int(state.get("last_seq", 0) or 0)
        if first == 0:
            first = last + 1
        delivered = int(ci["delivered"]["stream_seq"])
        why = self._count_evicted_unseen(st, delivered, first) if st.stream == chs.stream else None
        if why is not None:
            return Unknown(why)
        deleted = chs.deleted_for(st.consumer)
        # unresolved: advisories, plus our own final-attempt leases that expired unsettled
        exhausted = set(chs.exhausted.get(st.consumer, ()))
        cap = st.spec.max_deliver
        if cap != -1:
            for seq, (attempt, dl) in st.leases.items():
                if attempt >= cap and now >= dl + 0.05 and seq not in st.settled:
                    exhausted.add(seq)
        # forget leases long expired: the server has redelivered them (perhaps elsewhere) or
        # reported them exhausted in the durable advisory ledger by now
        keep = max(st.spec.ack_wait_seconds, LEASE_MEMORY)
        for seq in [q for q, (_a, d) in st.leases.items() if now > d + keep]:
            del st.leases[seq]
            st.retry_wait.pop(seq, None)
        gone = chs.gone_unresolved.setdefault(st.consumer, set())
        unresolved = set()
        for seq in exhausted:
            if seq in st.settled or seq in deleted:
                continue
            if seq < first:
                gone.add(seq)
            else:
                unresolved.add(seq)
        # leased on the server but waiting for redelivery by our ledger: pending, not leased
        waiting = sum(1 for seq, due in st.retry_wait.items() if seq not in unresolved) + sum(
            1
            for seq, (attempt, dl) in st.leases.items()
            if now >= dl and (cap == -1 or attempt < cap)
        )
        ack_pending = int(ci.get("num_ack_pending", 0))
        waiting = min(waiting, ack_pending)
        floor = int(ci["ack_floor"]["stream_seq"])
        if unresolved:
            floor = min(floor, min(unresolved) - 1)
        obs = SubscriptionObservation(
            subscription=subscription,
            pending=int(ci.get("num_pending", 0)) + waiting,
            leased=ack_pending - waiting,
            unresolved=len(unresolved),
            dropped=len(deleted) + len(gone) + chs.evicted_unseen.get(st.consumer, 0),
            redelivered=int(ci.get("num_redelivered", 0)),
            ack_floor=floor,
            dead_lettered=chs.termed.get(st.consumer, 0),
        )
        return Known(obs)

    async def observe_ack_floor(self, subscription: SubscriptionId) -> Known[int] | Unknown:
        obs = await self.observe_subscription(subscription)
        if isinstance(obs, Unknown):
            return obs
        return Known(obs.value.ack_floor)

    async def observe_channel(self, channel_id: ChannelId) -> Known[ChannelObservation] | Unknown:
        chs = await self._chan(channel_id)
        try:
            si = await self._stream_info(chs.stream)
            di = await self._stream_info(chs.dlq)
        except (ApiError, NoAnswer, NotSent, NoResponders) as exc:
            return Unknown(f"cannot read {channel_id}: {exc}")
        if si is None:
            self._forget_channel(channel_id)
            raise NotFound(f"no channel {channel_id}", kind="channel", name=channel_id.name)
        state = si["state"]
        msgs = int(state.get("messages", 0))
        last = int(state.get("last_seq", 0) or 0)
        first = int(state.get("first_seq", 0) or 0)
        if msgs == 0:
            first = last + 1
        # the stored size: bodies plus subject, headers and record overhead (the contract's
        # lower bound is the bodies)
        nbytes = int(state.get("bytes", 0))
        for s in [s for s in chs.index if s < first]:
            if all(chs.accounted.get(c, 0) >= s for c in self._consumers_of(chs)):
                del chs.index[s]
        dead = 0 if di is None else int(di["state"].get("messages", 0))
        return Known(ChannelObservation(channel_id, msgs, nbytes, first, last, dead))

    def _consumers_of(self, chs: ChanState) -> list[str]:
        return [st.consumer for st in self._subs.values() if st.chan is chs]

    # -- lifecycle ---------------------------------------------------------------------------------
    async def close(
        self, owned: Sequence[ChannelId], expected_generation: str
    ) -> CleanupObservation:
        removed: list[ChannelId] = []
        absent: list[ChannelId] = []
        refused: list[ChannelId] = []
        unconfirmed: list[ChannelId] = []
        for cid in dict.fromkeys(owned):
            name = self.names.stream(cid)
            try:
                info = await self._stream_info(name)
                if info is None:
                    absent.append(cid)
                    self._forget_channel(cid)
                    continue
                gen = (info["config"].get("metadata") or {}).get("videoflow.owner.generation")
                if gen is not None and gen != expected_generation:
                    refused.append(cid)
                    continue
                await self._api(f"STREAM.DELETE.{name}")
                chs = self._chans.get(cid)
                if chs is not None and chs.live_adv:
                    with contextlib.suppress(Exception):
                        await chs.live_adv.unsubscribe()
                self._forget_channel(cid)
                for side in (self.names.dlq_stream(cid), self.names.adv_stream(cid)):
                    with contextlib.suppress(ApiError):
                        await self._api(f"STREAM.DELETE.{side}")
                removed.append(cid)
            except (ApiError, NoAnswer, NotSent, NoResponders):
                unconfirmed.append(cid)
        return CleanupObservation(tuple(removed), tuple(absent), tuple(refused), tuple(unconfirmed))

    async def channel_ids(self) -> list[ChannelId]:
        out: list[ChannelId] = []
        offset = 0
        while True:
            try:
                page = await self._api(
                    "STREAM.NAMES", {"offset": offset, "subject": f"{self.names.subject_prefix}.>"}
                )
            except (ApiError, NoAnswer, NotSent, NoResponders) as exc:
                raise BackendUnavailable(f"cannot list channels: {exc}", backend="nats") from exc
            names = page.get("streams") or []
            for n in names:
                cid = self.names.channel_of(n)
                if cid is not None:
                    out.append(cid)
            offset += len(names)
            if not names or offset >= int(page.get("total", 0)):
                break
        return sorted(set(out))

    async def subscription_ids(self, channel_id: ChannelId) -> list[SubscriptionId]:
        chs = await self._chan(channel_id)
        out: list[SubscriptionId] = []
        for stream in (chs.stream, chs.dlq):
            offset = 0
            while True:
                try:
                    page = await self._api(f"CONSUMER.LIST.{stream}", {"offset": offset})
                except ApiError as exc:
                    if exc.err_code == _api.STREAM_NOT_FOUND:
                        break
                    raise BackendUnavailable(
                        f"cannot list {channel_id}: {exc}", backend="nats"
                    ) from exc
                except (NoAnswer, NotSent, NoResponders) as exc:
                    raise BackendUnavailable(
                        f"cannot list {channel_id}: {exc}", backend="nats"
                    ) from exc
                infos = page.get("consumers") or []
                for info in infos:
                    sid = self.names.consumer_id(channel_id, info["name"])
                    if sid is not None and self._sub_spec_from(sid, info["config"]) is not None:
                        out.append(sid)
                offset += len(infos)
                if not infos or offset >= int(page.get("total", 0)):
                    break
        return sorted(out)

    # -- optional profiles -----------------------------------------------------------------------
    async def commit_control(
        self, channel_id: ChannelId, key: str, expected_version: str | None, value: bytes
    ) -> bool:
        if not self.durable_control:
            raise Unsupported("durable control is not offered", capability="durable_control")
        value = validate_control_write(key, expected_version, value)
        await self._chan(channel_id)
        nc = await self._conn()
        return await _profiles.commit(
            nc, self.names, channel_id, key, expected_version, value, self.request_timeout
        )

    async def control_state(
        self, channel_id: ChannelId, key: str
    ) -> tuple[bytes | None, str | None]:
        if not self.durable_control:
            raise Unsupported("durable control is not offered", capability="durable_control")
        await self._chan(channel_id)
        m, body = await _profiles.last(
            self._api,
            _profiles.ctl_stream(self.names, channel_id),
            _profiles.ctl_subject(self.names, channel_id, key),
        )
        return (None, None) if m is None else (body, str(m["seq"]))

    async def replay(self, channel_id: ChannelId, event_id: str) -> Envelope | None:
        """The archived envelope for ``event_id`` (works after ``close``); None once the server
        expired it (past the horizon) or it was never archived."""
        if not self.archive:
            raise Unsupported("archive is not offered", capability="archive")
        m, body = await _profiles.last(
            self._api,
            _profiles.arc_stream(self.names, channel_id),
            _profiles.arc_subject(self.names, channel_id, event_id),
        )
        if m is None or body is None:
            return None
        src = _parse_headers(base64.b64decode(m.get("hdrs", "") or ""))
        meta = _meta_dec(src["Vf"]) if "Vf" in src else _Meta()
        pid = src.get("Vf-Pid", event_id)
        return Envelope(
            channel=channel_id,
            publication_id=pid,
            body=body,
            event_id=pid if meta.e is None else meta.e,
            kind=src.get("Vf-Kind", "data"),
            partition_key=src.get("Vf-Pk"),
            event_ts=meta.ts,
            source_epoch=meta.ep,
            source_offset=meta.off,
            headers=meta.h,
        )

    async def capabilities(self) -> MessagingCapabilities:
        return MessagingCapabilities(
            backend="nats-jetstream",
            latest_per_key=self.latest_per_key,
            durable_control=self.durable_control,
            archive=self.archive,
            archive_horizon_seconds=self.archive_horizon_seconds if self.archive else 0.0,
            persistent=True,
            replication_factor=self.replication_factor,
            max_payload_bytes=self.max_payload,
            dedup_window_seconds=self.dedup_window_seconds,
            publication_ledger=True,
            stale_settle_detection=True,
            unresolved_ledger=True,
        )


def seen_iter(st: SubState) -> list[int]:
    return list(st.delivered_seqs)


async def connect(opts: dict[str, Any], servers: list[str], seconds: float) -> Any:
    """``nats.connect`` bounded by ``seconds``; every failure is :class:`BackendUnavailable`
    with the cause chained (nats-py can keep retrying an unreachable server forever)."""
    try:
        with anyio.fail_after(seconds):
            return await nats.connect(**opts)
    except TimeoutError as exc:
        raise BackendUnavailable(
            f"cannot connect to NATS at {servers} within {seconds:g} s", backend="nats"
        ) from exc
    except Exception as exc:  # nats-py raises assorted errors (OSError, NoServersError…)
        raise BackendUnavailable(
            f"cannot connect to NATS at {servers}: {exc}", backend="nats"
        ) from exc


def _stamped(cfg: dict[str, Any], operation_id: str) -> dict[str, Any]:
    """``cfg`` with the creating operation recorded in its metadata (not part of any spec)."""
    out = dict(cfg)
    out["metadata"] = {**(cfg.get("metadata") or {}), CREATED_BY: operation_id}
    return out


def _parse_headers(raw: bytes) -> dict[str, str]:
    """``NATS/1.0\\r\\nKey: value\\r\\n…`` → dict (the raw form STREAM.MSG.GET returns)."""
    out: dict[str, str] = {}
    for line in raw.decode(errors="replace").split("\r\n")[1:]:
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out


__all__ = ["JetStreamMessagingBackend"]
