"""MSG cases, routing (MSG-027 to MSG-031): core-only mode; subjects by kind,
fan-out, competing consumers, partitions.

Conventions in :mod:`._msg_scenarios`; IDs are stable.
"""

from __future__ import annotations

from ...contracts.messaging import (
    Accepted,
)
from .._case import case
from .._harness import MessagingHarness as Harness
from ._msg_scenarios import (
    M,
    _chan_obs,
    _pids,
    _publish,
    _recv,
    _sub,
    _sub_obs,
    _with_channel,
    _with_profile,
)

# -- core-only mode -----------------------------------------------------------------------


@case(
    "MSG-027",
    "core-only: no retention, nothing for a subscriber attached after the publish",
    contract=M,
    needs=("core_only",),
)
async def core_no_retention(h: Harness) -> None:
    b, ch = await _with_profile(h, "core_only")
    early = await _sub(h, b, ch.channel, "early")
    out = await _publish(h, b, ch.channel, "p1")
    h.check(isinstance(out, Accepted), f"publish: {out!r}")
    late = await _sub(h, b, ch.channel, "late")
    h.equal(_pids(await _recv(h, b, early.id)), ["p1"], "attached subscriber gets it")
    h.equal(await _recv(h, b, late.id), [], "late subscriber gets nothing")
    h.equal((await _chan_obs(h, b, ch.channel)).messages, 0, "nothing retained")


@case(
    "MSG-028",
    "core-only: a slow consumer drops past client_queue_limit",
    contract=M,
    needs=("core_only",),
)
async def core_slow_consumer(h: Harness) -> None:
    b, ch = await _with_profile(h, "core_only", client_queue_limit=4)
    sub = await _sub(h, b, ch.channel)
    for i in range(10):
        await _publish(h, b, ch.channel, f"p{i}")
    got = await _recv(h, b, sub.id, n=64)
    h.equal(_pids(got), [f"p{i}" for i in range(4)], "the queue holds the first four")
    h.equal((await _sub_obs(h, b, sub.id)).dropped, 6, "six slow-consumer drops")


# -- subjects, fan-out, partitions --------------------------------------------------------


@case(
    "MSG-029",
    "kind filtering: a data subscription never sees EOS, an EOS one never data",
    contract=M,
)
async def kinds(h: Harness) -> None:
    b, ch = await _with_channel(h)
    data = await _sub(h, b, ch.channel, "d", kind="data")
    eos = await _sub(h, b, ch.channel, "e", kind="eos")
    await _publish(h, b, ch.channel, "d1")
    await _publish(h, b, ch.channel, "end", kind="eos")
    await _publish(h, b, ch.channel, "d2")
    h.equal(_pids(await _recv(h, b, data.id)), ["d1", "d2"], "data only")
    h.equal(_pids(await _recv(h, b, eos.id)), ["end"], "eos only")
    h.equal((await _sub_obs(h, b, eos.id)).pending, 0, "eos pending counts eos only")


@case(
    "MSG-030",
    "competing replicas split a subscription; separate subscriptions each see all",
    contract=M,
)
async def competing(h: Harness) -> None:
    b, ch = await _with_channel(h)
    work = await _sub(h, b, ch.channel, "work", competing=True, item_credit=64)
    audit = await _sub(h, b, ch.channel, "audit", competing=False, item_credit=64)
    for i in range(6):
        await _publish(h, b, ch.channel, f"p{i}")
    r1 = await _recv(h, b, work.id, n=3)
    r2 = await _recv(h, b, work.id, n=3)
    h.equal(sorted(_pids(r1) + _pids(r2)), [f"p{i}" for i in range(6)], "replicas split")
    h.check(not set(_pids(r1)) & set(_pids(r2)), "no message to two replicas")
    h.equal(_pids(await _recv(h, b, audit.id)), [f"p{i}" for i in range(6)], "fan-out")


@case("MSG-031", "partitions: a partition subscription sees only its partition", contract=M)
async def partitions(h: Harness) -> None:
    b, ch = await _with_channel(h)
    p0 = await _sub(h, b, ch.channel, "p0", partition=0)
    p1 = await _sub(h, b, ch.channel, "p1", partition=1)
    every = await _sub(h, b, ch.channel, "all")
    for i in range(4):
        await _publish(h, b, ch.channel, f"m{i}", partition_key=str(i % 2))
    h.equal(_pids(await _recv(h, b, p0.id)), ["m0", "m2"], "partition 0")
    h.equal(_pids(await _recv(h, b, p1.id)), ["m1", "m3"], "partition 1")
    h.equal(len(await _recv(h, b, every.id)), 4, "an unpartitioned subscription sees all")


# cases register themselves by ID (``case``) and run through the registry: none is imported by
# name, so the module exports nothing
__all__: list[str] = []
