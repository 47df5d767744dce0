"""Channels as JetStream streams: configuration both ways, ``ensure_channel``, ``close``.

The slot stream's configuration is derived from the :class:`ChannelSpec` (limits, retention,
dedup window) with the spec itself in the stream's metadata, so ``ensure_channel`` reads back
the effective spec from the server. The side streams (``_names``) are created before the slot
stream, so the index and the advisory ledger miss nothing of it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

import msgspec

from ...contracts.errors import (
    BackendUnavailable,
    NotFound,
    OutcomeUnknown,
    Unsupported,
    ValidationError,
)
from ...contracts.messaging import (
    IMMUTABLE_CHANNEL_FIELDS,
    LATEST_PER_KEY_PROFILE,
    ChannelId,
    ChannelSpec,
    CleanupObservation,
    SubscriptionId,
    VerifiedChannel,
    check_immutable,
)
from . import _api, _profiles
from ._api import ApiError, CallFailed, map_exceptions, unavailable
from ._connection import Client
from ._state import ChanState
from ._wire import Api, Reply, StreamConfig, StreamInfo, StreamNames

NS = 1_000_000_000
MIN_DUPLICATE_WINDOW = NS // 10
"""The server's smallest ``duplicate_window`` (100 ms); a channel without dedup sends no
``Nats-Msg-Id``, so its window never applies."""
INDEX_MAX_MSGS = 1 << 16
"""How many index records (each up to ``_publish.INDEX_BATCH`` publications) the index stream
keeps; an evicted sequence whose record is gone cannot be attributed (its drop is
``Unknown``)."""
CREATED_BY = "videoflow.created_by"


def stamped(cfg: dict[str, Any], operation_id: str) -> dict[str, Any]:
    """``cfg`` with the creating operation recorded in its metadata (not part of any spec)."""
    out = dict(cfg)
    out["metadata"] = {**(cfg.get("metadata") or {}), CREATED_BY: operation_id}
    return out


def window(spec: ChannelSpec, limit: int) -> int:
    """The channel's effective dedup window in whole seconds (capped by ``limit`` and by
    ``max_age``, which the server requires)."""
    w = min(spec.dedup_window_seconds, limit)
    if spec.max_age_seconds is not None:
        w = min(w, int(spec.max_age_seconds))
    return max(w, 0)


def stream_config(c: Client, spec: ChannelSpec, dedup_limit: int) -> dict[str, Any]:
    ch = spec.channel
    win = window(spec, dedup_limit)
    per_key = spec.profile == LATEST_PER_KEY_PROFILE
    return {
        "name": c.names.stream(ch),
        "subjects": c.names.slot_subjects(ch),
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
        "duplicate_window": win * NS if win > 0 else MIN_DUPLICATE_WINDOW,
        "metadata": {
            "videoflow.profile": spec.profile,
            "videoflow.max_msgs": str(spec.max_msgs),
            "videoflow.per_subject": "1" if spec.per_subject_limits else "0",
            "videoflow.persistence": "1" if spec.persistence else "0",
            "videoflow.dedup": str(win),
            "videoflow.required": msgspec.json.encode([s.consumer for s in spec.required]).decode(),
            **{f"videoflow.owner.{k}": v for k, v in spec.owner_labels.items()},
        },
    }


def spec_from(ch: ChannelId, cfg: StreamConfig) -> ChannelSpec:
    """The effective ChannelSpec read back from a stream's configuration."""
    meta = cfg.meta
    per_subject = meta.get("videoflow.per_subject") == "1"
    max_msgs = cfg.max_msgs
    if per_subject or max_msgs < 0:
        max_msgs = int(meta.get("videoflow.max_msgs", cfg.max_msgs_per_subject))
    max_bytes = cfg.max_bytes
    max_age = cfg.max_age
    required = msgspec.json.decode(meta.get("videoflow.required", "[]") or "[]")
    owner = {
        k[len("videoflow.owner.") :]: v for k, v in meta.items() if k.startswith("videoflow.owner.")
    }
    return ChannelSpec(
        channel=ch,
        profile=meta.get("videoflow.profile", "work"),
        retention=cfg.retention,
        required=tuple(SubscriptionId(ch, c) for c in required),
        max_msgs=max_msgs,
        max_bytes=None if max_bytes < 0 else max_bytes,
        max_age_seconds=None if max_age <= 0 else max_age / NS,
        overflow="reject" if cfg.discard == "new" else "evict_oldest",
        dedup_window_seconds=int(meta.get("videoflow.dedup", 0)),
        replicas=cfg.num_replicas,
        persistence=meta.get("videoflow.persistence") == "1" or cfg.storage == "file",
        per_subject_limits=per_subject,
        owner_labels=owner,
    )


