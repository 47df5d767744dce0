"""``settle`` and ``renew``, each confirmed by the server's own evidence that it applied.

JetStream answers every ack, nak or progress request with an empty reply, whether or not the
message was still pending: an ack of a purged message, of one already settled elsewhere, or
past ``max_deliver`` looks exactly like one that applied. But the server emits, *before* that
reply and in order with it, an ack metric (``$JS.EVENT.METRIC.CONSUMER.ACK.<stream>.<consumer>``,
every consumer samples all acks) for an ack that removed a pending delivery, and a
``MSG_NAKED`` advisory for a nak that found one. :class:`Evidence` follows both for the
consumer; a settle is sent without asking for a reply and waits for the delivery's own
(stream sequence, delivery sequence) — one message back, as a plain confirmed ack — or, when
it does not come soon, for the reply to a barrier sent behind it:

* ``Completed`` — ``+ACK``; ``SettleConfirmed`` only with its metric, else ``SettleStale``;
* ``Terminal`` — the dead letter is stored first (deduplicated per consumer and sequence),
  then ``+ACK`` as above (the dead letter, in ``…__dlq`` under the consumer's subject, is what
  ``dead_lettered`` counts);
* ``Retry(delay)`` — ``-NAK`` with the delay, confirmed by its advisory. On the final attempt
  no redelivery follows, so the delay is dropped and a pull that can deliver nothing makes the
  server decide at once (``MAX_DELIVERIES``): the message is unresolved when settle returns;
* ``renew`` — ``-NAK {"delay": ack_wait}``: the same effect on the server as ``+WPI`` (the
  lease restarts now) but confirmed by its advisory, so a renewal of a purged message is never
  reported held.

A token whose lease this client knows is superseded, expired, released by a Retry, or whose
message was deleted while leased is answered ``SettleStale`` without sending anything (the
server would apply it).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from typing import Any

import msgspec

from ...contracts.errors import AccessDenied, ValidationError
from ...contracts.messaging import (
    Completed,
    Delivery,
    DeliveryToken,
    Envelope,
    LeaseObservation,
    Retry,
    SettleAnswer,
    SettleConfirmed,
    SettleOutcome,
    SettleStale,
    SettleUnknown,
    Terminal,
)
from . import _api, _codec, _security
from ._api import ApiError, CallFailed, NoResponders
from ._connection import Client, await_leader, loop_time
from ._ledger import parse_ts
from ._names import ADV_DELETED, ADV_NAKED, METRIC_ACK
from ._state import Bounded, SubState
from ._subscriptions import sub
from ._wire import MsgGet, decode_pub_ack

NS = 1_000_000_000
ACK = b"+ACK"
BARRIER = b"+VFB"
"""Not an ack verb: the server ignores it and replies, after whatever it did for the acks
sent before it on the same consumer."""
EVIDENCE_WAIT = 0.02
"""Seconds to wait for a settle's evidence before asking with a barrier."""
LAPSE_GRACE = 0.1
"""Seconds past this client's deadline of a final-attempt lease after which the server has
surely seen it lapse (this client's deadline is the earlier one, see ``_pull.delivery``)."""


class _Seen(msgspec.Struct):
    stream_seq: int = 0
    consumer_seq: int = 0


_seen_dec = msgspec.json.Decoder(_Seen).decode


