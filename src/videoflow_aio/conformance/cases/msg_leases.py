"""MSG cases on leases, credit, limits, observation and the ack floor that mutation testing
showed unpinned (``benchmarks/mutation``: hand-written mutants, and cosmic-ray's generated
ones from ``MSG-087`` on): each holds every adapter to a rule whose breach a plausible bug in
the model went unnoticed by the other cases.

Same conventions as :mod:`.msg`: durations through the harness (scaled on real engines), bounds
on real-time waits generous (a fraction of a case's wait, never a scheduling slack), IDs stable.
"""

from __future__ import annotations

import anyio

from ...contracts.errors import ValidationError
from ...contracts.messaging import (
    Accepted,
    Completed,
    Delivery,
    Rejected,
    Retry,
    SettleConfirmed,
)
from .._case import case
from .._harness import MessagingHarness as Harness
from ._msg_scenarios import (
    M,
    _chan_obs,
    _pids,
    _publish,
    _recv,
    _replica,
    _seq,
    _sub,
    _sub_obs,
    _subscribed,
    _window,
    _with_channel,
    _with_profile,
)


@case(
    "MSG-081",
    "renew extends a lease ack_wait from the renewal, and a renewed lease still expires",
    contract=M,
)
async def renew_from_now(h: Harness) -> None:
    b, ch = await _with_channel(h)
    aw = h.seconds(10)
    sub = await _sub(h, b, ch.channel, ack_wait_seconds=aw)
    await _publish(h, b, ch.channel, "p1")
    got = await _recv(h, b, sub.id)
    h.equal(_pids(got), ["p1"], "delivered")
    await h.sleep(1)
    for _ in range(2):  # two renewals in a row: each counts from now, they do not add up
        before = h.now()
        lease = await b.renew(got[0].token)
        after = h.now()
        h.check(lease.held, f"renewed: {lease!r}")
        if lease.lease_deadline is not None:
            slack = h.seconds(1)
            h.check(
                before + aw - slack <= lease.lease_deadline <= after + aw + slack,
                f"the new deadline is ack_wait from the renewal: {lease.lease_deadline} "
                f"(renewed between {before} and {after}, ack_wait {aw})",
            )
    renewed = h.now()
    again = await _recv(h, b, sub.id, wait=60)
    h.equal(_pids(again), ["p1"], "the renewed lease expires and the message comes back")
    if again:
        h.equal(again[0].attempt, 2, "as attempt 2")
    took = h.now() - renewed
    h.check(took <= h.seconds(20), f"about ack_wait after the last renewal (took {took})")


@case(
    "MSG-082",
    "a delayed Retry on the last allowed attempt is not redelivered: the message is unresolved",
    contract=M,
)
async def delayed_retry_at_cap(h: Harness) -> None:
    b, ch, sub = await _subscribed(h, ack_wait_seconds=h.seconds(30), max_deliver=2)
    await _publish(h, b, ch.channel, "p1")
    first = await _recv(h, b, sub.id)
    h.equal([d.attempt for d in first], [1], "attempt 1")
    await b.settle(first[0].token, Retry(), "r1")
    second = await _recv(h, b, sub.id)
    h.equal([d.attempt for d in second], [2], "attempt 2, the last allowed")
    ans = await b.settle(second[0].token, Retry(h.seconds(2)), "r2")
    h.check(isinstance(ans, SettleConfirmed), f"retry: {ans!r}")
    h.equal(await _recv(h, b, sub.id, wait=10), [], "no third attempt, even after the delay")
    obs = await _sub_obs(h, b, sub.id)
    h.equal(obs.unresolved, 1, "unresolved after the last attempt's Retry")


