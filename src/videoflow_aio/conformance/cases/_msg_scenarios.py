"""What the MSG conformance cases share: their conventions, their helpers, and the named
scenarios they start from (the ``msg_*`` modules hold the cases, one per section).

Written against :mod:`videoflow_aio.contracts.messaging` only. Every duration goes through
``h.seconds`` / ``h.deadline`` / ``h.sleep`` (real engines scale time down); model controls are
declared in ``controls=``. IDs are stable: MSG-018 is the durable-control profile and MSG-024 the
archive profile, as the source document fixes them.
"""

from __future__ import annotations

import itertools
import weakref
from collections.abc import Iterator
from typing import Any, Final, TypeVar

from ...contracts import Known, Unknown
from ...contracts.messaging import (
    Accepted,
    ChannelId,
    ChannelObservation,
    ChannelSpec,
    Completed,
    Delivery,
    MessagingBackend,
    PublishOutcome,
    Rejected,
    SubscriptionId,
    SubscriptionObservation,
    SubscriptionSpec,
    make_channel,
    make_envelope,
    make_subscription,
)
from .._harness import MessagingHarness as Harness  # every case here is a messaging case

M: Final = "messaging"
T = TypeVar("T")
_ops: weakref.WeakKeyDictionary[Harness, Iterator[int]] = weakref.WeakKeyDictionary()


def _op(h: Harness) -> str:
    """A fresh operation id, counted per run (a run's log never depends on what ran before)."""
    ops = _ops.get(h)
    if ops is None:
        ops = _ops[h] = itertools.count(1)
    return f"op-{next(ops)}"


def _window(h: Harness, s: float) -> int:
    """A dedup window in whole seconds (the spec field is an int), scaled."""
    return max(1, round(h.seconds(s)))


async def _channel(
    h: Harness, backend: MessagingBackend, node: str = "n1", **kw: Any
) -> ChannelSpec:
    kw.setdefault("retention", "limits")
    spec = make_channel("flow", "run1", node, kw.pop("profile", "work"), **kw)
    await backend.ensure_channel(spec, _op(h))
    return spec


async def _interest_channel(h: Harness, backend: MessagingBackend, *required: str) -> ChannelSpec:
    """Channel ``n1`` with interest retention, held for the subscriptions of the ``required``
    consumers (which are not ensured)."""
    cid = ChannelId("flow", "run1", "n1")
    need = tuple(SubscriptionId(cid, consumer) for consumer in required)
    return await _channel(h, backend, retention="interest", required=need)


async def _with_channel(
    h: Harness, node: str = "n1", *, capability: str | None = None, **kw: Any
) -> tuple[MessagingBackend, ChannelSpec]:
    """The scenario most cases start from: a fresh backend with one channel on it (``kw`` as
    for :func:`_channel`); with ``capability``, skipped unless the backend offers it."""
    b = await (h.open() if capability is None else _with_capability(h, capability))
    return b, await _channel(h, b, node, **kw)


async def _subscribed(
    h: Harness,
    consumer: str = "w",
    *,
    channel: dict[str, Any] | None = None,
    capability: str | None = None,
    **kw: Any,
) -> tuple[MessagingBackend, ChannelSpec, SubscriptionSpec]:
    """A fresh backend, one channel (``channel`` its options) and one subscription on it
    (``kw`` as for :func:`_sub`); ``capability`` as for :func:`_with_channel`."""
    b, ch = await _with_channel(h, capability=capability, **(channel or {}))
    return b, ch, await _sub(h, b, ch.channel, consumer, **kw)


async def _with_capability(h: Harness, capability: str, **options: Any) -> MessagingBackend:
    """A fresh backend opened with ``options``; the case is skipped unless the backend offers
    ``capability`` (a field of ``capabilities()``)."""
    b = await h.open(**options)
    h.require(getattr(await b.capabilities(), capability), capability)
    return b


async def _with_profile(
    h: Harness, profile: str, *, channel: dict[str, Any] | None = None, **options: Any
) -> tuple[MessagingBackend, ChannelSpec]:
    """A fresh backend opened with the option ``profile=True`` and ``options`` (the case is
    skipped unless it offers the capability of that name) and one channel on it (``channel``
    its options, as for :func:`_channel`)."""
    b = await _with_capability(h, profile, **{profile: True, **options})
    return b, await _channel(h, b, **(channel or {}))


