"""Issue #14's differential test, grown: each class is one kind of schedule production has
every day — several clients, a server crash, an administrator — run on the memory model and
on the NATS adapter (``_nats_differential``) and compared answer by answer, with the server's
own view read back by a raw client. Under asyncio and trio (conftest's ``anyio_backend``).
"""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from _nats_differential import (
    BIG,
    CoreWorld,
    ModelWorld,
    NatsWorld,
    Schedule,
    Token,
    World,
    compare,
    dump,
    run_model,
    run_nats,
    settle_cancellable,
)
from _servers_fixtures import need_binary
from videoflow_aio.contracts.messaging import (
    ChannelId,
    ChannelSpec,
    Completed,
    Retry,
    SettleConfirmed,
    SettleOutcome,
    SettleUnknown,
    SubscriptionId,
    SubscriptionSpec,
    Terminal,
    make_channel,
    make_envelope,
    make_subscription,
)
from videoflow_aio.testing.servers import ServerProcess, start_nats

pytestmark = [pytest.mark.anyio, pytest.mark.server, pytest.mark.vtime(False)]

AW = 1.2
"""Ack wait (s) of the subscriptions whose leases a schedule lets lapse (real time on NATS:
long enough for the steps before the lapse on a loaded machine)."""
LAPSE = AW + 0.6
"""A wait past an ack wait, with room for the server's timers."""
LONG = 10.0
"""Ack wait (s) where no lease is meant to lapse (the model's time is virtual: a NATS lease
that lapsed only because the machine was slow would be a false finding)."""
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


def _name(schedule: Schedule) -> str:
    return getattr(schedule, "__name__", "schedule")


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


async def three_clients_on(w: World, ch: ChannelSpec, sub: SubscriptionSpec, tag: str) -> None:
    """Client 0 creates ``ch`` and ``sub``, the truth watches, clients 1 and 2 join; client 0
    publishes ``<tag>0`` .. ``<tag>2``."""
    await two_clients(w, ch, sub)
    await w.ensure(2, ch, sub)
    for i in range(3):
        await w.publish(0, ch.channel, f"{tag}{i}")


async def three_clients(w: World) -> None:
    await three_clients_on(w, CH, SUB, "a")
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


async def reject_full(w: World) -> None:
    spec = make_channel("f", "r", "x", "work", "limits", max_msgs=2, overflow="reject")
    sub = make_subscription(spec.channel, "w", ack_wait_seconds=LONG)
    c = spec.channel
    await w.ensure(0, spec, sub)
    await w.ensure(1, spec, sub)
    await w.publish(0, c, "a0")
    await w.publish(1, c, "a1")
    await w.publish(0, c, "a2", label="full: client 0")
    await w.publish(1, c, "a1", label="a duplicate of a stored one, full")
    await w.publish(1, c, "a3", label="full: client 1")
    await w.observe_publication(0, c, "a2")
    for i in range(2):
        await w.observe(i, sub.id)
        await w.observe_channel(i, c)


CHP = make_channel("f", "r", "p", "work", "limits", max_msgs=4)
P0 = make_subscription(CHP.channel, "p0", ack_wait_seconds=LONG, partition=0)
P1 = make_subscription(CHP.channel, "p1", ack_wait_seconds=LONG, partition=1)
PALL = make_subscription(CHP.channel, "all", ack_wait_seconds=LONG)
PEOS = make_subscription(CHP.channel, "eos", ack_wait_seconds=LONG, kind="eos")


