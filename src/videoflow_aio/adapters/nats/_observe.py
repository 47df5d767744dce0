"""``observe_subscription``, ``observe_ack_floor``, ``observe_channel``: reads, then ``_ledger``.

An observation reads the consumer and its stream (again, briefly, while the consumer visibly
trails the stream), folds new advisories from ``__adv`` into the channel's ledger, reads the
subscription's shared accounting record from ``__acct`` and — for removed sequences whose
subject it needs — the index records in ``__idx``; :mod:`._ledger` decides; an advanced record is
written back under compare-and-set (``Nats-Expected-Last-Subject-Sequence``), re-decided when
another client wrote first. Any failed read is ``Unknown``, never a zero.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable
from typing import Any

import anyio
import anyio.lowlevel
import msgspec

from ...contracts import Known, Unknown
from ...contracts.errors import NotFound
from ...contracts.messaging import (
    ChannelId,
    ChannelObservation,
    SubscriptionId,
    SubscriptionObservation,
)
from . import _api
from ._api import ApiError, CallFailed
from ._channels import chan, seen
from ._connection import Client, loop_time
from ._gap import Gap, gap, retained_above_floor
from ._ledger import (
    Accounted,
    Ambiguous,
    ConsumerView,
    Local,
    Own,
    Record,
    StreamView,
    account,
    candidates,
    counts,
    evicted_maybe_leased,
    exhausted_now,
    floor,
    initial_record,
    last_foreign,
    matches,
    needs_subject,
    own_floor,
    parse_ts,
    publications_uncounted,
)
from ._names import ADV_CREATED, ADV_DELETED, ADV_MAX_DELIVERIES, ADV_TERMINATED
from ._publish import INDEX_LINGER, IndexRecord, flush_all
from ._pull import DELETED_REASON
from ._settle import nudge
from ._state import ChanState, Ledger, SubState
from ._subscriptions import sub
from ._wire import ConsumerInfo, MsgGet, StreamInfo, decode_advisory, decode_pub_ack

CATCH_UP_TRIES = 20
CATCH_UP_PAUSE = 0.005
CATCH_UP_MAX_PAUSE = 0.05
CATCH_UP_WINDOW = 256
REMOVAL_CHECKS = 8
"""How many of the newest messages settled on every required subscription an observation of
an interest channel checks are gone (one ``STREAM.MSG.GET`` each, once per message)."""
INDEX_WAIT_TRIES = 6
ATTRIB_LIMIT = 1 << 20
BATCH = 1024
WRONG_LAST_SEQUENCE = 10071
CAS_TRIES = 4
ADVISORY_TRIES = 10
_record_dec = msgspec.json.Decoder(Record).decode
_record_enc = msgspec.json.Encoder().encode


async def _direct_batch(c: Client, nc: Any, stream: str, seq: int, n: int) -> list[Any] | None:
    """One batched direct get: the messages from ``seq`` (at most ``n``); None when the stream
    does not allow direct gets."""
    inbox = nc.new_inbox()
    got: list[Any] = []
    done = anyio.Event()

    async def collect(msg: Any) -> None:
        got.append(msg)
        if msg.headers and msg.headers.get("Status"):
            done.set()

    s = await nc.subscribe(inbox, cb=collect)
    try:
        body = {"seq": seq, "batch": n}
        await _api.publish(nc, f"$JS.API.DIRECT.GET.{stream}", _api.encode(body), reply=inbox)
        with anyio.move_on_after(c.request_timeout):
            await done.wait()
    finally:
        await s.unsubscribe()
    if not done.is_set():
        raise _api.NoAnswer(f"no end of batch from {stream} within {c.request_timeout:g} s")
    status = str(got[-1].headers.get("Status"))
    if status == "503":
        return None
    if status not in ("204", "404"):
        desc = got[-1].headers.get("Description", "")
        raise _api.NoAnswer(f"direct get on {stream}: status {status} {desc}")
    return got[:-1]


async def _one_by_one(
    c: Client, stream: str, start: int, upto: int
) -> list[tuple[int, str, bytes]]:
    out = []
    for seq in range(start, upto + 1):
        try:
            got = await c.api(f"STREAM.MSG.GET.{stream}", {"seq": seq}, MsgGet)
        except ApiError as exc:
            if exc.err_code == _api.NO_MESSAGE_FOUND:
                continue
            raise
        m = got.message
        out.append((seq, m.subject, base64.b64decode(m.data or "")))
    return out


async def batch_get(c: Client, stream: str, start: int, upto: int) -> list[tuple[int, str, bytes]]:
    """``(sequence, subject, body)`` of the messages of ``stream`` in ``[start, upto]`` (direct
    gets of up to ``BATCH`` at a time; a missing sequence is simply absent).

    A direct get is answered by any replica of a replicated stream, and a follower may not
    have the newest messages yet (the stream's info, from the leader, says they exist): what
    it did not return is read from the leader (``STREAM.MSG.GET``), so the caller's cursor
    never moves past a message it has not read."""
    nc = await c.conn()
    out: list[tuple[int, str, bytes]] = []
    seq = start
    while seq <= upto:
        rows = await _direct_batch(c, nc, stream, seq, min(BATCH, upto - seq + 1))
        if not rows:  # a stream made without direct gets (None), or a replica behind
            return out + await _one_by_one(c, stream, seq, upto)
        for m in rows:
            hdrs = m.headers or {}
            n = int(hdrs.get("Nats-Sequence", 0) or 0)
            if n <= upto:
                out.append((n, str(hdrs.get("Nats-Subject", "")), bytes(m.data)))
            seq = max(seq, n + 1)
    return out


async def read_new(c: Client, stream: str, cursor: int) -> tuple[list[tuple[int, str, bytes]], int]:
    """The messages of ``stream`` from sequence ``cursor`` on, and the cursor after them."""
    info = await c.stream_info(stream)
    if info is None:
        return [], cursor
    last = info.state.last_seq
    if cursor > last:
        return [], cursor
    return await batch_get(c, stream, cursor, last), last + 1


async def read_advisories(c: Client, chs: ChanState) -> None:
    """Fold new advisories from the channel's ``__adv`` stream into its ledgers."""
    rows, chs.adv_next = await read_new(c, chs.adv, chs.adv_next)
    for _seq, subject, data in rows:
        fold_advisory(chs, subject, data)


def fold_advisory(chs: ChanState, subject: str, data: bytes) -> None:
    parts = subject.rsplit(".", 2)
    if len(parts) != 3:
        return
    prefix, stream, consumer = parts
    key = (stream, consumer)
    if prefix in (ADV_CREATED, ADV_DELETED):
        chs.ledgers[key] = Ledger()  # what came before belongs to a previous incarnation
        return
    try:
        adv = decode_advisory(data or b"{}")
    except msgspec.DecodeError:
        return
    sseq = adv.stream_seq
    at = parse_ts(adv.timestamp)
    if prefix == ADV_MAX_DELIVERIES:
        chs.ledger(stream, consumer).exhausted[sseq] = at
    elif prefix == ADV_TERMINATED and adv.reason == DELETED_REASON:
        chs.ledger(stream, consumer).deleted[sseq] = at


def consumer_view(ci: ConsumerInfo) -> ConsumerView:
    return ConsumerView(
        delivered_d=ci.delivered.consumer_seq,
        delivered_s=ci.delivered.stream_seq,
        floor_d=ci.ack_floor.consumer_seq,
        floor_s=ci.ack_floor.stream_seq,
        num_pending=ci.num_pending,
        num_ack_pending=ci.num_ack_pending,
        num_redelivered=ci.num_redelivered,
        ts=parse_ts(ci.ts),
    )


async def _stream_caught_up(c: Client, chs: ChanState) -> StreamInfo | None:
    """The slot stream's info, re-read for up to ``request_timeout`` while it ends before
    this client's own publications (``stream_behind``)."""
    give_up = loop_time() + c.request_timeout
    pause = CATCH_UP_PAUSE
    while True:
        si = seen(chs, await c.stream_info(chs.stream))
        if si is None:
            return None
        if stream_behind(chs, si) is None or loop_time() >= give_up:
            return si
        await anyio.sleep(pause)
        pause = min(pause * 2, CATCH_UP_MAX_PAUSE)


async def _removals_caught_up(
    c: Client, chs: ChanState, si: StreamInfo | None
) -> StreamInfo | None:
    """Interest retention: a message every required subscription settled (with this
    client, confirmed) leaves the stream — after the acks, on a cluster, where the stream's
    leader applies what the consumers' leaders decided. While such a message is still there
    (the newest few checked, ``STREAM.MSG.GET``), re-read, for up to ``request_timeout``:
    this client's own settles are visible in what it observes next."""
    spec = chs.spec
    subs = [c.subs.get(sid) for sid in spec.required]
    if si is None or spec.retention != "interest" or not subs or None in subs:
        return si
    give_up = loop_time() + c.request_timeout
    while True:
        view = stream_view(si)
        settled = set.intersection(*(set(st.settled.data) for st in subs if st is not None))
        candidates = sorted(
            s for s in settled if view.first <= s <= view.last and chs.removed.get(s) is None
        )[-REMOVAL_CHECKS:]
        still = [s for s in candidates if await c.retained(chs.stream, s)]
        for s in set(candidates) - set(still):
            chs.removed.put(s, True)
        if not candidates or loop_time() >= give_up:
            return si
        if not still:  # gone now: the stream info read before may predate the removal
            return seen(chs, await c.stream_info(chs.stream))
        await anyio.sleep(CATCH_UP_PAUSE)
        si = seen(chs, await c.stream_info(chs.stream))
        if si is None:
            return None


def stream_view(si: StreamInfo, deleted: Iterable[int] = ()) -> StreamView:
    state = si.state
    last = state.last_seq
    first = state.first_seq
    if first == 0 or state.messages == 0:
        first = last + 1
    return StreamView(first, last, frozenset(deleted))


class Lagging(CallFailed):
    """A consumer (or its stream's leader) still trails what this client wrote after
    ``request_timeout`` (its observation would be older than this client's own writes): the
    observation is ``Unknown``."""


async def infos(c: Client, st: SubState, strict: bool = True) -> tuple[ConsumerInfo, StreamInfo]:
    """Consumer and stream info, re-read while either visibly trails this client's own
    writes (``_own_writes_missing``). A deleted consumer is NotFound; one deleted and
    created again is a new incarnation: this client's ledgers of the old one are dropped.

    On a replicated stream each consumer is a raft group of its own (reading its own replica
    of the stream), which applies a publish or a settle after the request that made it was
    answered. While it has not counted this client's own publications or settles it is
    re-read for up to ``request_timeout``, then — ``strict`` — :class:`Lagging`: an
    observation never reports a state older than this client's own writes. A single server
    counts a publication into its consumers after the PubAck too (3 in 2,000 reads right
    after one missed it here, under load): the same rule. A mere hint
    (``evicted_maybe_leased``) may never clear: a few re-reads, then the answer as read."""
    sid = st.id
    start = loop_time()
    hint_until = start + CATCH_UP_TRIES * CATCH_UP_PAUSE
    own_until = start + c.request_timeout
    pause = CATCH_UP_PAUSE
    while True:
        ci = await c.consumer_info(st.stream, st.consumer)
        if ci is None:
            c.forget_sub(sid)
            raise NotFound(f"no subscription {sid}", kind="subscription", name=sid.name)
        created = ci.created
        if created and created != st.created:
            st.reset(created, ci.config.opt_start_seq or 1)
        si = await c.stream_info(st.stream)
        if si is None:
            c.forget_channel(sid.channel)
            raise NotFound(f"no channel {sid.channel}", kind="channel", name=sid.channel.name)
        if st.stream == st.chan.stream:
            seen(st.chan, si)
        cv = consumer_view(ci)
        own = await _own_writes_missing(c, st, cv, si)
        now = loop_time()
        if own is not None:
            if now >= own_until:
                if strict:
                    raise Lagging(f"{sid}: {own} after {c.request_timeout:g} s")
                return ci, si
        elif not evicted_maybe_leased(cv, stream_view(si)) or now >= hint_until:
            return ci, si
        await anyio.sleep(pause)
        pause = min(pause * 2, CATCH_UP_MAX_PAUSE)


async def _own_writes_missing(
    c: Client, st: SubState, cv: ConsumerView, si: StreamInfo
) -> str | None:
    """Which of this client's writes the consumer has visibly not applied, or None."""
    chs = st.chan
    if st.stream == chs.stream and (behind := stream_behind(chs, si)) is not None:
        return behind
    index = chs.index if st.stream == chs.stream else {}  # a dead-letter subscription: none
    if publications_uncounted(st.spec, cv, stream_view(si), index, CATCH_UP_WINDOW):
        # an administrator's deletion is no lag: look again with the deleted sequences
        full = stream_view(si, await deleted_seqs(c, si)) if _num_deleted(si) else None
        if full is None or publications_uncounted(st.spec, cv, full, index, CATCH_UP_WINDOW):
            return "the consumer has not counted this client's publications"
    if chs.spec.replicas > 1 and st.settled.get(cv.floor_s + 1) is not None:
        return "the consumer's ack floor has not applied this client's settle"
    return None


def stream_behind(chs: ChanState, si: StreamInfo) -> str | None:
    """Why ``si`` (the slot stream's, this incarnation) is older than this client's own
    publications, or None. A PubAck comes once a majority stored the message, and purges,
    deletions and evictions keep the last sequence: a leader that has applied its log never
    ends before it. One that does was elected before applying it (a member killed and
    restarted on its data can be: seen once in CI, where its consumers then counted nothing
    pending and a subscription looked drained with 581 acknowledged messages to come) — or
    the stream lost acknowledged writes; either way what it says is not the state."""
    last = si.state.last_seq
    if last >= chs.acked_last:
        return None
    return (
        f"the stream's leader has not applied this client's publications (its last "
        f"sequence {last}, one acknowledged {chs.acked_last}): catching up, or they were lost"
    )


def _num_deleted(si: StreamInfo) -> int:
    return si.state.num_deleted


async def read_record(c: Client, st: SubState) -> tuple[Record | None, int]:
    """The subscription's accounting record and its sequence in ``__acct`` (0: none)."""
    subject = c.names.acct_subject(st.id)
    try:
        got = await c.api(f"STREAM.MSG.GET.{st.chan.acct}", {"last_by_subj": subject}, MsgGet)
    except ApiError as exc:
        if exc.err_code in (_api.NO_MESSAGE_FOUND, _api.STREAM_NOT_FOUND):
            return None, 0
        raise
    m = got.message
    try:
        rec = _record_dec(base64.b64decode(m.data or ""))
    except msgspec.DecodeError:
        return None, m.seq
    return rec, m.seq


async def write_record(c: Client, st: SubState, rec: Record, last: int) -> bool:
    """Write ``rec`` if the subject's last sequence is still ``last``; False when another
    client wrote first."""
    nc = await c.conn()
    hdrs = {"Nats-Expected-Last-Subject-Sequence": str(last)}
    msg = await _api.request(
        nc, c.names.acct_subject(st.id), _record_enc(rec), c.request_timeout, headers=hdrs
    )
    try:
        err = decode_pub_ack(msg.data).error
    except msgspec.DecodeError as exc:
        raise _api.NoAnswer(f"undecodable acknowledgement {msg.data[:80]!r}") from exc
    if err is not None:
        if err.err_code == WRONG_LAST_SEQUENCE:
            return False
        raise _api.api_error(err)
    return True


_index_dec = msgspec.json.Decoder(IndexRecord).decode


async def read_index(c: Client, chs: ChanState) -> None:
    """Fold new index records from ``__idx`` (every adapter publisher's) into ``chs.attrib``."""
    rows, chs.idx_next = await read_new(c, chs.idx, chs.idx_next)
    for _seq, _subject, data in rows:
        try:
            record = _index_dec(data)
        except msgspec.DecodeError:
            continue  # not a record of ours: its sequences stay unattributed
        if record.stream != chs.created:
            continue  # about another incarnation of the stream (deleted since)
        for s, kind, key in record.entries:
            chs.attrib[s] = (kind, key)
    if len(chs.attrib) > ATTRIB_LIMIT:
        for s in sorted(chs.attrib)[: ATTRIB_LIMIT // 2]:
            del chs.attrib[s]


async def subjects_of(
    c: Client, chs: ChanState, seqs: list[int]
) -> dict[int, tuple[str, str | None]]:
    """Kind and partition key of each of ``seqs`` this client can know: from its own publish
    index, else from the index records of the other publishers (written within
    ``INDEX_LINGER`` of each publication: waited for briefly)."""
    out: dict[int, tuple[str, str | None]] = {}
    for attempt in range(INDEX_WAIT_TRIES):
        for s in seqs:
            entry = chs.index.get(s)
            if entry is not None:
                out[s] = (entry[0], entry[1])
            else:
                got = chs.attrib.get(s)
                if got is not None:
                    out[s] = got
        if len(out) == len(seqs) or attempt + 1 == INDEX_WAIT_TRIES:
            return out
        if attempt:
            await anyio.sleep(INDEX_LINGER)
        await read_index(c, chs)
    return out


def known_subjects(chs: ChanState, seqs: list[int]) -> dict[int, tuple[str, str | None]]:
    """Kind and partition key of each of ``seqs`` this client knows already (no read)."""
    out: dict[int, tuple[str, str | None]] = {}
    for s in seqs:
        entry = chs.index.get(s)
        if entry is not None:
            out[s] = (entry[0], entry[1])
        elif s in chs.attrib:
            out[s] = chs.attrib[s]
    return out


async def deleted_seqs(c: Client, si: StreamInfo) -> list[int]:
    """Interior deletions of the stream ``si`` describes (read only when there are some)."""
    if not si.state.num_deleted:
        return []
    full = await c.stream_info(si.config.name, {"deleted_details": True})
    return [] if full is None else list(full.state.deleted or ())


async def dead_letters(c: Client, st: SubState) -> int:
    """Dead letters this incarnation of ``st`` settled, counted on the server (their subject
    names it)."""
    count_filter = c.names.dlq_count_filter(st.id, st.created_ns)
    info = await c.stream_info(st.chan.dlq, {"subjects_filter": count_filter})
    if info is None:
        return 0
    return sum((info.state.subjects or {}).values())


def local(st: SubState) -> Local:
    return Local(
        leases=st.leases,
        retry_wait=st.retry_wait,
        final_retry=st.final_retry,
        settled=st.settled.data.keys(),
        now=loop_time(),
        foreign=st.foreign_d,
    )


def see_deliveries(st: SubState, cv: ConsumerView) -> None:
    """Note the latest delivery another client received (before the delivery records are
    trimmed): a message this client gave back may have been that one."""
    if cv.delivered_d < st.checked_d:  # the server rolled back (a restart)
        st.void_give_backs()
        st.checked_d = cv.delivered_d
    foreign = last_foreign(st.deliveries, st.checked_d, cv.delivered_d)
    st.foreign_d = max(st.foreign_d, foreign)
    st.checked_d = max(st.checked_d, cv.delivered_d)


async def _drops(
    c: Client, st: SubState, cv: ConsumerView, sv: StreamView, exhausted: set[int]
) -> Accounted | Ambiguous:
    """Decide the subscription's silent drops against its shared record (written back)."""
    chs = st.chan
    for _ in range(CAS_TRIES):
        rec, rec_seq = await read_record(c, st)
        if rec is None or rec.inc != st.created:
            rec = initial_record(st.created, st.start_seq, parse_ts(st.created))
        need = needs_subject(rec, sv)
        subjects = known_subjects(chs, candidates(rec, sv))  # cheap: what is here already
        if need:
            subjects.update(await subjects_of(c, chs, need))
        await c.audit.settle_queue()
        purge = c.audit.purge_possible(st.stream, rec.ts)
        led = chs.ledger(st.stream, st.consumer)
        now = loop_time()
        live = {q for q, (_a, deadline, _d) in st.leases.items() if deadline > now}
        own = Own(st.deliveries, st.settled.data.keys(), live | st.lost)
        deleted = led.deleted_since(st.created_ns)
        res = account(rec, st.spec, cv, sv, exhausted, deleted, own, subjects, purge)
        if isinstance(res, Accounted) and res.inferred:
            # settled by inference (no advisory reported a lease on them): give an advisory
            # in flight a moment to land before counting on its absence
            await anyio.sleep(0.01)
            await read_advisories(c, chs)
            deleted = chs.ledger(st.stream, st.consumer).deleted_since(st.created_ns)
            res = account(rec, st.spec, cv, sv, exhausted, deleted, own, subjects, purge)
        if isinstance(res, Ambiguous) or not res.changed:
            return res.undecided or res if isinstance(res, Accounted) else res
        if await write_record(c, st, res.record, rec_seq):
            st.forget_deliveries_below(res.record.md)
            return res.undecided or res  # a partial record still leaves the count Unknown
    return Ambiguous("other clients kept rewriting the drop accounting; try again")


async def observe_subscription(
    c: Client, subscription: SubscriptionId
) -> Known[SubscriptionObservation] | Unknown:
    st = await sub(c, subscription)
    chs = st.chan
    await flush_all(c)  # what this client published is attributable by everyone now
    try:
        ci, si = await infos(c, st)
        if await decide_lapsed(c, st, ci):
            ci, si = await infos(c, st)
        await read_advisories(c, chs)
        sv = stream_view(si, await deleted_seqs(c, si))
        cv = consumer_view(ci)
        see_deliveries(st, cv)
        for s in [s for s in st.retry_wait if s <= cv.floor_s or sv.removed(s)]:
            del st.retry_wait[s]  # settled or gone: nothing waits for it any more
        loc = local(st)
        led = chs.ledger(st.stream, st.consumer)
        advised = led.exhausted_since(st.created_ns)
        exhausted = exhausted_now(st.spec, loc, advised)
        g = await _gap_of(c, st, cv, sv, exhausted | led.deleted_since(st.created_ns))
        if g.surplus and chs.spec.replicas > 1:
            return Unknown(f"cannot read {subscription}: {SURPLUS_REASON}")
        exhausted |= g.unresolved
        silent = 0
        lost: tuple[int, ...] = ()
        if st.stream == chs.stream:
            res = await _drops(c, st, cv, sv, exhausted)
            if isinstance(res, Ambiguous):
                return Unknown(res.reason)
            silent, lost = res.record.dropped, tuple(res.record.lost)
        dead = await dead_letters(c, st)
    except CallFailed as exc:
        return Unknown(f"cannot read {subscription}: {exc}")
    deleted = led.deleted_since(st.created_ns)
    n = counts(
        st.spec,
        cv,
        sv,
        exhausted,
        deleted,
        loc,
        silent,
        st.start_seq,
        advised,
        lost,
        others(st),
        floor_settled=_floor_settled(st, cv, g),
    )
    return Known(
        SubscriptionObservation(
            subscription=subscription,
            pending=n.pending,
            leased=n.leased,
            unresolved=len(n.unresolved),
            dropped=n.dropped,
            redelivered=cv.num_redelivered,
            ack_floor=n.ack_floor,
            dead_lettered=dead,
        )
    )


SURPLUS_REASON = (
    "more messages above the consumer's ack floor than it holds ack-pending: one exhausted "
    "whose MAX_DELIVERIES advisory was lost (a consumer leader election) cannot be told from "
    "one another client settled out of order"
)


async def _gap_of(
    c: Client, st: SubState, cv: ConsumerView, sv: StreamView, known: set[int]
) -> Gap:
    """The span above the server's ack floor, decided (``_gap``); the subjects of its
    sequences are read only when it holds more than the server's ack-pending count or this
    client's settles. A dead-letter subscription's stream has no index: not checked."""
    chs = st.chan
    if st.stream != chs.stream:
        return Gap()
    span = retained_above_floor(cv, sv, known)
    settled = st.settled.data.keys()
    if not span or (len(span) <= cv.num_ack_pending and not any(s in settled for s in span)):
        return Gap()
    subjects = known_subjects(chs, span)
    missing = [s for s in span if s not in subjects and s not in settled]
    if missing:
        subjects.update(await subjects_of(c, chs, missing))
    return gap(st.spec, cv, sv, known, settled, subjects)


def _floor_settled(st: SubState, cv: ConsumerView, g: Gap) -> list[int]:
    """This client's confirmed settles the ack floor may go past: none when the server holds
    some of them unsettled again (a restart lost them: ``_gap``), else those the consumer
    delivered (one beyond its delivered position was lost with it)."""
    if g.settles_lost:
        return []
    return [s for s in st.settled.data if s <= cv.delivered_s]


async def decide_lapsed(c: Client, st: SubState, ci: ConsumerInfo) -> bool:
    """Nudge the server (``_settle.nudge``) when a final attempt another client held may have
    lapsed undecided: the server holds more deliveries ack-pending than this client's own
    live leases. Once it answered, its ``MAX_DELIVERIES`` advisories are in ``__adv`` before
    the observation reads them (waited for, briefly). True when it nudged."""
    if st.spec.max_deliver < 2:  # unlimited, or 1: decided by the server at the lapse
        return False
    if not ci.num_redelivered:  # nothing redelivered: no last attempt yet
        return False
    now = loop_time()
    live = sum(1 for _a, deadline, _d in st.leases.values() if deadline > now)
    if ci.num_ack_pending <= live:
        return False
    led = st.chan.ledger(st.stream, st.consumer)
    before = len(led.exhausted)
    if not await nudge(c, st):
        return False
    after = await c.consumer_info(st.stream, st.consumer)
    gone = ci.num_ack_pending - (0 if after is None else after.num_ack_pending)
    for _ in range(ADVISORY_TRIES if gone > 0 else 0):
        await read_advisories(c, st.chan)  # an ack meanwhile also lowers the count: bounded
        if len(led.exhausted) >= before + gone:
            break
        await anyio.sleep(CATCH_UP_PAUSE)
    return True


async def observe_ack_floor(c: Client, subscription: SubscriptionId) -> Known[int] | Unknown:
    st = await sub(c, subscription)
    try:
        ci, si = await infos(c, st, strict=False)  # own writes: see own_floor
        await read_advisories(c, st.chan)
    except CallFailed as exc:
        return Unknown(f"cannot read {subscription}: {exc}")
    sv = stream_view(si)
    led = st.chan.ledger(st.stream, st.consumer)
    exhausted = exhausted_now(st.spec, local(st), led.exhausted_since(st.created_ns))
    deleted = led.deleted_since(st.created_ns)
    cv = consumer_view(ci)
    try:
        g = await _gap_of(c, st, cv, sv, exhausted | deleted)
    except CallFailed as exc:
        return Unknown(f"cannot read {subscription}: {exc}")
    unresolved = [s for s in exhausted | g.unresolved if not sv.removed(s) and s not in deleted]
    # removed messages count as settled; so do this client's confirmed settles, which a
    # consumer's raft group on a cluster may not have applied yet — unless the server lost them
    settled = _floor_settled(st, cv, g)
    return Known(floor(own_floor(cv.floor_s, sv, settled, others(st)), unresolved))


def others(st: SubState) -> Callable[[int], bool]:
    """Whether a sequence is known (from the publish indexes) not to be ``st``'s."""
    chs, spec = st.chan, st.spec
    if st.stream != chs.stream:  # a dead-letter subscription: the indexes name other sequences
        return lambda _seq: False

    def skip(seq: int) -> bool:
        entry = chs.index.get(seq)
        got = (entry[0], entry[1]) if entry is not None else chs.attrib.get(seq)
        return got is not None and not matches(spec, *got)

    return skip


async def observe_channel(c: Client, channel_id: ChannelId) -> Known[ChannelObservation] | Unknown:
    chs = await chan(c, channel_id)
    try:
        si = await _removals_caught_up(c, chs, await _stream_caught_up(c, chs))
        di = await c.stream_info(chs.dlq)
    except CallFailed as exc:
        return Unknown(f"cannot read {channel_id}: {exc}")
    if si is None:
        c.forget_channel(channel_id)
        raise NotFound(f"no channel {channel_id}", kind="channel", name=channel_id.name)
    if (behind := stream_behind(chs, si)) is not None:
        return Unknown(f"cannot read {channel_id}: {behind}")
    state = si.state
    msgs = state.messages
    view = stream_view(si)
    # the stored size: bodies plus subject, headers and record overhead (the contract's lower
    # bound is the bodies)
    nbytes = state.bytes
    for s in [s for s in chs.index if s < view.first]:
        del chs.index[s]  # evicted: its subject, if still needed, is in the index stream
    dead = 0 if di is None else di.state.messages
    return Known(ChannelObservation(channel_id, msgs, nbytes, view.first, view.last, dead))