async def _two_clients(
    h: Harness, consumer: str = "w", **kw: Any
) -> tuple[MessagingBackend, MessagingBackend, ChannelSpec, SubscriptionSpec]:
    """:func:`_subscribed` (same arguments), then another client of the same broker with the
    channel and the subscription ensured (:func:`_peer`): ``(backend, other, channel, sub)``."""
    b, ch, sub = await _subscribed(h, consumer, **kw)
    return b, await _peer(h, b, ch, sub), ch, sub


async def _acceptance_paused(
    h: Harness,
) -> tuple[MessagingBackend, ChannelSpec, SubscriptionSpec]:
    """:func:`_subscribed` with the channel's acceptance paused (control ``pause_acceptance``)."""
    b, ch, sub = await _subscribed(h)
    await h.controls(b).pause_acceptance(ch.channel)
    return b, ch, sub


async def _sub(
    h: Harness, backend: MessagingBackend, channel: ChannelId, consumer: str = "w", **kw: Any
) -> SubscriptionSpec:
    kw.setdefault("ack_wait_seconds", h.seconds(30))
    spec = make_subscription(channel, consumer, **kw)
    await backend.ensure_subscription(spec, _op(h))
    return spec


async def _publish(
    h: Harness, backend: MessagingBackend, channel: ChannelId, pid: str, **kw: Any
) -> PublishOutcome:
    return await backend.publish(make_envelope(channel, pid, **kw), h.deadline(5))


def _seq(h: Harness, out: PublishOutcome) -> int:
    """The sequence of an accepted publication (anything else fails the case)."""
    return h.expect_type(out, Accepted, "publish").sequence


def _why(h: Harness, out: PublishOutcome) -> str:
    """The reason of a rejected publication (anything else fails the case)."""
    return h.expect_type(out, Rejected, "publish").reason


async def _recv(
    h: Harness,
    backend: MessagingBackend,
    sub: SubscriptionId,
    n: int = 64,
    wait: float = 1.0,
    byte_credit: int = 1 << 30,
) -> list[Delivery]:
    return list(await backend.receive(sub, n, byte_credit, h.deadline(wait)))


async def _replica(
    h: Harness,
    backend: MessagingBackend,
    sub: SubscriptionId,
    into: list[tuple[float, list[Delivery]]],
) -> None:
    """A waiting replica (start it in a task group): one receive of one message, waiting up to
    60 s; appends to ``into`` when it returned and what it got."""
    got = await _recv(h, backend, sub, n=1, wait=60)
    into.append((h.now(), got))


def _known(h: Harness, obs: Known[T] | Unknown, what: str) -> T:
    """The value of a read that must succeed (an ``Unknown`` fails the case)."""
    h.check(isinstance(obs, Known), f"{what} failed: {obs!r}")
    assert isinstance(obs, Known)
    return obs.value


async def _sub_obs(
    h: Harness, backend: MessagingBackend, sub: SubscriptionId
) -> SubscriptionObservation:
    return _known(h, await backend.observe_subscription(sub), "observe_subscription")


async def _chan_obs(
    h: Harness, backend: MessagingBackend, channel: ChannelId
) -> ChannelObservation:
    return _known(h, await backend.observe_channel(channel), "observe_channel")


def _pids(deliveries: list[Delivery]) -> list[str]:
    return [d.envelope.publication_id for d in deliveries]


async def _settle_all(
    backend: MessagingBackend, deliveries: list[Delivery], prefix: str = "s"
) -> None:
    for d in deliveries:
        await backend.settle(d.token, Completed(), f"{prefix}-{d.token.lease_id}-{d.sequence}")


async def _peer(
    h: Harness, b: MessagingBackend, ch: ChannelSpec, *subs: SubscriptionSpec
) -> MessagingBackend:
    """Another client of ``b``'s broker, with the channel and subscriptions ensured."""
    c = await h.controls(b).another_client()
    seen = await c.ensure_channel(ch, _op(h))
    h.check(not seen.created, "another client finds the channel, it does not create it")
    h.equal(seen.effective.retention, ch.retention, "another client reads the same channel")
    for spec in subs:
        got = await c.ensure_subscription(spec, _op(h))
        h.check(not got.created, f"another client finds subscription {spec.id.consumer}")
    return c


def _right_or_unknown(h: Harness, obs: object, field: str, want: int, what: str) -> None:
    """``obs`` is Unknown, or its ``field`` is ``want``: never a wrong definite value."""
    if isinstance(obs, Unknown):
        h.check(bool(obs.reason), f"{what}: an Unknown says why")
        return
    h.check(isinstance(obs, Known), f"{what}: {obs!r}")
    assert isinstance(obs, Known)
    h.equal(getattr(obs.value, field), want, what)
