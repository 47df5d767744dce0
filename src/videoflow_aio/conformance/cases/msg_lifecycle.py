"""MSG cases, lifecycle (MSG-032 to MSG-038): ensure and close; latest per key;
receive waiting and deadlines.

Conventions in :mod:`._msg_scenarios`; IDs are stable.
"""

from __future__ import annotations

import anyio

from ...contracts.errors import IncompatibleProfile, NotFound
from ...contracts.messaging import (
    ChannelId,
    Completed,
    SettleStale,
    make_channel,
)
from .._case import case
from .._harness import MessagingHarness as Harness
from ._msg_scenarios import (
    M,
    _chan_obs,
    _channel,
    _op,
    _pids,
    _publish,
    _recv,
    _sub,
    _sub_obs,
    _subscribed,
    _with_channel,
    _with_profile,
)

# -- lifecycle ----------------------------------------------------------------------------


@case(
    "MSG-032", "ensure_channel is idempotent and reads back the effective configuration", contract=M
)
async def ensure_idempotent(h: Harness) -> None:
    b = await h.open()
    spec = make_channel("flow", "run1", "n1", "work", "limits", max_msgs=100)
    v1 = await b.ensure_channel(spec, "op-a")
    h.check(v1.created, "created")
    v2 = await b.ensure_channel(spec, "op-b")
    h.check(not v2.created and not v2.updated, "the same spec again changes nothing")
    h.equal(v2.effective.retention, "limits", "retention read back")
    h.equal(v2.effective.max_msgs, 100, "max_msgs read back")
    bigger = make_channel("flow", "run1", "n1", "work", "limits", max_msgs=200)
    v3 = await b.ensure_channel(bigger, "op-c")
    h.check(v3.updated, "a mutable limit is reconciled")
    h.equal(v3.effective.max_msgs, 200, "new limit read back")
    h.equal(await b.channel_ids(), [spec.channel], "one channel")


@case(
    "MSG-033",
    "ensure_channel: an immutable mismatch raises IncompatibleProfile, changes nothing",
    contract=M,
)
async def ensure_incompatible(h: Harness) -> None:
    b, spec = await _with_channel(h, retention="limits", max_msgs=5)
    await _publish(h, b, spec.channel, "p1")
    other = make_channel("flow", "run1", "n1", "work", "interest", max_msgs=5)
    raised = None
    try:
        await b.ensure_channel(other, _op(h))
    except IncompatibleProfile as exc:
        raised = exc
    h.check(raised is not None, "IncompatibleProfile raised")
    assert raised is not None
    h.equal(raised.fields.get("field"), "retention", "names the field")
    again = await b.ensure_channel(spec, _op(h))
    h.equal(again.effective.retention, "limits", "unchanged")
    h.equal((await _chan_obs(h, b, spec.channel)).messages, 1, "messages kept")


@case("MSG-034", "close removes exactly the owned channels", contract=M)
async def close_owned(h: Harness) -> None:
    b, mine = await _with_channel(h, "a", owner_labels={"generation": "g1"})
    keep = await _channel(h, b, "b", owner_labels={"generation": "g1"})
    foreign = await _channel(h, b, "c", owner_labels={"generation": "g2"})
    gone = ChannelId("flow", "run1", "never")
    out = await b.close([mine.channel, foreign.channel, gone], "g1")
    h.equal(list(out.removed), [mine.channel], "removed")
    h.equal(list(out.refused), [foreign.channel], "another generation's channel is left alone")
    h.equal(list(out.absent), [gone], "absent reported")
    h.equal(list(out.unconfirmed), [], "nothing unconfirmed")
    h.equal(await b.channel_ids(), sorted([keep.channel, foreign.channel]), "the rest remain")
    raised = False
    try:
        await _publish(h, b, mine.channel, "p1")
    except NotFound:
        raised = True
    h.check(raised, "publishing to a closed channel is NotFound")


# -- latest per key -----------------------------------------------------------------------


@case(
    "MSG-035",
    "latest_per_key: a channel keeps only the newest envelope per key",
    contract=M,
    needs=("latest_per_key",),
)
async def latest_per_key(h: Harness) -> None:
    b, ch = await _with_profile(h, "latest_per_key", channel=dict(profile="latest_per_key"))
    for i in range(3):
        await _publish(h, b, ch.channel, f"a{i}", partition_key="a", body=str(i).encode())
    await _publish(h, b, ch.channel, "b0", partition_key="b")
    sub = await _sub(h, b, ch.channel)
    got = await _recv(h, b, sub.id)
    h.equal(sorted(_pids(got)), ["a2", "b0"], "newest per key")
    h.equal((await _chan_obs(h, b, ch.channel)).messages, 2, "two keys, two messages")


@case(
    "MSG-036",
    "latest_per_key: a superseded unsettled message is a recorded drop",
    contract=M,
    needs=("latest_per_key",),
)
async def latest_supersede_drop(h: Harness) -> None:
    b, ch = await _with_profile(h, "latest_per_key", channel=dict(profile="latest_per_key"))
    sub = await _sub(h, b, ch.channel)
    await _publish(h, b, ch.channel, "a0", partition_key="a")
    leased = await _recv(h, b, sub.id)
    await _publish(h, b, ch.channel, "a1", partition_key="a")
    obs = await _sub_obs(h, b, sub.id)
    h.equal(obs.dropped, 1, "the leased a0 was superseded and recorded")
    h.equal(obs.leased, 0, "its lease is gone")
    ans = await b.settle(leased[0].token, Completed(), "late")
    if (await b.capabilities()).stale_settle_detection:
        h.check(isinstance(ans, SettleStale), f"settling a superseded message: {ans!r}")
    h.equal(_pids(await _recv(h, b, sub.id)), ["a1"], "the newest is delivered")


# -- waiting ------------------------------------------------------------------------------


@case("MSG-037", "receive blocks until a message arrives and wakes at once", contract=M)
async def receive_wakes(h: Harness) -> None:
    b, ch, sub = await _subscribed(h)
    arrived: list[float] = []

    async def producer() -> None:
        await h.sleep(7)
        arrived.append(h.now())
        await _publish(h, b, ch.channel, "p1")

    async with anyio.create_task_group() as tg:
        tg.start_soon(producer)
        got = await _recv(h, b, sub.id, wait=60)
        woke = h.now()
    h.equal(_pids(got), ["p1"], "received")
    h.check(woke - arrived[0] <= h.at_most(1), f"woke at once ({woke - arrived[0]} s late)")


@case("MSG-038", "receive returns [] once its deadline passes", contract=M)
async def receive_deadline(h: Harness) -> None:
    b, _, sub = await _subscribed(h)
    t0 = h.now()
    got = await _recv(h, b, sub.id, wait=8)
    waited = h.now() - t0
    h.equal(got, [], "nothing")
    h.check(h.seconds(7.9) <= waited <= h.at_most(12), f"waited until the deadline ({waited})")


# cases register themselves by ID (``case``) and run through the registry: none is imported by
# name, so the module exports nothing
__all__: list[str] = []
