"""The JetStream adapter's drop / lag / ledger arithmetic, without a server (``_ledger``).

Each case is a schedule written as the server would report it (consumer and stream views,
advisories) plus what one client saw; the arithmetic must give the model's number or say
why it cannot.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from videoflow_aio.adapters.nats._ledger import (
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
from videoflow_aio.contracts.messaging import ChannelId, make_subscription

CH = ChannelId("f", "r", "n")
DATA = make_subscription(CH, "w", max_deliver=3)
PART = make_subscription(CH, "p", partition=1)
NOBODY = Own({}, ())


def cv(
    d: int = 0, s: int = 0, fd: int = 0, fs: int = 0, pend: int = 0, ack: int = 0
) -> ConsumerView:
    return ConsumerView(d, s, fd, fs, pend, ack, 0, ts=100)


def rec0() -> Record:
    return initial_record("inc-1", 1, 10)


def data(*seqs: int) -> dict[int, tuple[str, str | None]]:
    return {s: ("data", None) for s in seqs}


def test_undelivered_evictions_are_drops_for_matching_subscriptions_only() -> None:
    subjects = {1: ("data", "0"), 2: ("data", "1"), 3: ("eos", None)}
    view = StreamView(first=4, last=6)
    for spec, want in ((DATA, 2), (PART, 1)):
        res = account(rec0(), spec, cv(), view, (), (), NOBODY, subjects, False)
        assert isinstance(res, Accounted)
        assert (res.record.dropped, res.record.acc, res.changed) == (want, 3, True)


def test_accounted_sequences_are_not_counted_again() -> None:
    first = account(rec0(), DATA, cv(), StreamView(3, 5), (), (), NOBODY, data(1, 2), False)
    assert isinstance(first, Accounted)
    again = account(first.record, DATA, cv(), StreamView(4, 6), (), (), NOBODY, data(3), False)
    assert isinstance(again, Accounted) and again.record.dropped == 3
    same = account(again.record, DATA, cv(), StreamView(4, 6), (), (), NOBODY, {}, False)
    assert isinstance(same, Accounted) and not same.changed and same.record.dropped == 3


def test_a_message_another_client_may_have_received_is_ambiguous() -> None:
    """Issue #14 (1): X never saw the deliveries, the consumer passed them, they were evicted."""
    res = account(
        rec0(), DATA, cv(d=3, s=3), StreamView(4, 6), (), (), NOBODY, data(1, 2, 3), False
    )
    assert isinstance(res, Ambiguous) and "another client" in res.reason


def test_the_record_mark_says_they_were_delivered() -> None:
    """Y observed after its deliveries: the shared mark lets X decide (no drop: no advisory)."""
    marked = Record("inc-1", acc=0, md=3, ms=3, floor=3, ts=50)
    res = account(
        marked, DATA, cv(d=3, s=3, fd=3, fs=3), StreamView(4, 6), (), (), NOBODY, {}, False
    )
    assert isinstance(res, Accounted) and res.record.dropped == 0


def test_own_contiguous_deliveries_prove_a_skip() -> None:
    """The consumer passed sequence 1 without delivering it: this client made every delivery
    since the mark, and none was of 1."""
    own = Own({1: 2, 2: 3}, ())
    res = account(rec0(), DATA, cv(d=2, s=3), StreamView(2, 3), (), (), own, data(1), False)
    assert isinstance(res, Accounted) and res.record.dropped == 1
    gap = Own({2: 3}, ())  # delivery 1 was someone else's: undecided (its delivery pooled)
    res = account(rec0(), DATA, cv(d=2, s=3), StreamView(2, 3), (), (), gap, data(1), False)
    assert isinstance(res, Accounted) and res.undecided is not None
    assert (res.record.dropped, res.record.done, res.record.seen) == (0, [], {2: 3})


def test_an_unattributable_removal_is_ambiguous() -> None:
    res = account(rec0(), DATA, cv(), StreamView(2, 3), (), (), NOBODY, {}, False)
    assert isinstance(res, Ambiguous) and "subject" in res.reason


