"""Service-time distributions: a spec becomes a sampler bound to one seeded RNG.

Each sampler returns seconds. ``lognormal`` is parametrised by its mean and 99th
percentile: with ``z`` the standard normal's 0.99 quantile and ``d = ln(p99 / mean)``,
``sigma = z - sqrt(z^2 - 2 d)`` and ``mu = ln(mean) - sigma^2 / 2`` (the smaller root, so
the shape is the least skewed one with that mean and p99).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from .._finite import is_finite_number
from ..contracts.errors import ValidationError
from ._spec import Z99 as _Z99
from ._spec_types import ServiceSpec

Sampler = Callable[[], float]


def lognormal_params(mean: float, p99: float) -> tuple[float, float]:
    """``(mu, sigma)`` of the lognormal with this mean and 99th percentile; ValidationError
    unless ``0 < mean < p99`` (finite) with ``ln(p99 / mean) <= z**2 / 2``."""
    if not (is_finite_number(mean) and is_finite_number(p99) and 0 < mean < p99):
        raise ValidationError("need finite 0 < mean < p99", field="p99", value=(mean, p99))
    d = math.log(p99 / mean)
    if d > _Z99 * _Z99 / 2.0:
        most = math.exp(_Z99 * _Z99 / 2.0)
        raise ValidationError(
            f"no lognormal has this mean and p99: p99 / mean must be <= {most:.2f}",
            field="p99",
            value=(mean, p99),
        )
    sigma = _Z99 - math.sqrt(_Z99 * _Z99 - 2.0 * d)
    return math.log(mean) - sigma * sigma / 2.0, sigma


def sampler(spec: ServiceSpec, rng: random.Random) -> Sampler:
    """A zero-argument function drawing one service time (seconds) from ``rng``."""
    if spec.dist == "constant":
        value = (spec.value_ms or 0.0) / 1000.0
        return lambda: value
    if spec.dist == "exponential":
        rate = 1000.0 / (spec.mean_ms or 1.0)
        expo = rng.expovariate
        return lambda: expo(rate)
    if spec.dist == "lognormal":
        assert spec.mean_ms is not None and spec.p99_ms is not None
        mu, sigma = lognormal_params(spec.mean_ms / 1000.0, spec.p99_ms / 1000.0)
        lognorm = rng.lognormvariate
        return lambda: lognorm(mu, sigma)
    samples = [v / 1000.0 for v in spec.samples_ms]
    choice = rng.choice
    return lambda: choice(samples)


def mean_seconds(spec: ServiceSpec) -> float:
    """The distribution's mean in seconds."""
    return (spec.mean_ms or 0.0) / 1000.0


__all__ = ["Sampler", "lognormal_params", "mean_seconds", "sampler"]
