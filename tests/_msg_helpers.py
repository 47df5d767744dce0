"""Helpers for the messaging tests: a channel + subscription in one call, fates from the log."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import anyio

from videoflow_aio.contracts.messaging import (
    ChannelSpec,
    Completed,
    Delivery,
    SubscriptionSpec,
    make_channel,
    make_subscription,
)
from videoflow_aio.memory.messaging import MemoryMessagingBackend
from videoflow_aio.observe import ObservationLog

FINAL = ("settle", "dead_letter", "drop")


async def setup(
    *, sub_kw: dict[str, Any] | None = None, log: ObservationLog | None = None, **chan_kw: Any
) -> tuple[MemoryMessagingBackend, ChannelSpec, SubscriptionSpec]:
    """A backend with one channel (``chan_kw``) and one subscription ``w`` (``sub_kw``)."""
    backend_kw = {k: chan_kw.pop(k) for k in list(chan_kw) if k.startswith("b_")}
    b = MemoryMessagingBackend(log=log, **{k[2:]: v for k, v in backend_kw.items()})
    chan_kw.setdefault("retention", "limits")
    ch = make_channel("f", "r", "n", chan_kw.pop("profile", "work"), **chan_kw)
    await b.ensure_channel(ch, "op-ch")
    sub = make_subscription(ch.channel, "w", **(sub_kw or {}))
    await b.ensure_subscription(sub, "op-sub")
    return b, ch, sub


def deadline(seconds: float = 1.0) -> float:
    return anyio.current_time() + seconds


async def settle_all(b: MemoryMessagingBackend, ds: list[Delivery], tag: str = "s") -> None:
    for d in ds:
        await b.settle(d.token, Completed(), f"{tag}-{d.token.lease_id}")


def fates(log: ObservationLog) -> dict[tuple[str, str], list[str]]:
    """Per (publication id, subscription name): the fate events in order.

    ``settle``/``dead_letter`` name one subscription; a ``drop`` names every subscription that
    lost the message; ``unresolved`` may later be followed by a drop (evicted while unresolved).
    """
    out: dict[tuple[str, str], list[str]] = defaultdict(list)
    for e in log.events(("settle", "dead_letter", "drop", "unresolved")):
        if e.kind == "drop":
            subs = e.attrs.get("subscriptions") or []
            assert isinstance(subs, list)
            for s in subs:
                out[(e.ident, s)].append("drop")
        else:
            out[(e.ident, str(e.attrs["subscription"]))].append(e.kind)
    return out