class Evidence:
    """The ack metrics and nak advisories of one consumer, by (stream seq, delivery seq): a
    settle waiting for its own is woken by it; others are kept (bounded) for a late check.
    Also the consumer's deletion: from then on no token of that incarnation is sent (the
    server would apply it to a consumer created again under the same name)."""

    def __init__(self) -> None:
        self.seen = {False: Bounded(8192), True: Bounded(8192)}  # nak? -> keys seen
        self.waiting: dict[tuple[bool, int, int], asyncio.Event] = {}
        self.subs: list[Any] = []

    async def start(self, nc: Any, st: SubState, seconds: float) -> None:
        stream, consumer = st.stream, st.consumer
        subjects = (
            f"{METRIC_ACK}.{stream}.{consumer}",
            f"{ADV_NAKED}.{stream}.{consumer}",
            f"{ADV_DELETED}.{stream}.{consumer}",
        )
        callbacks = (self._recorder(False), self._recorder(True), _ended(st))
        start = _security.mark(nc)
        for subject, cb in zip(subjects, callbacks, strict=True):
            self.subs.append(await nc.subscribe(subject, cb=cb))
        # refused (permissions), the evidence never comes and every settle would look stale
        try:
            await _security.check_subscribe(nc, subjects, start, "subscribe", seconds, strict=False)
        except AccessDenied:
            for s in self.subs:
                with contextlib.suppress(Exception):
                    await s.unsubscribe()
            raise

    def _recorder(self, nak: bool) -> Any:
        async def record(msg: Any) -> None:  # no await inside: one queue item at a time
            try:
                seen = _seen_dec(msg.data)
            except msgspec.DecodeError:
                return
            waiter = self.waiting.pop((nak, seen.stream_seq, seen.consumer_seq), None)
            if waiter is not None:
                waiter.set()
            else:
                self.seen[nak].put((seen.stream_seq, seen.consumer_seq), True)

        return record

    async def caught_up(self) -> None:
        """Let the callbacks handle what already arrived (everything the server sent before
        the reply just received: it sends both in order on one queue)."""
        for _ in range(1000):
            if not any(s.pending_msgs for s in self.subs):
                return
            await asyncio.sleep(0)  # asyncio-side: let nats-py's subscription callbacks run


class _Stamp(msgspec.Struct):
    timestamp: str = ""


_stamp_dec = msgspec.json.Decoder(_Stamp).decode


def _ended(st: SubState) -> Any:
    async def on_deleted(msg: Any) -> None:
        try:
            at = parse_ts(_stamp_dec(msg.data).timestamp)
        except msgspec.DecodeError:
            at = 0
        if not at or at >= st.created_ns:  # not a deletion of an incarnation before it
            st.dead.add(st.created_ns)

    return on_deleted


async def evidence(c: Client, st: SubState) -> Evidence:
    ev = st.evidence
    if ev is None:
        nc = await c.conn()
        ev = Evidence()
        st.evidence = ev  # before the awaits: one per subscription
        try:
            await ev.start(nc, st, c.request_timeout)
        except BaseException:
            st.evidence = None  # refused or interrupted: the next settle tries again
            raise
    assert isinstance(ev, Evidence)
    return ev


def delivery_seq(token: DeliveryToken) -> int:
    """The delivery (consumer) sequence of a token this adapter issued
    (``attempt.dseq.incarnation``)."""
    parts = token.lease_id.split(".")
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def incarnation(token: DeliveryToken) -> int | None:
    """The consumer incarnation (its ``created`` stamp, ns) a token was issued under."""
    parts = token.lease_id.split(".")
    return int(parts[2]) if len(parts) > 2 and parts[2].isdigit() else None


EXPIRED = "lease expired; message awaits redelivery"


def stale_reason(st: SubState, token: DeliveryToken, now: float) -> str | None:
    seq = token.sequence
    inc = incarnation(token)
    if inc is not None and (inc in st.dead or inc != st.created_ns):
        return "the subscription was deleted (and created again) since this delivery"
    if st.chan.ledger(st.stream, st.consumer).deleted.get(seq, -1) >= st.created_ns:
        return "message no longer retained (deleted while leased)"
    if seq in st.settled:
        return "already settled"
    if seq in st.final_retry:
        return "its final attempt was given back by Retry: the message is unresolved"
    if seq in st.retry_wait:
        return "lease released by Retry; the message awaits redelivery"
    cur = st.leases.get(seq)
    if cur is None:
        return None  # a token from another client: the server is the only judge
    if cur[0] != token.attempt:
        return f"lease superseded by attempt {cur[0]}"
    if now >= cur[1]:
        return EXPIRED
    return None


NOT_PENDING = (
    "the server held no lease for this delivery (settled already, past max_deliver, "
    "or the message was removed)"
)


def gone(st: SubState, seq: int) -> None:
    """The server held no lease where this client held a live one: the message was removed
    under it (a purge, say) — unsettled, which the drop accounting must know."""
    st.cancel_nudge(seq)
    if seq in st.leases:
        del st.leases[seq]
        st.lost.add(seq)