def test_advisory_ledger_sequences_are_not_counted_silently() -> None:
    res = account(rec0(), DATA, cv(d=1, s=2), StreamView(3, 4), {2}, {1}, NOBODY, {}, False)
    assert isinstance(res, Accounted) and res.record.dropped == 0


def test_a_purge_makes_delivered_unsettled_removals_ambiguous() -> None:
    """Issue #14 (3): a purge removes leased messages without any advisory."""
    marked = Record("inc-1", acc=0, md=2, ms=2, floor=0, ts=50)
    view = StreamView(3, 2)
    res = account(marked, DATA, cv(d=2, s=2), view, (), (), NOBODY, {}, True)
    assert isinstance(res, Ambiguous) and "purge" in res.reason
    # one this client settled (server-confirmed) or below the mark's floor is settled anyway
    ok = Own({}, (1, 2))
    assert isinstance(account(marked, DATA, cv(d=2, s=2), view, (), (), ok, {}, True), Accounted)
    floored = Record("inc-1", acc=0, md=2, ms=2, floor=2, ts=50)
    assert isinstance(
        account(floored, DATA, cv(d=2, s=2), view, (), (), NOBODY, {}, True), Accounted
    )
    # without a purge, a lease would have been reported: settled, by inference
    res = account(marked, DATA, cv(d=2, s=2), view, (), (), NOBODY, {}, False)
    assert isinstance(res, Accounted) and res.inferred == (1, 2) and res.record.dropped == 0


def test_interior_deletions_are_accounted_once() -> None:
    """Issue #14 (3): a raw delete of one undelivered message is a drop."""
    view = StreamView(1, 5, frozenset({3}))
    assert candidates(rec0(), view) == [3]
    res = account(rec0(), DATA, cv(), view, (), (), NOBODY, data(3), False)
    assert isinstance(res, Accounted) and res.record.dropped == 1 and res.record.done == [3]
    again = account(res.record, DATA, cv(), view, (), (), NOBODY, {}, False)
    assert isinstance(again, Accounted) and again.record.dropped == 1
    later = account(res.record, DATA, cv(), StreamView(4, 5), (), (), NOBODY, data(1, 2), False)
    assert isinstance(later, Accounted) and later.record.dropped == 3 and later.record.done == []


def test_needs_subject_skips_what_the_mark_covers() -> None:
    marked = Record("inc-1", acc=0, md=2, ms=2)
    assert needs_subject(marked, StreamView(5, 6)) == [3, 4]


def test_counts_fold_ledgers_into_the_server_counts() -> None:
    now = 10.0
    local = Local(
        leases={7: (1, 5.0, 7), 8: (3, 5.0, 8), 9: (1, 20.0, 9)},
        retry_wait={6: (12.0, 6)},
        final_retry={},
        settled=(),
        now=now,
    )
    exhausted = exhausted_now(DATA, local, {4})
    assert exhausted == {4, 8}  # the advisory, and our final lease that expired unsettled
    n = counts(DATA, cv(fs=3, pend=2, ack=4), StreamView(1, 9), exhausted, {5}, local, 1, 1)
    # pending: 2 undelivered + 6 (Retry delay) + 7 (expired, not final); the server's 4
    # ack-pending are 6, 7, 8 (final, expired, not decided by the server yet) and 9: leased 9
    assert (n.pending, n.unresolved, n.dropped) == (4, frozenset({4, 8}), 2)
    assert n.leased == 1
    assert n.ack_floor == 3  # held below the unresolved 4


def test_an_exhausted_message_removed_is_a_drop_not_unresolved() -> None:
    local = Local({}, {}, {}, (), 0.0)
    n = counts(DATA, cv(), StreamView(3, 4), {1, 3}, set(), local, 0, 1)
    assert (n.unresolved, n.dropped) == (frozenset({3}), 1)


