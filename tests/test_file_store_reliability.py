"""FileRuntimeStore under real processes: CAS contention between two processes, and a writer
killed with SIGKILL at random moments. These use the wall clock on purpose (real processes)."""

from __future__ import annotations

import hashlib
import json
import os
import random
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
from videoflow_aio.memory._file_store import Record, file_name
from videoflow_aio.memory.runtime_store import FileRuntimeStore

CONTENDER = textwrap.dedent(
    """
    import json, sys
    import anyio
    from videoflow_aio.memory.runtime_store import FileRuntimeStore

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
    # every success wrote exactly one new version: create (1) + one per increment
    assert version_number("counter", version) == 1 + sum(successes)
    assert all(s > 0 for s in successes), successes


# -- kill -9 ---------------------------------------------------------------------------------

KEYS = [f"rec/{i}" for i in range(4)]
LOG = "writes"


def _value(prev: str | None, key: str, rng: random.Random) -> bytes:
    pad = "x" * rng.choice([10, 1_000, 20_000, 100_000])
    n = None if prev is None else version_number(key, prev) + 1
    body = {"key": key, "n": n, "pad": pad}
    return msgspec.json.encode({**body, "check": hash_of(body)})


def hash_of(body: Mapping[str, object]) -> str:
    return hashlib.sha256(msgspec.json.encode(body)).hexdigest()


def _writer(root: str, seed: int) -> None:
    """Child process: write, delete and log forever (until SIGKILL)."""
    rng = random.Random(seed)

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

    anyio.run(main)


def _check(root: Path) -> int:
    """Every record whole and consistent with its version; the log tells a consistent story."""
    for path in (root / "kv").glob("*.json"):
        rec = msgspec.json.decode(path.read_bytes(), type=Record)  # no torn JSON
        assert path.name == file_name(rec.key) + ".json"

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
        if body["n"] is not None:
            assert version_number(key, version) == body["n"], (key, version, body["n"])
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
        pid = os.fork()
        if pid == 0:  # child
            code = 0
            try:
                _writer(str(tmp_path), rng.randrange(1 << 30) + i)
            except BaseException as exc:  # report, never return into pytest
                (tmp_path / "child-error").write_text(repr(exc))
                code = 1
            finally:
                os._exit(code)
        time.sleep(rng.uniform(0.005, 0.04))  # wall-clock: a real process runs meanwhile
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
    assert writes >= kills // 2, f"only {writes} logged writes in {kills} runs"
    # how often a kill left a temp file or a torn log line behind (informational; -s shows it)
    print(f"{writes} logged writes; {mid_write} kills left a temp file; {torn} a torn log line")
