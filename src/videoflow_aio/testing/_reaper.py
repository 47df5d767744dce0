"""Servers die with the process that started them, however it ends.

Two independent guards, both set up by :func:`popen` for every server that
:mod:`videoflow_aio.testing.servers` and :mod:`videoflow_aio.testing.clusters` start:

- **parent-death signal** (Linux): the server is started through util-linux ``setpriv
  --pdeathsig KILL``, which asks the kernel for SIGKILL when its parent dies
  (``prctl(PR_SET_PDEATHSIG)``, kept across ``exec``). No Python runs in the forked child: a
  ``preexec_fn`` in a process with threads (grpc's, xdist's) is unsafe, and one crashed
  with a segmentation fault in a parallel test run. The kernel sends the signal when the
  *thread* that forked the child ends, so servers are forked from the main thread or from
  one keeper thread that lives as long as the process — never from a short-lived worker
  thread (``astart`` runs in one). Without ``setpriv`` the reaper alone guards.
- **a reaper process** (one per owning process, started with the first server, in its own
  session so Ctrl-C does not reach it): it holds the read end of a pipe only the owner
  writes to. When the owner ends — exit, exception, SIGTERM, SIGKILL — the pipe reaches end
  of file and the reaper SIGKILLs every server still registered (its whole process group,
  so a server behind a wrapper goes too) and removes their temporary directories
  (:mod:`videoflow_aio.testing._reaper_main`).

A clean stop unregisters the server once its directory is removed. Waiting for processes
is wall-clock work.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import queue
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import IO, Any

_SCRIPT = Path(__file__).with_name("_reaper_main.py")

_lock = threading.Lock()
_reaper: subprocess.Popen[bytes] | None = None
_reaper_owner = 0  # the pid that started it (a forked child needs its own)
_keeper: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] | None = None
_inherited: list[subprocess.Popen[bytes]] = []


def _after_fork_in_child() -> None:
    """A forked child has neither the keeper thread nor the reaper's pipe of its own (and
    the lock may have been held by another thread at the fork): it starts afresh."""
    global _lock, _keeper, _reaper, _reaper_owner
    _lock = threading.Lock()
    _keeper = None
    if _reaper is not None:
        if _reaper.stdin is not None:
            with contextlib.suppress(OSError):  # the parent's pipe: its end of file is the signal
                _reaper.stdin.close()
        _inherited.append(_reaper)  # the parent's: never waited for (nor warned about) here
    _reaper, _reaper_owner = None, 0


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


@functools.cache
def _pdeathsig_prefix() -> tuple[str, ...]:
    """``setpriv --pdeathsig KILL --`` where util-linux's setpriv has that option (2.33+),
    else nothing (the reaper alone guards)."""
    if not sys.platform.startswith("linux"):
        return ()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return ()
    try:
        probe = subprocess.run(
            [setpriv, "--pdeathsig", "KILL", "--", "true"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ()
    return (setpriv, "--pdeathsig", "KILL", "--") if probe.returncode == 0 else ()


def _keeper_loop(jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]]) -> None:
    while True:
        job, result = jobs.get()
        try:
            result.set_result(job())
        except BaseException as exc:  # handed to the caller, raised in its thread
            result.set_exception(exc)


def _in_long_lived_thread(job: Callable[[], Any]) -> Any:
    """``job()`` in the main thread or in the keeper thread (never in a thread that may end
    before the process: a parent-death signal would fire then)."""
    global _keeper
    if threading.current_thread() is threading.main_thread():
        return job()
    with _lock:
        if _keeper is None:
            _keeper = queue.SimpleQueue()
            threading.Thread(
                target=_keeper_loop, args=(_keeper,), name="videoflow-server-keeper", daemon=True
            ).start()
        jobs = _keeper
    result: Future[Any] = Future()
    jobs.put((job, result))
    return result.result()


def _reaper_stdin() -> IO[bytes] | None:
    """The pipe to this process's reaper, started on first use (None if it cannot run)."""
    global _reaper, _reaper_owner
    pid = os.getpid()
    if _reaper is not None and _reaper_owner == pid and _reaper.poll() is None:
        return _reaper.stdin
    if not sys.executable:  # an embedded interpreter: the parent-death signal only
        return None
    try:
        _reaper = subprocess.Popen(
            [sys.executable, "-I", str(_SCRIPT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
    except OSError:
        _reaper = None
        return None
    _reaper_owner = pid
    return _reaper.stdin


def _tell(line: str) -> None:
    with _lock:
        pipe = _reaper_stdin()
        if pipe is None:
            return
        with contextlib.suppress(OSError, ValueError):
            pipe.write(line.encode("utf-8", "surrogateescape"))
            pipe.flush()


def _start_time(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(errors="replace")
    except OSError:
        return "-"
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else "-"


def popen(argv: list[str], *, cleanup: Path | None, **options: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(argv, start_new_session=True, **options)`` for a server that must
    die with this process; ``cleanup`` is the directory removed when it is reaped."""
    full = [*_pdeathsig_prefix(), *argv]

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(full, start_new_session=True, **options)

    proc: subprocess.Popen[bytes] = _in_long_lived_thread(start)
    where = "" if cleanup is None else str(cleanup).replace("\n", "")
    _tell(f"add {proc.pid} {_start_time(proc.pid)} {where}\n")
    return proc


def forget(pid: int) -> None:
    """The server ``pid`` was stopped (and reaped) by its owner: the reaper leaves it."""
    with _lock:
        reaper = _reaper
        if reaper is None or _reaper_owner != os.getpid() or reaper.poll() is not None:
            return
        assert reaper.stdin is not None
        with contextlib.suppress(OSError, ValueError):
            reaper.stdin.write(f"del {pid}\n".encode())
            reaper.stdin.flush()


@atexit.register
def _close_reaper() -> None:
    """At a clean exit (after the servers' own atexit stop): end the reaper, which finds
    nothing left to kill, and reap it."""
    reaper = _reaper
    if reaper is None or _reaper_owner != os.getpid():
        return
    with contextlib.suppress(OSError, ValueError):
        if reaper.stdin is not None:
            reaper.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        reaper.wait(2.0)


def reaper_pid() -> int | None:
    """The reaper process's id in this process (None before the first server)."""
    return _reaper.pid if _reaper is not None and _reaper_owner == os.getpid() else None