def side_configs(
    c: Client, spec: ChannelSpec, control: bool, horizon: float | None
) -> list[dict[str, Any]]:
    """Every stream besides the slot: index, ledgers, dead letters, optional profiles."""
    ch = spec.channel
    names = c.names
    base = {
        "retention": "limits",
        "storage": "file" if spec.persistence else "memory",
        "num_replicas": spec.replicas,
        "discard": "old",
        "duplicate_window": MIN_DUPLICATE_WINDOW,
        "metadata": {f"videoflow.owner.{k}": v for k, v in spec.owner_labels.items()},
    }
    cfgs = [
        {
            **base,
            "name": names.idx_stream(ch),
            "subjects": [names.index_subject(ch)],
            "max_msgs": INDEX_MAX_MSGS,
            "allow_direct": True,
        },
        {
            **base,
            "name": names.adv_stream(ch),
            "subjects": names.adv_subjects(ch),
            "allow_direct": True,
        },
        {
            **base,
            "name": names.acct_stream(ch),
            "subjects": names.acct_subjects(ch),
            "max_msgs_per_subject": 1,
        },
        {**base, "name": names.dlq_stream(ch), "subjects": names.dlq_subjects(ch)},
    ]
    return cfgs + _profiles.stream_configs(names, ch, spec.replicas, control, horizon)


def side_streams(c: Client, ch: ChannelId) -> list[str]:
    """Names of the streams ``close`` removes with the slot (not the archive)."""
    n = c.names
    out = [n.dlq_stream(ch), n.adv_stream(ch), n.idx_stream(ch), n.acct_stream(ch)]
    return [*out, _profiles.ctl_stream(n, ch)]


async def ensure_side_streams(c: Client, cfgs: Sequence[dict[str, Any]]) -> None:
    for cfg in cfgs:
        name = cfg["name"]
        if await c.stream_info(name) is None:
            try:
                await c.api(f"STREAM.CREATE.{name}", cfg)
            except ApiError as exc:
                if exc.err_code != _api.STREAM_NAME_IN_USE:
                    raise


async def placeholder(c: Client, ch: ChannelId, sid: SubscriptionId, sample: str) -> None:
    """Create the durable a ``required`` subscription will use, if it does not exist, so
    interest exists before the first publish (JetStream drops a message no consumer wants).
    It filters every slot kind until ``ensure_subscription`` narrows it."""
    stream = c.names.stream(ch)
    cfg = {
        "durable_name": c.names.consumer(sid),
        "ack_policy": "explicit",
        "deliver_policy": "all",
        "filter_subjects": c.names.slot_subjects(ch),
        "sample_freq": sample,
        "metadata": {"videoflow.placeholder": "1"},
    }
    try:
        await c.api(
            f"CONSUMER.CREATE.{stream}.{cfg['durable_name']}",
            {"stream_name": stream, "config": cfg, "action": "create"},
        )
    except ApiError as exc:
        if exc.err_code != _api.CONSUMER_EXISTS:
            raise


def _refused(ch: ChannelId, exc: BaseException) -> BaseException:
    assert isinstance(exc, ApiError)
    if exc.err_code in (_api.INVALID_CONFIG, _api.STREAM_NAME_IN_USE):
        return _api.refused(f"channel {ch}", ch.name, exc)
    if _api.replicas_refused(exc):
        return Unsupported(exc.description, capability="replicas")
    return BackendUnavailable(f"ensure_channel {ch}: {exc}", backend="nats")


def ensure_errors(ch: ChannelId) -> map_exceptions:
    """The error map of ``ensure_channel``: a refusal names the field, no answer is unknown."""
    return map_exceptions(
        {
            ApiError: lambda exc: _refused(ch, exc),
            CallFailed: lambda exc: OutcomeUnknown(
                f"ensure_channel {ch}: {exc}", operation="ensure_channel"
            ),
        }
    )


