"""The files a spec names (empirical samples, arrival traces, the spec itself), read in
chunks and never past a bound; a bad line is named by file and line number, never quoted."""

from __future__ import annotations

import stat
from pathlib import Path

from . import _limits as L
from ._spec_errors import fail as _fail


def read_capped(where: Path, cap: int) -> bytes | str:
    """The bytes of the regular file ``where``, read in chunks and never past ``cap``; or
    why not (a one-line reason: unreadable, not a regular file, larger than ``cap``)."""
    try:
        info = where.stat()
    except OSError as exc:
        return f"cannot read {where}: {exc.strerror}"
    if not stat.S_ISREG(info.st_mode):  # /dev/zero, a FIFO, a directory: never read
        return f"{where} is not a regular file"
    if info.st_size > cap:
        return f"{where} is larger than {cap:,} bytes"
    chunks: list[bytes] = []
    size = 0
    try:
        with where.open("rb") as f:
            while chunk := f.read(1 << 20):
                size += len(chunk)
                if size > cap:  # it grew since the stat
                    return f"{where} is larger than {cap:,} bytes"
                chunks.append(chunk)
    except OSError as exc:
        return f"cannot read {where}: {exc.strerror}"
    return b"".join(chunks)


def file_samples(file: str, path: str, base: Path | None) -> list[float]:
    """The samples of a file of numbers, one per line (``#`` comments). A bad line is named
    by the file and its line number, never quoted: the file may be anything."""
    where = Path(file) if base is None else base / file
    data = read_capped(where, L.MAX_SAMPLE_FILE_BYTES)
    if isinstance(data, str):
        raise _fail(f"{path}.file", data, file)
    samples: list[float] = []
    for n, raw in enumerate(data.splitlines(), 1):
        try:
            line = raw.decode("utf-8").split("#", 1)[0].strip()
        except UnicodeDecodeError:
            raise _fail(f"{path}.file", f"{where}:{n}: not UTF-8 text", file) from None
        if not line:
            continue
        try:
            v = float(line)
        except ValueError:
            raise _fail(f"{path}.file", f"{where}:{n}: not a number", file) from None
        if not 0 <= v <= L.MAX_MS:
            raise _fail(f"{path}.file", f"{where}:{n}: must be a number in [0, {L.MAX_MS:g}]", file)
        if len(samples) >= L.MAX_SAMPLES:
            raise _fail(f"{path}.file", f"{where}: more than {L.MAX_SAMPLES:,} samples", file)
        samples.append(v)
    return samples


def trace_times(file: str, path: str, base: Path | None) -> tuple[float, ...]:
    """A trace: capture times in seconds from the run's start, one per line (``#``
    comments), sorted. A bad line is named by its line number, never quoted."""
    where = Path(file) if base is None else base / file
    data = read_capped(where, L.MAX_TRACE_FILE_BYTES)
    if isinstance(data, str):
        raise _fail(path, data, file)
    times: list[float] = []
    for n, raw in enumerate(data.splitlines(), 1):
        try:
            line = raw.decode("utf-8").split("#", 1)[0].strip()
            if not line:
                continue
            v = float(line)
        except (UnicodeDecodeError, ValueError):
            raise _fail(path, f"{where}:{n}: not a number of seconds", file) from None
        if not 0 <= v <= L.MAX_SECONDS:
            raise _fail(path, f"{where}:{n}: must be in [0, {L.MAX_SECONDS:g}] seconds", file)
        if len(times) >= L.MAX_TRACE_FRAMES:
            raise _fail(path, f"{where}: more than {L.MAX_TRACE_FRAMES:,} timestamps", file)
        times.append(v)
    if not times:
        raise _fail(path, f"{where}: no timestamps", file)
    times.sort()
    return tuple(times)


__all__ = ["file_samples", "read_capped", "trace_times"]
