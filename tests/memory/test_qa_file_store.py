"""FileRuntimeStore beyond issue 11's own list: strict log lines, and a root written by the
previous release (no ``store.json``, per-key counters, tombstones, no checksums) adopted once,
crash-safely, instead of refused — a user upgrading the library keeps their store."""

from __future__ import annotations

import base64
import json
import os
import threading
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from videoflow_aio.contracts.runtime_store import CorruptRecord, key_tag, version_number
from videoflow_aio.memory._file_store import FileStoreCore
from videoflow_aio.memory.runtime_store import FileRuntimeStore

pytestmark = pytest.mark.anyio


# -- strict log lines -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "damage",
    [
        lambda line: line[:8].upper() + line[8:],  # a flipped 0x20 bit in a hex digit
        lambda line: b"+" + line[1:],  # int() takes a sign
        lambda line: b" " + line[1:],  # ... and surrounding blanks
        lambda line: line[:4] + b"_" + line[5:],  # ... and underscores
    ],
    ids=["upper-case", "plus-sign", "blank", "underscore"],
)
async def test_a_log_line_whose_checksum_field_was_altered_is_corrupt(
    tmp_path: Path, damage: Callable[[bytes], bytes]
) -> None:
    """The checksum is written as 8 lower-case hex digits; anything else in that field is
    damage (int(..., 16) read ``0D0E09B1``, ``+d0e09b1`` and `` d0e09b1`` as the same number)."""
    store = FileRuntimeStore(tmp_path)
    await store.append("log", b"r1")
    path = tmp_path / "logs" / "log.log"
    line = path.read_bytes()
    assert line.startswith(b"0d0e09b1 ")  # CRC32 of b"r1": digits and letters
    path.write_bytes(damage(line))
    with pytest.raises(CorruptRecord):
        await store.log_entries("log")
    with pytest.raises(CorruptRecord):
        await FileRuntimeStore(tmp_path).append("log", b"r2")


# -- a root of the previous release -----------------------------------------------------------

#: the previous release's layout (git show eaf2969:src/videoflow_aio/memory/_file_store.py):
#: kv/<name>.json {"key", "n": per-key write counter, "value": base64 | null (a tombstone)},
#: locks/<name>.lock never removed, logs/<name>.log "<crc32 hex> <base64>\n" (unchanged)
OLD_RECORDS: dict[str, tuple[str, int, bytes | None]] = {
    "jobs%2f1": ("jobs/1", 3, b"running"),
    "b": ("b", 1, b"\x00\xff binary"),
    "gone": ("gone", 7, None),  # deleted after 7 writes: the highest number in the store
    "%c3%a9t%c3%a9": ("\u00e9t\u00e9", 2, b"unicode key"),
}
OLD_LOG = [b"first", b"second"]


def _old_root(root: Path) -> None:
    """Write the previous release's files by hand (not with its code)."""
    for sub in ("kv", "locks", "logs"):
        (root / sub).mkdir(parents=True)
    for stem, (key, n, value) in OLD_RECORDS.items():
        encoded = None if value is None else base64.b64encode(value).decode()
        (root / "kv" / f"{stem}.json").write_text(
            json.dumps({"key": key, "n": n, "value": encoded})
        )
        (root / "locks" / f"{stem}.lock").touch()
    (root / "kv" / "b.tmp").write_text('{"key": "b", "n": 2, "val')  # a write that died
    lines = b"".join(b"%08x %s\n" % (zlib.crc32(r), base64.b64encode(r)) for r in OLD_LOG)
    (root / "logs" / "audit.log").write_bytes(lines)


async def _state(store: FileRuntimeStore) -> dict[str, Any]:
    return {
        "scan": await store.scan(""),
        "gone": await store.get("gone"),
        "log": await store.log_entries("audit"),
    }


def _expected_scan() -> list[tuple[str, bytes, str]]:
    live = [(k, v, n) for k, n, v in OLD_RECORDS.values() if v is not None]
    return sorted((k, v, f"{n}-{key_tag(k)}") for k, v, n in live)


async def test_a_root_of_the_previous_release_is_adopted(tmp_path: Path) -> None:
    _old_root(tmp_path)
    store = FileRuntimeStore(tmp_path)
    assert await _state(store) == {"scan": _expected_scan(), "gone": (None, None), "log": OLD_LOG}
    # a version a client of the old release holds still compares equal
    assert await store.cas("jobs/1", f"3-{key_tag('jobs/1')}", b"done")
    # no number of the old store is handed out again, tombstones' included
    assert await store.cas("gone", None, b"back")
    _, version = await store.get("gone")
    assert version is not None and version_number("gone", version) > 7
    assert await store.append("audit", b"third") == 3
    # the root is of the current format now: store.json, checksummed records, no tombstone
    assert (tmp_path / "store.json").exists()
    assert not (tmp_path / "upgrade.json").exists()
    for path in (tmp_path / "kv").glob("*.json"):
        assert "crc" in json.loads(path.read_bytes())
    assert not list((tmp_path / "kv").glob("*.tmp"))
    reopened = FileRuntimeStore(tmp_path)
    assert (await reopened.get("jobs/1"))[0] == b"done"


