"""Ports handed out to test servers are not handed out again for an hour (best effort).

A stopped or killed server's peers keep dialling its address: a NATS cluster member its
route, a Redis replica its primary, a client its server. A new server that the kernel puts on
that port — in another test, or another pytest-xdist worker — would be joined by them: a NATS
member of one cluster was taken into another (same cluster name, the route accepted), a Redis
primary would count a stranger's replica in ``WAIT``. So every port :func:`claim` returns is
recorded, one empty file per port in a directory shared by this user's processes with the
same temporary directory (``TMPDIR``), and skipped while that file's mtime is younger than
:data:`REUSE_AFTER`. The registry is a precaution: when it cannot be used (permissions, a
full disk) a port is picked without it.

Records carry wall-clock mtimes: ports outlive any one event loop.
"""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
import time
from pathlib import Path

REUSE_AFTER = 3600.0
"""Seconds a handed-out port is skipped."""
TRIES = 64
"""Kernel picks tried before a recently used port is returned anyway (the registry is a
precaution: a port race is still the caller's to retry)."""
PRUNE_EVERY = 256
"""Claims between two sweeps of expired records."""

_claims = 0


def registry() -> Path:
    """The shared directory of records (``$TMPDIR/videoflow-ports-<uid>``)."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"videoflow-ports-{uid}"


def _pick(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _record(path: Path, now: float) -> bool:
    """Record ``path``'s port as handed out; False when it already was, recently."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        try:
            if now - path.stat().st_mtime < REUSE_AFTER:
                return False
        except FileNotFoundError:
            pass  # pruned meanwhile: take it
        with contextlib.suppress(OSError):
            os.utime(path, (now, now))
        return True
    os.close(fd)
    return True


def _prune(directory: Path, now: float) -> None:
    for entry in directory.iterdir():
        with contextlib.suppress(OSError):
            if now - entry.stat().st_mtime >= REUSE_AFTER:
                entry.unlink()


def claim(host: str) -> int:
    """A port on ``host`` that was free a moment ago and that no process sharing the registry
    was handed in the last :data:`REUSE_AFTER` seconds (after :data:`TRIES` kernel picks,
    the last pick, recorded too)."""
    global _claims
    try:
        directory = registry()
        directory.mkdir(mode=0o700, exist_ok=True)
        now = time.time()  # wall-clock: a record must outlive any one event loop
        _claims += 1
        if _claims % PRUNE_EVERY == 1:
            _prune(directory, now)
        port = _pick(host)
        for _ in range(TRIES):
            if _record(directory / str(port), now):
                return port
            port = _pick(host)
        with contextlib.suppress(OSError):
            os.utime(directory / str(port), (now, now))
        return port
    except OSError:  # no registry here (permissions, a full disk): the kernel's pick
        return _pick(host)
