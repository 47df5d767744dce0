"""Issue #14's differential test, grown: each class is one kind of schedule production has
every day — several clients, a server crash, an administrator — run on the memory model and
on the NATS adapter (``_nats_differential``) and compared answer by answer, with the server's
own view read back by a raw client. Under asyncio and trio (conftest's ``anyio_backend``).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _nats_differential import (
    ModelWorld,
    NatsWorld,
    Schedule,
    World,
    compare,
    dump,
    run_model,
    run_nats,
)
from _servers_fixtures import need_binary
from videoflow_aio.contracts.messaging import (
    Completed,
    Retry,
    SubscriptionId,
    Terminal,
    make_channel,
    make_subscription,
)
from videoflow_aio.testing.servers import ServerProcess, start_nats

pytestmark = [pytest.mark.anyio, pytest.mark.server, pytest.mark.vtime(False)]

AW = 0.6
"""Ack wait (s) of the schedules' subscriptions: short, real time on NATS."""
LAPSE = AW + 0.5
"""A wait past an ack wait, with room for the server's timers."""
_n = itertools.count(1)


def prefix() -> tuple[str, str]:
    i = next(_n)
    return f"D{os.getpid()}x{i}", f"d{os.getpid()}x{i}"


@pytest.fixture
def srv(nats_srv: ServerProcess) -> ServerProcess:
    return nats_srv


@pytest.fixture
def own_srv(tmp_path: Path) -> Iterator[ServerProcess]:
    """A server of the test's own, with its store kept across a kill -9 (restart schedules)."""
    need_binary("nats-server")
    box: list[ServerProcess] = [start_nats(data_dir=tmp_path / "js")]
    yield box[0]
    box[0].stop()


async def differential(
    schedule: Schedule, srv: ServerProcess, store: Path | None = None, **options: Any
) -> tuple[ModelWorld, NatsWorld]:
    """Run ``schedule`` on the model and on NATS; fail on any untruthful NATS answer."""
    model = await run_model(schedule, **options)
    real = NatsWorld(srv, prefix(), **options)
    real.store = store
    real = await run_nats(schedule, real)
    problems = compare(model, real) + real.problems
    if os.environ.get("VIDEOFLOW_DIFF_DUMP"):
        print(dump(model, real), *real.unknowns, sep="\n")
    assert not problems, "\n".join(problems) + "\n" + dump(model, real)
    return model, real


# -- many clients on one subscription, with evictions ---------------------------------------

CH = make_channel("f", "r", "n", "work", "limits", max_msgs=4, persistence=True)
SUB = make_subscription(CH.channel, "w", ack_wait_seconds=AW, max_deliver=3, item_credit=16)
SID = SUB.id
C = CH.channel


async def three_clients(w: World) -> None:
    await w.ensure(0, CH, SUB)
    await w.watch(SUB)
    await w.ensure(1, CH, SUB)
    await w.ensure(2, CH, SUB)
    for i in range(3):
        await w.publish(0, C, f"a{i}")
    r1 = await w.receive(1, SID, n=2)
    r2 = await w.receive(2, SID, n=1)
    await w.settle(r1[0], Completed())
    for i in range(3):
        await w.observe(i, SID)
    for i in range(3):
        await w.publish(0, C, f"b{i}")  # evicts a0 (settled) and a1 (leased by 1)
    for i in range(3):
        await w.observe(i, SID)
    await w.settle(r1[1], Completed(), label="settle an evicted lease")
    await w.settle(r2[0], Completed())
    got = await w.receive(0, SID, n=2)
    await w.settle(got[0], Completed())
    await w.settle(got[1], Retry())
    await w.receive(1, SID, n=1)  # the retried one, attempt 2, left to lapse
    for i in range(3):
        await w.observe(i, SID)
    await w.sleep(LAPSE)
    await w.settled()
    for i in range(3):
        await w.publish(2, C, f"c{i}")  # evicts more: some settled, some lapsed
    for i in range(3):
        await w.observe(i, SID)
    await w.observe_channel(1, C)
    for t in await w.receive(2, SID):
        await w.settle(t, Completed())
    for i in range(3):
        await w.observe(i, SID)
    await w.check_truth(0, SUB, "after all settled")


