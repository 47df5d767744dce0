"""MSG cases with more than one client, a server restart, an administrator acting
out of band (MSG-049 to MSG-070).

Conventions in :mod:`._msg_scenarios`; IDs are stable.
"""

from __future__ import annotations

from ...contracts.errors import NotFound
from ...contracts.messaging import (
    Accepted,
    Completed,
    Delivery,
    Retry,
    SettleConfirmed,
    SettleStale,
    Terminal,
    make_channel,
    make_envelope,
    make_subscription,
)
from .._case import case
from .._harness import MessagingHarness as Harness
from ._msg_scenarios import (
    M,
    _chan_obs,
    _channel,
    _interest_channel,
    _op,
    _peer,
    _pids,
    _publish,
    _recv,
    _right_or_unknown,
    _seq,
    _settle_all,
    _sub,
    _sub_obs,
    _subscribed,
    _two_clients,
    _window,
    _with_capability,
    _with_channel,
    _with_profile,
)

# -- more than one client, a restart, an administrator (issue #14) -------------------------
#
# The schedules production has every day: another process on the same channel and
# subscription (``another_client``: a new backend instance on its own connection, which
# ensures what it uses, as a replacement worker does), a server restart (``restart_server``:
# kill -9 and restart on the same store), an administrator acting out of band (``purge``,
# ``delete_message``, ``delete_subscription``). Where a provider may not be able to tell, a
# case accepts ``Unknown`` — never a wrong definite value.


@case(
    "MSG-049",
    "another client: competing receives split a subscription; both observe the same counts",
    contract=M,
    controls=("another_client",),
)
async def two_clients_compete(h: Harness) -> None:
    b, c, ch, sub = await _two_clients(h, item_credit=64)
    outs = [await _publish(h, b, ch.channel, f"p{i}") for i in range(6)]
    r1 = await _recv(h, b, sub.id, n=3)
    r2 = await _recv(h, c, sub.id, n=3)
    h.equal(sorted(_pids(r1) + _pids(r2)), [f"p{i}" for i in range(6)], "split between clients")
    h.check(not set(_pids(r1)) & set(_pids(r2)), "no message to both clients")
    await _settle_all(b, r1, "b")
    await _settle_all(c, r2, "c")
    for who in (b, c):
        obs = await _sub_obs(h, who, sub.id)
        h.equal((obs.pending, obs.leased, obs.dropped), (0, 0, 0), "counts")
        h.equal(obs.ack_floor, _seq(h, outs[-1]), "ack floor")


@case(
    "MSG-050",
    "another client: a message another client received and settled is never called dropped",
    contract=M,
    controls=("another_client",),
)
async def two_clients_no_false_drop(h: Harness) -> None:
    b, c, ch, sub = await _two_clients(h, channel=dict(max_msgs=3))
    for i in range(3):
        await _publish(h, b, ch.channel, f"p{i}")
    got = await _recv(h, c, sub.id)
    h.equal(len(got), 3, "the other client receives them")
    await _settle_all(c, got, "c")
    for i in range(3, 6):
        await _publish(h, b, ch.channel, f"p{i}")  # evicts the three settled messages
    _right_or_unknown(h, await b.observe_subscription(sub.id), "dropped", 0, "publisher first")
    h.equal((await _sub_obs(h, c, sub.id)).dropped, 0, "the receiving client")
    h.equal((await _sub_obs(h, b, sub.id)).dropped, 0, "the publisher, after it")
    h.equal((await _sub_obs(h, b, sub.id)).pending, 3, "the three new ones pending")


