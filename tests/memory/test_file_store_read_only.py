"""FileRuntimeStore on a read-only file system (issue 26, item 1): a backup, a snapshot or a
replica mounted read-only is readable; every write is refused with AccessDenied.

The tests run as root, which permission bits do not stop, so the store is seen through a
read-only bind mount of its directory (skipped, saying why, where mounting is impossible).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import anyio
import pytest

from videoflow_aio.contracts.errors import AccessDenied, BackendUnavailable
from videoflow_aio.memory._file_store import file_name
from videoflow_aio.memory.runtime_store import FileRuntimeStore


def _mount(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["mount", *args], capture_output=True, check=False)


@contextlib.contextmanager
def read_only_view(source: Path, view: Path) -> Iterator[Path]:
    """``source`` seen read-only at ``view`` (a bind mount remounted ``ro``)."""
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root and mount(8)")
    view.mkdir()
    done = _mount("--bind", str(source), str(view))
    if done.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {done.stderr.decode(errors='replace').strip()}")
    try:
        done = _mount("-o", "remount,ro,bind", str(view))
        if done.returncode != 0:
            pytest.skip(f"cannot remount read-only: {done.stderr.decode(errors='replace')}")
        with pytest.raises(OSError):  # really read-only, also for root
            (view / "probe").write_bytes(b"")
        yield view
    finally:
        subprocess.run(["umount", str(view)], capture_output=True, check=False)


async def _populate(root: Path) -> dict[str, str]:
    store = FileRuntimeStore(root)
    versions = {}
    for key, value in (("cam/1", b"one"), ("cam/2", b"two"), ("other", b"x")):
        assert await store.cas(key, None, value)
        _, versions[key] = await store.get(key)
    assert await store.append("events", b"e1") == 1
    assert await store.append("events", b"e2") == 2
    # what a crashed writer leaves: compaction would remove these, a reader must not need to
    (root / "kv" / (file_name("cam/3") + ".tmp")).write_bytes(b'{"key": "cam/3"')
    log = root / "logs" / (file_name("events") + ".log")
    log.write_bytes(log.read_bytes() + b"torn")
    return {k: v for k, v in versions.items() if v is not None}


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.anyio
@pytest.mark.parametrize("compact_at_open", [True, False])
async def test_reads_work_and_writes_are_refused_on_a_read_only_root(
    tmp_path: Path, compact_at_open: bool
) -> None:
    source = tmp_path / "store"
    versions = await _populate(source)
    before = _snapshot(source)
    with read_only_view(source, tmp_path / "ro") as view:
        store = FileRuntimeStore(view, compact_at_open=compact_at_open)
        assert await store.get("cam/1") == (b"one", versions["cam/1"])
        assert await store.get("missing") == (None, None)
        assert await store.scan("cam/") == [
            ("cam/1", b"one", versions["cam/1"]),
            ("cam/2", b"two", versions["cam/2"]),
        ]
        assert await store.log_entries("events") == [b"e1", b"e2"]
        assert await store.log_entries("none") == []
        refused: list[tuple[str, Callable[[], Awaitable[object]]]] = [
            ("cas", lambda: store.cas("cam/1", versions["cam/1"], b"new")),
            ("cas", lambda: store.cas("fresh", None, b"new")),
            ("delete", lambda: store.delete("cam/2", None)),
            ("append", lambda: store.append("events", b"e3")),
            ("compact", store.compact),
        ]
        for operation, call in refused:
            with pytest.raises(AccessDenied) as err:
                await call()
            assert err.value.fields["backend"] == "file"
            assert err.value.fields["operation"] == operation
            assert err.value.fields["applied"] is False
            assert "read-only" in str(err.value)
        assert await store.get("cam/1") == (b"one", versions["cam/1"])
        assert await store.log_entries("events") == [b"e1", b"e2"]
    assert _snapshot(source) == before  # nothing changed, not even the leftovers


@pytest.mark.anyio
async def test_an_empty_read_only_root_reads_as_empty(tmp_path: Path) -> None:
    source = tmp_path / "empty"
    source.mkdir()
    with read_only_view(source, tmp_path / "ro") as view:
        store = FileRuntimeStore(view)
        assert await store.get("k") == (None, None)
        assert await store.scan("") == []
        assert await store.log_entries("log") == []
        with pytest.raises(AccessDenied):
            await store.cas("k", None, b"v")
    assert list(source.iterdir()) == []


@pytest.mark.anyio
async def test_a_missing_root_on_a_read_only_file_system_is_backend_unavailable(
    tmp_path: Path,
) -> None:
    source = tmp_path / "parent"
    source.mkdir()
    with read_only_view(source, tmp_path / "ro") as view:
        store = FileRuntimeStore(view / "absent")
        with pytest.raises(BackendUnavailable):
            await store.get("k")


async def _remount(view: Path, mode: str) -> None:
    done = await anyio.to_thread.run_sync(_mount, "-o", f"remount,{mode},bind", str(view))
    assert done.returncode == 0, done.stderr


@pytest.mark.anyio
async def test_a_file_system_remounted_read_only_while_open_refuses_writes(
    tmp_path: Path,
) -> None:
    """Opened writable, then the mount turns read-only: writes are AccessDenied (nothing
    written, as on a root opened read-only), reads keep working."""
    source = tmp_path / "store"
    source.mkdir()
    with read_only_view(source, tmp_path / "view") as view:
        await _remount(view, "rw")
        store = FileRuntimeStore(view)
        assert await store.cas("k", None, b"v")
        _, version = await store.get("k")
        assert await store.append("log", b"a") == 1
        await _remount(view, "ro")
        refused: list[tuple[str, Callable[[], Awaitable[object]]]] = [
            ("cas", lambda: store.cas("k", version, b"new")),
            ("cas", lambda: store.cas("other", None, b"new")),
            ("delete", lambda: store.delete("k", version)),
            ("append", lambda: store.append("log", b"b")),
        ]
        for operation, call in refused:
            with pytest.raises(AccessDenied) as err:
                await call()
            assert err.value.fields["operation"] == operation
        assert await store.get("k") == (b"v", version)
        assert await store.log_entries("log") == [b"a"]


@pytest.mark.anyio
async def test_a_read_only_root_of_the_previous_format_is_refused_unchanged(
    tmp_path: Path,
) -> None:
    """Adopting a root of the format before store.json rewrites it: read-only, it is
    refused (AccessDenied at open), never half adopted."""
    source = tmp_path / "legacy"
    (source / "kv").mkdir(parents=True)
    (source / "kv" / (file_name("k") + ".json")).write_text('{"key": "k", "n": 1, "value": "dg=="}')
    before = _snapshot(source)
    with read_only_view(source, tmp_path / "ro") as view:
        store = FileRuntimeStore(view)
        with pytest.raises(AccessDenied) as err:
            await store.get("k")
        assert err.value.fields["operation"] == "open"
    assert _snapshot(source) == before
    value, _ = await FileRuntimeStore(source).get("k")  # a writable open adopts it
    assert value == b"v"
