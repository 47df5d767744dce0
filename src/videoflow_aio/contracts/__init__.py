"""Contracts: abstract async backends and the msgspec Structs that cross them."""

from __future__ import annotations

from ._base import Known, Observed, Unknown
from .errors import (
    BackendUnavailable,
    ConflictError,
    IncompatibleProfile,
    NotFound,
    OutcomeUnknown,
    Unsupported,
    ValidationError,
    VideoflowError,
)
from .runtime_store import RuntimeCapabilities, RuntimeStore

__all__ = [
    "BackendUnavailable",
    "ConflictError",
    "IncompatibleProfile",
    "Known",
    "NotFound",
    "Observed",
    "OutcomeUnknown",
    "RuntimeCapabilities",
    "RuntimeStore",
    "Unknown",
    "Unsupported",
    "ValidationError",
    "VideoflowError",
]