async def partitions(w: World) -> None:
    """Two publishers (keyed and not), evictions of what nobody received: each drop is
    attributed from the other publisher's index records, by a third client that published
    nothing."""
    c = CHP.channel
    subs = (P0, P1, PALL, PEOS)
    for i in range(3):
        await w.ensure(i, CHP, *subs)
    await w.publish(0, c, "k0a", partition_key="0")
    await w.publish(1, c, "n0")
    await w.publish(0, c, "k1a", partition_key="1")
    await w.publish(1, c, "e0", kind="eos")
    for t in await w.receive(2, P0.id):
        await w.settle(t, Completed())
    await w.publish(0, c, "k1b", partition_key="1")  # evicts k0a: settled by p0, not by all
    await w.publish(1, c, "n1")  # evicts n0: nobody received it
    for sub in subs:
        await w.observe(2, sub.id)
    await w.publish(1, c, "e1", kind="eos")  # evicts k1a
    await w.publish(0, c, "k0b", partition_key="0")  # evicts e0
    for sub in subs:
        await w.observe(2, sub.id)
        await w.observe(0, sub.id)
    for t in await w.receive(1, PALL.id):
        await w.settle(t, Completed())
    await w.observe(2, PALL.id)


# -- the administrator ------------------------------------------------------------------------


async def two_clients(w: World, ch: ChannelSpec, sub: SubscriptionSpec) -> ChannelId:
    """Clients 0 and 1 on ``ch`` and ``sub``, the raw watch following ``sub``."""
    await w.ensure(0, ch, sub)
    await w.watch(sub)
    await w.ensure(1, ch, sub)
    return ch.channel


CHK = make_channel("f", "r", "k", "work", "limits", persistence=True)
SUBD = make_subscription(CHK.channel, "d", ack_wait_seconds=LONG, max_deliver=3)
SUBE = make_subscription(CHK.channel, "e", ack_wait_seconds=LONG, kind="eos")


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
    c = await two_clients(w, CHK, SUBD)
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
    c = await two_clients(w, CHK, SUBD)
    for i in range(3):
        await w.publish(0, c, f"d{i}")
    old = await w.receive(1, SUBD.id, n=2)
    await w.settle(old[0], Terminal("bad"))
    await w.observe(1, SUBD.id, label="one dead letter")
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


async def purge_two_receivers(w: World) -> None:
    c = await two_clients(w, CHK, SUBD)
    for i in range(4):
        await w.publish(0, c, f"d{i}")
    a = await w.receive(0, SUBD.id, n=1)
    b = await w.receive(1, SUBD.id, n=2)
    await w.settle(b[0], Completed())
    await w.purge(c)  # d0 leased by 0, d2 by 1, d3 undelivered; d1 settled
    for i in range(2):
        await w.observe(i, SUBD.id)
    await w.settle(a[0], Completed(), label="settle a purged lease, client 0")
    await w.renew(b[1], label="renew a purged lease, client 1")
    for i in range(2):
        await w.observe(i, SUBD.id)
    await w.publish(1, c, "after")
    got = await w.receive(0, SUBD.id)
    for t in got:
        await w.settle(t, Completed())
    for i in range(2):
        await w.observe(i, SUBD.id)
    await w.check_truth(1, SUBD, "after the purge")


# -- a server crash: kill -9 and a restart on the same store ----------------------------------

CHR = make_channel("f", "r", "r", "work", "limits", max_msgs=6, persistence=True)
SUBR = make_subscription(CHR.channel, "w", ack_wait_seconds=3.0, max_deliver=3)
RETRY_AFTER_CRASH = 6.0


async def restart_points(w: World) -> None:
    c, sid = CHR.channel, SUBR.id
    await w.ensure(0, CHR, SUBR)
    await w.watch(SUBR)
    await w.ensure(1, CHR, SUBR)
    for i in range(4):
        await w.publish(0, c, f"p{i}")
    await w.restart()  # after publish
    await w.observe(1, sid)
    got = await w.receive(1, sid, n=3)
    await w.settle(got[0], Completed())
    await w.restart()  # after receive (p1, p2 leased) and after a settle (p0)
    await w.observe(0, sid)
    await w.settle(got[1], Completed())
    await w.settle(got[2], Retry())
    await w.restart()  # after a Retry: the server keeps its redelivery queue in memory only,
    await w.observe(0, sid)  # so the message comes back when its lease's ack wait runs out
    more = await w.receive_until(0, sid, 2, within=RETRY_AFTER_CRASH)
    for t in more:
        await w.settle(t, Completed())
    await w.publish(1, c, "p4", label="publish after restarts")
    for i in range(2):
        await w.observe(i, sid)
    await w.check_truth(0, SUBR, "after the restarts")


