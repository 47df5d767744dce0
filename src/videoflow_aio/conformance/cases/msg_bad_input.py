"""MSG cases, bad input and the edges of the rules (MSG-039 to MSG-048): oversize,
unknown names, eviction under a lease, max_age, redelivery order, max_bytes.

Conventions in :mod:`._msg_scenarios`; IDs are stable.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ...contracts import Known
from ...contracts.errors import IncompatibleProfile, NotFound
from ...contracts.messaging import (
    Accepted,
    ChannelId,
    Completed,
    Rejected,
    Retry,
    SettleStale,
    SubscriptionId,
    make_envelope,
    make_subscription,
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
    _seq,
    _sub,
    _sub_obs,
    _subscribed,
    _why,
    _window,
    _with_channel,
)

# -- bad input ----------------------------------------------------------------------------


@case(
    "MSG-039",
    "a body over max_payload_bytes is Rejected with that reason, nothing stored",
    contract=M,
)
async def oversize(h: Harness) -> None:
    b = await h.open(max_payload_bytes=1024)
    limit = (await b.capabilities()).max_payload_bytes
    ch = await _channel(h, b)
    sub = await _sub(h, b, ch.channel)
    out = await _publish(h, b, ch.channel, "big", body=b"x" * (limit + 1))
    h.check(isinstance(out, Rejected), f"oversize: {out!r}")
    h.check("payload" in _why(h, out) or "size" in _why(h, out), f"reason names it: {out!r}")
    h.equal((await _chan_obs(h, b, ch.channel)).messages, 0, "nothing stored")
    h.equal(await _recv(h, b, sub.id), [], "nothing delivered")


@case("MSG-040", "unknown channel or subscription is NotFound, and changes nothing", contract=M)
async def unknown_names(h: Harness) -> None:
    b, ch = await _with_channel(h)
    other_run = ChannelId("flow", "run2", "n1")
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: b.publish(make_envelope(other_run, "p1"), h.deadline(1)),
        lambda: b.receive(SubscriptionId(ch.channel, "nobody"), 1, 1024, h.deadline(1)),
        lambda: b.observe_subscription(SubscriptionId(ch.channel, "nobody")),
        lambda: b.observe_channel(other_run),
        lambda: b.ensure_subscription(make_subscription(other_run, "w"), _op(h)),
        lambda: b.subscription_ids(other_run),
    ]
    for i, call in enumerate(calls):
        raised = False
        try:
            await call()
        except NotFound:
            raised = True
        h.check(raised, f"call {i} raises NotFound")
    h.equal(await b.channel_ids(), [ch.channel], "nothing created")
    h.equal((await _chan_obs(h, b, ch.channel)).messages, 0, "nothing stored")


@case(
    "MSG-041",
    "ensure_subscription: idempotent, reconciles credit, refuses a kind change",
    contract=M,
)
async def ensure_subscription(h: Harness) -> None:
    b, ch = await _with_channel(h)
    spec = make_subscription(ch.channel, "w", ack_wait_seconds=h.seconds(30), item_credit=4)
    v1 = await b.ensure_subscription(spec, _op(h))
    h.check(v1.created, "created")
    v2 = await b.ensure_subscription(spec, _op(h))
    h.check(not v2.created and not v2.updated, "idempotent")
    more = make_subscription(ch.channel, "w", ack_wait_seconds=h.seconds(30), item_credit=8)
    v3 = await b.ensure_subscription(more, _op(h))
    h.equal(v3.effective.item_credit, 8, "credit reconciled")
    raised = False
    try:
        await b.ensure_subscription(make_subscription(ch.channel, "w", kind="eos"), _op(h))
    except IncompatibleProfile:
        raised = True
    h.check(raised, "a kind change is an IncompatibleProfile")
    h.equal(await b.subscription_ids(ch.channel), [spec.id], "one subscription")


@case("MSG-042", "a receiver with a lease on an evicted message cannot settle it", contract=M)
async def evicted_while_leased(h: Harness) -> None:
    b, ch, sub = await _subscribed(h, channel=dict(max_msgs=1))
    await _publish(h, b, ch.channel, "p1")
    leased = await _recv(h, b, sub.id)
    await _publish(h, b, ch.channel, "p2")
    obs = await _sub_obs(h, b, sub.id)
    h.equal((obs.leased, obs.dropped, obs.pending), (0, 1, 1), "lease gone, drop recorded")
    ans = await b.settle(leased[0].token, Completed(), "late")
    if (await b.capabilities()).stale_settle_detection:
        h.check(isinstance(ans, SettleStale), f"settling an evicted message: {ans!r}")
    h.equal(_pids(await _recv(h, b, sub.id)), ["p2"], "the survivor is delivered")


@case(
    "MSG-043",
    "max_age: messages older than max_age leave the channel (a drop if unsettled)",
    contract=M,
)
async def max_age(h: Harness) -> None:
    b, ch = await _with_channel(
        h, max_age_seconds=h.seconds(60), dedup_window_seconds=_window(h, 30)
    )
    sub = await _sub(h, b, ch.channel)
    await _publish(h, b, ch.channel, "old")
    await h.sleep(40)
    await _publish(h, b, ch.channel, "young")
    await h.sleep(30)
    h.equal((await _chan_obs(h, b, ch.channel)).messages, 1, "the old one aged out")
    h.equal(_pids(await _recv(h, b, sub.id)), ["young"], "only the young one is delivered")
    h.equal((await _sub_obs(h, b, sub.id)).dropped, 1, "recorded as a drop")


@case("MSG-044", "redeliveries come before new messages", contract=M)
async def redelivery_first(h: Harness) -> None:
    b, ch, sub = await _subscribed(h, ack_wait_seconds=h.seconds(5), item_credit=1)
    await _publish(h, b, ch.channel, "p1")
    await _recv(h, b, sub.id)
    await _publish(h, b, ch.channel, "p2")
    got = await _recv(h, b, sub.id, n=1, wait=10)
    h.equal(_pids(got), ["p1"], "the expired lease comes back first")
    h.equal(got[0].attempt, 2, "as attempt 2")


@case("MSG-045", "a Retry counts toward max_deliver", contract=M)
async def retry_counts(h: Harness) -> None:
    b, ch, sub = await _subscribed(h, ack_wait_seconds=h.seconds(30), max_deliver=2)
    await _publish(h, b, ch.channel, "p1")
    for i in range(2):
        got = await _recv(h, b, sub.id)
        h.equal([d.attempt for d in got], [i + 1], f"attempt {i + 1}")
        await b.settle(got[0].token, Retry(), f"r{i}")
    h.equal(await _recv(h, b, sub.id, wait=5), [], "no third attempt")
    h.equal((await _sub_obs(h, b, sub.id)).unresolved, 1, "unresolved after two retries")


@case("MSG-046", "dedup: a duplicate does not extend the window", contract=M)
async def dedup_not_extended(h: Harness) -> None:
    win = _window(h, 20)
    b, ch = await _with_channel(h, dedup_window_seconds=win)
    step = 0.75 * win / h.scale  # harness seconds: 0.75 of the window
    first = await _publish(h, b, ch.channel, "p1")
    await h.sleep(step)
    dup = await _publish(h, b, ch.channel, "p1")
    h.check(isinstance(dup, Accepted) and dup.duplicate, f"inside the window: {dup!r}")
    await h.sleep(step)  # 1.5 windows after the first accept, 0.75 after the duplicate
    late = await _publish(h, b, ch.channel, "p1")
    h.check(
        isinstance(late, Accepted) and not late.duplicate, f"window ran from the first: {late!r}"
    )
    h.check(_seq(h, late) > _seq(h, first), "a new message")


@case("MSG-047", "ack floor: an evicted message counts as settled", contract=M)
async def floor_after_eviction(h: Harness) -> None:
    b, ch, sub = await _subscribed(h, channel=dict(max_msgs=2))
    outs = [await _publish(h, b, ch.channel, f"p{i}") for i in range(2)]
    got = await _recv(h, b, sub.id)
    await b.settle(got[1].token, Completed(), "second")  # the first stays unsettled
    h.equal(await b.observe_ack_floor(sub.id), Known(_seq(h, outs[0]) - 1), "held by p0")
    await _publish(h, b, ch.channel, "p2")  # evicts p0
    h.equal(await b.observe_ack_floor(sub.id), Known(_seq(h, outs[1])), "past the evicted p0")


@case("MSG-048", "limits by bytes: max_bytes evicts the oldest, or rejects", contract=M)
async def max_bytes(h: Harness) -> None:
    b, ev = await _with_channel(h, "a", max_bytes=2500)
    sub = await _sub(h, b, ev.channel)
    for i in range(3):
        await _publish(h, b, ev.channel, f"p{i}", body=b"z" * 1000)
    obs = await _chan_obs(h, b, ev.channel)
    h.equal(obs.messages, 2, "two 1000-byte bodies fit 2500")
    h.equal((await _sub_obs(h, b, sub.id)).dropped, 1, "the oldest was dropped")
    rj = await _channel(h, b, "b", max_bytes=2500, overflow="reject")
    for i in range(2):
        await _publish(h, b, rj.channel, f"q{i}", body=b"z" * 1000)
    out = await _publish(h, b, rj.channel, "q2", body=b"z" * 1000)
    h.check(isinstance(out, Rejected), f"over max_bytes with reject: {out!r}")


# cases register themselves by ID (``case``) and run through the registry: none is imported by
# name, so the module exports nothing
__all__: list[str] = []
