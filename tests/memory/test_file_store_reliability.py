"""FileRuntimeStore under real processes: CAS contention between two processes, and a writer
killed with SIGKILL at random moments. These use the wall clock on purpose (real processes)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Mapping
from pathlib import Path

import anyio
import msgspec
import pytest

from videoflow_aio.contracts.runtime_store import version_number
from videoflow_aio.memory._file_store import Record, file_name, record_crc
from videoflow_aio.memory.runtime_store import Compaction, FileRuntimeStore

CONTENDER = textwrap.dedent(
    """
    import json, sys
    import anyio
    from videoflow_aio.memory.runtime_store import Compaction, FileRuntimeStore

    async def main(root, attempts, tasks):
        store = FileRuntimeStore(root)
        await store.cas("counter", None, b"0")  # one of the two processes creates it
        successes = [0]

        async def contend():
            for _ in range(attempts // tasks):
                value, version = await store.get("counter")
                if await store.cas("counter", version, b"%d" % (int(value) + 1)):
                    successes[0] += 1

        async with anyio.create_task_group() as tg:
            for _ in range(tasks):
                tg.start_soon(contend)
        print(json.dumps({"successes": successes[0]}))

    anyio.run(main, sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
    """
)


@pytest.mark.slow
def test_two_processes_contending_lose_no_update(tmp_path: Path) -> None:
    attempts, tasks = 5_000, 4  # per process (10,000 in all), spread over 4 tasks each
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CONTENDER, str(tmp_path), str(attempts), str(tasks)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    successes = [json.loads(out)["successes"] for out in outs]

    async def final() -> tuple[bytes | None, str | None]:
        return await FileRuntimeStore(str(tmp_path)).get("counter")

    value, version = anyio.run(final)
    assert value is not None and version is not None
    assert int(value) == sum(successes), (value, successes)
    assert all(s > 0 for s in successes), successes


# -- kill -9 ---------------------------------------------------------------------------------

KEYS = [f"rec/{i}" for i in range(4)]
LOG = "writes"


def _value(prev: str | None, key: str, rng: random.Random) -> bytes:
    pad = "x" * rng.choice([10, 1_000, 20_000, 100_000])
    body = {"key": key, "prev": prev, "pad": pad}
    return msgspec.json.encode({**body, "check": hash_of(body)})


def hash_of(body: Mapping[str, object]) -> str:
    return hashlib.sha256(msgspec.json.encode(body)).hexdigest()


def _writer(root: str, seed: int, ready: int) -> None:
    """Child process: write, delete and log forever (until SIGKILL); a byte on ``ready``
    once its first write is logged."""
    rng = random.Random(seed)

    told: list[bool] = []

    async def main() -> None:
        store = FileRuntimeStore(root)
        while True:
            key = rng.choice(KEYS)
            _, prev = await store.get(key)
            if prev is not None and rng.random() < 0.1:
                if await store.delete(key, prev):
                    await store.append(LOG, f"del {key} {prev}".encode())
                continue
            if await store.cas(key, prev, _value(prev, key, rng)):
                _, now = await store.get(key)
                await store.append(LOG, f"put {key} {now}".encode())
                if not told:
                    os.write(ready, b"w")
                    os.close(ready)
                    told.append(True)

    anyio.run(main)


def _check(root: Path) -> int:
    """Every record whole and consistent with its version; the log tells a consistent story."""
    for path in (root / "kv").glob("*.json"):
        rec = msgspec.json.decode(path.read_bytes(), type=Record)  # no torn JSON
        assert path.name == file_name(rec.key) + ".json"
        assert rec.crc == record_crc(rec.key, rec.n, rec.value)

    async def read() -> tuple[dict[str, tuple[bytes | None, str | None]], list[bytes]]:
        store = FileRuntimeStore(str(root))
        return {k: await store.get(k) for k in KEYS}, await store.log_entries(LOG)

    records, log = anyio.run(read)
    for key, (value, version) in records.items():
        if value is None:
            assert version is None
            continue
        assert version is not None
        body = msgspec.json.decode(value)
        check = body.pop("check")
        assert check == hash_of(body), f"{key}: value is not whole"
        assert body["key"] == key
        assert body["prev"] != version, f"{key}: a write kept the version it replaced"
    # the writers run one after the other, each reserving a later block of numbers: the
    # versions of a key only grow (with concurrent writers they are only ever distinct)
    last: dict[str, int] = {}
    for line in log:
        op, key, version = line.decode().split()
        n = version_number(key, version)
        if op == "put":
            assert n > last.get(key, 0), f"version {version} of {key} reused or went back"
        else:
            assert n >= last.get(key, 0)
        last[key] = n
    for key, n in last.items():
        current = records[key][1]
        if current is not None:
            assert version_number(key, current) >= n, f"{key} went back to {current} after {n}"
    return len(log)


@pytest.mark.slow
def test_writer_killed_at_random_moments_leaves_whole_records(tmp_path: Path) -> None:
    rng = random.Random(20261130)
    kills = 200
    mid_write = torn = 0
    temps: set[tuple[str, int, int]] = set()
    for i in range(kills):
        seed, pause = rng.randrange(1 << 30) + i, rng.uniform(0.005, 0.04)
        ready_r, ready_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child
            code = 0
            os.close(ready_r)
            try:
                _writer(str(tmp_path), seed, ready_w)
            except BaseException as exc:  # report, never return into pytest
                (tmp_path / "child-error").write_text(repr(exc))
                code = 1
            finally:
                os._exit(code)
        os.close(ready_w)
        # the kill lands a random moment after the child's first logged write, whatever the
        # machine's load (a child killed before it wrote anything would test nothing)
        os.read(ready_r, 1)  # b"" if the child died first: its error is reported below
        os.close(ready_r)
        time.sleep(pause)  # wall-clock: a real process runs meanwhile
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        error = tmp_path / "child-error"
        assert not error.exists(), error.read_text()
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        for tmp in (tmp_path / "kv").glob("*.tmp"):  # a kill before the rename leaves one
            st = tmp.stat()
            mid_write += (tmp.name, st.st_ino, st.st_mtime_ns) not in temps
            temps.add((tmp.name, st.st_ino, st.st_mtime_ns))
        log_file = tmp_path / "logs" / (file_name(LOG) + ".log")
        torn += log_file.exists() and not log_file.read_bytes().endswith(b"\n")
        _check(tmp_path)
    writes = _check(tmp_path)
    assert writes >= kills, f"only {writes} logged writes in {kills} runs"
    # how often a kill left a temp file or a torn log line behind (informational; -s shows it)
    print(f"{writes} logged writes; {mid_write} kills left a temp file; {torn} a torn log line")


# -- kill -9 in the middle of a compaction ---------------------------------------------------

COMPACTOR = textwrap.dedent(
    """
    import os, signal, sys
    from videoflow_aio.memory._file_store import FileStoreCore

    root, kill_at = sys.argv[1], int(sys.argv[2])
    steps = [0]

    def step(real):
        def run(*args, **kwargs):
            steps[0] += 1
            if steps[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)  # before this change reaches the disk
            return real(*args, **kwargs)
        return run

    # every change a compaction makes is one of these calls
    os.unlink, os.ftruncate = step(os.unlink), step(os.ftruncate)
    print(FileStoreCore(root, compact_at_open=False).compact())
    """
)
LIVE = {f"live/{i}": b"value %d" % i for i in range(4)}
LOGS = {"audit": [b"one", b"two"], "events": [b"e1"]}


def _garbage_store(root: Path) -> None:
    """Live records and logs, plus what crashed writers leave: orphan temp files, lock files of
    absent keys, torn log tails and empty logs."""
    store = FileRuntimeStore(str(root), compact_at_open=False)

    async def fill() -> None:
        for key, value in LIVE.items():
            assert await store.cas(key, None, value)
        for log, records in LOGS.items():
            for record in records:
                await store.append(log, record)

    anyio.run(fill)
    for i in range(4):
        (root / "kv" / f"gone{i}.tmp").write_bytes(b'{"key": "gone')
        (root / "locks" / f"dead{i}.lock").write_bytes(b"")
    (root / "kv" / (file_name("live/0") + ".tmp")).write_bytes(b"half a record")
    for log in LOGS:
        with (root / "logs" / (file_name(log) + ".log")).open("ab") as f:
            f.write(b"0badc0de dG9y")  # a line cut short
    (root / "logs" / "empty.log").write_bytes(b"")


def _intact(root: Path) -> None:
    async def read() -> None:
        store = FileRuntimeStore(str(root), compact_at_open=False)
        records = {k: v for k, v, _ in await store.scan("")}
        assert records == LIVE
        for log, expected in LOGS.items():
            assert await store.log_entries(log) == expected
        versions = {v for _, _, v in await store.scan("")}
        assert await store.cas("new", None, b"n")  # writes continue, versions stay unique
        assert (await store.get("new"))[1] not in versions
        assert await store.append("audit", b"three") == 3
        assert await store.delete("new", None)

    anyio.run(read)


@pytest.mark.slow
def test_compaction_killed_at_every_step_leaves_a_valid_store(tmp_path: Path) -> None:
    template = tmp_path / "template"
    _garbage_store(template)
    step, finished, killed = 0, False, 0
    while not finished:
        step += 1
        root = tmp_path / f"run{step}"
        shutil.copytree(template, root)
        proc = subprocess.run(
            [sys.executable, "-c", COMPACTOR, str(root), str(step)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        finished = proc.returncode == 0
        assert finished or proc.returncode == -signal.SIGKILL, proc.stderr
        killed += not finished
        _intact(root)  # whatever the step, nothing live is lost or damaged
        anyio.run(_finish, root)  # and the next compaction finishes the job
        assert step < 100, "the compaction never finished"
    assert killed >= 10, f"only {killed} kill points: the garbage did not get compacted"


async def _finish(root: Path) -> None:
    store = FileRuntimeStore(str(root), compact_at_open=False)
    await store.compact()
    assert await store.compact() == Compaction()
    assert not list((root / "kv").glob("*.tmp"))
    locks = sorted(p.name for p in (root / "locks").iterdir())
    assert locks == sorted(file_name(k) + ".lock" for k in LIVE)
    logs = sorted(p.name for p in (root / "logs").iterdir())
    assert logs == sorted(file_name(log) + ".log" for log in LOGS)
