"""MSG cases, ambiguity and truthful observation (MSG-021 to MSG-026): late or
cancelled acceptance, failed observation, archive, ack floor, channel range.

Conventions in :mod:`._msg_scenarios`; IDs are stable.
"""

from __future__ import annotations

from ...contracts import Known, Unknown
from ...contracts.messaging import (
    Accepted,
    Completed,
    PublicationUnknown,
    make_envelope,
)
from .._case import case
from .._harness import MessagingHarness as Harness
from ._msg_scenarios import (
    M,
    _acceptance_paused,
    _chan_obs,
    _pids,
    _publish,
    _recv,
    _seq,
    _sub_obs,
    _subscribed,
    _with_channel,
    _with_profile,
)

# -- ambiguity and truthful observation ---------------------------------------------------


@case(
    "MSG-021",
    "ambiguous acceptance: the deadline passes (PublicationUnknown), then late acceptance",
    contract=M,
    controls=("pause_acceptance", "resume_acceptance"),
)
async def late_acceptance(h: Harness) -> None:
    b, ch, sub = await _acceptance_paused(h)
    env = make_envelope(ch.channel, "p1")
    t0 = h.now()
    out = await b.publish(env, h.deadline(5))
    h.check(isinstance(out, PublicationUnknown), f"deadline passed: {out!r}")
    h.check(h.now() - t0 >= h.seconds(4.9), "the publisher really waited for its deadline")
    seen = await b.observe_publication(env)
    h.check(not isinstance(seen, Accepted), f"not stored while held: {seen!r}")
    await h.controls(b).resume_acceptance(ch.channel)
    after = await b.observe_publication(env)
    h.check(isinstance(after, Accepted), f"stored late: {after!r}")
    h.equal(_pids(await _recv(h, b, sub.id)), ["p1"], "delivered after late acceptance")
    retry = await b.publish(env, h.deadline(5))
    h.check(isinstance(retry, Accepted) and retry.duplicate, f"a retry dedups: {retry!r}")


@case(
    "MSG-022",
    "ambiguous acceptance with cancellation: nothing is stored, and observe_publication says so",
    contract=M,
    controls=("pause_acceptance", "resume_acceptance", "cancel_publication"),
)
async def cancelled(h: Harness) -> None:
    b, ch, sub = await _acceptance_paused(h)
    env = make_envelope(ch.channel, "p1")
    ctl = h.controls(b)
    out = await b.publish(env, h.deadline(5))
    h.check(isinstance(out, PublicationUnknown), f"unknown: {out!r}")
    h.check(await ctl.cancel_publication(ch.channel, "p1"), "cancelled while held")
    h.check(not await ctl.cancel_publication(ch.channel, "p1"), "nothing left to cancel")
    await ctl.resume_acceptance(ch.channel)
    seen = await b.observe_publication(env)
    h.check(not isinstance(seen, Accepted), f"never stored: {seen!r}")
    h.equal(await _recv(h, b, sub.id), [], "nothing delivered")
    h.equal((await _chan_obs(h, b, ch.channel)).messages, 0, "nothing retained")


@case(
    "MSG-023",
    "fail_observation: observe_subscription is Unknown, never zero",
    contract=M,
    controls=("fail_observation",),
)
async def failed_observation(h: Harness) -> None:
    b, ch, sub = await _subscribed(h)
    ctl = h.controls(b)
    await _publish(h, b, ch.channel, "p1")
    await ctl.fail_observation(sub.id, "timeout")
    obs = h.expect_type(await b.observe_subscription(sub.id), Unknown, "observation")
    h.equal(obs.reason, "timeout", "reason")
    await ctl.fail_observation(sub.id, None)
    h.equal((await _sub_obs(h, b, sub.id)).pending, 1, "readable again")


@case(
    "MSG-024",
    "archive profile: replay within the horizon, None after it, outliving close",
    contract=M,
    needs=("archive",),
)
async def archive(h: Harness) -> None:
    labels = {"generation": "g1"}
    horizon = h.seconds(100)
    b, ch = await _with_profile(
        h, "archive", archive_horizon_seconds=horizon, channel=dict(owner_labels=labels)
    )
    env = make_envelope(ch.channel, "p1", body=b"frame", event_id="ev-1")
    await b.publish(env, h.deadline(5))
    got = await b.replay(ch.channel, "ev-1")
    h.check(got is not None and got.body == b"frame", f"replayable: {got!r}")
    cleanup = await b.close([ch.channel], "g1")
    h.equal(list(cleanup.removed), [ch.channel], "channel closed")
    after_close = await b.replay(ch.channel, "ev-1")
    h.check(after_close is not None and after_close.event_id == "ev-1", "outlives close")
    await h.sleep(150)
    h.equal(await b.replay(ch.channel, "ev-1"), None, "None past the horizon")
    h.equal(await b.replay(ch.channel, "never"), None, "None for an unknown event")


@case("MSG-025", "ack floor: contiguous; a gap holds it until filled", contract=M)
async def ack_floor(h: Harness) -> None:
    b, ch, sub = await _subscribed(h, item_credit=8)
    for i in range(1, 5):
        await _publish(h, b, ch.channel, f"p{i}")
    got = {d.envelope.publication_id: d for d in await _recv(h, b, sub.id)}
    base = got["p1"].sequence - 1
    for pid in ("p1", "p3", "p4"):
        await b.settle(got[pid].token, Completed(), pid)
    floor = await b.observe_ack_floor(sub.id)
    h.equal(floor, Known(base + 1), "floor stops before the unsettled p2")
    await b.settle(got["p2"].token, Completed(), "p2")
    h.equal(await b.observe_ack_floor(sub.id), Known(base + 4), "floor jumps once p2 settles")


@case("MSG-026", "channel range: messages, first and last sequence", contract=M)
async def channel_range(h: Harness) -> None:
    b, ch = await _with_channel(h, max_msgs=3)
    empty = await _chan_obs(h, b, ch.channel)
    h.equal(empty.messages, 0, "empty")
    h.equal(empty.first_sequence, empty.last_sequence + 1, "empty range: first = last + 1")
    outs = [await _publish(h, b, ch.channel, f"p{i}", body=b"abc") for i in range(5)]
    obs = await _chan_obs(h, b, ch.channel)
    h.equal(obs.messages, 3, "messages")
    h.check(obs.bytes >= 9, f"bytes cover the three bodies ({obs.bytes})")
    h.equal(obs.last_sequence, _seq(h, outs[-1]), "last")
    h.equal(obs.first_sequence, _seq(h, outs[2]), "first after eviction")


# cases register themselves by ID (``case``) and run through the registry: none is imported by
# name, so the module exports nothing
__all__: list[str] = []
