"""What lies between a consumer's ack floor and its delivered position: pure, no I/O.

Every retained message the subscription matched in ``(ack floor, delivered]`` is, on the
server, one of: ack-pending (leased, or waiting for redelivery), settled out of order (the
floor waits for an earlier delivery), or exhausted (past ``max_deliver``: no longer
ack-pending, the floor not moved past it). The ``MAX_DELIVERIES`` advisories name the
exhausted ones — unless an advisory was lost (a consumer's leader election on a cluster:
issue #25 item 5). Two facts then hold whatever the advisories say:

* the server holds **more** deliveries ack-pending than there are such messages this client
  did not settle itself → some of this client's confirmed settles were lost (a restart:
  item 6): its own settles must not raise the ack floor;
* there are **more** such messages, not settled by this client, than the server holds
  ack-pending → the surplus is exhausted or settled by another client. With nothing
  ack-pending and a single one (nothing removed or exhausted below it), it was exhausted —
  its settle would have moved the floor, since nothing earlier was pending to hold the floor
  back. Otherwise the two cannot be told apart from the server's state.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from ...contracts.messaging import SubscriptionSpec
from ._ledger import ConsumerView, StreamView, matches

GAP_SCAN = 4096
"""Most sequences above the server's ack floor the gap check looks at (past it: no check)."""


@dataclass(frozen=True)
class Gap:
    """``unresolved``: exhausted though no advisory said so; ``settles_lost``: the server holds
    some of this client's confirmed settles unsettled; ``surplus``: how many matching messages
    above the floor are neither ack-pending nor explained (exhausted or settled by another
    client, which the server's state cannot tell apart)."""

    unresolved: frozenset[int] = frozenset()
    settles_lost: bool = False
    surplus: int = 0


def retained_above_floor(
    cv: ConsumerView, stream: StreamView, known: Collection[int]
) -> list[int] | None:
    """Retained sequences in ``(ack floor, delivered]`` not in ``known`` (exhausted or
    deleted already); None when the span is too long to scan."""
    lo, hi = cv.floor_s, cv.delivered_s
    if hi - lo > GAP_SCAN:
        return None
    return [s for s in range(lo + 1, hi + 1) if not stream.removed(s) and s not in known]


def gap(
    spec: SubscriptionSpec,
    cv: ConsumerView,
    stream: StreamView,
    known: Collection[int],
    settled: Collection[int],
    subjects: Mapping[int, tuple[str, str | None]],
) -> Gap:
    """Decide the span above the server's ack floor (``known``: sequences already exhausted or
    deleted by the advisories and this client's ledger; ``settled``: this client's confirmed
    settles; ``subjects``: kind and partition key of the sequences it could attribute — an
    unattributed one counts as possibly the subscription's)."""
    span = retained_above_floor(cv, stream, known)
    if span is None:
        return Gap()
    mine = {s for s in span if s in settled}
    theirs = [
        s for s in span if s not in mine and (s not in subjects or matches(spec, *subjects[s]))
    ]
    pending = cv.num_ack_pending
    settles_lost = bool(mine) and pending > len(theirs)
    if spec.max_deliver == -1 or len(theirs) <= pending:
        return Gap(settles_lost=settles_lost)
    surplus = len(theirs) - pending
    if pending == 0 and len(theirs) == 1:
        s = theirs[0]
        below = range(cv.floor_s + 1, s)
        clear = s in subjects and not any(stream.removed(q) or q in known for q in below)
        if clear:
            return Gap(frozenset({s}), settles_lost)
    return Gap(settles_lost=settles_lost, surplus=surplus)