@case(
    "MSG-051",
    "another client: a message evicted before anyone received it is one drop, for every client",
    contract=M,
    controls=("another_client",),
)
async def two_clients_one_drop(h: Harness) -> None:
    b, c, ch, sub = await _two_clients(h, channel=dict(max_msgs=2))
    h.equal((await _sub_obs(h, c, sub.id)).dropped, 0, "nothing yet")
    for i in range(3):
        await _publish(h, b, ch.channel, f"p{i}")  # p0 is evicted unreceived
    h.equal((await _sub_obs(h, c, sub.id)).dropped, 1, "the client that did not publish it")
    h.equal((await _sub_obs(h, b, sub.id)).dropped, 1, "the publisher: counted once")
    await _publish(h, b, ch.channel, "p3")  # and p1
    h.equal((await _sub_obs(h, b, sub.id)).dropped, 2, "the publisher")
    h.equal((await _sub_obs(h, c, sub.id)).dropped, 2, "the other client agrees")
    h.equal(_pids(await _recv(h, c, sub.id)), ["p2", "p3"], "what remains is delivered")


@case(
    "MSG-052",
    "another client: a message exhausted by one client is unresolved for every client",
    contract=M,
    controls=("another_client",),
)
async def two_clients_unresolved(h: Harness) -> None:
    b, c, ch, sub = await _two_clients(h, ack_wait_seconds=h.seconds(5), max_deliver=1)
    await _publish(h, b, ch.channel, "p1")
    h.equal(_pids(await _recv(h, c, sub.id)), ["p1"], "the other client leases it")
    await h.sleep(6)  # its only lease lapses
    h.equal((await _sub_obs(h, c, sub.id)).unresolved, 1, "the client that held it")
    obs = await _sub_obs(h, b, sub.id)
    with h.fail_after(100):  # a server reports it once it decided (a second or so)
        while obs.unresolved != 1:
            await h.sleep(2)
            obs = await _sub_obs(h, b, sub.id)
    h.equal((obs.unresolved, obs.pending, obs.leased), (1, 0, 0), "the other client, too")
    h.equal(await _recv(h, b, sub.id, wait=5), [], "never delivered again")


@case(
    "MSG-053",
    "another client: dedup by publication id spans clients",
    contract=M,
    controls=("another_client",),
)
async def two_clients_dedup(h: Harness) -> None:
    b, ch = await _with_channel(h, dedup_window_seconds=_window(h, 60))
    c = await _peer(h, b, ch)
    first = await _publish(h, b, ch.channel, "p1", body=b"one")
    again = await _publish(h, c, ch.channel, "p1", body=b"two")
    h.check(isinstance(again, Accepted) and again.duplicate, f"a duplicate: {again!r}")
    h.equal(_seq(h, again), _seq(h, first), "the stored sequence")
    h.equal((await _chan_obs(h, c, ch.channel)).messages, 1, "stored once")


@case(
    "MSG-054",
    "administrator purge: no settle or renewal on a purged message is confirmed; each is a drop",
    contract=M,
    controls=("purge",),
)
async def admin_purge(h: Harness) -> None:
    b, ch, sub = await _subscribed(h, ack_wait_seconds=h.seconds(60))
    ctl = h.controls(b)
    for i in range(5):
        await _publish(h, b, ch.channel, f"p{i}")
    leased = await _recv(h, b, sub.id, n=2)
    await ctl.purge(ch.channel)
    ans = await b.settle(leased[0].token, Completed(), "late")
    h.check(isinstance(ans, SettleStale), f"settle on a purged message: {ans!r}")
    lease = await b.renew(leased[1].token)
    h.check(not lease.held, f"renewal on a purged message: {lease!r}")
    obs = await _sub_obs(h, b, sub.id)
    h.equal((obs.dropped, obs.pending, obs.leased), (5, 0, 0), "two leased + three pending lost")
    cobs = await _chan_obs(h, b, ch.channel)
    h.equal((cobs.messages, cobs.first_sequence), (0, cobs.last_sequence + 1), "empty")
    await _publish(h, b, ch.channel, "after")
    h.equal(_pids(await _recv(h, b, sub.id)), ["after"], "the channel works on")


