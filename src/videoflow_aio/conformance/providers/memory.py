"""The ``memory`` provider: the reference models on virtual time, every control available.

Each contract's model module registers its factory in ``MEMORY_FACTORIES`` lazily here.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from .._case import Case
from .._harness import Harness, Skip
from .._provider import Provider, register_provider
from ...vtime import current_clock

# contract -> (module, class) of the reference model
MEMORY_MODELS: dict[str, tuple[str, str]] = {
    "runtime_store": ("videoflow_aio.memory.runtime_store", "MemoryRuntimeStore"),
    "messaging": ("videoflow_aio.memory.messaging", "MemoryMessagingBackend"),
    "payload": ("videoflow_aio.memory.payload", "MemoryPayloadStore"),
    "allocation": ("videoflow_aio.memory.allocation", "MemoryAllocationBackend"),
}


def _model_class(contract: str) -> type[Any]:
    module, cls = MEMORY_MODELS[contract]
    try:
        return getattr(importlib.import_module(module), cls)  # type: ignore[no-any-return]
    except (ImportError, AttributeError) as exc:
        raise Skip(f"model {module}.{cls} is not available: {exc}") from exc


class MemoryProvider(Provider):
    name = "memory"

    def contracts(self) -> frozenset[str]:
        return frozenset(MEMORY_MODELS)

    @asynccontextmanager
    async def harness(self, case: Case) -> AsyncIterator[Harness]:
        cls = _model_class(case.contract)

        async def factory(**options: Any) -> Any:
            try:
                return cls(**options)
            except TypeError as exc:
                raise Skip(f"{cls.__name__} cannot be configured with {options}: {exc}") from exc

        yield Harness(
            provider=self.name,
            contract=case.contract,
            factory=factory,
            clock=current_clock(),
            allowed_controls=case.controls,
        )


register_provider("memory", MemoryProvider)
