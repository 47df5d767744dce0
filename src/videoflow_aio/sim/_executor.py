"""Where replications run: in this process, on local worker processes, or on a Dask
distributed cluster. Every job is ``run_replication(spec, seed)``, a pure function of its
arguments, so the results — and the JSON built from them, wall times aside — are the same
whichever executor ran them; results are handed back in job order.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from typing import Any, Protocol

from ._replicate import run_replication
from ._spec_types import SimSpec, SpecError

Job = tuple[SimSpec, int]
"""A spec and the seed to run it with."""


class Executor(Protocol):
    """Runs jobs; ``done`` is called once per finished job (for a progress bar)."""

    def run(self, jobs: Sequence[Job], done: Callable[[], None]) -> list[dict[str, Any]]:
        """The jobs' results, in job order."""
        ...

    def close(self) -> None:
        """Release workers or connections."""
        ...


class InProcess:
    """One job after another, in this process (``--workers 1``)."""

    def run(self, jobs: Sequence[Job], done: Callable[[], None]) -> list[dict[str, Any]]:
        out = []
        for spec, seed in jobs:
            out.append(run_replication(spec, seed))
            done()
        return out

    def close(self) -> None:
        pass


class LocalProcesses:
    """A pool of ``workers`` local processes (started by ``forkserver`` on POSIX, so a
    progress bar's thread in the parent is not forked), created on first use."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None

    def run(self, jobs: Sequence[Job], done: Callable[[], None]) -> list[dict[str, Any]]:
        if self._pool is None:
            method = (
                "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
            )
            self._pool = ProcessPoolExecutor(
                self.workers, mp_context=multiprocessing.get_context(method)
            )
        futures: dict[Future[dict[str, Any]], int] = {
            self._pool.submit(run_replication, spec, seed): i for i, (spec, seed) in enumerate(jobs)
        }
        out: list[dict[str, Any] | None] = [None] * len(jobs)
        for fut in as_completed(futures):
            out[futures[fut]] = fut.result()
            done()
        return [r for r in out if r is not None]

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)  # after an error or ^C: no more jobs
            self._pool = None


class DaskCluster:
    """Jobs on an existing Dask distributed cluster (``distributed.Client(address)``); the
    workers need this package installed (the same version)."""

    def __init__(self, address: str) -> None:
        try:
            from distributed import Client
        except ImportError:
            raise SpecError(
                "--dask needs the distributed package: pip install 'videoflow-aio[dask]'",
                field="--dask",
                value=address,
            ) from None
        try:
            self._client: Any = Client(address, timeout=10)  # type: ignore[no-untyped-call]
        except (OSError, TimeoutError, ValueError) as exc:
            raise SpecError(
                f"--dask {address}: cannot reach the scheduler: {exc}",
                field="--dask",
                value=address,
            ) from None

    def run(self, jobs: Sequence[Job], done: Callable[[], None]) -> list[dict[str, Any]]:
        from distributed import as_completed as dask_completed

        futures = [
            self._client.submit(run_replication, spec, seed, pure=False) for spec, seed in jobs
        ]
        index = {f.key: i for i, f in enumerate(futures)}
        out: list[dict[str, Any] | None] = [None] * len(jobs)
        for fut in dask_completed(futures):  # type: ignore[no-untyped-call]
            out[index[fut.key]] = fut.result()
            done()
        return [r for r in out if r is not None]

    def close(self) -> None:
        self._client.close()


def default_workers() -> int:
    """The CPUs this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def make_executor(workers: int | None = None, dask: str | None = None) -> Executor:
    """``dask`` (a scheduler address) → :class:`DaskCluster`; else ``workers`` (default: the
    CPU count) local processes, or :class:`InProcess` for one."""
    if dask is not None:
        return DaskCluster(dask)
    n = default_workers() if workers is None else workers
    if n < 1:
        raise SpecError("--workers must be >= 1", field="--workers", value=workers)
    return InProcess() if n == 1 else LocalProcesses(n)


__all__ = [
    "DaskCluster",
    "Executor",
    "InProcess",
    "Job",
    "LocalProcesses",
    "default_workers",
    "make_executor",
]
