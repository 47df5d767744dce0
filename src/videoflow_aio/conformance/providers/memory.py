"""The ``memory`` provider: the reference models on virtual time, every control available.

``MEMORY_MODELS`` maps each contract to its model class, imported lazily per case. A model
module that does not exist yet skips its cases with that reason; any other import error
fails them (a broken reference model is never hidden). Controls are strict here: a case that
declares a control the model lacks fails, since the reference model must offer every control.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from ...vtime import current_clock
from .._capabilities import CAPABILITIES
from .._case import Case
from .._harness import Harness, Skip
from .._provider import Provider

MEMORY_MODELS: dict[str, tuple[str, str]] = {
    "runtime_store": ("videoflow_aio.memory.runtime_store", "MemoryRuntimeStore"),
    "messaging": ("videoflow_aio.memory.messaging", "MemoryMessagingBackend"),
    "payload": ("videoflow_aio.memory.payload", "MemoryPayloadStore"),
    "allocation": ("videoflow_aio.memory.allocation", "MemoryAllocationBackend"),
}
"""contract -> (module, class) of its reference model."""


def _model_class(contract: str) -> type[Any]:
    module, cls = MEMORY_MODELS[contract]
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        raise Skip(f"model {module}.{cls} is not available: {exc}") from exc
    try:
        return getattr(mod, cls)  # type: ignore[no-any-return]
    except AttributeError as exc:
        raise Skip(f"model {module}.{cls} is not available: {exc}") from exc


class MemoryProvider(Provider):
    """Runs every contract's cases on its reference model (the executable specification)."""

    name = "memory"

    def contracts(self) -> frozenset[str]:
        return frozenset(MEMORY_MODELS)

    def capabilities(self, contract: str) -> frozenset[str] | None:
        if contract == "runtime_store":
            # MemoryRuntimeStore lives in one process: nothing survives a restart
            return frozenset({"client_side_cas"})
        # the other models implement every optional profile; none has members to lose
        return CAPABILITIES - {"replicated"}

    @asynccontextmanager
    async def harness(self, case: Case) -> AsyncIterator[Harness]:
        async def factory(**options: Any) -> Any:
            # resolved here, not up front, so a case that opens no backend runs without the model;
            # the reference model takes every seed option: a TypeError here is a real failure
            return _model_class(case.contract)(**options)

        yield Harness(
            provider=self.name,
            contract=case.contract,
            factory=factory,
            clock=current_clock(),
            allowed_controls=case.controls,
            strict_controls=True,
        )


__all__ = ["MEMORY_MODELS", "MemoryProvider"]
