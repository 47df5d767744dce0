"""Conformance: cases with stable IDs, run unchanged on every provider and async backend.

Write a case with :func:`case`; run cases with :func:`run` / :func:`run_case` (or
:func:`execute` for the traceback, the error and the injected faults of one run), from the CLI
(``videoflow-aio conformance``) or from pytest (:func:`conformance_suite`); plug in a backend
with a :class:`Provider`, declared as a ``videoflow_aio.providers`` entry point (or registered
with :func:`register_provider`). Results render with
:mod:`videoflow_aio.conformance.report`. See ``docs/conformance.md``.
"""

from __future__ import annotations

from ._capabilities import CAPABILITIES, Capability, capability_names
from ._case import CONTRACTS, REGISTRY, RESERVED_PREFIXES, Case, case, select_cases, selector
from ._controls import (
    CONTROLS,
    AllocationControls,
    MessagingControls,
    PayloadControls,
    RuntimeStoreControls,
)
from ._harness import (
    AllocationHarness,
    CaseFailure,
    Harness,
    MessagingHarness,
    PayloadHarness,
    RuntimeStoreHarness,
    Skip,
)
from ._provider import (
    Provider,
    env_options,
    get_provider,
    provider_names,
    register_provider,
)
from ._registry import ProviderLoadError
from ._runner import (
    BACKENDS,
    REQUIRE_SERVERS_ENV,
    VIRTUAL_LIMIT,
    CaseResult,
    Execution,
    Report,
    Summary,
    describe,
    execute,
    fault_injector,
    plan,
    run,
    run_case,
    servers_required,
    summarize,
)
from ._server_provider import ServerProvider
from ._suite import conformance_suite

__all__ = [
    "BACKENDS",
    "CAPABILITIES",
    "CONTRACTS",
    "CONTROLS",
    "REGISTRY",
    "REQUIRE_SERVERS_ENV",
    "RESERVED_PREFIXES",
    "VIRTUAL_LIMIT",
    "AllocationControls",
    "AllocationHarness",
    "Capability",
    "Case",
    "CaseFailure",
    "CaseResult",
    "Execution",
    "Harness",
    "MessagingControls",
    "MessagingHarness",
    "PayloadControls",
    "PayloadHarness",
    "Provider",
    "ProviderLoadError",
    "Report",
    "RuntimeStoreControls",
    "RuntimeStoreHarness",
    "ServerProvider",
    "Skip",
    "Summary",
    "capability_names",
    "case",
    "conformance_suite",
    "describe",
    "env_options",
    "execute",
    "fault_injector",
    "get_provider",
    "plan",
    "provider_names",
    "register_provider",
    "run",
    "run_case",
    "select_cases",
    "selector",
    "servers_required",
    "summarize",
]