async def _send(
    c: Client, st: SubState, token: DeliveryToken, payload: bytes, nak: bool
) -> SettleAnswer | bool:
    """Send ``payload`` on the token's ack subject; True when the server's evidence shows it
    applied, False when it did not, or the answer to give when there was no confirmation.

    The evidence usually arrives one round trip later and is all that comes back. When it
    has not within ``EVIDENCE_WAIT``, a barrier follows on the same subject (a payload the
    server ignores but answers, after everything it did for the settle): once its reply is
    in, the evidence is in too, or never comes.
    """
    nc = await c.conn()
    if c.lose_replies and st.id in c.lose_replies:
        c.lose_replies.discard(st.id)
        return await _lost(c, nc, st, token, payload, nak)
    if not st.sampled and not nak:  # a consumer made before sampling: the reply is all
        return await _barrier(c, nc, token, payload) or True
    ev = await evidence(c, st)
    key = (nak, token.sequence, delivery_seq(token))
    # asyncio's own primitives: this always runs on the connection's asyncio loop (the
    # bridge's, under trio), and a settle is the adapter's hottest path
    waiter = ev.waiting[key] = asyncio.Event()
    try:
        if not nak and replicated(st):
            # the leader emits the metric when it applies the ack and answers the ack's
            # request only once the consumer's group committed it: wait for both
            failed = await _barrier(c, nc, token, payload, st)
            if failed is not None:
                return failed
            await ev.caught_up()
            return waiter.is_set() or ev.seen[nak].pop(key[1:]) is not None
        try:
            await _api.publish(nc, token.opaque, payload)
        except CallFailed as exc:
            return SettleUnknown(f"not sent: {exc}")
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(EVIDENCE_WAIT):
                await waiter.wait()
        if waiter.is_set():
            return True
        failed = await _barrier(c, nc, token, BARRIER, st, payload)
        if failed is not None:
            return failed
        await ev.caught_up()
        return waiter.is_set() or ev.seen[nak].pop(key[1:]) is not None
    except BaseException:
        if waiter.is_set():  # cancelled after the evidence woke it: a retry must find it
            ev.seen[nak].put(key[1:], True)
        raise
    finally:
        ev.waiting.pop(key, None)


async def _lost(
    c: Client, nc: Any, st: SubState, token: DeliveryToken, payload: bytes, nak: bool
) -> SettleAnswer:
    """The fault behind the ``lose_reply`` control: ``payload`` is sent and the server
    applies it (a barrier's reply says so), but every confirmation of it is lost — its
    evidence is swallowed, the reply dropped — as when a connection fails right after."""
    key = (nak, token.sequence, delivery_seq(token))
    ev = await evidence(c, st) if st.sampled or nak else None
    if ev is not None:
        ev.waiting[key] = asyncio.Event()  # the evidence sets it, and nobody looks
    try:
        if not nak and replicated(st):
            await _barrier(c, nc, token, payload)
        else:
            with contextlib.suppress(CallFailed):
                await _api.publish(nc, token.opaque, payload)
            await _barrier(c, nc, token, BARRIER)
        if ev is not None:
            await ev.caught_up()
    finally:
        if ev is not None:
            ev.waiting.pop(key, None)
    return SettleUnknown("no confirmation: the reply was lost")


def replicated(st: SubState) -> bool:
    """Whether the subscription's consumer is replicated (its channel's ``replicas`` > 1):
    then an ack is confirmed once committed, not only applied by the leader."""
    return st.chan.spec.replicas > 1


async def _barrier(
    c: Client,
    nc: Any,
    token: DeliveryToken,
    payload: bytes,
    st: SubState | None = None,
    again: bytes | None = None,
) -> SettleAnswer | None:
    """``payload`` as a request on the token's ack subject; None once answered.

    No responders means nobody holds the consumer's ack subject: on a single server the
    consumer is gone (``SettleStale``); on a replicated consumer (``st`` given) it is also
    what a leader election looks like, so unless this client saw the consumer deleted it asks
    again — ``again`` (the settle itself, when ``payload`` was a barrier behind a publish that
    nobody received either) — until ``request_timeout``, then answers ``SettleUnknown``."""
    until = loop_time() + c.request_timeout
    while True:
        try:
            await _api.request(nc, token.opaque, payload, c.request_timeout)
        except NoResponders:
            if st is None or not replicated(st) or incarnation(token) in st.dead:
                return SettleStale("the subscription's consumer no longer exists")
            if not await await_leader(until):
                return SettleUnknown(
                    "no responders for the consumer: its leader is being elected (or it was "
                    "deleted)"
                )
            payload = again or payload
            continue
        except CallFailed as exc:
            return SettleUnknown(f"no confirmation: {exc}")
        return None


