"""The truthful-observation pair and the Struct base every contract uses."""

from __future__ import annotations

from typing import Generic, TypeVar

import msgspec

T = TypeVar("T")


class Known(msgspec.Struct, Generic[T], frozen=True, tag=True):
    """A read that succeeded: ``value`` is what the backend reported."""

    value: T


class Unknown(msgspec.Struct, frozen=True, tag=True):
    """A read that failed or cannot be answered. Never to be read as zero, idle or empty."""

    reason: str


Observed = Known[T] | Unknown
"""Either what was read, or why it could not be."""