async def ensure_channel(
    c: Client,
    spec: ChannelSpec,
    operation_id: str,
    *,
    dedup_limit: int,
    side: list[dict[str, Any]],
    sample: str,
) -> VerifiedChannel:
    if not isinstance(spec, ChannelSpec):
        raise ValidationError("spec must be a ChannelSpec", field="spec")
    ch = spec.channel
    name = c.names.stream(ch)
    want = stream_config(c, spec, dedup_limit)
    effective = spec_from(ch, msgspec.convert(want, StreamConfig))
    with ensure_errors(ch):
        info = await c.stream_info(name)
        created = updated = False
        if info is None:
            await ensure_side_streams(c, side)
            try:
                # the creating operation is stamped in the metadata: a concurrent create of the
                # same spec by another operation then differs (10058) instead of both being
                # told did_create (the server answers an identical create as created)
                info = await c.api(f"STREAM.CREATE.{name}", stamped(want, operation_id), StreamInfo)
                created = True
            except ApiError as exc:
                if exc.err_code != _api.STREAM_NAME_IN_USE:
                    raise
                info = await c.stream_info(name)  # lost a race: inspect the winner
                if info is None:
                    raise
        current = spec_from(ch, info.config)
        if not created:
            check_immutable(IMMUTABLE_CHANNEL_FIELDS, current, effective, "channel", ch)
            await ensure_side_streams(c, side)
            if current != effective:
                stamp = info.config.meta.get(CREATED_BY, "")
                info = await c.api(f"STREAM.UPDATE.{name}", stamped(want, stamp), StreamInfo)
                updated = True
                current = spec_from(ch, info.config)
        for req in spec.required:
            await placeholder(c, ch, req, sample)
    st = c.chans.get(ch)
    if st is None:
        st = c.chans[ch] = new_chan(c, current, info.created)
    else:
        seen(st, info)
    st.spec = current
    return VerifiedChannel(current, created=created, updated=updated)


def new_chan(c: Client, spec: ChannelSpec, created: str) -> ChanState:
    n, ch = c.names, spec.channel
    return ChanState(
        ch,
        spec,
        n.stream(ch),
        n.dlq_stream(ch),
        n.adv_stream(ch),
        n.idx_stream(ch),
        n.acct_stream(ch),
        created=created,
    )


def seen(chs: ChanState, info: StreamInfo | None) -> StreamInfo | None:
    """``info`` (the slot stream's) read: a new incarnation resets what was known of the old
    before anything compares it with ``info``. Returns ``info`` (None: no stream)."""
    created = info.created if info is not None else ""
    if created and created != chs.created:
        chs.new_stream(created)
    return info


async def chan(c: Client, ch: ChannelId) -> ChanState:
    """This client's state for ``ch``, read from the server the first time."""
    st = c.chans.get(ch)
    if st is not None:
        return st
    with unavailable(f"cannot read channel {ch}"):
        info = await c.stream_info(c.names.stream(ch))
    if info is None:
        raise NotFound(f"no channel {ch}", kind="channel", name=ch.name)
    st = c.chans[ch] = new_chan(c, spec_from(ch, info.config), info.created)
    return st


async def close(
    c: Client, owned: Sequence[ChannelId], expected_generation: str
) -> CleanupObservation:
    removed: list[ChannelId] = []
    absent: list[ChannelId] = []
    refused: list[ChannelId] = []
    unconfirmed: list[ChannelId] = []
    for cid in dict.fromkeys(owned):
        name = c.names.stream(cid)
        try:
            info = await c.stream_info(name)
            if info is None:
                absent.append(cid)
                c.forget_channel(cid)
                continue
            gen = info.config.meta.get("videoflow.owner.generation")
            if gen is not None and gen != expected_generation:
                refused.append(cid)
                continue
            await c.api(f"STREAM.DELETE.{name}")
            st = c.chans.get(cid)
            if st is not None and st.live_adv:
                with contextlib.suppress(Exception):  # the connection may be gone
                    await st.live_adv.unsubscribe()
            c.forget_channel(cid)
            for side in side_streams(c, cid):
                with contextlib.suppress(ApiError):  # absent (never created) or already gone
                    await c.api(f"STREAM.DELETE.{side}")
            removed.append(cid)
        except CallFailed:
            unconfirmed.append(cid)
    return CleanupObservation(tuple(removed), tuple(absent), tuple(refused), tuple(unconfirmed))


async def channel_ids(c: Client) -> list[ChannelId]:
    out: list[ChannelId] = []
    offset = 0
    while True:
        with unavailable("cannot list channels"):
            page = await c.api(
                "STREAM.NAMES",
                {"offset": offset, "subject": f"{c.names.subject_prefix}.>"},
                StreamNames,
            )
        names = page.streams or []
        for n in names:
            cid = c.names.channel_of(n)
            if cid is not None:
                out.append(cid)
        offset += len(names)
        if not names or offset >= page.total:
            break
    return sorted(set(out))


async def drop_namespace(api: Api, stream_prefix: str) -> int:
    """Delete every stream named ``<stream_prefix>__…`` through ``api`` (a JetStream API call
    ``api(subject, body, into)``); how many."""
    names: list[str] = []
    offset = 0
    while True:
        page = await api("STREAM.NAMES", {"offset": offset}, StreamNames)
        batch = page.streams or []
        names += batch
        offset += len(batch)
        if not batch or offset >= page.total:
            break
    mine = [n for n in names if n.startswith(stream_prefix + "__")]
    for name in mine:
        try:
            await api(f"STREAM.DELETE.{name}", None, Reply)
        except ApiError as exc:
            if exc.err_code != _api.STREAM_NOT_FOUND:
                raise
    return len(mine)
