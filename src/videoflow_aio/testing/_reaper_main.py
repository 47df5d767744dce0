"""The reaper process: kills the servers of a process that died without stopping them.

Run as ``python -I _reaper_main.py`` by :mod:`videoflow_aio.testing._reaper` (by path: it
imports nothing but the standard library). It reads lines from stdin, a pipe whose only
writer is the process that started the servers:

    add <pid> <start time> <directory>   a server was started (its process group is its pid)
    del <pid>                            that server was stopped by its owner

End of file means the owner is gone (it exited, crashed, or was killed with SIGKILL): every
server still registered is killed with SIGKILL (its whole process group, so a wrapper's
children go too), checked first to be the same process (``/proc/<pid>/stat`` start time, so
a reused pid is never killed), and its directory is removed once it is gone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time


def start_time(pid: int) -> str:
    """Field 22 of ``/proc/<pid>/stat`` (the process's start time), or ``""``."""
    fields = _stat(pid)
    return fields[19] if fields is not None and len(fields) > 19 else ""


def _stat(pid: int, task: int | None = None) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` (or of its thread ``task``) after the command
    name (state first), or None."""
    path = f"/proc/{pid}/stat" if task is None else f"/proc/{pid}/task/{task}/stat"
    try:
        with open(path, "rb") as f:
            stat = f.read().decode("ascii", "replace")
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()


def gone(pid: int) -> bool:
    """True when ``pid`` no longer runs: absent, or a zombie nobody reaped yet whose every
    thread has ended too (a killed leader shows as a zombie while a multi-threaded server's
    other threads are still exiting, and one of them may still write into its directory)."""
    fields = _stat(pid)
    if fields is None:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except OSError:
            return False
        return False
    if fields[:1] not in (["Z"], ["X"]):
        return False
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    for task in tasks:
        if task.isdigit():
            state = _stat(pid, int(task))
            if state is not None and state[:1] not in (["Z"], ["X"]):
                return False
    return True


def group_members(pgid: int) -> list[int]:
    """The live processes of process group ``pgid``."""
    found: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if entry.isdigit():
            fields = _stat(int(entry))
            live = fields is not None and len(fields) > 2 and fields[0] not in ("Z", "X")
            if live and fields is not None and fields[2] == str(pgid):
                found.append(int(entry))
    return found


def kill(pid: int, started: str) -> list[int]:
    """SIGKILL the server ``pid`` and its process group (a wrapper's children too, also when
    the wrapper itself already died of its parent-death signal); the pids to wait for.

    A group outlives its leader while it has members, and its id cannot be reused as a pid
    meanwhile: so unless ``pid`` names another process now (its start time differs), every
    member of group ``pid`` is one of ours."""
    if started not in ("", "-") and start_time(pid) not in (started, ""):
        return []  # the pid now names another process
    members = group_members(pid)
    if not gone(pid):
        members.append(pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    for member in members:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(member, signal.SIGKILL)
    return sorted(set(members))


def main() -> None:
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_IGN)
    servers: dict[int, tuple[str, str]] = {}
    for raw in sys.stdin.buffer:
        parts = raw.decode("utf-8", "surrogateescape").rstrip("\n").split(" ", 3)
        try:
            if parts[0] == "add" and len(parts) == 4:
                servers[int(parts[1])] = (parts[2], parts[3])
            elif parts[0] == "del" and len(parts) == 2:
                servers.pop(int(parts[1]), None)
        except ValueError:
            continue
    killed = [member for pid, (started, _) in servers.items() for member in kill(pid, started)]
    deadline = time.monotonic() + 60.0  # wall-clock: waiting for killed processes to go
    while killed and time.monotonic() < deadline:  # wall-clock: as above
        killed = [pid for pid in killed if not gone(pid)]
        if killed:
            time.sleep(0.02)  # wall-clock: polling real processes
    # a directory is removed until it stays gone: a member that was still exiting (a loaded
    # machine) may have written into it while it was being removed
    left = [directory for _, directory in servers.values() if directory]
    while left and time.monotonic() < deadline:  # wall-clock: as above
        for directory in left:
            shutil.rmtree(directory, ignore_errors=True)
        left = [directory for directory in left if os.path.lexists(directory)]
        if left:
            time.sleep(0.05)  # wall-clock: as above


if __name__ == "__main__":
    main()