def test_a_final_retry_is_unresolved_at_once() -> None:
    """Issue #14 (4): the server has not decided yet (still ack-pending there)."""
    local = Local({}, {}, {2: False}, (), 0.0)
    exhausted = exhausted_now(DATA, local, ())
    n = counts(DATA, cv(ack=1), StreamView(1, 2), exhausted, set(), local, 0, 1)
    assert (n.unresolved, n.leased, n.pending) == (frozenset({2}), 0, 0)
    decided = Local({}, {}, {2: True}, (), 0.0)
    n = counts(
        DATA, cv(ack=0), StreamView(1, 2), exhausted_now(DATA, decided, ()), set(), decided, 0, 1
    )
    assert (n.unresolved, n.leased) == (frozenset({2}), 0)


def test_floor_and_matches() -> None:
    assert floor(9, {4, 6}) == 3 and floor(9, ()) == 9
    assert matches(DATA, "data", "7") and not matches(DATA, "eos", None)
    assert matches(PART, "data", "1") and not matches(PART, "data", None)


def test_consumer_lags() -> None:
    index = {4: ("data", None, 1), 5: ("eos", None, 1)}
    assert publications_uncounted(DATA, cv(s=3, pend=0), StreamView(1, 5), index, 256)
    assert not publications_uncounted(DATA, cv(s=3, pend=1), StreamView(1, 5), index, 256)
    assert evicted_maybe_leased(cv(fs=0, ack=1), StreamView(3, 5))
    assert not evicted_maybe_leased(cv(fs=2, ack=1), StreamView(3, 5))


def test_parse_ts() -> None:
    assert parse_ts("") == 0 and parse_ts("garbage") == 0
    a = parse_ts("2026-12-01T13:09:58.4398412Z")
    b = parse_ts("2026-12-01T13:09:58.43984Z")
    assert a - b == 1200 and a % 1_000_000_000 == 439841200
    assert parse_ts("2026-12-01T13:09:58Z") == a - 439841200


@given(
    st.lists(st.sampled_from(["data", "eos"]), min_size=1, max_size=30),
    st.integers(min_value=0, max_value=30),
    st.integers(min_value=1, max_value=4),
)
def test_accounting_in_steps_equals_accounting_at_once(
    kinds: list[str], cut: int, steps: int
) -> None:
    """However the evictions are observed, every removed undelivered data message is counted
    exactly once."""
    subjects = {i + 1: (k, None) for i, k in enumerate(kinds)}
    last = len(kinds)
    cut = min(cut, last)
    rec = rec0()
    for i in range(1, steps + 1):
        first = 1 + cut * i // steps
        res = account(rec, DATA, cv(), StreamView(first, last), (), (), NOBODY, subjects, False)
        assert isinstance(res, Accounted)
        rec = res.record
    assert rec.dropped == sum(1 for k in kinds[:cut] if k == "data")


def test_a_give_back_waits_until_another_client_may_have_received_it() -> None:
    """A Retry (or a lapsed lease) of this client counts pending only while no other client
    received anything after it was given back: the server does not say which message a
    delivery was, so after that it is left to the server's count (leased)."""
    leases = {7: (1, 5.0, 3)}  # lapsed at 5.0, delivered as delivery 3
    retries = {6: (9.0, 2), 8: (20.0, 4)}  # 6 due at 9.0 (delivery 2), 8 due at 20.0
    assert Local(leases, retries, {}, (), 10.0).given_back(4) == {6, 7, 8}
    # another client received delivery 5: 6 and 7 may be with it; 8 is still delayed
    assert Local(leases, retries, {}, (), 10.0, foreign=5).given_back(4) == {8}
    n = counts(
        DATA,
        cv(pend=0, ack=3),
        StreamView(1, 8),
        set(),
        set(),
        Local(leases, retries, {}, (), 10.0, foreign=5),
        0,
        1,
    )
    assert (n.pending, n.leased) == (1, 2)


def test_last_foreign_delivery() -> None:
    assert last_foreign({4: 10, 5: 11}, 3, 5) == 0
    assert last_foreign({4: 10, 6: 12}, 3, 6) == 5
    assert last_foreign({}, 3, 9) == 9 and last_foreign({}, 9, 9) == 0