async def restart_dedup(w: World) -> None:
    spec = make_channel("f", "r", "q", "work", "limits", persistence=True, dedup_window_seconds=30)
    c = spec.channel
    await w.ensure(0, spec)
    await w.ensure(1, spec)
    await w.publish(0, c, "x")
    await w.restart()
    await w.publish(1, c, "x", label="the same id after a restart, another client")
    await w.observe_publication(0, c, "x")
    await w.observe_channel(1, c)


async def restart_memory_channel(w: World) -> None:
    """A channel without persistence is gone after a restart, for every client; created
    again, it starts over (sequences included) and no client counts from the old one."""
    spec = make_channel("f", "r", "m", "work", "limits", max_msgs=2)
    sub = make_subscription(spec.channel, "w", ack_wait_seconds=LONG)
    c = spec.channel
    await w.ensure(0, spec, sub)
    await w.ensure(1, spec, sub)
    for i in range(3):
        await w.publish(1, c, f"a{i}")
    await w.observe(0, sub.id)
    await w.restart()
    await w.observe(1, sub.id, label="gone after the restart")
    await w.observe_channel(0, c, label="the channel too")
    await w.ensure(0, spec, sub)
    for i in range(3):
        await w.publish(0, c, f"b{i}", kind="eos")  # evicts b0, of no interest to sub
    for i in range(2):
        await w.observe(i, sub.id)


# -- the last attempts: Retry with a delay, leases that lapse, with several clients ------------

SUBF = make_subscription(C, "f", ack_wait_seconds=AW, max_deliver=2)


async def final_attempts(w: World) -> None:
    ch = make_channel("f", "r", "n", "work", "limits", persistence=True)
    await three_clients_on(w, ch, SUBF, "p")
    a = await w.receive(1, SUBF.id, n=2)  # p0, p1, attempt 1
    await w.settle(a[0], Retry(0.2))
    await w.settle(a[1], Retry(0.0))
    await w.sleep(0.4)
    b = await w.receive(2, SUBF.id, n=2)  # p0, p1 again, attempt 2: the final one
    await w.settle(b[0], Retry(5.0), label="a delayed Retry on the final attempt")
    for i in range(3):
        await w.observe(i, SUBF.id, label=f"observe after a final Retry by {i}")
    await w.settled()
    for i in range(3):
        await w.observe(i, SUBF.id, label=f"observe, the server decided, by {i}")
    await w.sleep(LAPSE)  # b[1] (final attempt of p1) lapses at client 2
    await w.settled()
    await w.settled()
    for i in range(3):
        await w.observe(i, SUBF.id, label=f"observe after a final lease lapsed, by {i}")
    c = await w.receive(0, SUBF.id)  # p2 only: p0, p1 are unresolved
    await w.settle(b[1], Completed(), label="settle a lapsed final lease")
    for t in c:
        await w.settle(t, Terminal("bad"))
    for i in range(3):
        await w.observe(i, SUBF.id)
    await w.check_truth(1, SUBF, "after the final attempts")


# -- interest retention: required subscriptions with another one beside them ------------------


def interest_channel(node: str, required: tuple[str, ...], **kw: Any) -> ChannelSpec:
    cid = make_channel("f", "r", node, "work", "interest").channel
    subs = [SubscriptionId(cid, c) for c in required]
    return make_channel("f", "r", node, "work", "interest", required=subs, **kw)