async def nudge(c: Client, st: SubState) -> bool:
    """A pull that can deliver nothing (``max_bytes: 1``): the server then processes the
    head of its redelivery queue, deciding at once a message whose last attempt was given
    back or lapsed (nats-server decides a lapsed last attempt of ``max_deliver`` >= 2 only
    when a pull asks: its expiry check counts deliveries from zero). Harmless otherwise: the
    message it cannot deliver keeps its delivery count. True when the server answered."""
    nc = c.nc
    if nc is None or nc.is_closed:
        return False
    subject = f"$JS.API.CONSUMER.MSG.NEXT.{st.stream}.{st.consumer}"
    body = _api.encode({"batch": 1, "max_bytes": 1, "no_wait": True})
    try:
        await _api.request(nc, subject, body, c.request_timeout)
    except CallFailed:
        return False
    return True


def nudge_if_final(c: Client, st: SubState, seq: int, attempt: int, deadline: float) -> None:
    """Time a nudge for the lapse of a lease ending at ``deadline`` when it is the message's
    final attempt (``max_deliver`` 1 needs none: the server decides at the lapse)."""
    cap = st.spec.max_deliver
    if cap > 1 and attempt >= cap:
        nudge_when_lapsed(c, st, seq, deadline)


def nudge_when_lapsed(c: Client, st: SubState, seq: int, deadline: float) -> None:
    """Nudge the server once the final-attempt lease of ``seq`` ending at ``deadline`` (loop
    time) has lapsed there, so every client sees it unresolved then, not at the next pull.
    A settle or the server's "no lease" cancels it, a renewal moves it, and closing the client
    or forgetting the subscription cancels it (and a nudge in flight, ``c.tasks``)."""

    def fire() -> None:
        st.nudge_at.pop(seq, None)
        if c.nc is None:
            return  # closed meanwhile
        c.tasks.spawn(nudge(c, st), name=f"lease-lapse nudge of {st.consumer}")

    st.cancel_nudge(seq)
    st.nudge_at[seq] = asyncio.get_running_loop().call_at(deadline + LAPSE_GRACE, fire)


def _check(token: DeliveryToken, outcome: SettleOutcome, settlement_id: str) -> None:
    if not settlement_id:
        raise ValidationError("settlement_id must be non-empty", field="settlement_id")
    if not isinstance(outcome, (Completed, Retry, Terminal)):
        raise ValidationError(f"unknown settle outcome {outcome!r}", field="outcome")
    if not token.opaque.startswith("$JS.ACK."):
        raise ValidationError("token was not issued by a JetStream receive", field="token")


def _repeat(st: SubState, seq: int, settlement_id: str) -> SettleConfirmed | None:
    """The answer to a settlement id already applied (idempotent), or None."""
    prior = st.settlements.get(settlement_id)
    if prior is None:
        return None
    if prior != seq:
        raise ValidationError(
            f"settlement_id {settlement_id!r} was used for sequence {prior}",
            field="settlement_id",
        )
    return SettleConfirmed(seq, duplicate=True)


def _nak(outcome: Retry, final: bool) -> bytes:
    """``-NAK``, with the delay unless no redelivery follows anyway (the final attempt)."""
    if outcome.delay_seconds > 0 and not final:
        return b"-NAK " + _api.encode({"delay": int(outcome.delay_seconds * NS)})
    return b"-NAK"


async def settle(
    c: Client, token: DeliveryToken, outcome: SettleOutcome, settlement_id: str
) -> SettleAnswer:
    _check(token, outcome, settlement_id)
    st = await sub(c, token.subscription)
    seq = token.sequence
    repeated = _repeat(st, seq, settlement_id)
    if repeated is not None:
        return repeated
    retry = outcome if isinstance(outcome, Retry) else None
    # an earlier settle with this id was sent and went unanswered: it may have applied
    unanswered = st.unanswered.get(settlement_id) == seq
    now = loop_time()
    stale = stale_reason(st, token, now)
    if stale is not None:
        if unanswered and stale == EXPIRED:
            return await _after_unanswered(c, st, token, settlement_id, retry, now)
        return SettleStale(stale)
    final = retry is not None and st.spec.max_deliver != -1 and token.attempt >= st.spec.max_deliver
    stored = 0  # the dead letter's sequence in the dlq stream
    if isinstance(outcome, Terminal):
        letter = await dead_letter(c, st, token, outcome.reason)
        if not isinstance(letter, int):
            return letter
        stored = letter
    payload = ACK if retry is None else _nak(retry, final)
    res = await _send(c, st, token, payload, nak=retry is not None)
    if res is False:
        if unanswered:  # nothing to apply now: the earlier one did, or something else
            return await _after_unanswered(c, st, token, settlement_id, retry, now)
        gone(st, seq)
        if stored:  # the message was not settled: its dead letter must not stay
            await _withdraw(c, st, stored, seq)
        return SettleStale(NOT_PENDING)
    if res is not True:
        assert not isinstance(res, bool)
        if isinstance(res, SettleUnknown):
            st.unanswered.put(settlement_id, seq)
        return res
    return await _applied(c, st, token, settlement_id, retry, final, now)


