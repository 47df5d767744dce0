"""RuntimeStore conformance cases (RTS-…): written once against the contract.

Every case opens its own store with ``await h.open()``. RTS-008 (restart) needs a durable store
and opens a second one on the same data with ``await h.open(reopen_of=store)``: a provider
whose ``capabilities().durable`` is true must honour that option (a new store object, as a
restarted process would open it: new connections, same root / server / namespace).
"""

from __future__ import annotations

import itertools
from typing import Any, Final

import anyio
import anyio.lowlevel

from ... import faults
from ...contracts.errors import ValidationError
from ...contracts.runtime_store import CAS_READ_AFTER, DELETE_READ_AFTER, RuntimeStore
from .._case import case
from .._harness import RuntimeStoreHarness as Harness  # every case here: runtime store
from .._harness import Skip

RTS: Final = "runtime_store"


async def _everything(store: RuntimeStore, logs: tuple[str, ...] = ()) -> tuple[object, ...]:
    """A comparable snapshot: every record and the given logs."""
    return (await store.scan(""), *[await store.log_entries(log) for log in logs])


@case("RTS-001", "CAS create-only: None creates once and never overwrites", contract=RTS)
async def cas_create_only(h: Harness) -> None:
    store = await h.open()
    h.equal(await store.get("job/1"), (None, None), "get of a key never written")
    h.equal(await store.cas("job/1", None, b"first"), True, "create with expected None")
    value, version = await store.get("job/1")
    h.equal(value, b"first", "value after create")
    h.check(isinstance(version, str) and version, f"version is a non-empty str: {version!r}")
    h.equal(await store.cas("job/1", None, b"second"), False, "second create of an existing key")
    h.equal(await store.get("job/1"), (b"first", version), "record after the refused create")


@case("RTS-002", "CAS conflict: a stale version loses and changes nothing", contract=RTS)
async def cas_conflict(h: Harness) -> None:
    store = await h.open()
    await store.cas("owner", None, b"a")
    _, v1 = await store.get("owner")
    h.equal(await store.cas("owner", v1, b"b"), True, "CAS with the current version")
    _, v2 = await store.get("owner")
    h.check(v2 != v1, f"a write gives a new version ({v1!r} -> {v2!r})")
    h.equal(await store.cas("owner", v1, b"c"), False, "CAS with the stale version")
    h.equal(await store.get("owner"), (b"b", v2), "record after the losing CAS")
    h.equal(await store.cas("owner", v2, b"d"), True, "CAS with the fresh version")
    h.equal((await store.get("owner"))[0], b"d", "value after the winning CAS")


@case("RTS-003", "delete needs the current version; None deletes unconditionally", contract=RTS)
async def delete_versions(h: Harness) -> None:
    store = await h.open()
    await store.cas("k", None, b"1")
    _, v1 = await store.get("k")
    await store.cas("k", v1, b"2")
    _, v2 = await store.get("k")
    h.equal(await store.delete("k", v1), False, "delete with a stale version")
    h.equal(await store.get("k"), (b"2", v2), "record after the refused delete")
    h.equal(await store.delete("k", v2), True, "delete with the current version")
    h.equal(await store.get("k"), (None, None), "get after delete")
    h.equal(await store.delete("k", v2), False, "second delete of the same version")
    h.equal(await store.delete("k", None), False, "unconditional delete of a missing key")
    h.equal(await store.delete("never", None), False, "delete of a key never written")
    await store.cas("u", None, b"x")
    h.equal(await store.delete("u", None), True, "unconditional delete of a live key")
    h.equal(await store.get("u"), (None, None), "get after the unconditional delete")
    h.equal(await store.scan(""), [], "nothing left")


@case(
    "RTS-004",
    "versions are never reused for a key, not even after delete and re-create",
    contract=RTS,
)
async def versions_never_reused(h: Harness) -> None:
    store = await h.open()
    seen: list[str | None] = []
    stale: list[str | None] = []
    for cycle in range(4):
        h.equal(await store.cas("cfg", None, b"c%d" % cycle), True, f"create in cycle {cycle}")
        _, version = await store.get("cfg")
        seen.append(version)
        for step in range(2):
            h.equal(await store.cas("cfg", version, b"u%d" % step), True, "update")
            _, version = await store.get("cfg")
            seen.append(version)
        for old in stale:
            h.equal(
                await store.cas("cfg", old, b"stale"), False, f"CAS with {old!r} of a past life"
            )
            h.equal(await store.delete("cfg", old), False, f"delete with {old!r} of a past life")
        h.equal(await store.delete("cfg", version), True, "delete")
        stale.extend(seen[-3:])
    h.equal(len(set(seen)), len(seen), f"distinct versions across delete/re-create: {seen}")


