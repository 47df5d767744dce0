"""Conformance: cases with stable IDs, run unchanged on every provider and async backend.

Write a case with :func:`case`; run cases with :func:`run` / :func:`run_case`, from the CLI
(``videoflow-aio conformance``) or from pytest (:func:`conformance_suite`); plug in a backend
with a :class:`Provider` and :func:`register_provider`. See ``docs/conformance.md``.
"""

from __future__ import annotations

from ._capabilities import CAPABILITIES, Capability, capability_names
from ._case import CONTRACTS, REGISTRY, RESERVED_PREFIXES, Case, case, select_cases
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
from ._provider import Provider, get_provider, provider_names, register_provider
from ._runner import (
    BACKENDS,
    REQUIRE_SERVERS_ENV,
    CaseResult,
    Report,
    Summary,
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
    "AllocationControls",
    "AllocationHarness",
    "Capability",
    "Case",
    "CaseFailure",
    "CaseResult",
    "Harness",
    "MessagingControls",
    "MessagingHarness",
    "PayloadControls",
    "PayloadHarness",
    "Provider",
    "Report",
    "RuntimeStoreControls",
    "RuntimeStoreHarness",
    "ServerProvider",
    "Skip",
    "Summary",
    "capability_names",
    "case",
    "conformance_suite",
    "get_provider",
    "plan",
    "provider_names",
    "register_provider",
    "run",
    "run_case",
    "select_cases",
    "servers_required",
    "summarize",
]
