"""MSG conformance cases at the edges (issue #25): what a settle or a renew answers when
the server changed under the lease — a message aged out, a settle reply lost and retried.

Written against :mod:`videoflow_aio.contracts.messaging` only, like ``msg``; every duration
goes through the harness.
"""

from __future__ import annotations

from typing import Any, Final

from ...contracts.messaging import (
    Completed,
    SettleConfirmed,
    SettleStale,
    SettleUnknown,
)
from .._case import case
from .._harness import MessagingHarness as Harness
from .msg import _channel, _chan_obs, _pids, _publish, _recv, _sub, _sub_obs, _window

M: Final = "messaging"


async def _aged_under_lease(h: Harness, b: Any, node: str, look: bool) -> None:
    """A lease (ack wait 120) on a message whose max_age (60) passes under it; ``look``:
    something reads the subscription and the channel in between."""
    ch = await _channel(
        h, b, node, max_age_seconds=h.seconds(60), dedup_window_seconds=_window(h, 30)
    )
    sub = await _sub(h, b, ch.channel, ack_wait_seconds=h.seconds(120))
    await _publish(h, b, ch.channel, "old")
    got = await _recv(h, b, sub.id)
    h.equal(_pids(got), ["old"], "leased")
    await h.sleep(70)  # past max_age, well inside the lease
    label = "with a read in between" if look else "with no read in between"
    if look:
        await _chan_obs(h, b, ch.channel)
        await _sub_obs(h, b, sub.id)
    renewed = await b.renew(got[0].token)
    h.check(renewed.held is False, f"renewing an aged-out message ({label}): {renewed!r}")
    ans = await b.settle(got[0].token, Completed(), f"s-{node}")
    if (await b.capabilities()).stale_settle_detection:
        h.check(isinstance(ans, SettleStale), f"settling an aged-out message ({label}): {ans!r}")
    obs = await _sub_obs(h, b, sub.id)
    h.equal((obs.leased, obs.dropped), (0, 1), f"lease gone, one drop ({label})")
    h.equal((await _chan_obs(h, b, ch.channel)).messages, 0, f"aged out ({label})")


@case(
    "MSG-071",
    "max_age passing under a live lease: renew is not held and settle is Stale with a drop, "
    "whether or not anything read the subscription in between",
    contract=M,
)
async def aged_under_lease(h: Harness) -> None:
    b = await h.open()
    await _aged_under_lease(h, b, "n1", look=False)
    await _aged_under_lease(h, b, "n2", look=True)
