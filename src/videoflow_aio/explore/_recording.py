"""The memory provider, recording every model a case opens into one ObservationLog.

The conformance cases build their backends without a log; the explorer hands each model
that takes one (``log=``) the run's own log, so every case run leaves a log to check and
to compare byte for byte.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from ..conformance import Case, Harness
from ..conformance.providers.memory import MEMORY_MODELS, MemoryProvider
from ..observe import ObservationLog


@functools.cache
def _takes_log(contract: str) -> bool:
    module, name = MEMORY_MODELS[contract]
    try:
        model = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):  # the provider itself reports a missing model
        return False
    return "log" in inspect.signature(model).parameters


class RecordingMemoryProvider(MemoryProvider):
    """:class:`MemoryProvider` whose models record into :attr:`log` (fresh for each case)."""

    def __init__(self) -> None:
        self.log = ObservationLog()

    @asynccontextmanager
    async def harness(self, case: Case) -> AsyncIterator[Harness]:
        self.log = log = ObservationLog()
        async with super().harness(case) as h:
            if _takes_log(case.contract):
                opened = h._factory

                async def factory(**options: Any) -> Any:
                    options.setdefault("log", log)
                    return await opened(**options)

                h._factory = factory
            yield h