@case(
    "MSG-083",
    "a settle that frees exhausted item_credit wakes a waiting receive at once",
    contract=M,
)
async def settle_wakes_credit_waiter(h: Harness) -> None:
    b, ch, sub = await _subscribed(h, item_credit=1)
    for pid in ("p1", "p2"):
        await _publish(h, b, ch.channel, pid)
    held = await _recv(h, b, sub.id)
    h.equal(_pids(held), ["p1"], "the credit of one is used")
    woke: list[tuple[float, list[Delivery]]] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_replica, h, b, sub.id, woke)
        await h.sleep(2)
        h.equal(woke, [], "a replica waits while the credit is exhausted")
        settled = h.now()
        await b.settle(held[0].token, Completed(), "free-1")
    h.equal(len(woke), 1, "the replica returned")
    if woke:
        at, got = woke[0]
        h.equal(_pids(got), ["p2"], "with the next message")
        h.check(at - settled <= h.seconds(10), f"soon after the settle (took {at - settled})")


@case(
    "MSG-084",
    "a receive waiting when a lease expires gets the redelivery then, not at its own deadline",
    contract=M,
)
async def waiting_receive_gets_expiry(h: Harness) -> None:
    b, ch, sub = await _subscribed(h, ack_wait_seconds=h.seconds(5))
    got: list[tuple[float, list[Delivery]]] = []
    async with anyio.create_task_group() as tg:
        tg.start_soon(_replica, h, b, sub.id, got)
        tg.start_soon(_replica, h, b, sub.id, got)
        await h.sleep(1)
        published = h.now()
        await _publish(h, b, ch.channel, "p1")
    attempts = sorted((d.attempt, at) for at, ds in got for d in ds)
    h.equal([a for a, _ in attempts], [1, 2], "one replica leases it, the other the redelivery")
    if len(attempts) == 2:
        took = attempts[1][1] - published
        h.check(took <= h.seconds(20), f"the redelivery came at the expiry (took {took})")


@case(
    "MSG-085",
    "a subscription created on a non-empty channel starts with its ack floor below the "
    "first retained message",
    contract=M,
)
async def late_subscription_floor(h: Harness) -> None:
    b, ch = await _with_channel(h, max_msgs=2, overflow="evict_oldest")
    seqs = [_seq(h, await _publish(h, b, ch.channel, f"p{i}")) for i in range(3)]
    sub = await _sub(h, b, ch.channel)
    first = seqs[1]  # p0 was evicted
    h.equal((await _sub_obs(h, b, sub.id)).ack_floor, first - 1, "nothing settled yet")
    got = await _recv(h, b, sub.id)
    h.equal(_pids(got), ["p1", "p2"], "the retained messages")
    by_pid = {d.envelope.publication_id: d for d in got}
    await b.settle(by_pid["p2"].token, Completed(), "s2")
    h.equal((await _sub_obs(h, b, sub.id)).ack_floor, first - 1, "a gap holds the floor")
    await b.settle(by_pid["p1"].token, Completed(), "s1")
    h.equal((await _sub_obs(h, b, sub.id)).ack_floor, seqs[2], "all settled")


@case(
    "MSG-086",
    "the ack floor passes over messages of kinds the subscription does not see",
    contract=M,
)
async def floor_over_other_kinds(h: Harness) -> None:
    b, ch, sub = await _subscribed(h)
    await _publish(h, b, ch.channel, "d1")
    await _publish(h, b, ch.channel, "e1", kind="eos")
    last = _seq(h, await _publish(h, b, ch.channel, "d2"))
    got = await _recv(h, b, sub.id)
    h.equal(_pids(got), ["d1", "d2"], "the data subscription sees the data messages")
    for d in got:
        await b.settle(d.token, Completed(), f"s-{d.sequence}")
    h.equal((await _sub_obs(h, b, sub.id)).ack_floor, last, "the eos between does not hold it")


@case(
    "MSG-087",
    "overflow reject by bytes: what fits max_bytes is accepted and kept, only more is rejected",
    contract=M,
)
async def reject_by_bytes_keeps_what_fits(h: Harness) -> None:
    b, ch = await _with_channel(h, max_bytes=2500, overflow="reject")
    for i in range(2):
        out = await _publish(h, b, ch.channel, f"q{i}", body=b"z" * 1000)
        h.check(isinstance(out, Accepted), f"q{i}: 1000-byte bodies fit 2500: {out!r}")
    out = await _publish(h, b, ch.channel, "q2", body=b"z" * 1000)
    h.check(isinstance(out, Rejected), f"q2: a third would exceed max_bytes: {out!r}")
    h.equal((await _chan_obs(h, b, ch.channel)).messages, 2, "the two that fit are kept")


