"""Conformance: cases with stable IDs, run unchanged on every provider and async backend."""

from __future__ import annotations

from ._case import CONTRACTS, REGISTRY, Case, case, cases
from ._harness import CaseFailure, Harness, Skip
from ._provider import Provider, get_provider, provider_names, register_provider
from ._runner import BACKENDS, CaseResult, Report, run, run_case, summarize

__all__ = [
    "BACKENDS",
    "CONTRACTS",
    "REGISTRY",
    "Case",
    "CaseFailure",
    "CaseResult",
    "Harness",
    "Provider",
    "Report",
    "Skip",
    "case",
    "cases",
    "get_provider",
    "provider_names",
    "register_provider",
    "run",
    "run_case",
    "summarize",
]
