"""Conformance: cases with stable IDs, run unchanged on every provider and async backend.

Write a case with :func:`case`; run cases with :func:`run` / :func:`run_case`, from the CLI
(``videoflow-aio conformance``) or from pytest (:func:`conformance_suite`); plug in a backend
with a :class:`Provider` and :func:`register_provider`. See ``docs/conformance.md``.
"""

from __future__ import annotations

import sys
import types
from typing import Any

from ._case import CONTRACTS, REGISTRY, Case, case, cases
from ._harness import CaseFailure, Harness, Skip
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


class _Package(types.ModuleType):
    """Keeps ``conformance.cases`` the function when the ``cases/`` folder gets imported.

    Importing a submodule sets it as an attribute of its package; without this, importing
    ``videoflow_aio.conformance.cases`` (the folder of case modules) would replace the
    :func:`cases` function. The folder stays importable through ``sys.modules``.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "cases" and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

__all__ = [
    "BACKENDS",
    "CONTRACTS",
    "REGISTRY",
    "REQUIRE_SERVERS_ENV",
    "Case",
    "CaseFailure",
    "CaseResult",
    "Harness",
    "Provider",
    "Report",
    "ServerProvider",
    "Skip",
    "Summary",
    "case",
    "cases",
    "conformance_suite",
    "get_provider",
    "plan",
    "provider_names",
    "register_provider",
    "run",
    "run_case",
    "servers_required",
    "summarize",
]