# cosmic-ray's mutants of a new subscription's starting floor proved equivalent in the model
# (observation advances the floor over removed sequences), but no case held an adapter to the
# observed floor of a late subscription: MSG-088 and MSG-089 do
@case(
    "MSG-088",
    "a new subscription's ack floor is just below the oldest retained message",
    contract=M,
)
async def new_floor_below_oldest(h: Harness) -> None:
    b, ch = await _with_channel(h, max_msgs=1)
    gone = _seq(h, await _publish(h, b, ch.channel, "p1"))
    await _publish(h, b, ch.channel, "p2")  # evicts p1: the channel starts after it
    sub = await _sub(h, b, ch.channel)
    h.equal((await _sub_obs(h, b, sub.id)).ack_floor, gone, "the evicted p1's sequence")


@case(
    "MSG-089",
    "a new subscription on a channel emptied by max_age: its ack floor is the last sequence",
    contract=M,
)
async def new_floor_on_emptied_channel(h: Harness) -> None:
    b, ch = await _with_channel(
        h, max_age_seconds=h.seconds(60), dedup_window_seconds=_window(h, 30)
    )
    await _publish(h, b, ch.channel, "p1")
    last = _seq(h, await _publish(h, b, ch.channel, "p2"))
    await h.sleep(70)  # both age out
    obs = await _chan_obs(h, b, ch.channel)
    h.equal((obs.messages, obs.first_sequence), (0, last + 1), "empty, past p2")
    sub = await _sub(h, b, ch.channel)
    h.equal((await _sub_obs(h, b, sub.id)).ack_floor, last, "the last sequence")
    p3 = _seq(h, await _publish(h, b, ch.channel, "p3"))
    got = await _recv(h, b, sub.id)
    h.equal(_pids(got), ["p3"], "only what comes after")
    for d in got:
        await b.settle(d.token, Completed(), "s-p3")
    h.equal((await _sub_obs(h, b, sub.id)).ack_floor, p3, "then the floor follows")


@case(
    "MSG-090",
    "receive with an item or byte credit below 1 is a ValidationError and leases nothing",
    contract=M,
)
async def receive_credit_below_one(h: Harness) -> None:
    b, ch, sub = await _subscribed(h)
    await _publish(h, b, ch.channel, "p1")
    for items, nbytes in ((0, 1 << 20), (1, 0), (-1, 1 << 20), (1, -1)):
        with h.raises(ValidationError, f"item_credit {items}, byte_credit {nbytes}"):
            await b.receive(sub.id, items, nbytes, h.deadline(1))
    got = await _recv(h, b, sub.id)
    h.equal([(d.envelope.publication_id, d.attempt) for d in got], [("p1", 1)], "untouched")


@case(
    "MSG-091",
    "core-only: a channel observation is an empty range after the last published sequence",
    contract=M,
    needs=("core_only",),
)
async def core_channel_observation(h: Harness) -> None:
    b, ch = await _with_profile(h, "core_only")
    sub = await _sub(h, b, ch.channel)
    outs = [await _publish(h, b, ch.channel, f"p{i}") for i in range(3)]
    h.equal(len(_pids(await _recv(h, b, sub.id))), 3, "all three delivered")
    obs = await _chan_obs(h, b, ch.channel)
    h.equal(
        (obs.messages, obs.first_sequence - obs.last_sequence, obs.dead_letters),
        (0, 1, 0),
        "nothing retained: first == last + 1, no dead letters",
    )
    last = outs[-1]
    if isinstance(last, Accepted):
        h.equal(obs.last_sequence, last.sequence, "last is the last publication's sequence")


# cases register themselves by ID (``case``) and run through the registry: none is imported by
# name, so the module exports nothing
__all__: list[str] = []