@case(
    "MSG-055",
    "administrator deletes one message: a drop for each subscription that had not settled it",
    contract=M,
    controls=("delete_message",),
)
async def admin_delete_message(h: Harness) -> None:
    b, ch = await _with_channel(h)
    a = await _sub(h, b, ch.channel, "a")
    c = await _sub(h, b, ch.channel, "c")
    outs = [await _publish(h, b, ch.channel, f"p{i}") for i in range(3)]
    await _settle_all(b, await _recv(h, b, a.id))  # a settles all three, c none
    await h.controls(b).delete_message(ch.channel, _seq(h, outs[1]))
    h.equal((await _sub_obs(h, b, a.id)).dropped, 0, "a had settled it")
    oc = await _sub_obs(h, b, c.id)
    h.equal((oc.dropped, oc.pending), (1, 2), "c lost it")
    h.equal(_pids(await _recv(h, b, c.id)), ["p0", "p2"], "c receives the others")
    h.equal((await _sub_obs(h, b, c.id)).dropped, 1, "counted once")


@case(
    "MSG-056",
    "administrator deletes a subscription: ensured again, it starts with no inherited ledger",
    contract=M,
    controls=("delete_subscription",),
)
async def admin_delete_subscription(h: Harness) -> None:
    b, ch, spec = await _subscribed(h, ack_wait_seconds=h.seconds(5), max_deliver=1)
    await _publish(h, b, ch.channel, "p1")
    await _recv(h, b, spec.id)
    await h.sleep(6)
    h.equal((await _sub_obs(h, b, spec.id)).unresolved, 1, "exhausted")
    await h.controls(b).delete_subscription(spec.id)
    with h.raises(NotFound, "a deleted subscription"):
        await b.observe_subscription(spec.id)
    again = await b.ensure_subscription(spec, _op(h))
    h.check(again.created, "ensured again, it is created")
    obs = await _sub_obs(h, b, spec.id)
    h.equal((obs.unresolved, obs.pending, obs.leased, obs.dropped), (0, 1, 0, 0), "fresh")
    h.equal(obs.ack_floor, 0, "nothing settled yet")
    got = await _recv(h, b, spec.id)
    h.equal([(d.envelope.publication_id, d.attempt) for d in got], [("p1", 1)], "first attempt")
    await _settle_all(b, got)
    h.equal((await _sub_obs(h, b, spec.id)).ack_floor, got[0].sequence, "the floor moves")


@case(
    "MSG-057",
    "a Retry with a delay on the final attempt leaves the message unresolved at once",
    contract=M,
)
async def final_retry_unresolved(h: Harness) -> None:
    b, ch, sub = await _subscribed(h, ack_wait_seconds=h.seconds(60), max_deliver=2)
    await _publish(h, b, ch.channel, "p1")
    for i, delay in enumerate((0.0, h.seconds(20))):
        got = await _recv(h, b, sub.id)
        h.equal([d.attempt for d in got], [i + 1], f"attempt {i + 1}")
        ans = await b.settle(got[0].token, Retry(delay), f"r{i}")
        h.check(isinstance(ans, SettleConfirmed), f"retry {i}: {ans!r}")
    obs = await _sub_obs(h, b, sub.id)
    h.equal((obs.unresolved, obs.pending, obs.leased), (1, 0, 0), "unresolved, not pending")
    h.equal(await _recv(h, b, sub.id, wait=30), [], "no third attempt after the delay")


@case(
    "MSG-058",
    "dedup_window_seconds=0: the backend and a channel without dedup store every publication",
    contract=M,
)
async def zero_dedup_window(h: Harness) -> None:
    b = await h.open(dedup_window_seconds=0)
    spec = await _channel(h, b, "a")
    got = await b.ensure_channel(spec, _op(h))
    h.equal(got.effective.dedup_window_seconds, 0, "capped by the backend")
    plain = await h.open()
    none = make_channel("flow", "run1", "b", "work", "limits", dedup_window_seconds=0)
    h.equal((await plain.ensure_channel(none, _op(h))).effective.dedup_window_seconds, 0, "spec 0")
    for backend, cid in ((b, spec.channel), (plain, none.channel)):
        one = await _publish(h, backend, cid, "same")
        two = await _publish(h, backend, cid, "same")
        h.check(isinstance(two, Accepted) and not two.duplicate, f"no dedup: {two!r}")
        h.check(_seq(h, two) > _seq(h, one), "a second message")


