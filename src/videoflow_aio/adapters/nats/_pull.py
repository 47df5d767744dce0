"""``receive``: one raw pull request per wait, its replies routed through this client's inbox.

A pull is ``{"batch": n, "max_bytes": b, "no_wait": true, "expires": deadline}``: the server
answers at once with what is available (then ``404``), or waits for the first message until
it expires (``408``). One pull per subscription is open at a time in a client, so every
delivery belongs to the pull open when it arrives; later ones are kept (``st.late``) and
returned by the next receive while their lease lasts and their message is still stored
(an administrator may have purged it meanwhile). nats-py would turn the statuses into a
timeout; the adapter reads them: ``409 Consumer Deleted`` or ``503`` is ``NotFound`` once
``CONSUMER.INFO`` confirms it, no answer at all ``BackendUnavailable`` — never ``[]``. A
``503`` from a consumer that exists means nobody leads it yet (a cluster's election): the
receive asks again until its deadline, then ``BackendUnavailable``.

A redelivery of a message this client settled with the server's confirmation means the
server lost the settle (a crash before it saved consumer state): the settle is sent again
(``_settle.resettle``) and the message is not handed out a second time.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import anyio
import nats.errors

from ...contracts.errors import AccessDenied, BackendUnavailable, NotFound, ValidationError
from ...contracts.messaging import Delivery, DeliveryToken, SubscriptionId
from .._tasks import gather
from . import _api, _codec, _security, _settle
from ._api import unavailable
from ._connection import Client, await_leader, loop_time
from ._ledger import matches, parse_ts
from ._names import ADV_TERMINATED
from ._state import ChanState, Pull, SubState
from ._subscriptions import sub
from ._wire import ConsumerInfo, MsgGet, decode_advisory

NS = 1_000_000_000
LINGER = 0.002
"""How long a pull that got some messages waits for the rest of the burst."""
REPLICATED_LINGER = 0.02
"""The same on a replicated stream (R > 1: a cluster)."""
STRAGGLERS = 0.02
"""How long a pull ended by a status without messages waits for deliveries that status
overtook (a cluster routes them from the consumer's leader)."""
DELIVERY_LIMIT = 1 << 20
"""Most delivery records a subscription keeps; past it the oldest half is forgotten (a drop
that would need them is then ``Unknown``)."""
DELETED_REASON = "Unacknowledged message was deleted"


def on_reply(c: Client) -> Any:
    """The inbox callback: statuses end a pull, deliveries go to the pull open for them."""

    async def cb(msg: Any) -> None:
        hdrs = msg.headers
        status = hdrs.get("Status") if hdrs else None
        if status and not msg.reply:  # a status ends the pull named by the reply subject
            token = msg.subject.rsplit(".", 1)[-1]
            pull = c.pulls.pop(token, None)
            if pull is not None:
                pull.status = (status, str(hdrs.get("Description", "")))
                pull.first.set()
                pull.done.set()
            return
        # a delivery arrives on its original subject: route it by its ack reply subject
        try:
            md = msg.metadata
            st = c.by_consumer.get((md.stream, md.consumer))
        except Exception:  # not a JetStream delivery: nothing of ours
            return
        if st is None:
            return  # not ours any more: the lease expires and the server redelivers
        pull = st.current
        if pull is None or pull.closed:
            with contextlib.suppress(Exception):
                st.late.append(delivery(c, st, msg, st.last_sent))
            return
        pull.msgs.append(msg)
        pull.first.set()
        if len(pull.msgs) >= pull.want:
            pull.done.set()

    return cb


def delivery(c: Client, st: SubState, msg: Any, sent_at: float) -> Delivery:
    md = msg.metadata
    seq = int(md.sequence.stream)
    dseq = int(md.sequence.consumer)
    attempt = int(md.num_delivered)
    env = _codec.envelope(c.names, st.id.channel, msg.subject, bytes(msg.data), msg.headers, seq)
    # the server started the lease between our request and this arrival: count it from the
    # arrival minus a margin for the one-way latency, never before the request
    start = max(sent_at, loop_time() - c.lease_margin)
    deadline = start + st.spec.ack_wait_seconds
    st.leases[seq] = (attempt, deadline, dseq)
    _settle.nudge_if_final(c, st, seq, attempt, deadline)  # unresolved then, for every client
    if st.deliveries.get(dseq, seq) != seq:
        st.deliveries.clear()  # delivery sequences restarted (a new incarnation, or a rollback)
    st.deliveries[dseq] = seq
    if len(st.deliveries) > DELIVERY_LIMIT:
        for d in sorted(st.deliveries)[: DELIVERY_LIMIT // 2]:
            del st.deliveries[d]
    st.retry_wait.pop(seq, None)
    # the consumer incarnation in the lease id: a token of a deleted consumer never settles a
    # delivery of the one created again under its name (the server would apply it)
    token = DeliveryToken(st.id, seq, attempt, f"{attempt}.{dseq}.{st.created_ns}", msg.reply)
    return Delivery(env, seq, attempt, token, deadline)


REPLICATED_PULL_SLICE = 5.0
"""Longest a replicated consumer's pull waits: a waiting pull lives on the consumer's leader
only, and dies with it unanswered (or is routed to a leader that just died), so a long
receive pulls afresh at least this often and loses at most one slice (plus
``request_timeout``) to a leader change."""


async def pull(
    c: Client, nc: Any, st: SubState, batch: int, max_bytes: int, deadline: float
) -> Pull:
    """One pull request (see the module docstring). The caller holds ``st.lock``."""
    now = loop_time()
    token = str(next(c.pull_ids))
    wait = deadline - now
    if st.chan.spec.replicas > 1:
        wait = min(wait, REPLICATED_PULL_SLICE)
    expires = max(wait - 0.005, 0.001)
    p = Pull(st, batch, now, now + expires)
    c.pulls[token] = p
    st.current = p
    st.last_sent = now
    body = {"batch": batch, "max_bytes": max_bytes, "no_wait": True, "expires": int(expires * NS)}
    subject = f"$JS.API.CONSUMER.MSG.NEXT.{st.stream}.{st.consumer}"
    limit = now + expires + c.request_timeout
    start = _security.mark(nc)
    try:
        await nc.publish(subject, _api.encode(body), reply=f"{c.inbox}.{token}")
        await _until(p.first, limit)
        if p.status is None and p.msgs and len(p.msgs) < batch:
            # the rest of a burst arrives together; a request blocked by the shared credit
            # (max_ack_pending) would wait for its expiry, so do not wait for its status. A
            # replicated stream's deliveries come from the consumer's leader, maybe through
            # another node: they arrive further apart
            linger = LINGER if st.chan.spec.replicas <= 1 else REPLICATED_LINGER
            await _until(p.done, min(limit, loop_time() + linger))
        if p.status is None and not p.msgs:  # an empty pull may be a refused one
            _security.raise_if_denied(nc, subject, start, "receive")
    except nats.errors.Error as exc:
        p.status = ("error", f"{type(exc).__name__}: {exc}")
    except BaseException:
        # cancelled: what arrived is leased to this client all the same; the next receive
        # hands it out (and the drop accounting knows who received it)
        st.late.extend(delivery(c, st, m, p.sent_at) for m in p.msgs)
        p.msgs.clear()
        raise
    finally:
        p.closed = True
        st.current = None
        if p.status is not None or len(c.pulls) > 4096:
            c.pulls.pop(token, None)
    return p


async def _until(event: asyncio.Event, deadline: float) -> None:
    """Wait for ``event`` until the loop-clock ``deadline`` (asyncio's own primitives: this
    runs on the connection's asyncio loop, once per receive)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout_at(deadline):
            await event.wait()


def _live(st: SubState, d: Delivery, now: float) -> bool:
    """Whether the lease of kept delivery ``d`` still holds (not expired, not superseded)."""
    cur = st.leases.get(d.sequence)
    return d.lease_deadline > now and cur is not None and cur[0] == d.attempt


def take_late(st: SubState, n: int, budget: int) -> list[Delivery]:
    out: list[Delivery] = []
    now = loop_time()
    keep = []
    while st.late:
        d = st.late.popleft()
        if not _live(st, d, now):
            continue  # expired or superseded: the server redelivers it
        if len(out) < n and len(d.envelope.body) <= budget:
            budget -= len(d.envelope.body)
            out.append(d)
        else:
            keep.append(d)
    st.late.extend(keep)
    return out


async def _withhold_removed(c: Client, st: SubState) -> None:
    """Deliveries kept from an earlier receive (``st.late``) whose message the stream no
    longer holds — purged or deleted since they arrived — are not handed out: their lease is
    lost with the message (counted removed under it). One read per kept delivery, in
    parallel; a delivery whose read fails is handed out as before (its settle is judged by
    the server)."""
    now = loop_time()
    kept = [d for d in st.late if _live(st, d, now)]  # take_late drops the others
    held = await gather(*(c.retained(st.chan.stream, d.sequence) for d in kept))
    removed = {d.sequence for d, h in zip(kept, held, strict=True) if h is False}
    if removed:
        still = [d for d in st.late if d.sequence not in removed]
        st.late.clear()
        st.late.extend(still)
        for seq in removed:
            _settle.gone(st, seq)


async def confirm_consumer(c: Client, st: SubState) -> None:
    """After an empty receive: NotFound when the consumer is gone (nats-py would hide it
    behind a timeout); silence otherwise — an unreachable server is not "no messages"."""
    with unavailable(f"receive on {st.id} got nothing and the consumer cannot be read"):
        info = await c.consumer_info(st.stream, st.consumer)
    if info is None:
        c.forget_sub(st.id)
        raise NotFound(
            f"subscription {st.id} no longer exists", kind="subscription", name=st.id.name
        )
    created = info.created
    if created and created != st.created:  # deleted and created again: a new incarnation
        st.reset(created, info.config.opt_start_seq or 1)


async def check_status(c: Client, st: SubState, p: Pull) -> bool:
    """Raise what the pull's status means; True for "no responders" (``503``) from a consumer
    not known gone: nobody leads it yet — on a cluster, an election (its ``CONSUMER.INFO``
    may time out too), or a new consumer whose leader's interest has not yet reached this
    client's server. Not gone, not empty."""
    if p.status is None:
        return False
    code, desc = p.status
    if code == "503":  # no responders: the consumer is gone, or has no leader (yet)
        with contextlib.suppress(BackendUnavailable):  # its leader answers that read too
            await confirm_consumer(c, st)  # NotFound when it is gone
        return True
    if code == "409" and "Consumer Deleted" in desc:
        c.forget_sub(st.id)
        raise NotFound(f"subscription {st.id} was deleted", kind="subscription", name=st.id.name)
    if code == "error":
        raise BackendUnavailable(f"receive on {st.id}: {desc}", backend="nats")
    return False


async def watch_deletions(nc: Any, chs: ChanState) -> None:
    """Follow the channel's ``MSG_TERMINATED`` advisories live (a fast path beside the durable
    ``__adv`` ledger), so a lease on a message deleted meanwhile is known gone at once."""

    async def on_advisory(msg: Any) -> None:
        with contextlib.suppress(Exception):
            adv = decode_advisory(msg.data)
            if adv.reason == DELETED_REASON:
                led = chs.ledger(chs.stream, adv.consumer)
                led.deleted[adv.stream_seq] = parse_ts(adv.timestamp)

    try:
        chs.live_adv = await nc.subscribe(f"{ADV_TERMINATED}.{chs.stream}.*", cb=on_advisory)
    except nats.errors.Error:
        chs.live_adv = False  # the durable ledger still has them; do not retry each time


async def receive(
    c: Client, subscription: SubscriptionId, item_credit: int, byte_credit: int, deadline: float
) -> list[Delivery]:
    if item_credit < 1:
        raise ValidationError("item_credit must be >= 1", field="item_credit", value=item_credit)
    if byte_credit < 1:
        raise ValidationError("byte_credit must be >= 1", field="byte_credit", value=byte_credit)
    nc = await c.conn()
    st = await sub(c, subscription)
    if st.lock is None:
        st.lock = asyncio.Lock()
    async with st.lock:
        return await _receive(c, nc, st, item_credit, byte_credit, deadline)


async def _receive(
    c: Client, nc: Any, st: SubState, item_credit: int, byte_credit: int, deadline: float
) -> list[Delivery]:
    budget = min(byte_credit, st.spec.byte_credit)
    if st.chan.live_adv is None:
        await watch_deletions(nc, st.chan)
    with contextlib.suppress(AccessDenied):  # the settle that needs it says so
        await _settle.evidence(c, st)  # follows the consumer's deletion from now on
    if st.created_ns in st.dead:  # deleted since: pull from the consumer there is now
        await confirm_consumer(c, st)
    if st.late:
        await _withhold_removed(c, st)
    out = await _fresh(c, st, take_late(st, item_credit, budget))
    if out:
        return out
    while True:
        p = await pull(c, nc, st, item_credit, budget, deadline)
        if await check_status(c, st, p):  # no leader yet: ask again until the deadline
            if not await await_leader(deadline):
                raise BackendUnavailable(
                    f"receive on {st.id}: no responders until the deadline (the consumer "
                    "exists but nobody leads it: a leader election, or JetStream is down)",
                    backend="nats",
                )
            continue
        out = await _fresh(c, st, [delivery(c, st, m, p.sent_at) for m in p.msgs])
        if out:
            return await _the_rest(c, nc, st, p, out, item_credit, budget, deadline)
        if p.msgs:
            continue  # every one was a re-settled redelivery: pull again
        if p.status is None:  # the server never answered: not "no messages"
            if p.expires_at < deadline - 0.006 and loop_time() < deadline:
                # a slice's pull lost with its consumer's leader: ask again (only NotFound,
                # the consumer gone, is final; its leader answers that read too)
                with anyio.CancelScope(deadline=deadline), contextlib.suppress(BackendUnavailable):
                    await confirm_consumer(c, st)
                continue
            await confirm_consumer(c, st)  # NotFound when the consumer is gone
            raise BackendUnavailable(
                f"receive on {st.id}: no answer from the server within "
                f"{c.request_timeout:g} s after the deadline",
                backend="nats",
            )
        code, desc = p.status
        if code in ("404", "408", "409"):
            out = await _fresh(c, st, await _stragglers(st, item_credit, budget, deadline))
            if out:
                return out
        if code == "409" and "MaxBytes" in desc:
            return out  # the head does not fit this byte credit
        if loop_time() >= deadline - 0.006:
            return out
        if code not in ("404", "408"):
            await asyncio.sleep(0.01)  # asyncio-side: e.g. 409 Exceeded MaxWaiting, back off


async def _the_rest(
    c: Client,
    nc: Any,
    st: SubState,
    p: Pull,
    out: list[Delivery],
    item_credit: int,
    budget: int,
    deadline: float,
) -> list[Delivery]:
    """On a replicated stream, a pull answered "that is all" (``404``) by a consumer whose
    leader has not yet applied messages stored before the receive (its replica of the stream
    trails the stream's leader): pull again for them while the deadline allows, so a receive
    sees what this client — or, asked of the stream's leader, anyone — published before it."""
    while st.chan.spec.replicas > 1 and len(out) < item_credit and loop_time() < deadline - 0.006:
        left = budget - sum(len(d.envelope.body) for d in out)
        if left <= 0:
            break
        late = take_late(st, item_credit - len(out), left)  # what reached an earlier pull
        if late:
            out += await _fresh(c, st, late)
            continue
        more = p.status is None or p.status[0] in ("404", "408")
        top = max(d.sequence for d in out)
        if not more or not (_published_beyond(st, top) or await _stored_beyond(c, st, top)):
            break
        await asyncio.sleep(0.001)  # asyncio-side: nats-py's loop
        p = await pull(c, nc, st, item_credit - len(out), left, deadline)
        if await check_status(c, st, p):
            break  # no leader now: return what this receive already leased
        out += await _fresh(c, st, [delivery(c, st, m, p.sent_at) for m in p.msgs])
    return out


async def _stored_beyond(c: Client, st: SubState, top: int) -> bool:
    """Whether the stream's leader holds a message ``st`` receives past both ``top`` and the
    consumer's delivered position: one the consumer has not applied yet (a pull that ended
    "no messages" had it to give otherwise). Both read at once (one round trip; the first
    such message past ``top`` is the one compared: one already delivered to another client
    says no). A failed read says no: the receive returns what it has, as it would have."""
    subject = c.names.filter(st.id.channel, st.spec.kind, st.spec.partition)
    info, found = await gather(
        c.consumer_info(st.stream, st.consumer),
        c.api(f"STREAM.MSG.GET.{st.stream}", {"seq": top + 1, "next_by_subj": subject}, MsgGet),
    )
    for got in (info, found):
        if isinstance(got, Exception) and not isinstance(got, _api.CallFailed):
            raise got
    if not isinstance(info, ConsumerInfo) or not isinstance(found, MsgGet):
        return False  # no consumer, nothing found (NO_MESSAGE_FOUND), or a failed read
    return found.message.seq > info.delivered.stream_seq


def _published_beyond(st: SubState, top: int, window: int = 64) -> bool:
    """Whether this client published, past sequence ``top``, a message ``st`` receives that
    it has neither leased nor settled (among the next ``window`` sequences)."""
    index = st.chan.index
    for seq in range(top + 1, top + 1 + window):
        entry = index.get(seq)
        if (
            entry is not None
            and matches(st.spec, entry[0], entry[1])
            and seq not in st.leases
            and st.settled.get(seq) is None
        ):
            return True
    return False


async def _stragglers(st: SubState, n: int, budget: int, deadline: float) -> list[Delivery]:
    """On a cluster a pull's status can overtake the deliveries it ends (they come from the
    consumer's leader by another route, and land in ``late``; a ``409 MaxBytes`` arrived
    before its messages every time): wait for them a little (``STRAGGLERS``, never past the
    deadline), then for the rest of their burst."""
    end = min(deadline, loop_time() + STRAGGLERS)
    while not st.late and loop_time() < end:  # noqa: ASYNC110 - filled by the inbox callback
        await asyncio.sleep(0.001)  # asyncio-side: nats-py's loop
    if st.late:
        linger = LINGER if st.chan.spec.replicas <= 1 else REPLICATED_LINGER
        await asyncio.sleep(linger)  # asyncio-side: nats-py's loop
    return take_late(st, n, budget)


async def _fresh(c: Client, st: SubState, got: list[Delivery]) -> list[Delivery]:
    """``got`` without the redeliveries of messages this client already settled (the server
    forgot those settles: they are sent again, and reported)."""
    if not got or not any(d.sequence in st.settled for d in got):
        return got
    out = []
    for d in got:
        if d.sequence in st.settled:
            await _settle.resettle(c, st, d)
        else:
            out.append(d)
    return out