@case("RTS-005", "scan returns the live keys with a prefix, in key order", contract=RTS)
async def scan_prefix_order(h: Harness) -> None:
    store = await h.open()
    keys = ["a/b/c", "b", "a/b", "a0", "a/bc", "a/", "a/a", "ab", "a/b/d", "gone/x", "a/zz"]
    for i, key in enumerate(keys):
        await store.cas(key, None, b"v%d" % i)
    _, gone = await store.get("gone/x")
    await store.delete("gone/x", gone)
    expected = {k: b"v%d" % i for i, k in enumerate(keys) if k != "gone/x"}

    async def check(prefix: str) -> None:
        rows = await store.scan(prefix)
        want = sorted(k for k in expected if k.startswith(prefix))
        h.equal([r[0] for r in rows], want, f"keys of scan({prefix!r})")
        for key, value, version in rows:
            h.equal(value, expected[key], f"value of {key!r} in scan")
            h.equal(await store.get(key), (value, version), f"scan row of {key!r} matches get")

    for prefix in ("a/b", "a/", "a", "", "b", "gone/", "zzz"):
        await check(prefix)


@case("RTS-006", "append numbers grow per log; log_entries is oldest first", contract=RTS)
async def append_order(h: Harness) -> None:
    store = await h.open()
    h.equal(await store.log_entries("audit"), [], "an unknown log is empty")
    records = [b"one", b"", b"with\nnewline", bytes(range(256)), b"five"]
    numbers: list[int] = []
    other: list[int] = []
    for i, record in enumerate(records):
        numbers.append(await store.append("audit", record))
        other.append(await store.append("audit/other", b"o%d" % i))
    h.check(
        all(a < b for a, b in itertools.pairwise(numbers)),
        f"numbers grow: {numbers}",
    )
    h.check(all(a < b for a, b in itertools.pairwise(other)), f"numbers grow: {other}")
    h.equal(await store.log_entries("audit"), records, "entries of audit")
    h.equal(
        await store.log_entries("audit/other"),
        [b"o%d" % i for i in range(len(records))],
        "entries of a second log",
    )
    caps = await store.capabilities()
    if caps.dense_log_numbers:
        h.equal(numbers, list(range(1, len(records) + 1)), "dense numbers")
    h.equal(await store.scan(""), [], "logs are not records")


@case(
    "RTS-007",
    "concurrent CAS from many tasks: one winner per version, no lost update",
    contract=RTS,
)
async def concurrent_cas(h: Harness) -> None:
    store = await h.open()
    tasks, rounds = 8, 5
    await store.cas("race", None, b"start")
    winners: list[list[int]] = [[] for _ in range(rounds)]
    read_versions: list[set[str | None]] = [set() for _ in range(rounds)]

    # phase 1: in each round every task reads the same version, then all CAS at once
    for r in range(rounds):
        all_read = anyio.Event()
        ready = [0]

        async def contender(
            t: int, r: int = r, all_read: anyio.Event = all_read, ready: list[int] = ready
        ) -> None:
            _, version = await store.get("race")
            read_versions[r].add(version)
            ready[0] += 1
            if ready[0] == tasks:
                all_read.set()
            await all_read.wait()
            if await store.cas("race", version, b"r%d-t%d" % (r, t)):
                winners[r].append(t)

        async with anyio.create_task_group() as tg:
            for t in range(tasks):
                tg.start_soon(contender, t)
        h.equal(len(read_versions[r]), 1, f"round {r}: every task read the same version")
        h.equal(len(winners[r]), 1, f"round {r}: exactly one winner, got {winners[r]}")
        h.equal(
            (await store.get("race"))[0], b"r%d-t%d" % (r, winners[r][0]), "winner's value stored"
        )

    # phase 2: read-increment-CAS loops; the counter ends at the number of successes
    await store.cas("counter", None, b"0")
    increments = 5
    successes = [0]
    attempts = [0]

    async def incrementer() -> None:
        done = 0
        while done < increments:
            value, version = await store.get("counter")
            h.check(value is not None, "the counter exists")
            await anyio.lowlevel.checkpoint()  # let the others interleave between read and CAS
            attempts[0] += 1
            if await store.cas("counter", version, b"%d" % (int(value or b"") + 1)):
                done += 1
                successes[0] += 1

    async with anyio.create_task_group() as tg:
        for _ in range(tasks):
            tg.start_soon(incrementer)
    h.equal(successes[0], tasks * increments, "successful increments")
    h.equal((await store.get("counter"))[0], b"%d" % (tasks * increments), "final counter")
    h.check(attempts[0] >= successes[0], "attempts counted")