@case(
    "MSG-059",
    "observe_publication keeps naming the stored sequence after a duplicate publish",
    contract=M,
)
async def observe_after_duplicate(h: Harness) -> None:
    b, ch = await _with_channel(h)
    env = make_envelope(ch.channel, "p1")
    first = h.expect_type(await b.publish(env, h.deadline(5)), Accepted, "first publish")
    dup = await b.publish(env, h.deadline(5))
    h.check(isinstance(dup, Accepted) and dup.duplicate, f"a duplicate: {dup!r}")
    for i in range(2):
        seen = await b.observe_publication(env)
        h.equal(seen, Accepted("p1", first.sequence, False), f"observation {i + 1}")


@case(
    "MSG-060",
    "the first ensure of a required subscription of an interest channel creates it",
    contract=M,
)
async def required_created(h: Harness) -> None:
    b = await h.open()
    cid = (await _interest_channel(h, b, "a")).channel
    spec = make_subscription(cid, "a", ack_wait_seconds=h.seconds(30))
    first = await b.ensure_subscription(spec, _op(h))
    h.equal((first.created, first.updated), (True, False), "created")
    again = await b.ensure_subscription(spec, _op(h))
    h.equal((again.created, again.updated), (False, False), "then found as is")


@case(
    "MSG-061",
    "server restart: a persistent channel keeps messages and settlements; none handed out twice",
    contract=M,
    controls=("restart_server",),
)
async def restart_keeps(h: Harness) -> None:
    b = await h.open(persistent=True)
    ch = await _channel(h, b, persistence=True)
    sub = await _sub(h, b, ch.channel, ack_wait_seconds=h.seconds(10), max_deliver=3)
    for i in range(4):
        await _publish(h, b, ch.channel, f"p{i}")
    done = await _recv(h, b, sub.id, n=2)
    for d in done:
        ans = await b.settle(d.token, Completed(), f"s{d.sequence}")
        h.check(isinstance(ans, SettleConfirmed), f"settled before the restart: {ans!r}")
    await h.controls(b).restart_server()
    out = await _publish(h, b, ch.channel, "p4")
    h.check(isinstance(out, Accepted), f"publish after the restart: {out!r}")
    seen: list[str] = []
    with h.move_on_after(40):  # past an ack wait: a settle the server lost comes back by then
        while True:
            got = await _recv(h, b, sub.id, wait=15)
            seen += _pids(got)
            await _settle_all(b, got, "after")
    h.equal(sorted(seen), ["p2", "p3", "p4"], "each unsettled message once, no settled one")
    obs = await _sub_obs(h, b, sub.id)
    h.equal((obs.pending, obs.leased, obs.unresolved), (0, 0, 0), "all settled")
    h.equal((await _chan_obs(h, b, ch.channel)).messages, 5, "every message retained")


@case(
    "MSG-062",
    "server restart: a channel without persistence is gone",
    contract=M,
    controls=("restart_server",),
)
async def restart_forgets(h: Harness) -> None:
    b = await h.open(persistent=True)
    kept = await _channel(h, b, "kept", persistence=True)
    lost = await _channel(h, b, "lost", persistence=False)
    for spec in (kept, lost):
        await _publish(h, b, spec.channel, "p1")
    await h.controls(b).restart_server()
    h.equal((await _chan_obs(h, b, kept.channel)).messages, 1, "the persistent channel")
    with h.raises(NotFound, "the other channel"):
        await b.observe_channel(lost.channel)
    h.equal(await b.channel_ids(), [kept.channel], "only the persistent channel is listed")


