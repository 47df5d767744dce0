"""PROP-MSG-NOTHING-LOST: publishers, competing consumers and an operator pausing acceptance,
deleting messages, purging and restarting the (persistent) server, all at once on one
channel of the messaging model; at the end every accepted publication has exactly one
recorded fate per subscription that sees it, or is still retained, and the model's own
counts agree with the log.

The seed draws the channel's profile and each task's plan (its own PRNG, drawn up front,
so the plans do not depend on the schedule); the schedule decides how they interleave.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import anyio

from ...contracts import Known
from ...contracts.messaging import (
    ChannelId,
    Completed,
    Kind,
    Retention,
    Retry,
    SettleOutcome,
    SubscriptionId,
    Terminal,
    make_channel,
    make_envelope,
    make_subscription,
)
from ...faults import SimulatedCrash
from ...memory.messaging import MemoryMessagingBackend
from ...observe import ObservationLog
from .._program import Context, program

SUBS: dict[str, Kind] = {"a": "data", "b": "data", "e": "eos"}  # two data subscriptions, one eos
KINDS: tuple[Kind, ...] = ("data", "data", "data", "eos")
RETENTIONS: tuple[Retention, ...] = ("limits", "interest")
ACK_WAIT = 5.0
OUTCOMES: Sequence[SettleOutcome] = (Completed(), Completed(), Retry(), Retry(1.0), Terminal("x"))


async def _publisher(b: MemoryMessagingBackend, cid: ChannelId, n: int, rng: random.Random) -> None:
    for i in range(rng.randint(3, 12)):
        await anyio.sleep(rng.choice((0.0, 0.0, 0.5, 1.0, 3.0)))
        pid = f"p{n}-{rng.randint(0, i)}"  # now and then a repeat: dedup
        kind = rng.choice(KINDS)
        await b.publish(make_envelope(cid, pid, kind=kind), anyio.current_time() + 1.0)


async def _consumer(
    b: MemoryMessagingBackend, sid: SubscriptionId, me: int, rng: random.Random
) -> None:
    n = 0
    for _ in range(rng.randint(2, 10)):
        now = anyio.current_time()
        got = await b.receive(sid, rng.randint(1, 3), 1 << 20, now + rng.choice((0.5, 2.0, 6.0)))
        for delivery in got:
            # sometimes past the lease: the settle is stale and the message comes back
            await anyio.sleep(rng.choice((0.0, 0.0, 1.0, ACK_WAIT)))
            n += 1
            await b.settle(delivery.token, rng.choice(OUTCOMES), f"{sid.name}-{me}-{n}")


async def _operator(b: MemoryMessagingBackend, cid: ChannelId, rng: random.Random) -> None:
    """Pauses and resumes acceptance, cancels held publications, and (an administrator,
    out of band) deletes a message or purges the channel."""
    for _ in range(rng.randint(0, 4)):
        await anyio.sleep(rng.choice((0.5, 2.0)))
        actions = ("pause", "resume", "cancel", "pause", "resume", "delete", "purge", "restart")
        action = rng.choice(actions)
        if action == "pause":
            b.pause_acceptance(cid)
        elif action == "resume":
            b.resume_acceptance(cid)
        elif action == "cancel":
            b.cancel_publication(cid, f"p{rng.randint(0, 2)}-{rng.randint(0, 3)}")
        elif action == "delete":
            b.delete_message(cid, rng.randint(1, 12))
        elif action == "purge":
            b.purge(cid)
        else:  # the channel is persistent: it keeps everything across a restart
            b.restart_server()
    b.resume_acceptance(cid)


async def _mortal(task: Callable[..., Awaitable[None]], *args: Any) -> None:
    """Run one client; an injected crash (``explore --faults``, e.g. at the messaging
    model's ``messaging.settle.after``: applied, reply lost) kills it as a process dies —
    the property must hold for what the others and the model recorded."""
    with contextlib.suppress(SimulatedCrash):
        await task(*args)


@program(
    "PROP-MSG-NOTHING-LOST",
    "messaging: every accepted publication ends in one recorded fate per subscription, or "
    "is still retained, under concurrent publishers, consumers and pauses",
)
async def nothing_lost(ctx: Context) -> None:
    rng = ctx.rng
    retention = rng.choice(RETENTIONS)
    cid = ChannelId("f", "r", "n")
    sids = {name: SubscriptionId(cid, name) for name in SUBS}
    b = MemoryMessagingBackend(log=ctx.log, dedup_window_seconds=1_000_000, persistent=True)
    spec = make_channel(
        "f", "r", "n", "work", retention,
        required=tuple(sids.values()) if retention == "interest" else (),
        max_msgs=rng.randint(2, 8), per_subject_limits=rng.random() < 0.5,
        dedup_window_seconds=1_000_000, persistence=True,
    )  # fmt: skip
    await b.ensure_channel(spec, "op")
    max_deliver = rng.choice((1, 2, 3, -1))
    for name, kind in SUBS.items():
        sub = make_subscription(
            cid, name, ack_wait_seconds=ACK_WAIT, max_deliver=max_deliver, item_credit=3,
            kind=kind,
        )  # fmt: skip
        await b.ensure_subscription(sub, "op")
    async with anyio.create_task_group() as tg:
        for n in range(rng.randint(1, 3)):
            tg.start_soon(_mortal, _publisher, b, cid, n, random.Random(rng.getrandbits(64)))
        for name in SUBS:
            for me in range(rng.randint(1, 2)):  # competing consumers
                seeded = random.Random(rng.getrandbits(64))
                tg.start_soon(_mortal, _consumer, b, sids[name], me, seeded)
        tg.start_soon(_mortal, _operator, b, cid, random.Random(rng.getrandbits(64)))
    b.resume_acceptance(cid)
    await check_nothing_lost(b, ctx.log, sids)


async def check_nothing_lost(
    b: MemoryMessagingBackend, log: ObservationLog, sids: dict[str, SubscriptionId]
) -> None:
    """Every accepted publication of a subscription's kind has at most one fate for it in the
    log; those without one are exactly what the model reports pending, leased or unresolved;
    its dropped and dead-lettered counts are the log's."""
    for sid in sids.values():  # timers are stamped and fire lazily: bring the log up to date
        await b.observe_subscription(sid)
    kind_of = {
        int(e.attrs["seq"]): e.attrs.get("msg_kind")  # type: ignore[arg-type]
        for e in log.events("publish")
        if not e.attrs.get("duplicate")
    }
    fates: dict[tuple[int, str], list[str]] = {}
    for e in log.events(("settle", "dead_letter", "drop", "unresolved")):
        names = e.attrs["subscriptions"] if e.kind == "drop" else [e.attrs["subscription"]]
        assert isinstance(names, list)
        for name in names:
            fates.setdefault((int(e.attrs["seq"]), str(name)), []).append(e.kind)  # type: ignore[arg-type]
    for name, sid in sids.items():
        open_pairs, unresolved, dropped, dead = _fates_of(name, sid.name, kind_of, fates)
        obs = await b.observe_subscription(sid)
        assert isinstance(obs, Known), obs
        v = obs.value
        counted = v.pending + v.leased + v.unresolved
        assert counted == open_pairs, (
            f"{name}: {open_pairs} accepted publication(s) without a fate, but the model "
            f"reports {v.pending} pending + {v.leased} leased + {v.unresolved} unresolved"
        )
        assert v.unresolved == unresolved, f"{name}: unresolved {v.unresolved} != {unresolved}"
        assert v.dropped == dropped, f"{name}: dropped {v.dropped} != log's {dropped}"
        assert v.dead_lettered == dead, f"{name}: dead-lettered {v.dead_lettered} != log's {dead}"


def _fates_of(
    name: str,
    sub: str,
    kind_of: Mapping[int, object],
    fates: dict[tuple[int, str], list[str]],
) -> tuple[int, int, int, int]:
    """``(without a fate, of those unresolved, dropped, dead-lettered)`` on one subscription,
    from the log; asserts no message has two fates and none of another kind has one."""
    open_pairs = unresolved = dropped = dead = 0
    for seq, kind in kind_of.items():
        events = fates.get((seq, sub), [])
        if kind != SUBS[name]:
            assert not events, f"seq {seq} has a fate on {name}, which never sees it"
            continue
        final = [k for k in events if k != "unresolved"]
        assert len(final) <= 1, f"seq {seq} on {name}: more than one fate {events}"
        if final == ["drop"]:
            dropped += 1
        elif final == ["dead_letter"]:
            dead += 1
        elif not final:
            open_pairs += 1
            unresolved += events == ["unresolved"]
    return open_pairs, unresolved, dropped, dead


# programs register themselves by ID (``program``) and run through the registry: none is
# imported by name, so the module exports nothing
__all__: list[str] = []
