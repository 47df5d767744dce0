"""MSG cases, basics and limits (MSG-001 to MSG-008): publish, receive and settle;
dedup; limits and interest retention.

Conventions in :mod:`._msg_scenarios`; IDs are stable.
"""

from __future__ import annotations

from ...contracts.messaging import (
    Accepted,
    Completed,
    Rejected,
    SettleConfirmed,
    Terminal,
)
from .._case import case
from .._harness import MessagingHarness as Harness
from ._msg_scenarios import (
    M,
    _chan_obs,
    _interest_channel,
    _pids,
    _publish,
    _recv,
    _seq,
    _settle_all,
    _sub,
    _sub_obs,
    _subscribed,
    _why,
    _window,
    _with_channel,
)

# -- basics -------------------------------------------------------------------------------


@case(
    "MSG-001", "publish, receive and settle: a completed message is never redelivered", contract=M
)
async def basic_cycle(h: Harness) -> None:
    b, ch, sub = await _subscribed(h, ack_wait_seconds=h.seconds(10))
    out = await _publish(h, b, ch.channel, "p1", body=b"hello")
    h.check(isinstance(out, Accepted) and not out.duplicate, f"publish: {out!r}")
    got = await _recv(h, b, sub.id)
    h.equal(_pids(got), ["p1"], "delivered")
    h.equal(got[0].envelope.body, b"hello", "body")
    h.equal(got[0].attempt, 1, "first attempt")
    h.equal(got[0].sequence, _seq(h, out), "sequence matches the publish ack")
    ans = await b.settle(got[0].token, Completed(), "set-1")
    h.check(isinstance(ans, SettleConfirmed), f"settle: {ans!r}")
    again = await _recv(h, b, sub.id, wait=30)  # past the ack wait: nothing comes back
    h.equal(again, [], "no redelivery after Completed")
    obs = await _sub_obs(h, b, sub.id)
    h.equal((obs.pending, obs.leased, obs.unresolved), (0, 0, 0), "pending/leased/unresolved")
    h.equal(obs.ack_floor, _seq(h, out), "ack floor")


@case(
    "MSG-002",
    "dedup: a publication id seen within the window is a duplicate, stored once",
    contract=M,
)
async def dedup_inside(h: Harness) -> None:
    b, ch = await _with_channel(h, dedup_window_seconds=_window(h, 20))
    sub = await _sub(h, b, ch.channel)
    first = await _publish(h, b, ch.channel, "p1", body=b"first")
    await h.sleep(5)
    second = await _publish(h, b, ch.channel, "p1", body=b"second")
    h.check(isinstance(first, Accepted) and not first.duplicate, f"first: {first!r}")
    h.check(isinstance(second, Accepted) and second.duplicate, f"second: {second!r}")
    h.equal(_seq(h, second), _seq(h, first), "duplicate names the original sequence")
    h.equal((await _chan_obs(h, b, ch.channel)).messages, 1, "stored once")
    got = await _recv(h, b, sub.id)
    h.equal([d.envelope.body for d in got], [b"first"], "the first body wins")


@case("MSG-003", "dedup: past the window a retry is a new message", contract=M)
async def dedup_past(h: Harness) -> None:
    win = _window(h, 10)
    b, ch = await _with_channel(h, dedup_window_seconds=win)
    first = await _publish(h, b, ch.channel, "p1")
    await h.sleep(1.5 * win / h.scale)  # ``win`` is already in provider seconds
    again = await _publish(h, b, ch.channel, "p1")
    h.check(isinstance(again, Accepted) and not again.duplicate, f"retry past window: {again!r}")
    h.check(_seq(h, again) > _seq(h, first), "a new sequence")
    h.equal((await _chan_obs(h, b, ch.channel)).messages, 2, "stored twice")


# -- limits -------------------------------------------------------------------------------


