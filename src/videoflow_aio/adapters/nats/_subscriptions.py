"""Subscriptions as durable pull consumers: configuration both ways, ``ensure_subscription``.

A consumer's identity is its name *and* its ``created`` stamp: one deleted and created again
(by ``ensure_subscription`` after an administrator removed it) is a new incarnation, and this
client's ledgers of the old one are dropped (:meth:`SubState.reset`). Every consumer samples
all its acks (``sample_freq: 100%``): the ack metric is the server's evidence that an ack
applied (see ``_settle``).
"""

from __future__ import annotations

from typing import Any

from ...contracts.errors import NotFound, OutcomeUnknown, ValidationError
from ...contracts.messaging import (
    IMMUTABLE_SUBSCRIPTION_FIELDS,
    ChannelId,
    SubscriptionId,
    SubscriptionSpec,
    VerifiedSubscription,
    check_immutable,
)
from . import _api
from ._api import ApiError, CallFailed, map_exceptions, unavailable
from ._channels import NS, chan, stamped
from ._connection import Client
from ._state import ChanState, SubState
from ._wire import ConsumerConfig, ConsumerInfo, ConsumerList

SAMPLE = "100%"
CREATED_BY = "videoflow.created_by"


def consumer_config(c: Client, spec: SubscriptionSpec, start_seq: int) -> dict[str, Any]:
    ch = spec.channel
    cfg: dict[str, Any] = {
        "durable_name": c.names.consumer(spec.id),
        "ack_policy": "explicit",
        "ack_wait": int(spec.ack_wait_seconds * NS),
        "max_deliver": spec.max_deliver,
        "max_ack_pending": spec.item_credit,
        "filter_subject": c.names.filter(ch, spec.kind, spec.partition),
        "deliver_policy": "by_start_sequence" if start_seq > 1 else "all",
        "sample_freq": SAMPLE,
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


def spec_from(sid: SubscriptionId, cfg: ConsumerConfig) -> SubscriptionSpec | None:
    """The subscription a consumer stands for; None for a placeholder or a foreign consumer."""
    meta = cfg.meta
    if meta.get("videoflow.placeholder") == "1" or "videoflow.kind" not in meta:
        return None
    part = meta.get("videoflow.partition", "")
    return SubscriptionSpec(
        id=sid,
        competing=meta.get("videoflow.competing", "1") == "1",
        partition=int(part) if part else None,
        ack_wait_seconds=cfg.ack_wait / NS,
        max_deliver=cfg.max_deliver,
        item_credit=cfg.max_ack_pending,
        byte_credit=int(meta.get("videoflow.byte_credit", 67108864)),
        kind=meta["videoflow.kind"],
    )


async def _create(
    c: Client, stream: str, consumer: str, spec: SubscriptionSpec, operation_id: str
) -> ConsumerInfo | None:
    """Create the consumer from the stream's first retained sequence; None when another
    client created it first (read it back)."""
    si = await c.stream_info(stream)
    if si is None:
        c.forget_channel(spec.channel)
        raise NotFound(f"no channel {spec.channel}", kind="channel", name=spec.channel.name)
    first = si.state.first_seq
    last = si.state.last_seq
    start = first if first > 0 else last + 1
    cfg = stamped(consumer_config(c, spec, start), operation_id)
    try:
        return await c.api(
            f"CONSUMER.CREATE.{stream}.{consumer}",
            {"stream_name": stream, "config": cfg, "action": "create"},
            ConsumerInfo,
        )
    except ApiError as exc:
        if exc.err_code != _api.CONSUMER_EXISTS:
            raise
        return None


async def _created_or_found(
    c: Client, stream: str, consumer: str, spec: SubscriptionSpec, operation_id: str
) -> tuple[ConsumerInfo, bool]:
    """The consumer's info, and whether this call created it."""
    info = await c.consumer_info(stream, consumer)
    if info is not None:
        return info, False
    info = await _create(c, stream, consumer, spec, operation_id)
    if info is not None:
        return info, True
    info = await c.consumer_info(stream, consumer)  # another client created it first
    if info is None:
        raise OutcomeUnknown(
            f"subscription {spec.id} vanished while created", operation="ensure_subscription"
        )
    return info, False


async def _reconcile(
    c: Client, stream: str, consumer: str, spec: SubscriptionSpec, info: ConsumerInfo, op: str
) -> ConsumerInfo | None:
    """Update an existing consumer to ``spec`` (a placeholder keeps its start and narrows
    its filter); None when it is already so. An immutable change raises."""
    raw = info.config
    current = spec_from(spec.id, raw)
    if current is not None:
        check_immutable(IMMUTABLE_SUBSCRIPTION_FIELDS, current, spec, "subscription", spec.id)
    if current == spec and raw.sample_freq == SAMPLE:
        return None
    start = raw.opt_start_seq or 1
    stamp = raw.meta.get(CREATED_BY, "")
    cfg = stamped(consumer_config(c, spec, start), stamp or op)
    if current is None:  # a placeholder: keep its start, narrow its filter
        cfg["deliver_policy"] = raw.deliver_policy
        cfg.pop("opt_start_seq", None)
        if raw.opt_start_seq is not None:
            cfg["opt_start_seq"] = raw.opt_start_seq
    return await c.api(
        f"CONSUMER.CREATE.{stream}.{consumer}",
        {"stream_name": stream, "config": cfg, "action": "update"},
        ConsumerInfo,
    )


async def ensure_subscription(
    c: Client, spec: SubscriptionSpec, operation_id: str
) -> VerifiedSubscription:
    if not isinstance(spec, SubscriptionSpec):
        raise ValidationError("spec must be a SubscriptionSpec", field="spec")
    chs = await chan(c, spec.channel)
    stream = chs.dlq if spec.kind == "dlq" else chs.stream
    consumer = c.names.consumer(spec.id)
    errors = map_exceptions(
        {
            ApiError: lambda exc: _api.refused(f"subscription {spec.id}", spec.id.name, exc),
            CallFailed: lambda exc: OutcomeUnknown(
                f"ensure_subscription {spec.id}: {exc}", operation="ensure_subscription"
            ),
        }
    )
    with errors:
        info, created = await _created_or_found(c, stream, consumer, spec, operation_id)
        before = spec_from(spec.id, info.config)
        updated = False
        if not created:
            changed = await _reconcile(c, stream, consumer, spec, info, operation_id)
            if changed is not None:
                info = changed
                # the first ensure of a required subscription turns its placeholder into it:
                # created, from the caller's point of view (the durable only held interest)
                created = before is None
                updated = before is not None and before != spec
    current = spec_from(spec.id, info.config)
    if current is None:  # pragma: no cover - the server dropped our metadata
        raise OutcomeUnknown(
            f"subscription {spec.id} did not read back", operation="ensure_subscription"
        )
    remember(c, chs, current, stream, consumer, info)
    return VerifiedSubscription(current, created=created, updated=updated)


def remember(
    c: Client,
    chs: ChanState,
    spec: SubscriptionSpec,
    stream: str,
    consumer: str,
    info: ConsumerInfo,
) -> SubState:
    """This client's state for the consumer ``info`` describes (a new incarnation resets it)."""
    cfg = info.config
    start = cfg.opt_start_seq or 1
    created = info.created
    st = c.subs.get(spec.id)
    if st is None:
        st = SubState(spec.id, spec, stream, consumer, chs, created=created, start_seq=start)
        c.subs[spec.id] = st
        c.by_consumer[(stream, consumer)] = st
    elif created and created != st.created:
        st.reset(created, start)
    st.spec = spec
    st.chan = chs
    st.sampled = cfg.sample_freq == SAMPLE
    return st


async def sub(c: Client, sid: SubscriptionId) -> SubState:
    """This client's state for ``sid``, read from the server the first time."""
    st = c.subs.get(sid)
    if st is not None:
        return st
    chs = await chan(c, sid.channel)
    consumer = c.names.consumer(sid)
    for stream in (chs.stream, chs.dlq):
        with unavailable(f"cannot read {sid}"):
            info = await c.consumer_info(stream, consumer)
        if info is None:
            continue
        spec = spec_from(sid, info.config)
        if spec is None:
            break
        return remember(c, chs, spec, stream, consumer, info)
    raise NotFound(f"no subscription {sid}", kind="subscription", name=sid.name)


async def _consumers_page(c: Client, stream: str, offset: int) -> ConsumerList | None:
    try:
        return await c.api(f"CONSUMER.LIST.{stream}", {"offset": offset}, ConsumerList)
    except ApiError as exc:
        if exc.err_code == _api.STREAM_NOT_FOUND:
            return None
        raise


async def subscription_ids(c: Client, channel_id: ChannelId) -> list[SubscriptionId]:
    chs = await chan(c, channel_id)
    out: list[SubscriptionId] = []
    for stream in (chs.stream, chs.dlq):
        offset = 0
        while True:
            with unavailable(f"cannot list {channel_id}"):
                page = await _consumers_page(c, stream, offset)
            if page is None:
                break
            infos = page.consumers or []
            for info in infos:
                sid = c.names.consumer_id(channel_id, info.name)
                if sid is not None and spec_from(sid, info.config) is not None:
                    out.append(sid)
            offset += len(infos)
            if not infos or offset >= page.total:
                break
    return sorted(out)
