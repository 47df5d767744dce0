"""The drop / lag / ledger arithmetic of ``observe_subscription``: pure functions, no I/O.

JetStream reports a consumer's pending, ack-pending and ack floor, but not what the contract
calls *dropped* (a matching message that left the stream before the subscription settled it)
nor *unresolved* (past ``max_deliver``, which the server reports as nothing pending). This
module decides both from facts the server gives every client alike, plus what this client saw
itself, and answers "cannot tell" rather than guess:

* **Advisories** (``__adv``): a message deleted while leased (``MSG_TERMINATED``,
  "Unacknowledged message was deleted") is a drop; one past ``max_deliver``
  (``MAX_DELIVERIES``) is unresolved while retained and a drop once removed.
* **Silent removals** (no advisory: evicted or deleted before delivery, or purged): decided
  one sequence at a time against the shared accounting :class:`Record` (``__acct``), in stream
  order, so every client counts each removed sequence once and agrees:

  - never delivered (beyond the consumer's delivered position, or proved by this client's own
    contiguous deliveries) → a drop if it matched the subscription (kind and partition, from
    the publishers' index records or this client's publish index), else nothing;
  - delivered while retained (at or below the record's mark) → settled unless a purge could
    have removed it unsettled (a purge emits no advisory); a sequence at or below the record's
    ack floor, or one this client settled with the server's confirmation, is settled anyway;
  - anything else (another client may have delivered it; its subject is unknown; a purge may
    have removed it leased) → :class:`Ambiguous`: the observation is ``Unknown``.

  A record is advanced only by an observation that decided every sequence; so a client that
  cannot decide leaves it for one that can (the one that delivered the messages, say).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

import msgspec

from ...contracts.messaging import SubscriptionSpec

SEEN_LIMIT = 4096
"""Most delivery records an accounting record pools (past it, what is left stays Unknown)."""
FINAL_GRACE = 0.05
"""Seconds past its deadline an unsettled final-attempt lease of this client counts as
unresolved (the server's advisory follows within about a second)."""


class Record(msgspec.Struct, forbid_unknown_fields=False):
    """The shared drop accounting of one consumer incarnation (stored as JSON in ``__acct``).

    Every removed sequence ``<= acc`` (and each in ``done``) has been decided; ``dropped``
    counts the silent drops of undelivered messages among them, ``lost`` the delivered ones
    removed while a client still held their lease (by sequence: a late advisory for one must
    not count it twice). The mark — delivered position ``(md, ms)`` and ack
    floor ``floor`` read at server time ``ts`` (ns) — says what was true of every sequence
    above ``acc`` that was retained then: at or below ``ms`` it had been delivered, at or below
    ``floor`` settled. ``seen`` pools the deliveries since the mark that clients which could
    decide only part of the removed sequences knew (so that together they cover every
    delivery: a purge moves the consumer's position past what it removed undelivered).
    """

    inc: str
    acc: int
    dropped: int = 0
    md: int = 0
    ms: int = 0
    floor: int = 0
    ts: int = 0
    done: list[int] = []
    lost: list[int] = []
    seen: dict[int, int] = {}  # delivery seq -> stream seq since the mark, from partial records


def initial_record(inc: str, start_seq: int, created_ns: int) -> Record:
    """The record of a consumer nothing has been accounted for yet."""
    return Record(inc=inc, acc=start_seq - 1, ms=start_seq - 1, ts=created_ns)


@dataclass(frozen=True)
class ConsumerView:
    """The fields of ``CONSUMER.INFO`` this arithmetic reads."""

    delivered_d: int
    delivered_s: int
    floor_d: int
    floor_s: int
    num_pending: int
    num_ack_pending: int
    num_redelivered: int
    ts: int = 0


@dataclass(frozen=True)
class StreamView:
    """The fields of ``STREAM.INFO`` this arithmetic reads (``first = last + 1`` when empty)."""

    first: int
    last: int
    deleted: frozenset[int] = frozenset()

    def removed(self, seq: int) -> bool:
        return seq < self.first or seq in self.deleted


@dataclass(frozen=True)
class Own:
    """What this client saw of the consumer incarnation: its deliveries (delivery sequence →
    stream sequence), the sequences it settled with the server's confirmation, and those it
    holds a live lease on now (so nobody settled them)."""

    deliveries: Mapping[int, int]
    settled: Collection[int]
    leased: Collection[int] = ()


@dataclass(frozen=True)
class Ambiguous:
    """Why the drop count cannot be decided now (the observation is ``Unknown``)."""

    reason: str


@dataclass(frozen=True)
class Accounted:
    """The record after an observation (``changed`` when it must be written back)."""

    record: Record
    changed: bool
    inferred: tuple[int, ...] = ()  # delivered, no advisory, counted settled by inference
    undecided: Ambiguous | None = None  # some sequences are left for a client that knows


Attribution = Mapping[int, tuple[str, str | None]]


def matches(spec: SubscriptionSpec, kind: str, key: str | None) -> bool:
    """Whether a message of ``kind`` and partition key ``key`` is one ``spec`` receives."""
    if kind != spec.kind:
        return False
    return spec.partition is None or key == str(spec.partition)


def candidates(rec: Record, stream: StreamView) -> list[int]:
    """Removed sequences not accounted yet, in order."""
    done = set(rec.done)
    out = [s for s in range(rec.acc + 1, stream.first) if s not in done]
    out += sorted(s for s in stream.deleted if s > rec.acc and s >= stream.first and s not in done)
    return out


def needs_subject(rec: Record, stream: StreamView) -> list[int]:
    """The candidates whose subject :func:`account` may need (not delivered by the mark)."""
    return [s for s in candidates(rec, stream) if s > rec.ms]


def _covered(own: Own, lo: int, hi: int) -> bool:
    """Whether this client made every delivery with a delivery sequence in ``(lo, hi]``."""
    if hi <= lo:
        return True
    if len(own.deliveries) < hi - lo:
        return False
    return all(d in own.deliveries for d in range(lo + 1, hi + 1))


# what one removed sequence was for the subscription (see ``account``)
SILENT_DROP, LOST, INFERRED, NOTHING = "silent drop", "lost", "inferred", "nothing"


@dataclass(frozen=True)
class _Facts:
    """What ``account`` knows of every removed sequence it decides."""

    rec: Record
    spec: SubscriptionSpec
    cv: ConsumerView
    own: Own
    own_delivered: frozenset[int]
    covered: bool
    subjects: Attribution
    purge_possible: bool


def _delivered(f: _Facts, s: int) -> bool | Ambiguous:
    """Whether ``s`` was ever delivered to the subscription, or why that is unknown."""
    if s <= f.rec.ms or s in f.own_delivered:
        return True  # passed while retained (the mark), or received here
    if s > f.cv.delivered_s or f.covered:
        return False  # beyond the position, or every delivery since the mark was ours
    return Ambiguous(
        f"sequence {s} was removed after the subscription's position passed it, and "
        "another client may have received it: drops cannot be counted"
    )


def _fate(f: _Facts, s: int) -> str | Ambiguous:
    """What the removal of ``s`` (no advisory named it) was for the subscription."""
    subject = f.subjects.get(s)
    if subject is not None and not matches(f.spec, *subject):
        return NOTHING  # never the subscription's, delivered or not to anyone
    delivered = _delivered(f, s)
    if isinstance(delivered, Ambiguous):
        return delivered
    if not delivered:
        if subject is None:
            return Ambiguous(
                f"sequence {s} was removed before delivery and its subject is not known "
                "(published other than through this adapter, or its index record was lost "
                "or trimmed): drops cannot be counted"
            )
        return SILENT_DROP
    if s <= f.rec.floor or s in f.own.settled:
        return NOTHING  # settled before it left
    if s in f.own.leased:
        return LOST  # removed under this client's live lease: never settled
    if f.purge_possible:
        return Ambiguous(
            f"sequence {s} was delivered and removed without an advisory while a purge "
            "may have happened: whether it was settled first cannot be known"
        )
    return INFERRED  # removal by limits or delete would have reported a lease


def account(
    rec: Record,
    spec: SubscriptionSpec,
    cv: ConsumerView,
    stream: StreamView,
    exhausted: Collection[int],
    deleted: Collection[int],
    own: Own,
    subjects: Attribution,
    purge_possible: bool,
) -> Accounted | Ambiguous:
    """Decide every removed sequence above the record (see the module docstring)."""
    todo = candidates(rec, stream)
    if not todo:
        return _advance(rec, cv, stream, 0, (), changed=_mark_moved(rec, cv))
    pool = rec.seen if not rec.seen or max(rec.seen) <= cv.delivered_d else {}  # rolled back
    pooled = Own({**pool, **own.deliveries}, own.settled, own.leased)
    facts = _Facts(
        rec,
        spec,
        cv,
        own,
        frozenset(pooled.deliveries.values()),
        _covered(pooled, rec.md, cv.delivered_d),
        subjects,
        purge_possible,
    )
    found: dict[str, list[int]] = {SILENT_DROP: [], LOST: [], INFERRED: [], NOTHING: []}
    left: list[int] = []
    why: Ambiguous | None = None
    for s in todo:
        if s in deleted or s in exhausted:
            continue  # counted from the advisory ledger
        fate = _fate(facts, s)
        if isinstance(fate, Ambiguous):
            left.append(s)
            why = why or fate
            continue
        found[fate].append(s)
    if why is not None:
        return _partial(rec, cv, own, todo, left, found, why)
    return _advance(
        rec,
        cv,
        stream,
        len(found[SILENT_DROP]),
        tuple(found[INFERRED]),
        changed=True,
        lost=found[LOST],
    )


def _partial(
    rec: Record,
    cv: ConsumerView,
    own: Own,
    todo: list[int],
    left: list[int],
    found: dict[str, list[int]],
    why: Ambiguous,
) -> Accounted | Ambiguous:
    """What this client could decide of ``todo``, when it could not decide ``left``: the
    decided sequences join ``done`` (their drops counted), this client's deliveries since the
    mark join ``seen`` (bounded), the mark stays (it vouches for sequences removed after it,
    and the undecided ones may have been removed before), and the rest is left for a client
    that knows — one that received them, say. The observation stays ``Unknown`` until every
    sequence is decided."""
    decided = [s for s in todo if s not in left]
    mine = {d: s for d, s in own.deliveries.items() if rec.md < d <= cv.delivered_d}
    seen = {**rec.seen, **mine} if len(rec.seen) + len(mine) <= SEEN_LIMIT else rec.seen
    if not decided and seen == rec.seen:
        return why
    new = msgspec.structs.replace(
        rec,
        dropped=rec.dropped + len(found[SILENT_DROP]),
        done=sorted(set(rec.done) | set(decided)),
        lost=sorted(set(rec.lost) | set(found[LOST])),
        seen=seen,
    )
    return Accounted(new, True, tuple(found[INFERRED]), undecided=why)


def _mark_moved(rec: Record, cv: ConsumerView) -> bool:
    return (cv.delivered_d, cv.delivered_s, cv.floor_s) != (rec.md, rec.ms, rec.floor)


def _advance(
    rec: Record,
    cv: ConsumerView,
    stream: StreamView,
    silent: int,
    inferred: tuple[int, ...],
    changed: bool,
    lost: list[int] | None = None,
) -> Accounted:
    acc = max(rec.acc, stream.first - 1)
    done = sorted(s for s in set(rec.done) | set(stream.deleted) if s > acc)
    new = Record(
        inc=rec.inc,
        acc=acc,
        dropped=rec.dropped + silent,
        md=max(rec.md, cv.delivered_d),
        ms=max(rec.ms, cv.delivered_s),
        floor=max(rec.floor, cv.floor_s),
        ts=max(rec.ts, cv.ts),
        done=done,
        lost=sorted(set(rec.lost) | set(lost or ())),
    )
    return Accounted(new, changed or new != rec, inferred)


@dataclass(frozen=True)
class Local:
    """This client's leases and Retries at time ``now``: sequence → (attempt, deadline,
    delivery sequence) of each lease; → (due time, delivery sequence) of each Retry waiting
    for redelivery; → whether the server already decided a final Retry. ``foreign`` is the
    highest delivery sequence this client knows another client received (0: none)."""

    leases: Mapping[int, tuple[int, float, int]]
    retry_wait: Mapping[int, tuple[float, int]]
    final_retry: Mapping[int, bool]
    settled: Collection[int]
    now: float
    foreign: int = 0

    def given_back(self, cap: int) -> set[int]:
        """The deliveries this client gave back (a Retry, a lapsed lease that is not the
        final attempt) that provably still wait for redelivery: the server holds them
        ack-pending, the contract counts them pending. Once another client received anything
        after one was given back, it may have been that one (the server does not say which):
        then it is left to the server's count."""
        out = {
            s
            for s, (due, dseq) in self.retry_wait.items()
            if due > self.now or self.foreign <= dseq
        }
        for s, (attempt, deadline, dseq) in self.leases.items():
            lapsed = self.now >= deadline and (cap == -1 or attempt < cap)
            if lapsed and s not in self.retry_wait and self.foreign <= dseq:
                out.add(s)
        return out


def last_foreign(deliveries: Mapping[int, int], checked: int, delivered: int) -> int:
    """The highest delivery sequence in ``(checked, delivered]`` that is not one of this
    client's ``deliveries`` (0: every one was ours)."""
    for d in range(delivered, checked, -1):
        if d not in deliveries:
            return d
    return 0


@dataclass(frozen=True)
class Counts:
    pending: int
    leased: int
    unresolved: frozenset[int]
    dropped: int
    ack_floor: int


def exhausted_now(spec: SubscriptionSpec, local: Local, advisories: Collection[int]) -> set[int]:
    """Unresolved candidates: the server's ``MAX_DELIVERIES`` advisories, this client's
    final-attempt Retries, and its final-attempt leases that expired unsettled."""
    out = set(advisories) | set(local.final_retry)
    cap = spec.max_deliver
    if cap != -1:
        for seq, (attempt, deadline, _d) in local.leases.items():
            if attempt >= cap and local.now >= deadline + FINAL_GRACE and seq not in local.settled:
                out.add(seq)
    return out


def counts(
    spec: SubscriptionSpec,
    cv: ConsumerView,
    stream: StreamView,
    exhausted: Collection[int],
    deleted: Collection[int],
    local: Local,
    silent_drops: int,
    start_seq: int,
    advised: Collection[int] = (),
    lost: Collection[int] = (),
    skip: Callable[[int], bool] = lambda _s: False,
    floor_settled: Collection[int] | None = None,
) -> Counts:
    """The observation's numbers, from the server's counts corrected by the ledgers
    (``advised``: the server's own ``MAX_DELIVERIES`` advisories among ``exhausted``;
    ``skip``: sequences known not to be the subscription's, see :func:`own_floor`;
    ``floor_settled``: this client's settles the ack floor may go past, when not all of
    ``local.settled`` — see ``_gap``)."""
    unresolved: set[int] = set()
    gone = 0
    for s in exhausted:
        if s in deleted or s < start_seq:
            continue
        if stream.removed(s):
            gone += 1
        else:
            unresolved.add(s)
    now = local.now
    cap = spec.max_deliver
    # leased on the server but waiting for redelivery by this client's ledger: pending
    waiting = len(local.given_back(cap) - unresolved)
    ack_pending = cv.num_ack_pending
    waiting = min(waiting, ack_pending)
    # a final attempt the server has not decided yet (its Retry, or its lease that expired
    # here) is still ack-pending there: unresolved here, so not leased
    undecided = {s for s, decided in local.final_retry.items() if not decided}
    if cap != -1:
        undecided |= {
            s
            for s, (attempt, deadline, _d) in local.leases.items()
            if attempt >= cap and now >= deadline + FINAL_GRACE and s not in local.settled
        }
    leased = max(ack_pending - waiting - len(undecided - set(advised)), 0)
    return Counts(
        pending=cv.num_pending + waiting,
        leased=leased,
        unresolved=frozenset(unresolved),
        dropped=len(set(deleted) | set(lost)) + gone + silent_drops,
        ack_floor=floor(
            own_floor(
                cv.floor_s,
                stream,
                local.settled if floor_settled is None else floor_settled,
                skip,
            ),
            unresolved,
        ),
    )


FLOOR_SCAN = 4096
"""Most sequences past the server's ack floor :func:`own_floor` looks at."""


def own_floor(
    server_floor: int,
    stream: StreamView,
    settled: Collection[int],
    skip: Callable[[int], bool] = lambda _s: False,
) -> int:
    """The ack floor with this client's own writes in it: from the server's (raised to just
    below the stream's first retained sequence), past every following sequence this client
    settled with the server's confirmation or that was removed, and past a sequence the
    subscription does not receive (``skip``) when a settled or removed one follows it — where
    the server's floor goes once the consumer applied them. On a cluster a consumer's raft
    group applies an ack or an eviction after the request that made it was answered: its
    floor can trail what this client already knows is settled (read-your-writes)."""
    base = max(server_floor, stream.first - 1)
    out = base
    for s in range(base + 1, min(stream.last, base + FLOOR_SCAN) + 1):
        if s in settled or stream.removed(s):
            out = s
        elif not skip(s):
            break
    return out


def floor(server_floor: int, unresolved: Collection[int]) -> int:
    """The ack floor: the server's (raised by the caller to just below the stream's first
    retained sequence: removed messages count as settled), held below the lowest unresolved
    sequence (the server moves it past an exhausted message once a later one is acked)."""
    if unresolved:
        return min(server_floor, min(unresolved) - 1)
    return server_floor


def evicted_maybe_leased(cv: ConsumerView, stream: StreamView) -> bool:
    """Whether an evicted message may still count as leased: the server confirms a publish
    (and the eviction it causes) before it updates the consumers. Something is ack-pending
    and the ack floor sits below the stream's first sequence — a hint only: the ack-pending
    one may be a later message while the floor waits for the consumer's position (a message
    aged out before delivery, say), which no amount of waiting changes."""
    return cv.num_ack_pending > 0 and cv.floor_s < stream.first - 1


def publications_uncounted(
    spec: SubscriptionSpec,
    cv: ConsumerView,
    stream: StreamView,
    index: Mapping[int, tuple[str, str | None, int]],
    window: int,
) -> bool:
    """Fewer pending than the messages this client published past the consumer's delivered
    position that match it and are still retained (among the last ``window`` sequences,
    which is where a lag can be): impossible once the consumer has caught up."""
    delivered = max(cv.delivered_s, stream.first - 1)
    known = 0
    for seq in range(max(delivered + 1, stream.last - window + 1), stream.last + 1):
        entry = index.get(seq)
        if entry is not None and not stream.removed(seq) and matches(spec, entry[0], entry[1]):
            known += 1
    return cv.num_pending < known


def parse_ts(text: str) -> int:
    """An RFC 3339 server timestamp (``2026-12-01T13:09:58.4398412Z``) as Unix nanoseconds;
    0 when absent or unreadable."""
    if not text:
        return 0
    import datetime as _dt

    body = text.rstrip("Z")
    frac = 0
    if "." in body:
        body, _, digits = body.partition(".")
        tz = ""
        for sep in ("+", "-"):
            if sep in digits:
                digits, _, rest = digits.partition(sep)
                tz = sep + rest
        frac = int((digits + "000000000")[:9]) if digits.isdigit() else 0
        body += tz
    try:
        when = _dt.datetime.fromisoformat(body)
    except ValueError:
        return 0
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.UTC)
    return int(when.timestamp()) * 1_000_000_000 + frac
