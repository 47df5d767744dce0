"""MemoryRuntimeStore and FileRuntimeStore: the seed's semantics, bad input, barrier races."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from _rts_helpers import KINDS, open_store, snapshot
from videoflow_aio import faults
from videoflow_aio.contracts.errors import ValidationError
from videoflow_aio.contracts.runtime_store import RuntimeStore, version_number
from videoflow_aio.memory.runtime_store import (
    CAS_READ_AFTER,
    DELETE_READ_AFTER,
    MAX_KEY_BYTES,
    MAX_VALUE_BYTES,
    MemoryRuntimeStore,
)


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> RuntimeStore:
    return open_store(request.param, tmp_path)


@pytest.fixture(autouse=True)
def _isolated_barriers() -> Any:
    with faults.isolated():
        yield


pytestmark = pytest.mark.anyio


async def test_create_update_delete_recreate(store: RuntimeStore) -> None:
    assert await store.cas("a/b", None, b"1")
    v1 = (await store.get("a/b"))[1]
    assert v1 is not None
    assert await store.cas("a/b", v1, b"2")
    value, v2 = await store.get("a/b")
    assert value == b"2" and v2 not in (None, v1)
    assert await store.delete("a/b", v2)
    assert await store.get("a/b") == (None, None)
    assert await store.cas("a/b", None, b"3")
    _, v3 = await store.get("a/b")
    assert v3 not in (v1, v2)
    assert not await store.cas("a/b", v2, b"stale")
    assert not await store.cas("a/b", v1, b"stale")


async def test_versions_survive_delete(store: RuntimeStore) -> None:
    """The model counts per key; the file store numbers every write of the store (one store
    object hands out increasing numbers): either way a re-created key never repeats one."""
    numbers = []
    for _ in range(3):
        await store.cas("k", None, b"x")
        _, v = await store.get("k")
        assert v is not None
        numbers.append(version_number("k", v))
        await store.delete("k", None)
    await store.cas("other", None, b"y")
    other = version_number("other", (await store.get("other"))[1])
    if isinstance(store, MemoryRuntimeStore):
        assert (numbers, other) == ([1, 2, 3], 1)
    else:
        assert numbers == sorted(set(numbers)) and other > numbers[-1]


async def test_scan_is_sorted_by_code_point_and_skips_deleted(store: RuntimeStore) -> None:
    keys = ["b", "a/é", "a/z", "a/Z", "a/", "a", "a/b/c"]
    for k in keys:
        await store.cas(k, None, k.encode())
    await store.delete("a/z", None)
    rows = await store.scan("a/")
    assert [k for k, _, _ in rows] == ["a/", "a/Z", "a/b/c", "a/é"]
    assert all(v == k.encode() for k, v, _ in rows)


async def test_append_numbers_are_dense_per_log(store: RuntimeStore) -> None:
    assert [await store.append("x", b"%d" % i) for i in range(4)] == [1, 2, 3, 4]
    assert await store.append("y", b"y") == 1
    assert await store.log_entries("x") == [b"0", b"1", b"2", b"3"]
    entries = await store.log_entries("x")
    entries.append(b"not stored")
    assert len(await store.log_entries("x")) == 4


async def test_capabilities(store: RuntimeStore) -> None:
    caps = await store.capabilities()
    assert caps.max_key_bytes == MAX_KEY_BYTES and caps.max_value_bytes == MAX_VALUE_BYTES
    assert caps.dense_log_numbers and not caps.shared_across_hosts
    assert caps.durable == caps.shared_across_processes == (caps.store == "file")


async def test_limits_are_inclusive(store: RuntimeStore) -> None:
    key = "é" * (MAX_KEY_BYTES // 2)  # exactly MAX_KEY_BYTES UTF-8 bytes
    assert await store.cas(key, None, b"v" * MAX_VALUE_BYTES)
    assert (await store.get(key))[0] == b"v" * MAX_VALUE_BYTES
    with pytest.raises(ValidationError) as err:
        await store.cas(key + "x", None, b"v")
    assert err.value.fields["field"] == "key"
    with pytest.raises(ValidationError) as err:
        await store.cas("k", None, b"v" * (MAX_VALUE_BYTES + 1))
    assert err.value.fields["field"] == "value"


Call = Callable[[RuntimeStore], Awaitable[Any]]
BAD: list[tuple[str, str, Call]] = [
    ("value", "str", lambda s: s.cas("k", None, "text")),  # type: ignore[arg-type]
    ("value", "bytearray", lambda s: s.cas("k", None, bytearray(b"x"))),  # type: ignore[arg-type]
    ("value", "memoryview", lambda s: s.cas("k", None, memoryview(b"x"))),  # type: ignore[arg-type]
    ("value", "None", lambda s: s.cas("k", None, None)),  # type: ignore[arg-type]
    ("key", "empty", lambda s: s.cas("", None, b"x")),
    ("key", "bytes", lambda s: s.cas(b"k", None, b"x")),  # type: ignore[arg-type]
    ("key", "int", lambda s: s.get(1)),  # type: ignore[arg-type]
    ("key", "over-long", lambda s: s.cas("k" * (MAX_KEY_BYTES + 1), None, b"x")),
    ("key", "lone surrogate", lambda s: s.cas("a\ud800", None, b"x")),
    ("key", "empty delete", lambda s: s.delete("", None)),
    ("expected_version", "int", lambda s: s.cas("k", 1, b"x")),  # type: ignore[arg-type]
    ("expected_version", "garbage", lambda s: s.cas("k", "abc", b"x")),
    ("expected_version", "no tag", lambda s: s.cas("k", "1", b"x")),
    ("expected_version", "bad tag", lambda s: s.delete("k", "1-zzzzzzzz")),
    ("expected_version", "negative", lambda s: s.cas("k", "-1-00000000", b"x")),
    ("prefix", "None", lambda s: s.scan(None)),  # type: ignore[arg-type]
    ("log", "empty", lambda s: s.append("", b"x")),
    ("log", "over-long", lambda s: s.log_entries("l" * (MAX_KEY_BYTES + 1))),
    ("record", "str", lambda s: s.append("log", "x")),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("field", "what", "call"), BAD, ids=[f"{f}-{w}" for f, w, _ in BAD])
async def test_bad_input_is_refused_and_changes_nothing(
    store: RuntimeStore, field: str, what: str, call: Call
) -> None:
    await store.cas("k", None, b"keep")
    await store.append("log", b"r")
    before = await snapshot(store, ("log",))
    with pytest.raises(ValidationError) as err:
        await call(store)
    assert err.value.fields["field"] == field, err.value
    assert await snapshot(store, ("log",)) == before


async def test_a_version_of_another_key_is_refused(store: RuntimeStore) -> None:
    await store.cas("left", None, b"L")
    await store.cas("right", None, b"R")
    _, left = await store.get("left")
    assert left is not None
    before = await snapshot(store)
    calls: list[Callable[[], Awaitable[bool]]] = [
        lambda: store.cas("right", left, b"X"),
        lambda: store.delete("right", left),
        lambda: store.cas("missing", left, b"X"),
    ]
    for call in calls:
        with pytest.raises(ValidationError) as err:
            await call()
        assert err.value.fields["field"] == "expected_version"
        assert "another key" in str(err.value)
    assert await snapshot(store) == before


async def test_concurrent_cas_exactly_one_winner(store: RuntimeStore) -> None:
    await store.cas("k", None, b"0")
    _, version = await store.get("k")
    wins: list[int] = []

    async def contender(i: int) -> None:
        if await store.cas("k", version, b"%d" % i):
            wins.append(i)

    async with anyio.create_task_group() as tg:
        for i in range(32):
            tg.start_soon(contender, i)
    assert len(wins) == 1
    assert (await store.get("k"))[0] == b"%d" % wins[0]


async def test_cas_race_at_barrier_rechecks_after_the_read(store: RuntimeStore) -> None:
    await store.cas("k", None, b"a")
    _, v1 = await store.get("k")
    barrier = faults.arm(CAS_READ_AFTER)
    results: dict[str, bool] = {}

    async def slow() -> None:
        results["slow"] = await store.cas("k", v1, b"slow")

    async with anyio.create_task_group() as tg:
        tg.start_soon(slow)
        await barrier.wait_paused()
        assert barrier.contexts == [{"key": "k", "expected_version": v1, "seen_version": v1}]
        results["fast"] = await store.cas("k", v1, b"fast")  # barrier spent: passes through
        barrier.release()
    assert results == {"fast": True, "slow": False}
    assert (await store.get("k"))[0] == b"fast"


async def test_crash_at_cas_barrier_leaves_the_store_unchanged(store: RuntimeStore) -> None:
    await store.cas("k", None, b"a")
    _, v1 = await store.get("k")
    before = await snapshot(store)
    faults.arm(CAS_READ_AFTER, crash=True)
    with pytest.raises(faults.SimulatedCrash):
        await store.cas("k", v1, b"never")
    assert await snapshot(store) == before
    assert await store.cas("k", v1, b"b")  # the version is still current


async def test_delete_race_at_barrier(store: RuntimeStore) -> None:
    await store.cas("k", None, b"a")
    _, v1 = await store.get("k")
    barrier = faults.arm(DELETE_READ_AFTER, times=2)
    results: dict[str, bool] = {}

    async def deleter(name: str, version: str | None) -> None:
        results[name] = await store.delete("k", version)

    async with anyio.create_task_group() as tg:
        tg.start_soon(deleter, "conditional", v1)
        tg.start_soon(deleter, "unconditional", None)
        await barrier.wait_paused(2)
        assert await store.cas("k", v1, b"b")  # moves on while both deleters wait
        barrier.release()
    # whichever runs first: the stale conditional delete never succeeds, the other one does
    assert results == {"conditional": False, "unconditional": True}
    assert await store.get("k") == (None, None)