@case(
    "MSG-063",
    "interest: only required subscriptions hold a message; another one loses it as a drop",
    contract=M,
)
async def interest_required_only(h: Harness) -> None:
    b = await _with_capability(h, "interest_required_only")
    cid = (await _interest_channel(h, b, "a")).channel
    a = await _sub(h, b, cid, "a")
    audit = await _sub(h, b, cid, "audit")
    await _publish(h, b, cid, "p1")
    await _settle_all(b, await _recv(h, b, a.id))
    h.equal((await _chan_obs(h, b, cid)).messages, 0, "removed once the required one settled")
    h.equal(await _recv(h, b, audit.id), [], "the other subscription does not get it")
    h.equal((await _sub_obs(h, b, audit.id)).dropped, 1, "and counts it dropped")


@case(
    "MSG-064",
    "redelivered counts every redelivery, also after the message is settled",
    contract=M,
)
async def redelivered_cumulative(h: Harness) -> None:
    b, ch, sub = await _subscribed(
        h, capability="cumulative_redelivered", ack_wait_seconds=h.seconds(60), max_deliver=5
    )
    await _publish(h, b, ch.channel, "p1")
    got = await _recv(h, b, sub.id)
    await b.settle(got[0].token, Retry(), "r1")
    again = await _recv(h, b, sub.id)
    h.equal((await _sub_obs(h, b, sub.id)).redelivered, 1, "one redelivery")
    await b.settle(again[0].token, Completed(), "done")
    h.equal((await _sub_obs(h, b, sub.id)).redelivered, 1, "still counted once settled")


@case(
    "MSG-065",
    "core-only: another client's subscriptions see what is published once they are attached",
    contract=M,
    needs=("core_only",),
    controls=("another_client",),
)
async def core_two_clients(h: Harness) -> None:
    b, ch = await _with_profile(h, "core_only")
    mine = await _sub(h, b, ch.channel, "mine", competing=False)
    c = await h.controls(b).another_client()
    await c.ensure_channel(ch, _op(h))
    theirs = await _sub(h, c, ch.channel, "theirs", competing=False)
    for i in range(3):
        await _publish(h, b, ch.channel, f"p{i}")
    h.equal(_pids(await _recv(h, b, mine.id)), ["p0", "p1", "p2"], "the publishing client")
    got: list[Delivery] = []
    with h.move_on_after(10):  # routed to another connection: they arrive as they arrive
        while len(got) < 3:
            got += await _recv(h, c, theirs.id, wait=5)
    h.equal(_pids(got), ["p0", "p1", "p2"], "the other client, in order")
    obs = await _sub_obs(h, c, theirs.id)
    h.equal((obs.pending, obs.dropped), (0, 0), "nothing left, nothing dropped")


@case(
    "MSG-066",
    "core-only: after a server restart what was queued stays queued and delivery resumes",
    contract=M,
    needs=("core_only",),
    controls=("restart_server",),
)
async def core_restart(h: Harness) -> None:
    b, ch = await _with_profile(h, "core_only")
    sub = await _sub(h, b, ch.channel)
    await _publish(h, b, ch.channel, "before")
    h.equal((await _sub_obs(h, b, sub.id)).pending, 1, "queued in the client")
    await h.controls(b).restart_server()
    out = await _publish(h, b, ch.channel, "after")
    h.check(isinstance(out, Accepted), f"publish after the restart: {out!r}")
    h.equal(_pids(await _recv(h, b, sub.id)), ["before", "after"], "both, in order")


@case(
    "MSG-067",
    "another client: a last attempt that lapsed is unresolved for every client before any pull",
    contract=M,
    controls=("another_client",),
)
async def two_clients_last_attempt_lapses(h: Harness) -> None:
    b, c, ch, sub = await _two_clients(h, ack_wait_seconds=h.seconds(5), max_deliver=2)
    await _publish(h, b, ch.channel, "p1")
    for attempt in (1, 2):
        got = await _recv(h, c, sub.id, wait=10)
        h.equal([d.attempt for d in got], [attempt], f"attempt {attempt} at the other client")
        await h.sleep(7)  # it lapses; nobody pulls after the last one
    for who, what in ((b, "a client that never held it"), (c, "the client that held it")):
        obs = await _sub_obs(h, who, sub.id)
        h.equal((obs.unresolved, obs.pending, obs.leased), (1, 0, 0), what)


