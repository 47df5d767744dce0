"""close(): every accepted publication ends in exactly one recorded fate — messages still
retained (or, core-only, still in a client queue) are dropped with reason ``channel closed``
naming who had not settled them; held publications are rejected, with a ``reject`` event."""

from __future__ import annotations

import anyio
import pytest

from _msg_helpers import FINAL, deadline, fates, settle_all, setup
from videoflow_aio.contracts.messaging import (
    Accepted,
    PublicationUnknown,
    PublishOutcome,
    Rejected,
    Terminal,
    make_envelope,
    make_subscription,
)
from videoflow_aio.observe import ObservationLog

pytestmark = pytest.mark.anyio


def closing_drops(log: ObservationLog) -> dict[str, list[str]]:
    return {
        e.ident: list(e.attrs["subscriptions"])  # type: ignore[arg-type]
        for e in log.events("drop")
        if e.attrs["reason"] == "channel closed"
    }


async def test_close_records_a_fate_for_every_unsettled_message() -> None:
    log = ObservationLog()
    b, ch, w = await setup(log=log)
    x = make_subscription(ch.channel, "x")
    await b.ensure_subscription(x, "op-x")
    for i in range(3):
        await b.publish(make_envelope(ch.channel, f"p{i}"), deadline())
    got_w = await b.receive(w.id, 3, 1 << 20, deadline())
    got_x = await b.receive(x.id, 1, 1 << 20, deadline())
    await settle_all(b, got_w[:2], "w")  # w settles p0, p1; p2 stays leased
    await settle_all(b, got_x, "x")  # x settles p0
    await b.close([ch.channel], "g")
    assert closing_drops(log) == {"p1": [x.id.name], "p2": [w.id.name, x.id.name]}
    assert [(e.ident, e.attrs["reason"]) for e in log.events("evict")] == [("p0", "channel closed")]
    final = fates(log)
    for pid in ("p0", "p1", "p2"):
        for name in (w.id.name, x.id.name):
            assert len([k for k in final[(pid, name)] if k in FINAL]) == 1, (pid, name)
    (closed,) = log.events("channel_closed")
    assert closed.attrs["discarded"] == 3


async def test_close_fires_due_timers_before_it_drops() -> None:
    log = ObservationLog()
    b, ch, w = await setup(log=log, sub_kw={"ack_wait_seconds": 5.0, "max_deliver": 1})
    await b.publish(make_envelope(ch.channel, "p0"), deadline())
    await b.receive(w.id, 1, 100, deadline())
    t0 = anyio.current_time()
    await anyio.sleep(6)
    await b.close([ch.channel], "g")
    events = [(e.kind, e.at - t0) for e in log.events(("unresolved", "drop"))]
    assert events == [("unresolved", 5.0), ("drop", 6.0)]
    assert closing_drops(log) == {"p0": [w.id.name]}


async def test_close_drops_dead_letters_a_dlq_subscription_had_not_settled() -> None:
    log = ObservationLog()
    b, ch, w = await setup(log=log)
    dlq = make_subscription(ch.channel, "dlq", kind="dlq")
    await b.ensure_subscription(dlq, "op-dlq")
    await b.publish(make_envelope(ch.channel, "p0"), deadline())
    (d,) = await b.receive(w.id, 1, 100, deadline())
    await b.settle(d.token, Terminal("bad"), "s")
    await b.close([ch.channel], "g")
    assert closing_drops(log) == {f"p0~dlq~{w.id.consumer}": [dlq.id.name]}
    (closed,) = log.events("channel_closed")
    assert (closed.attrs["discarded"], closed.attrs["dead_letters"]) == (1, 1)


async def test_core_only_close_drops_what_waits_in_client_queues() -> None:
    log = ObservationLog()
    b, ch, w = await setup(log=log, b_core_only=True)
    x = make_subscription(ch.channel, "x")
    await b.ensure_subscription(x, "op-x")
    for i in range(3):
        await b.publish(make_envelope(ch.channel, f"p{i}"), deadline())
    await b.receive(w.id, 2, 1 << 20, deadline())  # w takes p0, p1; p2 waits in w's queue
    await b.receive(x.id, 1, 1 << 20, deadline())  # x takes p0; p1, p2 wait
    await b.close([ch.channel], "g")
    assert closing_drops(log) == {"p1": [x.id.name], "p2": [w.id.name, x.id.name]}
    (closed,) = log.events("channel_closed")
    assert closed.attrs["discarded"] == 2
    delivered = {(e.ident, e.attrs["subscription"]) for e in log.events("deliver")}
    dropped = {(pid, s) for pid, subs in closing_drops(log).items() for s in subs}
    assert delivered.isdisjoint(dropped)
    assert delivered | dropped == {(f"p{i}", s) for i in range(3) for s in (w.id.name, x.id.name)}


async def test_close_rejects_held_publications_with_a_recorded_reject() -> None:
    log = ObservationLog()
    b, ch, _ = await setup(log=log)
    b.pause_acceptance(ch.channel)
    outcomes: dict[str, PublishOutcome] = {}

    async def publish(pid: str, seconds: float) -> None:
        outcomes[pid] = await b.publish(make_envelope(ch.channel, pid), deadline(seconds))

    async with anyio.create_task_group() as tg:
        tg.start_soon(publish, "gave-up", 1.0)  # answered PublicationUnknown, still held
        tg.start_soon(publish, "waiting", 60.0)
        await anyio.sleep(2)
        await b.close([ch.channel], "g")
    assert isinstance(outcomes["gave-up"], PublicationUnknown)
    assert outcomes["waiting"] == Rejected("waiting", "channel closed")
    rejects = [(e.ident, e.attrs["reason"]) for e in log.events("reject")]
    assert sorted(rejects) == [("gave-up", "channel closed"), ("waiting", "channel closed")]
    assert not log.events("publish")
    assert not any(isinstance(o, Accepted) for o in outcomes.values())
