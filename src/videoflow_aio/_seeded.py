"""What a seed decides: the order of a batch of same-instant work, and timing jitter.

A seeded clock owns one PRNG. Each backend draws from it, in the order its run loop makes
decisions, so the same seed and the same program give the same decisions. Every draw is
``random()``; a draw of 0.0 always means "as if unseeded" (keep the canonical order, no
delay), so a Hypothesis-controlled random (``st.randoms()``) shrinks towards the plain
schedule.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, MutableSequence
from typing import Any, TypeVar

from ._finite import is_finite_number
from .contracts.errors import ValidationError

T = TypeVar("T")

Seed = int | random.Random


def make_rng(seed: Seed | None) -> random.Random | None:
    """The PRNG for ``seed``: a fresh ``random.Random(seed)`` for a non-negative int, the
    object itself for a ``random.Random``, None for None; anything else is refused."""
    if seed is None or isinstance(seed, random.Random):
        return seed
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValidationError(
            f"seed must be a non-negative int (or a random.Random), not {seed!r}",
            field="seed",
            value=seed,
        )
    return random.Random(seed)


def check_seconds(value: Any, name: str) -> float:
    """``value`` as a float: a finite number of seconds >= 0 (a typed error otherwise)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValidationError(
            f"{name} must be a number of seconds, not {value!r}", field=name, value=value
        )
    if not (is_finite_number(value) and value >= 0):
        raise ValidationError(
            f"{name} must be finite and >= 0, not {value!r}", field=name, value=value
        )
    return float(value)


def check_jitter(jitter: Any, seed: Seed | None) -> float:
    """``jitter`` as a float: a finite number of seconds >= 0, non-zero only with a seed."""
    value = check_seconds(jitter, "jitter")
    if value and seed is None:
        raise ValidationError(
            "jitter needs a seed (it is drawn from the seeded PRNG)", field="jitter", value=jitter
        )
    return value


def shuffle(batch: MutableSequence[T], draw: Callable[[], float]) -> None:
    """Permute ``batch`` in place, uniformly, from ``draw()`` (a float in [0, 1)).

    A forward Fisher-Yates: step ``i`` swaps item ``i`` with one of ``i..n-1``, so draws of
    0.0 leave the batch as it is. One draw per item but the last.
    """
    n = len(batch)
    for i in range(n - 1):
        j = i + int(draw() * (n - i))
        if j != i:
            batch[i], batch[j] = batch[j], batch[i]


def overshoot(when: float, jitter: float, draw: Callable[[], float], limit: float) -> float:
    """Where a jump to deadline ``when`` lands with ``jitter``: ``when + u * jitter`` for a
    drawn ``u`` in [0, 1), never past ``limit`` (manual mode: what ``advance()`` reached)
    and never short of ``when``."""
    target = when + draw() * jitter
    if target > limit:
        target = limit
    return target if target > when and math.isfinite(target) else when
