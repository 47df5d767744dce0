"""One definition of "a finite real number" for every check of caller-supplied numbers.

Python ints are unbounded, so ``math.isfinite(10**400)`` and ``float(10**400)`` raise
``OverflowError`` instead of answering: a check written with them turns hostile input into
an untyped error. These helpers treat an int beyond the float range as infinite.
"""

from __future__ import annotations

import math
from typing import TypeGuard

__all__ = ["as_float", "is_finite_number"]


def as_float(value: float) -> float:
    """``float(value)``, with ``±inf`` for an int too large for a float (``10**400``)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def is_finite_number(value: object) -> TypeGuard[int | float]:
    """True for an int or float (never a bool) that is finite as a float."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(as_float(value))