async def _applied(
    c: Client,
    st: SubState,
    token: DeliveryToken,
    settlement_id: str,
    retry: Retry | None,
    final: bool,
    now: float,
    duplicate: bool = False,
) -> SettleConfirmed:
    """Record a settle the server applied; its answer (``duplicate``: an earlier settle with
    this id is what applied)."""
    seq = token.sequence
    st.unanswered.pop(settlement_id)
    st.leases.pop(seq, None)
    st.cancel_nudge(seq)  # settled (a final Retry nudges at once below)
    st.settlements.put(settlement_id, seq)  # before any await: a retry of it is a repeat
    if retry is None:
        st.settled.put(seq, token.attempt)
    elif final:
        st.final_retry[seq] = False  # given back; undecided until the server answers
        st.final_retry[seq] = await nudge(c, st)
    else:
        st.retry_wait[seq] = (now + retry.delay_seconds, delivery_seq(token))
    return SettleConfirmed(seq, duplicate)


async def _after_unanswered(
    c: Client,
    st: SubState,
    token: DeliveryToken,
    settlement_id: str,
    retry: Retry | None,
    now: float,
) -> SettleAnswer:
    """A settle retried after one with the same id went unanswered, where this one cannot
    apply (the lease expired here, or the server held no lease): the answer is the earlier
    one's, as far as the server shows it — ``SettleConfirmed`` when its evidence came late,
    or (an ack) when the consumer's ack floor is past the message and the message is still
    retained (so a removal did not move the floor); otherwise ``SettleUnknown``, never
    ``SettleStale``: the earlier settle may have applied."""
    seq = token.sequence
    nak = retry is not None
    ev = st.evidence
    if isinstance(ev, Evidence):
        await ev.caught_up()
        if ev.seen[nak].pop((seq, delivery_seq(token))) is not None:
            final = nak and st.spec.max_deliver != -1 and token.attempt >= st.spec.max_deliver
            return await _applied(c, st, token, settlement_id, retry, final, now, True)
    if not nak:
        try:
            info = await c.consumer_info(st.stream, st.consumer)
            floor = 0 if info is None else info.ack_floor.stream_seq
            retained = floor >= seq and await c.retained(st.chan.stream, seq)
        except CallFailed as exc:
            return SettleUnknown(f"an earlier settle with this id went unanswered ({exc})")
        if retained:
            return await _applied(c, st, token, settlement_id, None, False, now, True)
    return SettleUnknown(
        "an earlier settle with this id went unanswered and the server shows no sign of it "
        "yet: it may have applied"
    )


async def resettle(c: Client, st: SubState, d: Delivery) -> None:
    """Settle again a message the server redelivered after confirming this client's settle
    (it lost the settle in a crash): the new delivery is acked, not handed out, and the event
    is recorded (``settle_forgotten`` in the backend's observation log)."""
    res = await _send(c, st, d.token, ACK, nak=False)
    st.leases.pop(d.sequence, None)
    st.cancel_nudge(d.sequence)
    st.resettled += 1
    c.record(
        "settle_forgotten",
        st.id.name,
        str(d.sequence),
        attempt=d.attempt,
        resettled=res is True,
    )
    if res is not True:
        # not confirmed this time: forget the settle, so the next delivery is handed out
        st.settled.pop(d.sequence)