CHI = interest_channel("i", ("a", "b"), max_msgs=3)
CI = CHI.channel
SUBA = make_subscription(CI, "a", ack_wait_seconds=LONG)
SUBB = make_subscription(CI, "b", ack_wait_seconds=LONG)
SUBX = make_subscription(CI, "x", ack_wait_seconds=LONG)  # not required


async def interest(w: World) -> None:
    await w.ensure(0, CHI)
    await w.publish(0, CI, "p0", label="published before any subscription is ensured")
    await w.ensure(0, SUBA, SUBB, SUBX)
    await w.watch(SUBA)
    await w.ensure(1, CHI, SUBA, SUBB)
    for i in range(1, 3):
        await w.publish(1, CI, f"p{i}")
    for t in await w.receive(0, SUBA.id):
        await w.settle(t, Completed())
    for t in await w.receive(1, SUBB.id, n=1):
        await w.settle(t, Completed())
    for i in range(2):
        await w.observe(i, SUBA.id)
        await w.observe(i, SUBB.id)
    for i in range(3, 6):
        await w.publish(0, CI, f"p{i}")  # evicts what b has not settled
    for i in range(2):
        await w.observe(i, SUBA.id)
        await w.observe(i, SUBB.id)
    for t in await w.receive(1, SUBB.id):
        await w.settle(t, Completed())
    await w.observe(0, SUBB.id)
    await w.check_truth(0, SUBA, "a after the evictions")


CHJ = interest_channel("j", ("d", "e"))
CJ = CHJ.channel
SUBJD = make_subscription(CJ, "d", ack_wait_seconds=LONG)
SUBJE = make_subscription(CJ, "e", ack_wait_seconds=LONG, kind="eos")


async def interest_kinds(w: World) -> None:
    """Required subscriptions of two kinds, messages published before either is ensured:
    once each is ensured it holds only its own kind (the placeholder held every kind)."""
    await w.ensure(0, CHJ)
    await w.publish(0, CJ, "d0")
    await w.publish(0, CJ, "e0", kind="eos")
    await w.ensure(0, SUBJD, SUBJE)
    await w.ensure(1, CHJ, SUBJD, SUBJE)
    for t in await w.receive(1, SUBJD.id):
        await w.settle(t, Completed())
    await w.observe_channel(0, CJ, label="the data message settled by its only reader")
    for t in await w.receive(0, SUBJE.id):
        await w.settle(t, Completed())
    await w.observe_channel(1, CJ, label="everything settled")
    for sub in (SUBJD, SUBJE):
        await w.observe(1, sub.id)


# -- dedup windows across clients, observe_publication repeated -------------------------------


async def dedup_windows(w: World) -> None:
    none = make_channel("f", "r", "z", "work", "limits", dedup_window_seconds=0)
    small = make_channel("f", "r", "s", "work", "limits", dedup_window_seconds=1)
    for i in range(2):
        await w.ensure(i, none, small)
    for i in range(2):
        await w.publish(i, none.channel, "same", label=f"window 0, client {i}")
        await w.publish(i, small.channel, "same", label=f"window 1 s, client {i}")
    await w.observe_channel(1, none.channel)
    await w.observe_channel(1, small.channel)
    for _ in range(3):
        await w.observe_publication(0, small.channel, "same")
        await w.observe_publication(1, small.channel, "same")
    await w.sleep(1.5)
    await w.publish(1, small.channel, "same", label="after the window")
    await w.observe_publication(1, small.channel, "same")
    await w.observe_channel(0, small.channel)


# -- cancellation at every await (NATS only: the model has no awaits to cancel at) ------------

CHC = make_channel("f", "r", "c", "work", "limits", max_msgs=6)
SUBC = make_subscription(CHC.channel, "w", ack_wait_seconds=AW, max_deliver=3, item_credit=64)
SEEDS = [int(s) for s in os.environ.get("VIDEOFLOW_DIFF_SEEDS", "1,2,3").split(",")]
TINY = (0.0, 0.0003, 0.001, 0.002, 0.004, 0.008, 5.0)
"""Cancel-scope deadlines (s): 0 cancels at the first await, 5 s lets the call finish."""


