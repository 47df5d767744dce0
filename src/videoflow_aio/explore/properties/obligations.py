"""PROP-PAY-OBLIGATIONS: producers put objects under obligation sets while readers read,
renew and release them and a reconciler runs against the runtime's truth, all at once, on
the durable tier of the payload model. The accounting must hold in every schedule:

* a reader holding an unreleased obligation always reads the bytes (durable: an object
  under obligation is never expired or evicted);
* per object, each obligation is released with effect exactly once, the last of them
  ``reclaimed`` (remaining 0) and every earlier one ``released`` with one fewer left;
  repeats change nothing;
* when everything is done and the grace has passed, a reconcile with the truth leaves the
  store empty (nothing leaks — objects whose producer crashed included).
"""

from __future__ import annotations

import random
from collections.abc import Mapping

import anyio

from ... import faults
from ...contracts import Known
from ...contracts.errors import ConflictError
from ...contracts.payload import (
    ImmutablePayloadRef,
    ObligationLedger,
    PayloadBytes,
    RetentionContract,
)
from ...memory.payload import MemoryPayloadStore
from .._program import Context, program

GRACE = 5.0


class _Truth(ObligationLedger):
    """What the runtime knows: each key -> the obligations its readers still hold."""

    def __init__(self) -> None:
        self.required: dict[str, set[str]] = {}

    def required_obligations(self) -> Mapping[str, tuple[str, ...]]:
        return {key: tuple(sorted(ids)) for key, ids in self.required.items()}


class _Object:
    def __init__(self, key: str, readers: list[str]) -> None:
        self.key = key
        self.readers = readers
        self.ref: ImmutablePayloadRef | None = None
        self.ready = anyio.Event()  # set when the put ended (ref is None: it failed)
        self.releases: list[tuple[str, str, int]] = []  # (obligation, outcome, remaining)


async def _produce(
    store: MemoryPayloadStore, obj: _Object, truth: _Truth, rng: random.Random
) -> None:
    await anyio.sleep(rng.choice((0.0, 0.5, 1.0)))
    contract = RetentionContract(
        ttl_seconds=rng.choice((2.0, 10.0)),
        obligations=tuple(obj.readers),
        obligation_seconds=10_000.0,
    )
    try:
        obj.ref = await store.put(b"frame:" + obj.key.encode(), obj.key, contract)
    except (faults.SimulatedCrash, ConflictError):
        truth.required[obj.key] = set()  # nobody will read it: the runtime gives it up
    finally:
        obj.ready.set()


async def _read_and_release(
    store: MemoryPayloadStore, obj: _Object, oid: str, truth: _Truth, rng: random.Random
) -> None:
    await obj.ready.wait()
    ref = obj.ref
    if ref is None:
        return
    for _ in range(rng.randint(1, 3)):
        await anyio.sleep(rng.choice((0.0, 1.0, 4.0)))
        got = await store.read(ref, oid)
        assert isinstance(got, PayloadBytes), f"{oid} holds an obligation on {ref.key}: {got}"
        if rng.random() < 0.3:
            await store.renew_obligation(ref, oid, anyio.current_time() + 10_000.0)
    receipt = await store.release_obligation(ref, oid, "done")
    obj.releases.append((oid, receipt.outcome, receipt.remaining))
    truth.required[obj.key].discard(oid)
    if rng.random() < 0.3:  # a repeat must change nothing
        again = await store.release_obligation(ref, oid, "done-again")
        assert not again.changed, f"a repeated release of {oid} changed the store: {again}"


async def _reconcile(store: MemoryPayloadStore, truth: _Truth, rng: random.Random) -> None:
    for n in range(rng.randint(0, 4)):
        await anyio.sleep(rng.choice((0.5, 2.0, 6.0)))
        await store.reconcile(truth, f"pass-{n}")


@program(
    "PROP-PAY-OBLIGATIONS",
    "payload: obligation accounting holds under concurrent puts, reads, releases and "
    "reconciles; readers under obligation always read; nothing leaks",
)
async def obligations(ctx: Context) -> None:
    rng = ctx.rng
    store = MemoryPayloadStore(log=ctx.log, orphan_grace_seconds=GRACE)
    truth = _Truth()
    objects = [
        _Object(f"obj{k}", [f"r/{k}-{n}" for n in range(rng.randint(1, 3))])
        for k in range(rng.randint(2, 4))
    ]
    for obj in objects:
        truth.required[obj.key] = set(obj.readers)
    async with anyio.create_task_group() as tg:
        for obj in objects:
            tg.start_soon(_produce, store, obj, truth, random.Random(rng.getrandbits(64)))
            for oid in obj.readers:
                tg.start_soon(
                    _read_and_release, store, obj, oid, truth, random.Random(rng.getrandbits(64))
                )
        tg.start_soon(_reconcile, store, truth, random.Random(rng.getrandbits(64)))
    for obj in objects:
        if obj.ref is None:
            continue
        outcomes = [outcome for _, outcome, _ in obj.releases]
        expected = ["released"] * (len(obj.readers) - 1) + ["reclaimed"]
        assert outcomes == expected, f"{obj.key}: releases {obj.releases}, expected {expected}"
        remaining = [left for _, _, left in obj.releases]
        assert remaining == list(range(len(obj.readers) - 1, -1, -1)), (
            f"{obj.key}: remaining counts {remaining}"
        )
    await anyio.sleep(GRACE + 10.0)  # past the grace and every TTL
    await store.reconcile(truth, "final")
    inventory = await store.inventory()
    assert isinstance(inventory, Known), inventory
    assert not inventory.value, f"left behind: {[ref.key for ref in inventory.value]}"


# programs register themselves by ID (``program``) and run through the registry: none is
# imported by name, so the module exports nothing
__all__: list[str] = []
