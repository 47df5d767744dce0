"""MSG conformance cases for issue #25 items 5 and 6: what other clients observe when the
server lost something under a lease — a final attempt lapsing while the consumer's leader is
replaced, a confirmed settle lost in a crash.

Truthful observation: a Known count is right, or the observation is ``Unknown``. Written
against :mod:`videoflow_aio.contracts.messaging` only; every duration goes through the
harness.
"""

from __future__ import annotations

from typing import Final

from ...contracts import Known
from ...contracts.messaging import (
    Completed,
    MessagingBackend,
    SettleConfirmed,
    SubscriptionId,
    SubscriptionObservation,
    SubscriptionSpec,
)
from .._case import case
from .._harness import MessagingHarness as Harness
from ._msg_scenarios import (
    _channel,
    _peer,
    _publish,
    _recv,
    _seq,
    _settle_all,
    _sub,
    _subscribed,
)

M: Final = "messaging"


async def _observed(
    h: Harness, b: MessagingBackend, sub: SubscriptionId, wait: float
) -> SubscriptionObservation | None:
    """The first Known observation within ``wait`` (an ``Unknown`` — a client reconnecting,
    a leader being elected — is asked again), or None."""
    with h.move_on_after(wait):
        while True:
            got = await b.observe_subscription(sub)
            if isinstance(got, Known):
                return got.value
            await h.sleep(2)
    return None


async def _two_persistent(h: Harness) -> tuple[MessagingBackend, SubscriptionSpec, int]:
    """A backend that outlives a restart, two messages on a persistent channel, the last's
    sequence."""
    b = await h.open(persistent=True)
    ch = await _channel(h, b, persistence=True)
    sub = await _sub(h, b, ch.channel, ack_wait_seconds=h.seconds(20), max_deliver=3)
    return b, sub, max([_seq(h, await _publish(h, b, ch.channel, p)) for p in ("p1", "p2")])


@case(
    "MSG-075",
    "a restart that lost a confirmed settle: no observation counts a message both unsettled "
    "(pending or leased) and settled (at or below the ack floor)",
    contract=M,
    controls=("restart_server",),
)
async def restart_lost_settle(h: Harness) -> None:
    b, sub, last = await _two_persistent(h)
    got = await _recv(h, b, sub.id, n=2, wait=5)
    h.equal(len(got), 2, "both leased")
    # the second settle lands inside the window the server saves its state in
    answers = [await b.settle(d.token, Completed(), f"s{d.sequence}") for d in got]
    confirmed = all(isinstance(a, SettleConfirmed) for a in answers)
    h.check(confirmed, f"settled before the restart: {answers!r}")
    await h.controls(b).restart_server()
    first = await _observed(h, b, sub.id, 60)
    h.check(first is not None, "an observation after the restart")
    assert first is not None
    unsettled = first.pending + first.leased + first.unresolved
    h.check(
        unsettled <= last - first.ack_floor,
        f"right after the restart: {unsettled} unsettled and ack floor {first.ack_floor} of "
        f"{last} messages ({first!r})",
    )
    with h.move_on_after(60):  # the lost settles come back after an ack wait: settled again
        while (o := await _observed(h, b, sub.id, 20)) is not None and o.pending + o.leased:
            h.check(
                o.pending + o.leased + o.unresolved <= last - o.ack_floor,
                f"while the redeliveries come back: {o!r}",
            )
            await _settle_all(b, await _recv(h, b, sub.id, wait=5), "again")
    done = await _observed(h, b, sub.id, 20)
    h.check(done is not None and (done.pending, done.leased, done.ack_floor) == (0, 0, last),
            f"every message settled in the end: {done!r}")  # fmt: skip


@case(
    "MSG-803",
    "a final attempt lapsing while the consumer's leader is killed: another client's Known "
    "observation always accounts for it, and names it unresolved once the server decided",
    contract=M,
    needs=("replicated",),
    controls=("another_client", "subscription_leader", "kill_member", "restart_member"),
)
async def final_attempt_lapses_in_election(h: Harness) -> None:
    b, ch, sub = await _subscribed(
        h, channel={"replicas": 3, "persistence": True}, ack_wait_seconds=h.seconds(20),
        max_deliver=1,
    )  # fmt: skip
    other = await _peer(h, b, ch, sub)
    await _publish(h, b, ch.channel, "p1")
    got = await _recv(h, b, sub.id, wait=5)
    h.equal(len(got), 1, "leased")
    controls = h.controls(b)
    leader = await controls.subscription_leader(sub.id)
    await h.sleep(20)  # the lease runs out ...
    await controls.kill_member(leader)  # ... as the consumer's leader dies
    try:
        await h.sleep(20)
    finally:
        await controls.restart_member(leader)
    seen: list[SubscriptionObservation] = []
    with h.move_on_after(1200):
        while not seen or seen[-1].pending + seen[-1].leased:  # until the server decided
            o = await _observed(h, other, sub.id, 200)
            if o is not None:
                seen.append(o)
            await h.sleep(4)
    for o in seen:
        h.equal((o.pending + o.leased + o.unresolved, o.dropped), (1, 0), f"accounted for: {o!r}")
    h.check(bool(seen) and seen[-1].unresolved == 1, f"unresolved in the end: {seen[-1:]!r}")


# cases register themselves by ID (``case``) and run through the registry: none is imported by
# name, so the module exports nothing
__all__: list[str] = []