@case(
    "MSG-068",
    "administrator deletes a subscription: a token of the old one never settles a new delivery",
    contract=M,
    controls=("another_client", "delete_subscription"),
)
async def old_token_after_recreate(h: Harness) -> None:
    b, c, ch, sub = await _two_clients(h, ack_wait_seconds=h.seconds(60))
    await _publish(h, b, ch.channel, "p1")
    old = await _recv(h, c, sub.id)
    h.equal(_pids(old), ["p1"], "the other client holds it")
    await h.controls(b).delete_subscription(sub.id)
    h.check((await b.ensure_subscription(sub, _op(h))).created, "ensured again, it is new")
    new = await _recv(h, b, sub.id)
    h.equal([(d.envelope.publication_id, d.attempt) for d in new], [("p1", 1)], "redelivered")
    ans = await c.settle(old[0].token, Completed(), "old")
    h.check(isinstance(ans, SettleStale), f"the old subscription's token: {ans!r}")
    ans = await b.settle(new[0].token, Completed(), "new")
    h.check(isinstance(ans, SettleConfirmed), f"the new delivery settles: {ans!r}")
    obs = await _sub_obs(h, b, sub.id)
    h.equal((obs.pending, obs.leased), (0, 0), "settled once")


@case(
    "MSG-069",
    "administrator deletes a subscription: ensured again, it counts only its own dead letters",
    contract=M,
    controls=("delete_subscription",),
)
async def dead_letters_per_incarnation(h: Harness) -> None:
    b, ch, sub = await _subscribed(h, ack_wait_seconds=h.seconds(60))
    for i in range(2):
        await _publish(h, b, ch.channel, f"p{i}")
    got = await _recv(h, b, sub.id)
    await b.settle(got[0].token, Terminal("bad"), "t0")
    h.equal((await _sub_obs(h, b, sub.id)).dead_lettered, 1, "one dead letter")
    await h.controls(b).delete_subscription(sub.id)
    await b.ensure_subscription(sub, _op(h))
    h.equal((await _sub_obs(h, b, sub.id)).dead_lettered, 0, "none of its own yet")
    again = await _recv(h, b, sub.id)
    h.equal(_pids(again), ["p0", "p1"], "both delivered to the new subscription")
    await b.settle(again[0].token, Terminal("bad again"), "t1")
    h.equal((await _sub_obs(h, b, sub.id)).dead_lettered, 1, "its own dead letter")
    h.equal((await _chan_obs(h, b, ch.channel)).dead_letters, 2, "the channel keeps both")


@case(
    "MSG-070",
    "another client: a Retry received again by a third client is leased, for every client",
    contract=M,
    controls=("another_client",),
)
async def retry_received_elsewhere(h: Harness) -> None:
    b, c, ch, sub = await _two_clients(h, ack_wait_seconds=h.seconds(60), max_deliver=5)
    d = await _peer(h, b, ch, sub)
    await _publish(h, b, ch.channel, "p1")
    got = await _recv(h, c, sub.id)
    h.check(isinstance(await c.settle(got[0].token, Retry(), "r"), SettleConfirmed), "Retry")
    again = await _recv(h, d, sub.id)
    h.equal([(x.envelope.publication_id, x.attempt) for x in again], [("p1", 2)], "redelivered")
    for who, what in ((b, "a bystander"), (c, "the client that gave it back"), (d, "its holder")):
        obs = await _sub_obs(h, who, sub.id)
        h.equal((obs.pending, obs.leased), (0, 1), what)


# cases register themselves by ID (``case``) and run through the registry: none is imported by
# name, so the module exports nothing
__all__: list[str] = []