async def cancelled_everywhere(w: World, seed: int) -> None:
    """Random publishes, receives, settles and renewals by two clients, each under a cancel
    scope of a tiny deadline; then everything is received and settled without one. Every
    answer given must be true (the raw watch checks each settle), and the counts at the end
    are the server's."""
    rnd = random.Random(seed)
    c, sid = CHC.channel, SUBC.id
    await w.ensure(0, CHC, SUBC)
    await w.watch(SUBC)
    await w.ensure(1, CHC, SUBC)
    held: list[Token] = []
    for step in range(60):
        i = rnd.randrange(2)
        b = await w.client(i)
        within = rnd.choice(TINY)
        act = rnd.choice(("publish", "publish", "receive", "settle", "settle", "renew"))
        if act == "publish":
            with anyio.move_on_after(within):
                await b.publish(make_envelope(c, f"p{seed}-{step}"), w.dl(1.0))
        elif act == "receive":
            with anyio.move_on_after(within):
                got = await b.receive(sid, rnd.randint(1, 3), BIG, w.dl(0.05))
                held += [Token(d, i) for d in got]
        elif held:
            t = held.pop(rnd.randrange(len(held)))
            if act == "renew":
                with anyio.move_on_after(within) as scope:
                    lease = await (await w.client(t.client)).renew(t.delivery.token)
                if not scope.cancelled_caught:
                    w.note(t.delivery, "renew", lease)
                    held.append(t)
                continue
            outcome = rnd.choice((Completed(), Completed(), Retry(0.0), Terminal("x")))
            ans = await settle_cancellable(w, t, outcome, f"s{step}", within)
            if ans is None or isinstance(ans, SettleUnknown):
                again = await settle_cancellable(w, t, outcome, f"s{step}", 5.0)  # retried
                assert (
                    not isinstance(again, SettleConfirmed) or again.sequence == t.delivery.sequence
                )
    await w.sleep(LAPSE)  # every lease lapses
    for _round in range(20):
        got = []
        for i in range(2):
            got += [Token(d, i) for d in await (await w.client(i)).receive(sid, 64, BIG, w.dl(0.2))]
        for t in got:
            await w.settle(t, Completed(), f"end-{t.delivery.sequence}-{t.delivery.attempt}")
        if not got:
            break
    await w.settled()
    for i in range(2):
        await w.check_truth(i, SUBC, f"client {i} after cancellations", every=True)


class TestCancellation:
    @pytest.mark.parametrize("seed", SEEDS)
    async def test_cancelled_at_every_await(self, srv: ServerProcess, seed: int) -> None:
        w = NatsWorld(srv, prefix())
        w = await run_nats(lambda w: cancelled_everywhere(w, seed), w)
        assert not w.problems, "\n".join(w.problems)


# -- an administrator deletes the whole stream; it is created again --------------------------

CHS = make_channel("f", "r", "s", "work", "limits", max_msgs=3)
SUBSD = make_subscription(CHS.channel, "d", ack_wait_seconds=LONG)
SUBSE = make_subscription(CHS.channel, "e", ack_wait_seconds=LONG, kind="eos")


