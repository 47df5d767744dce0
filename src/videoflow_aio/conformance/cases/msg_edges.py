"""MSG conformance cases at the edges (issue #25): what a settle or a renew answers when
the server changed under the lease — a message aged out, a settle reply lost and retried.

Written against :mod:`videoflow_aio.contracts.messaging` only, like ``msg``; every duration
goes through the harness.
"""

from __future__ import annotations

from typing import Final

from ...contracts import Known
from ...contracts.messaging import (
    ChannelSpec,
    Completed,
    Delivery,
    MessagingBackend,
    SettleConfirmed,
    SettleOutcome,
    SettleStale,
    SettleUnknown,
    SubscriptionSpec,
    Terminal,
    make_channel,
)
from .._case import case
from .._harness import MessagingHarness as Harness
from ._msg_scenarios import (
    _chan_obs,
    _channel,
    _pids,
    _publish,
    _recv,
    _sub,
    _sub_obs,
    _subscribed,
    _window,
)

M: Final = "messaging"


async def _leased(
    h: Harness, b: MessagingBackend, node: str
) -> tuple[ChannelSpec, SubscriptionSpec, list[Delivery]]:
    """A channel with max_age 60 and a lease (ack wait 120) on its one message."""
    ch = await _channel(
        h, b, node, max_age_seconds=h.seconds(60), dedup_window_seconds=_window(h, 30)
    )
    sub = await _sub(h, b, ch.channel, ack_wait_seconds=h.seconds(120))
    await _publish(h, b, ch.channel, "old")
    got = await _recv(h, b, sub.id)
    h.equal(_pids(got), ["old"], "leased")
    return ch, sub, got


@case(
    "MSG-071",
    "max_age passing under a live lease: renew is not held and settle is Stale with a drop, "
    "whether or not anything read the subscription in between",
    contract=M,
)
async def aged_under_lease(h: Harness) -> None:
    b = await h.open()
    unread = await _leased(h, b, "n1")
    read = await _leased(h, b, "n2")
    await h.sleep(70)  # past max_age, well inside the leases
    for (ch, sub, got), look in ((unread, False), (read, True)):
        label = "with a read in between" if look else "with no read in between"
        if look:
            await _chan_obs(h, b, ch.channel)
            await _sub_obs(h, b, sub.id)
        renewed = await b.renew(got[0].token)
        h.check(renewed.held is False, f"renewing an aged-out message ({label}): {renewed!r}")
        ans = await b.settle(got[0].token, Completed(), f"s-{ch.channel.node}")
        if (await b.capabilities()).stale_settle_detection:
            h.check(
                isinstance(ans, SettleStale), f"settling an aged-out message ({label}): {ans!r}"
            )
        obs = await _sub_obs(h, b, sub.id)
        h.equal((obs.leased, obs.dropped), (0, 1), f"lease gone, one drop ({label})")
        h.equal((await _chan_obs(h, b, ch.channel)).messages, 0, f"aged out ({label})")


async def _lost_then_retried(
    h: Harness, outcomes: list[SettleOutcome], past_deadline: bool
) -> None:
    """Settles applied whose answers were lost, retried with the same settlement ids before
    or after the lease deadline: each retry answers what the first did. One message per
    outcome, on one subscription."""
    b, ch, sub = await _subscribed(h, ack_wait_seconds=h.seconds(5 if past_deadline else 30))
    for i in range(len(outcomes)):
        await _publish(h, b, ch.channel, f"p{i}")
    got = await _recv(h, b, sub.id)
    h.equal(_pids(got), [f"p{i}" for i in range(len(outcomes))], "leased")
    for d, outcome in zip(got, outcomes, strict=True):
        await h.controls(b).lose_reply(sub.id)
        first = await b.settle(d.token, outcome, f"s-{d.sequence}")
        h.check(isinstance(first, SettleUnknown), f"a settle whose reply was lost: {first!r}")
    when = "after" if past_deadline else "before"
    if past_deadline:
        await h.sleep(10)  # the lease deadline passes
    for d, outcome in zip(got, outcomes, strict=True):
        again = await b.settle(d.token, outcome, f"s-{d.sequence}")
        h.check(
            isinstance(again, SettleConfirmed) and again.sequence == d.sequence,
            f"the retry {when} the lease deadline of a settle that applied: {again!r}",
        )
    h.equal(_pids(await _recv(h, b, sub.id, wait=10)), [], "never redelivered")
    obs = await _sub_obs(h, b, sub.id)
    dead = sum(isinstance(o, Terminal) for o in outcomes)
    h.equal((obs.leased, obs.pending, obs.dropped), (0, 0, 0), "settled, nothing lost")
    h.equal(obs.dead_lettered, dead, "dead letters")
    floor = await b.observe_ack_floor(sub.id)
    h.check(
        isinstance(floor, Known) and floor.value >= got[-1].sequence,
        f"the ack floor is past them: {floor!r}",
    )


