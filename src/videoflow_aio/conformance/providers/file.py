"""The ``file`` provider: :class:`~videoflow_aio.memory.runtime_store.FileRuntimeStore` in a
fresh temporary directory per case, on virtual time like the models (the store has no timers;
the virtual clock never jumps while its worker threads run).

Options a case may pass to ``h.open``: ``reopen_of=<a store this harness opened>`` opens a new
store on the same directory, as a restarted process would. Anything else skips the case.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import anyio.to_thread

from ...memory.runtime_store import FileRuntimeStore
from ...vtime import current_clock
from .._case import Case
from .._harness import Harness, Skip
from .._provider import Provider


class FileProvider(Provider):
    """Runs the runtime_store cases on the file-directory store."""

    name = "file"

    def __init__(self, root: str | None = None) -> None:
        self.root = root  # parent of the per-case directories (default: the system temp dir)

    def contracts(self) -> frozenset[str]:
        return frozenset({"runtime_store"})

    def controls(self, contract: str) -> frozenset[str] | None:
        return frozenset()

    @asynccontextmanager
    async def harness(self, case: Case) -> AsyncIterator[Harness]:
        mkdtemp = partial(tempfile.mkdtemp, prefix=f"vf-{case.id}-", dir=self.root)
        directory = await anyio.to_thread.run_sync(mkdtemp)
        seq = [0]

        async def factory(**options: Any) -> Any:
            reopen_of = options.pop("reopen_of", None)
            if options:
                raise Skip(f"file provider cannot honour options {sorted(options)}")
            if reopen_of is not None:
                if not isinstance(reopen_of, FileRuntimeStore):
                    raise Skip(f"reopen_of must be a store of this harness, not {reopen_of!r}")
                return FileRuntimeStore(reopen_of.root)
            seq[0] += 1
            return FileRuntimeStore(f"{directory}/store-{seq[0]}")

        try:
            yield Harness(
                provider=self.name,
                contract=case.contract,
                factory=factory,
                clock=current_clock(),
                allowed_controls=case.controls,
            )
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(partial(shutil.rmtree, directory, True))


__all__ = ["FileProvider"]