def test_the_ack_floor_counts_removed_messages_as_settled() -> None:
    """The server's floor of a consumer moves past evicted messages only as its position
    passes them (issue #14 (10)); everything below the first retained sequence is settled."""
    local = Local({}, {}, {}, (), 0.0)
    n = counts(DATA, cv(fs=2, pend=1), StreamView(6, 9), set(), set(), local, 0, 1)
    assert n.ack_floor == 5
    n = counts(DATA, cv(fs=2, pend=1), StreamView(6, 9), {7}, set(), local, 0, 1)
    assert n.ack_floor == 5  # still below the unresolved 7
    n = counts(DATA, cv(fs=2, pend=1), StreamView(3, 9), {4}, set(), local, 0, 1)
    assert n.ack_floor == 2


def test_the_ack_floor_has_this_clients_confirmed_settles_in_it() -> None:
    """On a cluster a consumer's raft group applies an ack or an eviction after the request
    that made it was answered (MSG-047 read 1 where 2 was right): the floor goes on past
    this client's confirmed settles, removed sequences, and sequences of another kind when a
    settled one follows — where the server's goes once it applied them."""
    view = StreamView(2, 6)  # 1 evicted
    assert own_floor(0, view, {2}) == 2  # server still at 0: 1 gone, 2 settled here
    assert own_floor(0, view, {3}) == 1  # 2 is neither: stops
    assert own_floor(0, StreamView(2, 6, frozenset({3})), {2, 4}) == 4  # 3 deleted
    assert own_floor(4, view, {2}) == 4  # never below the server's
    eos = {3}.__contains__
    assert own_floor(0, view, {2, 4}, skip=eos) == 4  # over eos 3 to the settled 4
    assert own_floor(0, view, {2}, skip=eos) == 2  # not over a trailing one (as the server)
    assert own_floor(0, StreamView(1, 2), {1, 2, 3}) == 2  # not past the stream's last
    local = Local({}, {}, {}, {2}, 0.0)
    n = counts(DATA, cv(fs=0, ack=1), view, set(), set(), local, 0, 1)
    assert n.ack_floor == 2


def test_two_clients_decide_a_purge_together() -> None:
    """A purge of four messages: x received 1 (leased), y received 2 (settled) and 3
    (leased), 4 was never delivered; the purge moved the consumer's position past 4. Neither
    client alone can decide every sequence: x decides its own and records its deliveries,
    then y decides the rest — 1 + 2 leased lost, 1 silent drop (it said Unknown forever)."""
    after = cv(d=3, s=4, fs=4)  # positions after the purge
    view = StreamView(5, 4)
    x = Own({1: 1}, (), leased={1})
    y = Own({2: 2, 3: 3}, {2}, leased={3})
    first = account(rec0(), DATA, after, view, (), (), x, data(4), True)
    assert isinstance(first, Accounted) and first.undecided is not None
    assert (first.record.done, first.record.lost, first.record.seen) == ([1], [1], {1: 1})
    assert first.record.acc == rec0().acc  # the mark stays
    second = account(first.record, DATA, after, view, (), (), y, data(4), True)
    assert isinstance(second, Accounted) and second.undecided is None
    assert (second.record.dropped, second.record.lost, second.record.acc) == (1, [1, 3], 4)
    alone = account(rec0(), DATA, after, view, (), (), y, data(4), True)
    assert isinstance(alone, Accounted) and alone.undecided is not None  # 1 is x's to decide


def test_a_removed_message_of_another_kind_is_nothing_whoever_received_it() -> None:
    """The position passed sequence 1 and another client may have made the delivery; but 1
    was an eos message, which a data subscription never receives: nothing to decide (it was
    Unknown)."""
    res = account(
        rec0(), DATA, cv(d=1, s=2), StreamView(2, 2), (), (), NOBODY, {1: ("eos", None)}, True
    )
    assert isinstance(res, Accounted) and res.undecided is None and res.record.dropped == 0
