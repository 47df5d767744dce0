"""``_gap``: the span above a consumer's ack floor, decided from the server's state (issue #25
items 5 and 6). Pure: no server."""

from __future__ import annotations

from videoflow_aio.adapters.nats._gap import GAP_SCAN, Gap, gap
from videoflow_aio.adapters.nats._ledger import ConsumerView, StreamView
from videoflow_aio.contracts.messaging import ChannelId, make_subscription

CH = ChannelId("f", "r", "n")
ONCE = make_subscription(CH, "w", max_deliver=1)
FOREVER = make_subscription(CH, "w", max_deliver=-1)  # nothing is ever exhausted


def cv(delivered: int, floor: int, ack_pending: int) -> ConsumerView:
    return ConsumerView(delivered, delivered, floor, floor, 0, ack_pending, 0)


def data(*seqs: int) -> dict[int, tuple[str, str | None]]:
    return {s: ("data", None) for s in seqs}


SV = StreamView(1, 10)


def test_a_lone_message_above_the_floor_with_nothing_ack_pending_is_exhausted() -> None:
    # retained, never redelivered, above the floor, and its advisory is missing
    assert gap(ONCE, cv(1, 0, 0), SV, (), (), data(1)) == Gap(frozenset({1}))


def test_one_below_it_already_exhausted_leaves_it_undecided() -> None:
    # 2 may have been settled out of order while 1 was still pending, then 1 exhausted
    assert gap(ONCE, cv(2, 0, 0), SV, {1}, (), data(1, 2)) == Gap(surplus=1)


def test_two_unexplained_cannot_be_told_apart() -> None:
    assert gap(ONCE, cv(2, 0, 0), SV, (), (), data(1, 2)) == Gap(surplus=2)


def test_a_removal_below_it_leaves_it_undecided() -> None:
    deleted = StreamView(1, 10, frozenset({2}))
    assert gap(ONCE, cv(3, 1, 0), deleted, (), (), data(3)) == Gap(surplus=1)


def test_ack_pending_messages_explain_the_span() -> None:
    assert gap(ONCE, cv(3, 0, 2), SV, (), {3}, data(1, 2, 3)) == Gap()


def test_other_kinds_and_unattributed_sequences() -> None:
    other = {1: ("eos", None), 2: ("data", None)}
    assert gap(ONCE, cv(2, 0, 0), SV, (), (), other) == Gap(frozenset({2}))
    # an unattributed sequence may be the subscription's: never derived from
    assert gap(ONCE, cv(1, 0, 0), SV, (), (), {}) == Gap(surplus=1)


def test_unlimited_deliveries_never_exhaust() -> None:
    assert gap(FOREVER, cv(1, 0, 0), SV, (), (), data(1)) == Gap()


def test_the_server_holding_this_clients_settles_again_means_they_were_lost() -> None:
    # a restart lost the acks of 1 and 2: the server holds both ack-pending again
    assert gap(ONCE, cv(2, 0, 2), SV, (), {1, 2}, data(1, 2)) == Gap(settles_lost=True)
    # one of them lost
    assert gap(ONCE, cv(2, 0, 1), SV, (), {1, 2}, data(1, 2)) == Gap(settles_lost=True)
    # an out-of-order settle while another client holds 1: nothing lost
    assert gap(ONCE, cv(2, 0, 1), SV, (), {2}, data(1, 2)) == Gap()


def test_a_span_too_long_is_not_scanned() -> None:
    long = cv(GAP_SCAN + 1, 0, 0)
    assert gap(ONCE, long, StreamView(1, GAP_SCAN + 1), (), (), data(1)) == Gap()