@case(
    "RTS-008",
    "a durable store reopened after a restart keeps records, versions, logs",
    contract=RTS,
    needs=("durable",),
)
async def reopen_after_restart(h: Harness) -> None:
    store = await h.open()
    caps = await store.capabilities()
    h.require(caps.durable, "durable (reopen after restart)")
    await store.cas("keep", None, b"k1")
    _, keep_v = await store.get("keep")
    await store.cas("keep", keep_v, b"k2")
    _, keep_v = await store.get("keep")
    await store.cas("dead", None, b"d1")
    _, dead_v = await store.get("dead")
    await store.delete("dead", dead_v)
    numbers = [await store.append("journal", b"j%d" % i) for i in range(3)]
    before = await _everything(store, ("journal",))

    again = await h.open(reopen_of=store)
    h.equal(await _everything(again, ("journal",)), before, "records and log after reopen")
    h.equal(await again.get("keep"), (b"k2", keep_v), "record and version after reopen")
    h.equal(await again.cas("keep", keep_v, b"k3"), True, "CAS with the pre-restart version")
    _, new_v = await again.get("keep")
    h.check(new_v != keep_v, "a write after reopen gives a new version")
    h.equal(await again.cas("dead", dead_v, b"zombie"), False, "CAS with a deleted key's version")
    h.equal(await again.cas("dead", None, b"d2"), True, "re-create after reopen")
    _, reborn = await again.get("dead")
    h.check(reborn != dead_v, f"re-created version {reborn!r} differs from {dead_v!r}")
    later = await again.append("journal", b"j3")
    h.check(later > numbers[-1], f"append number after reopen ({later}) > {numbers[-1]}")
    h.equal(await again.log_entries("journal"), [b"j0", b"j1", b"j2", b"j3"], "log after reopen")


@case("RTS-009", "bad input is refused with ValidationError and changes nothing", contract=RTS)
async def bad_input(h: Harness) -> None:
    store = await h.open()
    caps = await store.capabilities()
    await store.cas("ok", None, b"v")
    await store.append("log", b"r")
    before = await _everything(store, ("log",))
    _, version = await store.get("ok")
    long_key = "k" * (caps.max_key_bytes + 1)
    loose: Any = store  # the wrong types below are the point: the contract refuses them
    bad: list[tuple[str, Any]] = [
        ("cas str value", lambda: loose.cas("ok", version, "text")),
        ("cas None value", lambda: loose.cas("new", None, None)),
        ("cas empty key", lambda: store.cas("", None, b"x")),
        ("cas non-str key", lambda: loose.cas(b"ok", None, b"x")),
        ("cas over-long key", lambda: store.cas(long_key, None, b"x")),
        ("cas non-str version", lambda: loose.cas("ok", 1, b"x")),
        ("get empty key", lambda: store.get("")),
        ("delete empty key", lambda: store.delete("", None)),
        ("delete non-str version", lambda: loose.delete("ok", 1)),
        ("scan non-str prefix", lambda: loose.scan(None)),
        ("append empty log", lambda: store.append("", b"x")),
        ("append str record", lambda: loose.append("log", "text")),
        ("log_entries empty log", lambda: store.log_entries("")),
    ]
    if caps.max_value_bytes < 64 << 20:
        big = b"x" * (caps.max_value_bytes + 1)
        bad.append(("cas over-long value", lambda: store.cas("big", None, big)))
    for what, call in bad:
        with h.raises(ValidationError, what):
            await call()
    h.equal(await _everything(store, ("log",)), before, "store after the refused calls")
    h.equal(await store.get("ok"), (b"v", version), "record after the refused calls")


@case(
    "RTS-010",
    "a version from another key, or a made-up one, never changes a record",
    contract=RTS,
)
async def foreign_version(h: Harness) -> None:
    store = await h.open()
    await store.cas("left", None, b"L")
    await store.cas("right", None, b"R")
    _, left_v = await store.get("left")
    _, right_v = await store.get("right")
    before = await store.scan("")
    for key, version in (("left", right_v), ("right", left_v), ("left", "no-such-version")):
        for op in ("cas", "delete"):
            try:
                if op == "cas":
                    done = await store.cas(key, version, b"overwritten")
                else:
                    done = await store.delete(key, version)
            except ValidationError:
                done = False  # the reference models refuse it outright
            h.equal(done, False, f"{op}({key!r}, {version!r})")
    h.equal(await store.scan(""), before, "records after foreign versions")