async def renew(c: Client, token: DeliveryToken) -> LeaseObservation:
    if not token.opaque.startswith("$JS.ACK."):
        raise ValidationError("token was not issued by a JetStream receive", field="token")
    st = await sub(c, token.subscription)
    now = loop_time()
    stale = stale_reason(st, token, now)
    if stale is not None:
        return LeaseObservation(False, None, token.attempt, stale)
    wait = int(st.spec.ack_wait_seconds * NS)
    res = await _send(c, st, token, b"-NAK " + _api.encode({"delay": wait}), nak=True)
    if res is False:
        gone(st, token.sequence)
        return LeaseObservation(False, None, token.attempt, NOT_PENDING)
    if res is not True:
        assert not isinstance(res, bool)
        if isinstance(res, SettleUnknown):  # it may have applied: the lease is not known lost
            return LeaseObservation(None, None, token.attempt, f"renewal unconfirmed: {res.reason}")
        assert isinstance(res, SettleStale)  # _send confirms only with True
        return LeaseObservation(False, None, token.attempt, res.reason)
    deadline = now + st.spec.ack_wait_seconds
    st.leases[token.sequence] = (token.attempt, deadline, delivery_seq(token))
    nudge_if_final(c, st, token.sequence, token.attempt, deadline)  # moved to the new lapse
    return LeaseObservation(True, deadline, token.attempt)


async def _withdraw(c: Client, st: SubState, dlq_seq: int, seq: int) -> None:
    """Delete the dead letter stored for a Terminal settle the server then did not apply (the
    message was purged or deleted in between): the settle is Stale, the message dropped, and
    a dead letter left behind would count it dead-lettered too. A delete that fails is
    recorded (``dead_letter_left``)."""
    try:
        await c.api(f"STREAM.MSG.DELETE.{st.chan.dlq}", {"seq": dlq_seq})
    except ApiError as exc:
        if exc.err_code == _api.NO_MESSAGE_FOUND:
            return
        c.record("dead_letter_left", st.id.name, str(seq), reason=exc.description)
    except CallFailed as exc:
        c.record("dead_letter_left", st.id.name, str(seq), reason=str(exc))


async def dead_letter(
    c: Client, st: SubState, token: DeliveryToken, reason: str
) -> SettleAnswer | int:
    """Store the dead letter (dedup by consumer incarnation, sequence and attempt); its
    sequence in the dlq stream when stored, else the answer to give (nothing was settled)."""
    chs = st.chan
    try:
        got = await c.api(f"STREAM.MSG.GET.{chs.stream}", {"seq": token.sequence}, MsgGet)
    except ApiError as exc:
        if exc.err_code == _api.NO_MESSAGE_FOUND:
            return SettleStale("message no longer retained")
        return SettleUnknown(f"dead letter not stored ({exc.description}); nothing settled")
    except CallFailed as exc:
        return SettleUnknown(f"dead letter not stored ({exc}); nothing settled")
    m = got.message
    body = base64.b64decode(m.data or "")
    src = _codec.parse_headers(base64.b64decode(m.hdrs or ""))
    orig = _codec.envelope(c.names, chs.id, m.subject, body, src, token.sequence)
    h = dict(orig.headers)
    h.update(
        {
            "dlq-reason": reason,
            "dlq-origin-seq": str(token.sequence),
            "dlq-origin-kind": orig.kind,
            "dlq-consumer": token.subscription.consumer,
        }
    )
    env = Envelope(
        channel=chs.id,
        publication_id=(
            f"{orig.publication_id}~dlq~{token.subscription.consumer}~{st.created_ns}"
            f"~{token.attempt}"
        ),
        body=body,
        event_id=orig.event_id,
        kind="dlq",
        partition_key=orig.partition_key,
        event_ts=orig.event_ts,
        source_epoch=orig.source_epoch,
        source_offset=orig.source_offset,
        headers=h,
    )
    hdrs = _codec.headers(env, True)
    subject = c.names.dlq_subject(token.subscription, st.created_ns, orig.partition_key)
    nc = await c.conn()
    try:
        msg = await _api.request(nc, subject, body, c.request_timeout, headers=hdrs)
        ack = decode_pub_ack(msg.data)
    except (CallFailed, msgspec.DecodeError) as exc:
        return SettleUnknown(f"dead letter not stored ({exc}); nothing settled")
    if ack.error is not None:
        desc = ack.error.description
        return SettleUnknown(f"dead letter not stored ({desc}); nothing settled")
    return ack.seq