@case(
    "MSG-004",
    "limits evict_oldest: a drop for exactly the subscriptions that had not settled it",
    contract=M,
)
async def evict_oldest(h: Harness) -> None:
    b, ch = await _with_channel(h, max_msgs=2, overflow="evict_oldest")
    a = await _sub(h, b, ch.channel, "a")
    c = await _sub(h, b, ch.channel, "c")
    await _publish(h, b, ch.channel, "p1")
    await _settle_all(b, await _recv(h, b, a.id, n=1))  # a settles p1, c never does
    await _publish(h, b, ch.channel, "p2")
    third = await _publish(h, b, ch.channel, "p3")
    h.check(isinstance(third, Accepted), f"evict_oldest accepts: {third!r}")
    obs = await _chan_obs(h, b, ch.channel)
    h.equal(obs.messages, 2, "retained")
    h.equal(obs.first_sequence, _seq(h, third) - 1, "oldest evicted")
    h.equal((await _sub_obs(h, b, a.id)).dropped, 0, "a settled p1: no drop")
    oc = await _sub_obs(h, b, c.id)
    h.equal(oc.dropped, 1, "c lost p1")
    h.equal(oc.pending, 2, "c still has p2, p3")
    h.equal(_pids(await _recv(h, b, c.id)), ["p2", "p3"], "c receives what remains")


@case(
    "MSG-005", "limits reject: a full channel rejects with a reason and stores nothing", contract=M
)
async def reject_full(h: Harness) -> None:
    b, ch = await _with_channel(h, max_msgs=2, overflow="reject")
    await _publish(h, b, ch.channel, "p1")
    await _publish(h, b, ch.channel, "p2")
    before = await _chan_obs(h, b, ch.channel)
    out = await _publish(h, b, ch.channel, "p3")
    h.check(isinstance(out, Rejected), f"full channel: {out!r}")
    h.check(bool(_why(h, out)), "a rejection carries a reason")
    h.equal(await _chan_obs(h, b, ch.channel), before, "channel unchanged")
    dup = await _publish(h, b, ch.channel, "p1")
    h.check(isinstance(dup, Accepted) and dup.duplicate, f"dedup is checked first: {dup!r}")


@case("MSG-006", "limits: data, EOS and control share the slot", contract=M)
async def shared_slot(h: Harness) -> None:
    b, ch = await _with_channel(h, max_msgs=3)
    eos = await _sub(h, b, ch.channel, "e", kind="eos")
    await _publish(h, b, ch.channel, "end", kind="eos")
    for i in range(3):
        await _publish(h, b, ch.channel, f"d{i}")
    h.equal((await _chan_obs(h, b, ch.channel)).messages, 3, "slot size")
    h.equal(await _recv(h, b, eos.id), [], "the EOS marker was evicted by data")
    h.equal((await _sub_obs(h, b, eos.id)).dropped, 1, "and recorded as dropped")


@case(
    "MSG-007",
    "per_subject_limits: each kind has its own slot, EOS survives a data flood",
    contract=M,
)
async def per_subject(h: Harness) -> None:
    b, ch = await _with_channel(h, max_msgs=3, per_subject_limits=True)
    eos = await _sub(h, b, ch.channel, "e", kind="eos")
    await _publish(h, b, ch.channel, "end", kind="eos")
    for i in range(6):
        await _publish(h, b, ch.channel, f"d{i}")
    h.equal((await _chan_obs(h, b, ch.channel)).messages, 4, "3 data + 1 eos")
    h.equal(_pids(await _recv(h, b, eos.id)), ["end"], "EOS kept")


@case("MSG-008", "interest retention: kept until every required subscription settles", contract=M)
async def interest(h: Harness) -> None:
    b = await h.open()
    ch = await _interest_channel(h, b, "a", "b")
    cid = ch.channel
    ra, rb = ch.required
    await _sub(h, b, cid, "a")
    await _sub(h, b, cid, "b")
    await _publish(h, b, cid, "p1")
    await _publish(h, b, cid, "p2")
    await _settle_all(b, await _recv(h, b, ra))
    h.equal((await _chan_obs(h, b, cid)).messages, 2, "b has not settled yet")
    got_b = await _recv(h, b, rb)
    await b.settle(got_b[0].token, Completed(), "b-1")
    await b.settle(got_b[1].token, Terminal("bad"), "b-2")  # terminal counts as settled
    obs = await _chan_obs(h, b, cid)
    h.equal(obs.messages, 0, "removed once every required subscription settled")
    h.equal(ch.retention, "interest", "retention")


# cases register themselves by ID (``case``) and run through the registry: none is imported by
# name, so the module exports nothing
__all__: list[str] = []