async def stream_deleted(w: NatsWorld) -> None:
    """Client 1 published into the first stream; after the administrator deleted it and
    client 0 created it again, eos messages published by a raw client (no index record)
    evict each other. Client 1 must not attribute them from what it published before."""
    c = CHS.channel
    await w.ensure(0, CHS, SUBSD, SUBSE)
    await w.ensure(1, CHS, SUBSD, SUBSE)
    for i in range(3):
        await w.publish(1, c, f"d{i}")
    await w.observe(1, SUBSD.id)
    await w.delete_channel(c)
    await w.ensure(0, CHS, SUBSD, SUBSE)
    await w.watch(SUBSD)
    assert w.raw is not None
    base = f"{w.prefix[1]}.{c.flow_id}.{c.run_id}.{c.node}"
    for i in range(4):  # e0 is evicted: it was not data, so nobody lost a data message
        await w.raw.request(f"{base}.eos.n", f"e{i}".encode())
    for i in range(2):
        await w.check_truth(i, SUBSD, f"data subscription by client {i}", every=False)


class TestStreamDeleted:
    async def test_a_stream_deleted_and_created_again(self, srv: ServerProcess) -> None:
        w = NatsWorld(srv, prefix())
        await run_nats(stream_deleted, w)  # type: ignore[arg-type]  # a NatsWorld schedule
        assert not w.problems, "\n".join(w.problems)


# -- Core NATS: two clients and a restart ------------------------------------------------------

CHN = make_channel("f", "r", "core", "work", "limits")
CA = make_subscription(CHN.channel, "a", competing=False)
CB = make_subscription(CHN.channel, "b", competing=False)
CC = make_subscription(CHN.channel, "c", competing=True)


async def core_two_clients(w: World) -> None:
    c = CHN.channel
    await w.ensure(0, CHN, CA, CC)
    await w.ensure(1, CHN, CB, CC)
    for i in range(3):
        await w.publish(0, c, f"x{i}")
    for i in range(2):
        await w.publish(1, c, f"y{i}")
    await w.settled()  # routed to the other connection: it arrives as it arrives
    await w.observe(0, CA.id)
    await w.observe(1, CB.id)
    await w.receive(0, CA.id)
    await w.receive(1, CB.id, n=2)
    await w.restart()
    await w.observe(1, CB.id, label="what was queued stays queued")
    await w.publish(1, c, "z0", label="publish after the restart")
    await w.settled()
    await w.receive(1, CB.id)
    await w.receive(0, CA.id)
    await w.pending_total(CC.id, "the competing subscription, over both clients")


class TestCoreNats:
    async def test_two_clients_and_a_restart(self, own_srv: ServerProcess, tmp_path: Path) -> None:
        model = await run_model(core_two_clients, core_only=True)
        real = CoreWorld(own_srv, prefix())
        real.store = tmp_path / "js"
        real = await run_nats(core_two_clients, real)
        problems = compare(model, real) + real.problems
        assert not problems, "\n".join(problems) + "\n" + dump(model, real)


# -- the schedules compared with the model, one class per kind ---------------------------------


# -- issue #25: the edges ---------------------------------------------------------------------


def _aged(look: bool) -> Schedule:
    async def schedule(w: World) -> None:
        """max_age passes under live leases (ack wait LONG): renew, settle and observe, with
        or without another client reading the subscription in between."""
        spec = make_channel("f", "r", "age", "work", "limits", max_age_seconds=AW)
        sub = make_subscription(spec.channel, "w", ack_wait_seconds=LONG)
        await two_clients(w, spec, sub)
        for i in range(2):
            await w.publish(0, spec.channel, f"m{i}")
        got = await w.receive(0, sub.id, n=2)
        await w.sleep(LAPSE)  # both aged out, the leases still live
        if look:
            await w.observe(1, sub.id)
            await w.observe_channel(1, spec.channel)
        await w.renew(got[0], label="renew an aged-out lease")
        await w.settle(got[0], Completed(), label="settle an aged-out lease")
        await w.settle(got[1], Terminal("bad"), label="a Terminal of an aged-out lease")
        for i in range(2):
            await w.observe(i, sub.id)
        await w.observe_channel(0, spec.channel)
        await w.check_truth(0, sub, "after the settles")

    schedule.__name__ = f"aged_under_lease_{'read' if look else 'unread'}"
    return schedule