@case(
    "RTS-011",
    "keys, logs and values round-trip exactly (slashes, dots, %, case, Unicode, binary)",
    contract=RTS,
)
async def round_trip(h: Harness) -> None:
    store = await h.open()
    keys = [
        "a/b", "a%2fb", "a%2Fb", "a/b/", "/a", ".", "..", "a.json", "a.lock", "A", "a",
        "ä/ü", "film 🎞", "sp ace", "tab\tx", "=x", "x=y", "nul\x00x", "k" * 300,
    ]  # fmt: skip
    values = [b"", bytes(range(256)), b"\n\n", b'{"json": 1}', b"\x00" * 7]
    for i, key in enumerate(keys):
        h.equal(await store.cas(key, None, values[i % len(values)] + key.encode()), True, key)
    for i, key in enumerate(keys):
        value, _ = await store.get(key)
        h.equal(value, values[i % len(values)] + key.encode(), f"value of {key!r}")
    h.equal([row[0] for row in await store.scan("")], sorted(keys), "scan of every key")
    h.equal([row[0] for row in await store.scan("a%")], ["a%2Fb", "a%2fb"], "scan('a%')")
    for key in ("a/b", "a%2fb", "A", "a"):
        await store.append(key, key.encode())
    for key in ("a/b", "a%2fb", "A", "a"):
        h.equal(await store.log_entries(key), [key.encode()], f"log {key!r}")


@case("RTS-012", "CAS with a version on a missing key fails and creates nothing", contract=RTS)
async def cas_missing(h: Harness) -> None:
    store = await h.open()
    await store.cas("present", None, b"p")
    _, version = await store.get("present")
    await store.delete("present", version)
    h.equal(await store.cas("present", version, b"again"), False, "CAS on a deleted key")
    h.equal(await store.get("present"), (None, None), "deleted key stays deleted")
    h.equal(await store.scan(""), [], "nothing was created")


async def _race_at_barrier(
    h: Harness, barrier_name: str, slow_op: str
) -> tuple[Any, dict[str, bool]]:
    """Pause the slow operation at ``barrier_name`` (after it read version 1), let a CAS win
    version 1 meanwhile, release it. Skips when the store never reaches the barrier (its CAS
    is atomic on the server: there is no read-then-write window to race in)."""
    store = await h.open()
    await store.cas("k", None, b"v1")
    _, v1 = await store.get("k")
    barrier = faults.arm(barrier_name)
    results: dict[str, bool] = {}
    paused, finished = anyio.Event(), anyio.Event()

    async def slow() -> None:
        if slow_op == "cas":
            results["slow"] = await store.cas("k", v1, b"slow")
        else:
            results["slow"] = await store.delete("k", v1)
        finished.set()

    async def watch() -> None:
        await barrier.wait_paused()
        paused.set()

    async def first_of() -> None:
        async with anyio.create_task_group() as inner:
            for event in (paused, finished):

                async def wait(e: anyio.Event = event) -> None:
                    await e.wait()
                    inner.cancel_scope.cancel()

                inner.start_soon(wait)

    async with anyio.create_task_group() as tg:
        tg.start_soon(watch)
        tg.start_soon(slow)
        await first_of()
        if not paused.is_set():
            tg.cancel_scope.cancel()
            faults.disarm(barrier_name)
            raise Skip(f"the store never reaches {barrier_name} (atomic CAS, no window to race)")
        h.equal(barrier.contexts[0].get("seen_version"), v1, "version the paused call read")
        results["fast"] = await store.cas("k", v1, b"fast")
        barrier.release()
    return store, results


@case(
    "RTS-013",
    "a CAS paused between its read and its write loses to a CAS that won meanwhile",
    contract=RTS,
    needs=("client_side_cas",),
)
async def cas_race_at_barrier(h: Harness) -> None:
    store, results = await _race_at_barrier(h, CAS_READ_AFTER, "cas")
    h.equal(results, {"fast": True, "slow": False}, "outcomes of the two CAS")
    h.equal((await store.get("k"))[0], b"fast", "the winner's value is kept")


@case(
    "RTS-014",
    "a delete paused between its read and its write loses to a CAS that won meanwhile",
    contract=RTS,
    needs=("client_side_cas",),
)
async def delete_race_at_barrier(h: Harness) -> None:
    store, results = await _race_at_barrier(h, DELETE_READ_AFTER, "delete")
    h.equal(results, {"fast": True, "slow": False}, "outcomes of the CAS and the stale delete")
    h.equal((await store.get("k"))[0], b"fast", "the record survives the stale delete")


# cases register themselves by ID (``case``) and run through the registry: none is imported by
# name, so the module exports nothing
__all__: list[str] = []
