"""FileRuntimeStore specifics: names, on-disk layout, tombstones, torn log lines, locks,
crash leftovers, corrupt files, OS errors, worker threads."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import threading
import time
from pathlib import Path

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from videoflow_aio import faults
from videoflow_aio.contracts.errors import BackendUnavailable, OutcomeUnknown, ValidationError
from videoflow_aio.contracts.runtime_store import DELETE_READ_AFTER, CorruptRecord, version_number
from videoflow_aio.memory import _file_store
from videoflow_aio.memory._file_store import (
    MAX_NAME,
    FileStoreCore,
    escape,
    file_name,
    record_crc,
    unescape,
)
from videoflow_aio.memory.runtime_store import FileRuntimeStore


def kv(root: Path, key: str) -> Path:
    return root / "kv" / (file_name(key) + ".json")


def log_path(root: Path, log: str) -> Path:
    return root / "logs" / (file_name(log) + ".log")


# -- names -----------------------------------------------------------------------------------


@given(st.text(min_size=1))
def test_escape_round_trips_and_uses_a_safe_alphabet(key: str) -> None:
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return  # refused by check_key before it gets here
    name = escape(key)
    assert unescape(name) == key
    assert set(name) <= set("abcdefghijklmnopqrstuvwxyz0123456789_-%")


@given(st.text(min_size=1), st.text(min_size=1))
def test_file_names_are_injective(a: str, b: str) -> None:
    try:
        a.encode(), b.encode()
    except UnicodeEncodeError:
        return
    assert (file_name(a) == file_name(b)) == (a == b)


def test_names_that_look_alike_stay_apart() -> None:
    keys = ["a/b", "a%2fb", "a%2Fb", "A/b", ".", "..", "a.json", "=x"]
    names = [file_name(k) for k in keys]
    assert len(set(names)) == len(keys)
    assert not any("/" in n or "." in n for n in names)
    assert file_name("a/b") == "a%2fb" and file_name("A") == "%41"


def test_long_keys_get_hashed_names(tmp_path: Path) -> None:
    long_key = "x/" * 150
    assert len(escape(long_key)) > MAX_NAME
    assert file_name(long_key).startswith("=") and len(file_name(long_key)) == 65

    async def main() -> None:
        store = FileRuntimeStore(str(tmp_path))
        assert await store.cas(long_key, None, b"long")
        assert await store.cas("x/short", None, b"short")
        assert [k for k, _, _ in await store.scan("x/")] == ["x/short", long_key]
        assert await store.scan("y") == []
        assert (await store.get(long_key))[0] == b"long"

    anyio.run(main)


# -- layout ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_record_files_are_checksummed_json_and_delete_removes_them(tmp_path: Path) -> None:
    store = FileRuntimeStore(str(tmp_path))
    await store.cas("jobs/1", None, b"\x00hi")
    _, v1 = await store.get("jobs/1")
    doc = json.loads(kv(tmp_path, "jobs/1").read_bytes())
    assert doc == {
        "key": "jobs/1",
        "n": 1,
        "value": "AGhp",
        "crc": record_crc("jobs/1", 1, b"\x00hi"),
    }
    assert version_number("jobs/1", v1) == 1
    assert json.loads((tmp_path / "store.json").read_bytes())["next"] == 1 + _file_store.BLOCK
    assert (tmp_path / "locks" / "jobs%2f1.lock").exists()
    await store.delete("jobs/1", v1)
    assert not kv(tmp_path, "jobs/1").exists()  # no tombstone: numbers are store-wide
    assert not (tmp_path / "locks" / "jobs%2f1.lock").exists()
    await store.cas("jobs/1", None, b"again")
    assert json.loads(kv(tmp_path, "jobs/1").read_bytes())["n"] == 2
    assert not list((tmp_path / "kv").glob("*.tmp"))


@pytest.mark.anyio
async def test_reopen_continues_versions_and_log_numbers(tmp_path: Path) -> None:
    first = FileRuntimeStore(tmp_path)
    await first.cas("k", None, b"1")
    _, old = await first.get("k")
    await first.delete("k", None)
    await first.append("log", b"a")
    second = FileRuntimeStore(str(tmp_path))
    await second.cas("k", None, b"2")
    _, new = await second.get("k")
    assert version_number("k", new) > version_number("k", old)  # a block of its own
    # two live instances appending in turn: numbers stay dense (the count cache notices)
    numbers = []
    for i in range(6):
        numbers.append(await (first if i % 2 else second).append("log", b"%d" % i))
    assert numbers == [2, 3, 4, 5, 6, 7]
    assert await first.log_entries("log") == [b"a", *[b"%d" % i for i in range(6)]]


# -- logs ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_torn_last_line_is_ignored_then_cut_before_the_next_append(tmp_path: Path) -> None:
    store = FileRuntimeStore(str(tmp_path))
    await store.append("log", b"one")
    await store.append("log", b"two")
    path = log_path(tmp_path, "log")
    whole = path.read_bytes()
    torn = _file_store.encode_line(b"three")[:-4]  # a writer died mid-line
    path.write_bytes(whole + torn)
    assert await store.log_entries("log") == [b"one", b"two"]
    other = FileRuntimeStore(str(tmp_path))  # no cached count: reads the file
    assert await other.append("log", b"four") == 3
    assert path.read_bytes() == whole + _file_store.encode_line(b"four")
    assert await store.log_entries("log") == [b"one", b"two", b"four"]
    assert await store.append("log", b"five") == 4


@pytest.mark.anyio
async def test_a_log_holding_only_a_torn_line(tmp_path: Path) -> None:
    store = FileRuntimeStore(str(tmp_path))
    await store.append("other", b"x")  # creates the directories
    log_path(tmp_path, "log").write_bytes(b"0000")
    assert await store.log_entries("log") == []
    assert await store.append("log", b"first") == 1
    assert await store.log_entries("log") == [b"first"]


@pytest.mark.anyio
async def test_damaged_complete_lines_are_reported_not_skipped(tmp_path: Path) -> None:
    store = FileRuntimeStore(str(tmp_path))
    await store.append("log", b"one")
    path = log_path(tmp_path, "log")
    line = bytearray(path.read_bytes())
    line[10] ^= 0x01  # flip a bit inside the base64
    path.write_bytes(bytes(line) + _file_store.encode_line(b"two"))
    with pytest.raises(CorruptRecord):
        await store.log_entries("log")
    path.write_bytes(b"garbage\n")
    with pytest.raises(CorruptRecord):
        await store.log_entries("log")


# -- crash leftovers and damage --------------------------------------------------------------


@pytest.mark.anyio
async def test_orphan_temp_files_are_ignored_and_replaced(tmp_path: Path) -> None:
    store = FileRuntimeStore(str(tmp_path))
    await store.cas("k", None, b"old")
    orphan = tmp_path / "kv" / (file_name("k") + ".tmp")
    orphan.write_bytes(b'{"key": "k", "n": 9, "val')  # a writer died before its rename
    (tmp_path / "kv" / (file_name("new") + ".tmp")).write_bytes(b"junk")
    assert await store.get("k") == (b"old", (await store.get("k"))[1])
    assert [k for k, _, _ in await store.scan("")] == ["k"]
    _, version = await store.get("k")
    assert await store.cas("k", version, b"new")
    assert not orphan.exists()
    assert version_number("k", (await store.get("k"))[1]) == 2


@pytest.mark.anyio
async def test_a_damaged_record_file_raises_corrupt_record(tmp_path: Path) -> None:
    store = FileRuntimeStore(str(tmp_path))
    await store.cas("k", None, b"v")
    kv(tmp_path, "k").write_bytes(b'{"key": "k", "n": 1, "va')
    for call in (store.get("k"), store.cas("k", None, b"x"), store.scan("")):
        with pytest.raises(CorruptRecord):
            await call
    kv(tmp_path, "k").write_bytes(b'{"key": "not-k", "n": 1, "value": "eA=="}')
    with pytest.raises(CorruptRecord):
        await store.get("k")


@pytest.mark.anyio
async def test_os_errors_become_backend_unavailable(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a directory")
    store = FileRuntimeStore(str(tmp_path / "file" / "store"))
    with pytest.raises(BackendUnavailable) as err:
        await store.cas("k", None, b"v")
    assert err.value.fields["backend"] == "file"
    with pytest.raises(BackendUnavailable):
        await store.get("k")


@pytest.mark.anyio
async def test_a_write_that_cannot_be_made_durable_is_outcome_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileRuntimeStore(str(tmp_path))
    await store.cas("k", None, b"v1")
    _, v1 = await store.get("k")

    def broken_fsync_dir(path: str) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(_file_store, "_fsync_dir", broken_fsync_dir)
    with pytest.raises(OutcomeUnknown) as err:
        await store.cas("k", v1, b"v2")
    assert err.value.fields["operation"] == "cas"
    assert (await store.get("k"))[0] == b"v2"  # visible, durability unknown: hence "unknown"


# -- locks and threads -----------------------------------------------------------------------


def test_the_key_lock_excludes_other_threads_of_the_same_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """flock, not lockf: while one thread writes a key, a second open of its lock file in the
    same process cannot take the lock."""
    core = FileStoreCore(str(tmp_path))
    core.cas("k", None, b"v")
    inside, proceed = threading.Event(), threading.Event()
    real_write = core._write

    def paused_write(*args: object) -> None:
        inside.set()
        assert proceed.wait(30)
        real_write(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(core, "_write", paused_write)
    writer = threading.Thread(target=core.cas, args=("k", 1, b"w"))
    writer.start()
    assert inside.wait(30)
    fd = os.open(tmp_path / "locks" / (file_name("k") + ".lock"), os.O_RDWR)
    try:
        with pytest.raises(BlockingIOError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        proceed.set()
        writer.join(30)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free again once the write is done
    finally:
        os.close(fd)
    assert core.get("k") == (b"w", 2)


@pytest.mark.anyio
async def test_file_io_never_runs_on_the_event_loop_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop_thread = threading.get_ident()
    on_loop: list[str] = []
    for name in ("_read", "_write", "_lock", "_ensure", "_count_lines"):
        real = getattr(FileStoreCore, name)

        def spy(self: FileStoreCore, *args: object, _real: object = real, _n: str = name) -> object:
            if threading.get_ident() == loop_thread:
                on_loop.append(_n)
            return _real(self, *args)  # type: ignore[operator]

        monkeypatch.setattr(FileStoreCore, name, spy)
    store = FileRuntimeStore(str(tmp_path))
    await store.cas("k", None, b"v")
    _, v = await store.get("k")
    await store.scan("")
    await store.delete("k", v)
    await store.append("l", b"r")
    await store.log_entries("l")
    await store.capabilities()
    assert on_loop == []


@pytest.mark.anyio
async def test_many_tasks_on_two_instances_one_winner_per_round(tmp_path: Path) -> None:
    stores = [FileRuntimeStore(str(tmp_path)) for _ in range(2)]
    await stores[0].cas("k", None, b"0")
    for round_ in range(5):
        _, version = await stores[0].get("k")
        wins: list[int] = []

        async def contender(i: int, version: str | None = version, wins: list[int] = wins) -> None:
            if await stores[i % 2].cas("k", version, b"%d" % i):
                wins.append(i)

        async with anyio.create_task_group() as tg:
            for i in range(16):
                tg.start_soon(contender, i)
        assert len(wins) == 1, (round_, wins)


@pytest.mark.anyio
async def test_a_virtual_deadline_does_not_fire_while_file_io_runs(tmp_path: Path) -> None:
    """The virtual clock must not jump while a worker thread works (asyncio and trio): real
    disk time is not virtual time, so a 1 s virtual deadline around real I/O never fires."""
    store = FileRuntimeStore(str(tmp_path))
    start = anyio.current_time()
    with anyio.fail_after(1):
        for i in range(20):
            await store.cas(f"k{i}", None, b"v")
            await store.append("log", b"r")
    assert anyio.current_time() - start < 1


# -- damage, lost counters, full disks and compaction ----------------------------------------


@pytest.mark.anyio
async def test_a_flipped_byte_in_a_stored_value_is_corrupt_not_a_wrong_value(
    tmp_path: Path,
) -> None:
    store = FileRuntimeStore(str(tmp_path))
    await store.cas("k", None, b"the value")
    path = kv(tmp_path, "k")
    doc = json.loads(path.read_bytes())
    doc["value"] = "dGhlIHZhbHVm"  # base64 of b"the valuf": well-formed, one byte off
    path.write_text(json.dumps(doc))
    for call in (store.get("k"), store.scan(""), store.cas("k", None, b"x")):
        with pytest.raises(CorruptRecord):
            await call


@pytest.mark.anyio
@pytest.mark.parametrize("n", [-5, 0])
async def test_a_record_edited_to_a_non_positive_version_is_refused(tmp_path: Path, n: int) -> None:
    store = FileRuntimeStore(str(tmp_path))
    await store.cas("k", None, b"v")
    kv(tmp_path, "k").write_text(
        json.dumps({"key": "k", "n": n, "value": "dg==", "crc": record_crc("k", n, b"v")})
    )
    with pytest.raises(CorruptRecord):
        await store.get("k")


@pytest.mark.anyio
async def test_losing_the_kv_folder_never_reissues_a_version(tmp_path: Path) -> None:
    store = FileRuntimeStore(str(tmp_path))
    seen = set()
    for i in range(3):
        assert await store.cas(f"k{i}", None, b"v")
        seen.add((await store.get(f"k{i}"))[1])
    _, old = await store.get("k0")
    shutil.rmtree(tmp_path / "kv")
    with pytest.raises(BackendUnavailable):  # the running store: nothing written
        await store.cas("k0", None, b"new")
    for reopened in (FileRuntimeStore(str(tmp_path)), store):  # reopening recreates kv/
        assert await reopened.cas("k0", None, b"new")
        _, version = await reopened.get("k0")
        assert version not in seen
        seen.add(version)
        assert not await reopened.cas("k0", old, b"stale")  # the old version wins nothing
        await reopened.delete("k0", None)


@pytest.mark.anyio
async def test_a_store_without_its_counter_is_refused_not_restarted(tmp_path: Path) -> None:
    store = FileRuntimeStore(str(tmp_path))
    await store.cas("k", None, b"v")
    (tmp_path / "store.json").unlink()
    with pytest.raises(CorruptRecord):
        await FileRuntimeStore(str(tmp_path)).get("k")
    (tmp_path / "store.json").write_text('{"format": 2, "next": 1, "crc": "00000000"}')
    with pytest.raises(CorruptRecord):
        await FileRuntimeStore(str(tmp_path)).get("k")


@pytest.mark.anyio
async def test_an_inserted_empty_log_line_is_corrupt_for_readers_and_writers_alike(
    tmp_path: Path,
) -> None:
    store = FileRuntimeStore(str(tmp_path))
    assert await store.append("log", b"one") == 1
    path = log_path(tmp_path, "log")
    path.write_bytes(path.read_bytes() + b"\n")
    for fresh in (store, FileRuntimeStore(str(tmp_path))):
        with pytest.raises(CorruptRecord):
            await fresh.log_entries("log")
        with pytest.raises(CorruptRecord):
            await fresh.append("log", b"two")  # never numbered past a line it cannot read
    assert path.read_bytes() == _file_store.encode_line(b"one") + b"\n"


@pytest.mark.anyio
async def test_scan_refuses_a_prefix_that_is_not_valid_unicode(tmp_path: Path) -> None:
    store = FileRuntimeStore(str(tmp_path))
    with pytest.raises(ValidationError) as info:
        await store.scan("\ud800")
    assert info.value.field == "prefix"


@pytest.mark.anyio
async def test_a_full_disk_leaves_no_temp_file_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FileRuntimeStore(str(tmp_path))
    await store.cas("k", None, b"old")
    _, v = await store.get("k")
    real = _file_store._write_all

    def disk_full(fd: int, data: bytes) -> None:
        real(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_file_store, "_write_all", disk_full)
    with pytest.raises(BackendUnavailable):
        await store.cas("k", v, b"new")
    with pytest.raises(BackendUnavailable):
        await store.cas("fresh", None, b"new")
    with pytest.raises(BackendUnavailable):
        await store.append("log", b"r")
    monkeypatch.setattr(_file_store, "_write_all", real)
    assert not list((tmp_path / "kv").glob("*.tmp"))
    assert not (tmp_path / "locks" / (file_name("fresh") + ".lock")).exists()
    assert await store.get("k") == (b"old", v)
    assert await store.log_entries("log") == []
    assert await store.append("log", b"r") == 1


@pytest.mark.anyio
async def test_a_full_disk_while_reserving_versions_uses_none_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    core = FileStoreCore(str(tmp_path), block=2)
    core.cas("a", None, b"v")
    core.cas("b", None, b"v")  # the block is used up: the next write reserves
    real = _file_store._write_all

    def disk_full(fd: int, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_file_store, "_write_all", disk_full)
    with pytest.raises(BackendUnavailable):
        core.cas("c", None, b"v")
    monkeypatch.setattr(_file_store, "_write_all", real)
    assert not (tmp_path / "store.json.tmp").exists()
    assert core.cas("c", None, b"v") == 3
    assert [n for _, _, n in core.scan("")] == [1, 2, 3]


@pytest.mark.anyio
async def test_open_removes_orphan_temp_files_but_not_one_being_written(tmp_path: Path) -> None:
    store = FileRuntimeStore(str(tmp_path))
    await store.cas("k", None, b"v")
    await store.cas("busy", None, b"v")
    orphan = tmp_path / "kv" / (file_name("k") + ".tmp")
    orphan.write_bytes(b'{"key": "k", "n": 9, "va')  # a writer died before its rename
    stray = tmp_path / "kv" / (file_name("gone") + ".tmp")
    stray.write_bytes(b"junk")
    writing = tmp_path / "kv" / (file_name("busy") + ".tmp")
    writing.write_bytes(b"half")
    held = os.open(tmp_path / "locks" / (file_name("busy") + ".lock"), os.O_RDWR)
    fcntl.flock(held, fcntl.LOCK_EX)  # another process is writing "busy" right now
    try:
        reopened = FileRuntimeStore(str(tmp_path))
        assert await reopened.get("k") == await store.get("k")
        assert not orphan.exists() and not stray.exists() and writing.exists()
        assert reopened._core.opened == _file_store.Compaction(temp_files=2, busy=1)
        assert not (tmp_path / "locks" / (file_name("gone") + ".lock")).exists()
    finally:
        os.close(held)
    assert await reopened.compact() == _file_store.Compaction(temp_files=1)


@pytest.mark.anyio
async def test_compaction_reclaims_lock_files_torn_tails_and_empty_logs(tmp_path: Path) -> None:
    store = FileRuntimeStore(str(tmp_path), compact_at_open=False)
    await store.cas("live", None, b"v")
    await store.append("log", b"one")
    locks = tmp_path / "locks"
    for i in range(5):  # lock files of keys whose writers died between delete and unlock
        (locks / f"dead{i}.lock").write_bytes(b"")
    path = log_path(tmp_path, "log")
    path.write_bytes(path.read_bytes() + _file_store.encode_line(b"two")[:-3])
    log_path(tmp_path, "empty").write_bytes(b"")
    log_path(tmp_path, "only-torn").write_bytes(b"0000")
    before = await store.scan(""), await store.log_entries("log")
    report = await store.compact()
    assert report == _file_store.Compaction(lock_files=5, torn_tails=1, empty_logs=2)
    assert sorted(p.name for p in locks.iterdir()) == [file_name("live") + ".lock"]
    assert path.read_bytes() == _file_store.encode_line(b"one")
    assert (await store.scan(""), await store.log_entries("log")) == before
    assert await store.compact() == _file_store.Compaction()
    assert await store.append("empty", b"x") == 1 and await store.append("log", b"two") == 2


def test_a_writer_waiting_on_a_lock_file_that_is_removed_takes_the_new_one(
    tmp_path: Path,
) -> None:
    """Delete removes the key's lock file while holding it; a writer that opened the old file
    and waited must not then write under a lock nobody else can see."""
    core = FileStoreCore(str(tmp_path))
    core.cas("k", None, b"v")
    lock = core._lock(file_name("k"))
    got: list[int | None] = []
    waiter = threading.Thread(target=lambda: got.append(core.cas("k", None, b"w")))
    waiter.start()
    time.sleep(0.05)  # wall-clock: let the waiter block on the old lock file
    os.unlink(kv(tmp_path, "k"))
    core._drop_lock(file_name("k"))
    os.close(lock)
    waiter.join(30)
    assert got and got[0] is not None  # it created the key under the new lock file
    fd = core._try_lock(file_name("k"))
    assert fd is not None  # and released it
    os.close(fd)


@pytest.mark.anyio
async def test_the_delete_barrier_sees_the_version_read_before_it(tmp_path: Path) -> None:
    """The context a ``DELETE_READ_AFTER`` barrier is handed names the version the delete read
    (found by cosmic-ray: the file store's report of it could be inverted unnoticed)."""
    store = FileRuntimeStore(tmp_path)
    assert await store.cas("k", None, b"a")
    _, v1 = await store.get("k")
    with faults.isolated() as registry:
        barrier = registry.arm(DELETE_READ_AFTER, crash=True, times=2)
        for key, version in (("k", v1), ("absent", None)):
            with pytest.raises(faults.SimulatedCrash):
                await store.delete(key, version)
    assert [(c["key"], c["seen_version"]) for c in barrier.contexts] == [
        ("k", v1),
        ("absent", None),
    ]