class _Killed(BaseException):
    """What a process killed at this point leaves: whatever it has not done yet."""


def _kill_after(monkeypatch: pytest.MonkeyPatch, steps: int) -> list[str]:
    """Make the ``steps``-th file-system change of the store (a rename, an unlink, a
    directory fsync) the last one before the process dies."""
    done: list[str] = []
    for name in ("replace", "unlink"):
        real = getattr(os, name)

        def step(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            if len(done) >= steps:
                raise _Killed
            result = _real(*args, **kwargs)
            done.append(f"{_name} {args[0]}")
            return result

        monkeypatch.setattr(os, name, step)  # the module _file_store calls
    return done


def test_an_upgrade_killed_at_every_step_finishes_on_the_next_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each step of the adoption is atomic, the numbers to continue from are made durable
    before anything changes, and ``store.json`` comes last: killed after any step, the next
    open finishes the job, with the same records, versions and log."""
    reference = tmp_path / "reference"
    _old_root(reference)
    FileStoreCore(str(reference), compact_at_open=False)._ensure()
    expected_next = json.loads((reference / "store.json").read_bytes())["next"]
    assert expected_next == 8
    for steps in range(64):
        root = tmp_path / f"killed-after-{steps}"
        _old_root(root)
        with monkeypatch.context() as patch:
            _kill_after(patch, steps)
            try:
                FileStoreCore(str(root), compact_at_open=False)._ensure()
                finished = True
            except _Killed:
                finished = False
        FileStoreCore(str(root))._ensure()  # the next open (and its compaction)
        assert json.loads((root / "store.json").read_bytes())["next"] == expected_next, steps
        state = anyio.run(_state, FileRuntimeStore(root))
        assert state == {"scan": _expected_scan(), "gone": (None, None), "log": OLD_LOG}, steps
        if finished:
            break
    else:
        pytest.fail("the upgrade never finished")
    assert steps > 4  # it has several steps, and each was interrupted once


@pytest.mark.parametrize(
    "damage",
    [
        lambda root: (root / "kv" / "b.json").write_text("{not json"),
        lambda root: (root / "kv" / "b.json").write_text('{"key": "other", "n": 1, "value": ""}'),
        lambda root: (root / "kv" / "b.json").write_text('{"key": "b", "n": 0, "value": ""}'),
    ],
    ids=["not-json", "another-key", "number-zero"],
)
def test_an_old_root_with_a_damaged_record_is_refused_and_left_as_it_was(
    tmp_path: Path, damage: Callable[[Path], Any]
) -> None:
    _old_root(tmp_path)
    damage(tmp_path)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    with pytest.raises(CorruptRecord):
        FileStoreCore(str(tmp_path)).get("jobs/1")
    after = {
        p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and p.name != "store.lock"
    }
    assert after == {p: v for p, v in before.items() if p.name != "store.lock"}


async def test_a_current_root_that_lost_its_counter_is_still_refused(tmp_path: Path) -> None:
    """Checksummed records without store.json are not an old release's store: the counter
    of a current store was lost, and versions of deleted keys could come back."""
    store = FileRuntimeStore(tmp_path)
    await store.cas("k", None, b"v")
    (tmp_path / "store.json").unlink()
    with pytest.raises(CorruptRecord, match=r"no store.json"):
        await FileRuntimeStore(tmp_path).get("k")


def test_processes_opening_an_old_root_at_once_adopt_it_once(tmp_path: Path) -> None:
    """The adoption runs under store.lock: openers that race (threads here, each with its
    own descriptors, as processes have) see it done once, and agree on every version."""
    _old_root(tmp_path)
    cores = [FileStoreCore(str(tmp_path)) for _ in range(4)]
    errors: list[BaseException] = []

    def open_and_read(core: FileStoreCore) -> None:
        try:
            core.get("jobs/1")
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_and_read, args=(core,)) for core in cores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert json.loads((tmp_path / "store.json").read_bytes())["next"] == 8
    assert {core.get("jobs/1") for core in cores} == {(b"running", 3)}
    numbers = {core.cas(f"new-{i}", None, b"v") for i, core in enumerate(cores)}
    assert len(numbers) == 4 and min(n for n in numbers if n is not None) >= 8