class TestManyClients:
    async def test_three_clients_with_evictions(self, srv: ServerProcess) -> None:
        await differential(three_clients, srv)


# -- the administrator ------------------------------------------------------------------------

CHK = make_channel("f", "r", "k", "work", "limits", persistence=True)
SUBD = make_subscription(CHK.channel, "d", ack_wait_seconds=AW, max_deliver=3)
SUBE = make_subscription(CHK.channel, "e", ack_wait_seconds=AW, kind="eos")


async def purge_by_kind(w: World) -> None:
    c = CHK.channel
    await w.ensure(0, CHK, SUBD, SUBE)
    await w.watch(SUBD)
    await w.ensure(1, CHK, SUBD, SUBE)
    for i in range(3):
        await w.publish(0, c, f"d{i}")
    await w.publish(0, c, "e0", kind="eos")
    got = await w.receive(1, SUBD.id, n=2)
    await w.settle(got[0], Completed())
    await w.purge_kind(c, "data")  # d1 leased by client 1, d2 never delivered
    for i in range(2):
        await w.observe(i, SUBD.id)
        await w.observe(i, SUBE.id)
    await w.settle(got[1], Completed(), label="settle a purged lease")
    await w.observe(1, SUBD.id)
    await w.observe(0, SUBD.id)
    await w.receive(0, SUBE.id)
    await w.observe_channel(0, c)
    await w.publish(0, c, "d3")
    await w.receive(0, SUBD.id)
    await w.observe(0, SUBD.id)


async def delete_messages(w: World) -> None:
    c = CHK.channel
    await w.ensure(0, CHK, SUBD)
    await w.watch(SUBD)
    await w.ensure(1, CHK, SUBD)
    seqs = [(await w.publish(0, c, f"d{i}")).sequence for i in range(5)]
    got = await w.receive(1, SUBD.id, n=3)  # d0, d1, d2 leased by client 1
    await w.settle(got[0], Completed())
    await w.delete_message(c, seqs[0])  # delivered and settled
    await w.delete_message(c, seqs[1])  # leased by client 1
    await w.delete_message(c, seqs[4])  # never delivered
    for i in range(2):
        await w.observe(i, SUBD.id)
    await w.settle(got[1], Completed(), label="settle a deleted lease")
    await w.renew(got[2])
    await w.settle(got[2], Completed())
    await w.receive(0, SUBD.id)
    for i in range(2):
        await w.observe(i, SUBD.id)
    await w.check_truth(0, SUBD, "after deletes")


async def delete_consumer(w: World) -> None:
    c = CHK.channel
    await w.ensure(0, CHK, SUBD)
    await w.watch(SUBD)
    await w.ensure(1, CHK, SUBD)
    for i in range(3):
        await w.publish(0, c, f"d{i}")
    old = await w.receive(1, SUBD.id, n=2)
    await w.settle(old[0], Completed())
    await w.delete_subscription(SUBD.id)
    await w.observe(0, SUBD.id)
    await w.ensure(0, SUBD)
    fresh = await w.receive(0, SUBD.id, n=2)  # the new incarnation: d0, d1, attempt 1
    await w.settle(old[1], Completed(), label="settle an old incarnation's token")
    await w.observe(0, SUBD.id)
    await w.settle(fresh[1], Completed(), label="settle the new delivery")
    await w.settle(fresh[0], Completed())
    await w.observe(1, SUBD.id)
    await w.receive(1, SUBD.id)
    await w.observe(1, SUBD.id)
    await w.observe(0, SUBD.id)


class TestAdministrator:
    async def test_purge_by_kind(self, srv: ServerProcess) -> None:
        await differential(purge_by_kind, srv)

    async def test_delete_messages(self, srv: ServerProcess) -> None:
        await differential(delete_messages, srv)

    async def test_delete_a_consumer_then_ensure_it_again(self, srv: ServerProcess) -> None:
        await differential(delete_consumer, srv)


__all__ = ["SubscriptionId", "Terminal"]