@case(
    "MSG-072",
    "a settle applied whose reply was lost, retried before the lease deadline, is Confirmed",
    contract=M,
    controls=["lose_reply"],
)
async def lost_reply_retried_in_lease(h: Harness) -> None:
    await _lost_then_retried(h, [Completed()], past_deadline=False)


@case(
    "MSG-073",
    "a settle applied whose reply was lost, retried after the lease deadline, is Confirmed "
    "(never Stale: the message is settled and never comes back)",
    contract=M,
    controls=["lose_reply"],
)
async def lost_reply_retried_past_lease(h: Harness) -> None:
    await _lost_then_retried(h, [Completed(), Terminal("bad")], past_deadline=True)


@case(
    "MSG-074",
    "a renewal applied whose reply was lost is unknown (held None), never 'not held'; "
    "renewed again it is held, and the lease settles",
    contract=M,
    controls=["lose_reply"],
)
async def lost_renew_reply(h: Harness) -> None:
    b, ch, sub = await _subscribed(h, ack_wait_seconds=h.seconds(30))
    await _publish(h, b, ch.channel, "p1")
    got = await _recv(h, b, sub.id)
    h.equal(_pids(got), ["p1"], "leased")
    await h.controls(b).lose_reply(sub.id)
    lost = await b.renew(got[0].token)
    h.check(lost.held is None, f"a renewal whose reply was lost: {lost!r}")
    again = await b.renew(got[0].token)
    h.check(again.held is True, f"renewed again: {again!r}")
    ans = await b.settle(got[0].token, Completed(), "s-1")
    h.check(isinstance(ans, SettleConfirmed), f"the lease still holds: {ans!r}")
    h.equal(_pids(await _recv(h, b, sub.id, wait=2)), [], "never redelivered")


@case(
    "MSG-802",
    "a settle and a renewal while the consumer's leader is killed are never Stale nor 'not "
    "held' (the lease is live); the same settle confirms once a leader is elected",
    contract=M,
    needs=("replicated",),
    controls=("subscription_leader", "kill_member", "restart_member"),
)
async def consumer_leader_killed(h: Harness) -> None:
    b = await h.open()
    controls = h.controls(b)
    spec = make_channel("flow", "run", "node", "work", "limits", replicas=3, persistence=True)
    await b.ensure_channel(spec, "op-ch")
    sub = await _sub(h, b, spec.channel, ack_wait_seconds=h.seconds(1200))
    for pid in ("p1", "p2"):
        await _publish(h, b, spec.channel, pid)
    got = await _recv(h, b, sub.id, n=2, wait=20)
    h.equal(_pids(got), ["p1", "p2"], "leased")
    leader = await controls.subscription_leader(sub.id)
    await controls.kill_member(leader)
    try:
        renewed = await b.renew(got[1].token)
        first = await b.settle(got[0].token, Completed(), "s-1")
    finally:
        await controls.restart_member(leader)
    h.check(renewed.held is not False, f"a renewal during the election: {renewed!r}")
    h.check(not isinstance(first, SettleStale), f"a settle during the election: {first!r}")
    again = first
    with h.fail_after(1200):  # once a leader is elected the same settle id answers for good
        while isinstance(again, SettleUnknown):
            await h.sleep(4)
            again = await b.settle(got[0].token, Completed(), "s-1")
    h.check(isinstance(again, SettleConfirmed), f"the settle once a leader leads: {again!r}")
    last = await b.settle(got[1].token, Completed(), "s-2")
    h.check(isinstance(last, SettleConfirmed), f"the renewed lease settles: {last!r}")
    h.equal(_pids(await _recv(h, b, sub.id, wait=10)), [], "neither is redelivered")


# cases register themselves by ID (``case``) and run through the registry: none is imported by
# name, so the module exports nothing
__all__: list[str] = []
