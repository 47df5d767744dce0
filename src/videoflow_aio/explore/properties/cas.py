"""PROP-RTS-CAS-ONE-WINNER: rounds of contenders racing compare-and-swap on one key of the
runtime store model; in every round exactly one contender that read the current version
wins (none only if every contender crashed), and the key ends holding the winner's value.

Injected faults pause or crash contenders between the store's read and its write
(``runtime_store.cas.read.after``), which is where a store that does not re-check loses.
"""

from __future__ import annotations

import random

import anyio

from ... import faults
from ...memory.runtime_store import MemoryRuntimeStore
from .._program import Context, program

KEY = "election/leader"


async def _contend(
    store: MemoryRuntimeStore,
    version: str | None,
    value: bytes,
    rng: random.Random,
    wins: list[bytes],
    crashed: list[bytes],
) -> None:
    await anyio.sleep(rng.choice((0.0, 0.0, 0.001)))
    try:
        if await store.cas(KEY, version, value):
            wins.append(value)
    except faults.SimulatedCrash:
        crashed.append(value)


@program(
    "PROP-RTS-CAS-ONE-WINNER",
    "runtime store: in every round of contenders racing compare-and-swap from one version, "
    "exactly one wins",
)
async def cas_one_winner(ctx: Context) -> None:
    rng = ctx.rng
    store = MemoryRuntimeStore()
    for round_ in range(rng.randint(2, 6)):
        _, version = await store.get(KEY)
        wins: list[bytes] = []
        crashed: list[bytes] = []
        values = [f"r{round_}-c{n}".encode() for n in range(rng.randint(2, 5))]
        async with anyio.create_task_group() as tg:
            for value in values:
                tg.start_soon(
                    _contend, store, version, value, random.Random(rng.getrandbits(64)), wins,
                    crashed,
                )  # fmt: skip
        ctx.log.record("cas_round", subject=KEY, ident=str(round_), wins=len(wins))
        assert len(wins) <= 1, f"round {round_}: {len(wins)} winners from one version: {wins}"
        if len(crashed) < len(values):
            assert wins, f"round {round_}: no winner, though not every contender crashed"
        held, _ = await store.get(KEY)
        if wins:
            assert held == wins[0], f"round {round_}: the key holds {held!r}, not the winner's"


# programs register themselves by ID (``program``) and run through the registry: none is
# imported by name, so the module exports nothing
__all__: list[str] = []