async def lost_replies(w: World) -> None:
    """Settles and a renewal applied whose answers were lost, retried with the same ids before
    and after the lease deadline (two clients watching)."""
    spec = make_channel("f", "r", "lost", "work", "limits")
    sub = make_subscription(spec.channel, "w", ack_wait_seconds=AW)
    await two_clients(w, spec, sub)
    for i in range(4):
        await w.publish(0, spec.channel, f"l{i}")
    got = await w.receive(0, sub.id, n=4)
    await w.lose_reply(0, sub.id)
    await w.renew(got[3], label="a renewal whose reply was lost")
    await w.renew(got[3], label="renewed again")
    first: tuple[SettleOutcome, ...] = (Completed(), Terminal("bad"), Completed())
    for t, outcome in zip(got[:3], first, strict=True):
        await w.lose_reply(0, sub.id)
        await w.settle(t, outcome, sid=f"x-{t.delivery.sequence}", label="reply lost")
    await w.settle(got[0], Completed(), sid=f"x-{got[0].delivery.sequence}", label="retry, live")
    await w.sleep(LAPSE)  # the lease deadlines pass
    for t, outcome in zip(got[1:3], first[1:], strict=True):
        sid = f"x-{t.delivery.sequence}"
        await w.settle(t, outcome, sid=sid, label="retry past the deadline")
    await w.settle(got[3], Completed(), label="the renewed one, lapsed since")
    for i in range(2):
        await w.observe(i, sub.id)
    await w.observe_channel(1, spec.channel)
    await w.check_truth(0, sub, "after the retries")


class TestEdges:
    """Issue #25: max_age under a lease, read or not; settles and a renewal whose replies
    were lost, retried before and after the lease deadline."""

    @pytest.mark.parametrize("schedule", [_aged(False), _aged(True), lost_replies], ids=_name)
    async def test_schedule(self, srv: ServerProcess, schedule: Schedule) -> None:
        await differential(schedule, srv)


class TestManyClients:
    """Several clients of one channel and subscription."""

    @pytest.mark.parametrize("schedule", [reject_full, three_clients, partitions], ids=_name)
    async def test_schedule(self, srv: ServerProcess, schedule: Schedule) -> None:
        await differential(schedule, srv)


class TestAdministrator:
    """An administrator acting out of band."""

    @pytest.mark.parametrize(
        "schedule",
        [purge_two_receivers, purge_by_kind, delete_messages, delete_consumer],
        ids=_name,
    )
    async def test_schedule(self, srv: ServerProcess, schedule: Schedule) -> None:
        await differential(schedule, srv)


class TestRestart:
    """kill -9 and a restart on the same store."""

    @pytest.mark.parametrize(
        "schedule", [restart_memory_channel, restart_points, restart_dedup], ids=_name
    )
    async def test_schedule(
        self, own_srv: ServerProcess, tmp_path: Path, schedule: Schedule
    ) -> None:
        await differential(schedule, own_srv, store=tmp_path / "js")


class TestFinalAttempts:
    """Retry with delays and leases that lapse at the last attempts."""

    @pytest.mark.parametrize("schedule", [final_attempts], ids=_name)
    async def test_schedule(self, srv: ServerProcess, schedule: Schedule) -> None:
        await differential(schedule, srv)


class TestInterest:
    """Interest retention with required subscriptions."""

    @pytest.mark.parametrize("schedule", [interest_kinds, interest], ids=_name)
    async def test_schedule(self, srv: ServerProcess, schedule: Schedule) -> None:
        await differential(schedule, srv)


class TestDedup:
    """Dedup windows across clients; observe_publication repeated."""

    @pytest.mark.parametrize("schedule", [dedup_windows], ids=_name)
    async def test_schedule(self, srv: ServerProcess, schedule: Schedule) -> None:
        await differential(schedule, srv, dedup_window_seconds=60)


__all__ = ["SubscriptionId", "Terminal"]
