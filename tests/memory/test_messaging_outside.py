"""The messaging model's controls for what happens outside its clients: another client of
the same broker, an administrator's purge and deletes, a server restart (issue #14). The
conformance cases MSG-049…066 run the same schedules on every provider; these pin the
model's own record of them: every removal a recorded fate, nothing lost silently."""

from __future__ import annotations

import anyio
import pytest

from _msg_helpers import deadline, fates, settle_all, setup
from videoflow_aio.contracts import Known
from videoflow_aio.contracts.errors import NotFound
from videoflow_aio.contracts.messaging import (
    Completed,
    PublicationUnknown,
    SettleStale,
    make_channel,
    make_envelope,
    make_subscription,
)
from videoflow_aio.observe import ObservationLog

pytestmark = pytest.mark.anyio


async def test_another_client_shares_the_broker_not_the_counter() -> None:
    b, ch, sub = await setup()
    c = b.another_client()
    assert c is not b and c._broker is b._broker
    await b.publish(make_envelope(ch.channel, "p1"), deadline())
    got = await c.receive(sub.id, 8, 1 << 20, deadline())
    assert [d.envelope.publication_id for d in got] == ["p1"]
    await settle_all(c, got)
    obs = await b.observe_subscription(sub.id)
    assert isinstance(obs, Known) and obs.value.ack_floor == got[0].sequence


async def test_a_purge_is_a_recorded_drop_for_each_unsettled_message() -> None:
    log = ObservationLog()
    b, ch, sub = await setup(log=log)
    for i in range(4):
        await b.publish(make_envelope(ch.channel, f"p{i}"), deadline())
    got = await b.receive(sub.id, 2, 1 << 20, deadline())
    await b.settle(got[0].token, Completed(), "s0")  # p0 settled: not lost
    b.purge(ch.channel)
    assert isinstance(await b.settle(got[1].token, Completed(), "late"), SettleStale)
    assert not (await b.renew(got[1].token)).held
    lost = fates(log)
    assert [lost[(f"p{i}", sub.id.name)] for i in range(4)] == [
        ["settle"],
        ["drop"],
        ["drop"],
        ["drop"],
    ]
    assert {e.attrs["reason"] for e in log.events("drop")} == {"purge"}
    obs = await b.observe_subscription(sub.id)
    assert isinstance(obs, Known)
    assert (obs.value.dropped, obs.value.pending, obs.value.leased) == (3, 0, 0)


async def test_a_deleted_message_and_a_deleted_subscription() -> None:
    b, ch, sub = await setup()
    outs = [await b.publish(make_envelope(ch.channel, f"p{i}"), deadline()) for i in range(3)]
    b.delete_message(ch.channel, outs[1].sequence)  # type: ignore[union-attr]
    b.delete_message(ch.channel, 999)  # not there: nothing happens
    got = await b.receive(sub.id, 8, 1 << 20, deadline())
    assert [d.envelope.publication_id for d in got] == ["p0", "p2"]
    b.delete_subscription(sub.id)
    with pytest.raises(NotFound):
        await b.observe_subscription(sub.id)
    with pytest.raises(NotFound):
        await b.settle(got[0].token, Completed(), "gone")
    again = await b.ensure_subscription(sub, "op-again")
    assert again.created
    obs = await b.observe_subscription(sub.id)
    assert isinstance(obs, Known) and (obs.value.pending, obs.value.dropped) == (2, 0)


async def test_a_receive_waiting_on_a_deleted_subscription_fails() -> None:
    b, _ch, sub = await setup()
    raised: list[BaseException] = []

    async def waiter() -> None:
        try:
            await b.receive(sub.id, 8, 1 << 20, deadline(60))
        except NotFound as exc:
            raised.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(waiter)
        await anyio.sleep(1)
        b.delete_subscription(sub.id)
    assert len(raised) == 1


async def test_a_restart_keeps_persistent_channels_and_loses_the_rest() -> None:
    log = ObservationLog()
    b, kept, sub = await setup(log=log, persistence=True, b_persistent=True)
    lost = make_channel("f", "r", "lost", "work", "limits")
    await b.ensure_channel(lost, "op-lost")
    gone_sub = make_subscription(lost.channel, "w")
    await b.ensure_subscription(gone_sub, "op-lost-sub")
    for spec in (kept, lost):
        await b.publish(make_envelope(spec.channel, "p1"), deadline())
    leased = await b.receive(sub.id, 1, 1 << 20, deadline())
    b.pause_acceptance(kept.channel)
    held: list[object] = []

    async def publish_held() -> None:
        held.append(await b.publish(make_envelope(kept.channel, "held"), deadline(5)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(publish_held)
        await anyio.sleep(1)
        b.restart_server()
    assert isinstance(held[0], PublicationUnknown)  # never stored: its deadline passed
    assert b.stored(kept.channel)[0].publication_id == "p1"
    assert [e.publication_id for e in b.stored(kept.channel)] == ["p1"]
    with pytest.raises(NotFound):
        await b.observe_channel(lost.channel)
    assert fates(log)[("p1", gone_sub.id.name)] == ["drop"]  # lost with its channel
    # the lease survived the restart: settling it is confirmed
    ans = await b.settle(leased[0].token, Completed(), "after")
    assert not isinstance(ans, SettleStale), ans
    await b.publish(make_envelope(kept.channel, "p2"), deadline())  # no longer paused
    assert [e.publication_id for e in b.stored(kept.channel)] == ["p1", "p2"]


async def test_a_core_only_restart_keeps_the_client_queues() -> None:
    b, ch, sub = await setup(b_core_only=True)
    await b.publish(make_envelope(ch.channel, "before"), deadline())
    b.restart_server()
    await b.publish(make_envelope(ch.channel, "after"), deadline())
    got = await b.receive(sub.id, 8, 1 << 20, deadline())
    assert [d.envelope.publication_id for d in got] == ["before", "after"]
