"""Queueing formulas the simulator is validated against (``tests/sim/test_sim_queueing.py``).

All times in seconds; ``lam`` is the arrival rate, ``mu`` one server's service rate.
"""

from __future__ import annotations

import math

from .._finite import is_finite_number
from ..contracts.errors import ValidationError

#: the most servers the formulas take: the Erlang B recursion is O(c)
MAX_SERVERS = 1_000_000


def _positive(value: object, field: str) -> float:
    if not is_finite_number(value) or value <= 0:
        raise ValidationError(f"{field} must be a finite number > 0", field=field, value=value)
    return float(value)


def _servers(c: object) -> int:
    if isinstance(c, bool) or not isinstance(c, int) or not 1 <= c <= MAX_SERVERS:
        raise ValidationError(f"c must be an integer in [1, {MAX_SERVERS:,}]", field="c", value=c)
    return c


def _check(lam: float, mu: float, c: int) -> float:
    lam, mu, c = _positive(lam, "lam"), _positive(mu, "mu"), _servers(c)
    rho = lam / (c * mu)
    if not rho < 1:
        raise ValidationError(f"unstable: utilisation {rho:.3f} >= 1", field="lam", value=lam)
    return rho


def erlang_c(c: int, offered: float) -> float:
    """The probability that an arrival waits in M/M/c with offered load ``lam / mu``
    (computed through the Erlang B recursion, stable for large ``c``). ValidationError
    unless ``c`` is an integer in [1, :data:`MAX_SERVERS`] and ``0 <= offered < c``."""
    c = _servers(c)
    if not is_finite_number(offered) or not 0 <= offered < c:
        raise ValidationError(
            "offered load must be a finite number in [0, c)", field="offered", value=offered
        )
    b = 1.0
    for k in range(1, c + 1):
        b = offered * b / (k + offered * b)
    rho = offered / c
    return b / (1.0 - rho * (1.0 - b))


def mmc_mean_response(lam: float, mu: float, c: int) -> float:
    """Mean time in system (wait + service) of M/M/c: ``1/mu + C(c, a) / (c mu - lam)``."""
    _check(lam, mu, c)
    return 1.0 / mu + erlang_c(c, lam / mu) / (c * mu - lam)


def mmc_response_tail(lam: float, mu: float, c: int, t: float) -> float:
    """``P(T > t)`` for the time in system ``T`` (wait + service) of FCFS M/M/c.

    The wait is 0 with probability ``1 - C`` and otherwise exponential with rate
    ``theta = c mu - lam`` (``C`` = Erlang C); the service is exponential with rate ``mu``
    and independent of it, so ``T`` is a mixture of ``Exp(mu)`` and the hypoexponential
    sum of ``Exp(theta)`` and ``Exp(mu)``."""
    _check(lam, mu, c)
    if not is_finite_number(t) and not (isinstance(t, float) and t == math.inf):
        raise ValidationError("t must be a number of seconds", field="t", value=t)
    if t <= 0:
        return 1.0
    if t == math.inf:
        return 0.0
    wait = erlang_c(c, lam / mu)
    theta = c * mu - lam
    if abs(theta - mu) < 1e-12 * mu:
        both = (1.0 + mu * t) * math.exp(-mu * t)
    else:
        both = (mu * math.exp(-theta * t) - theta * math.exp(-mu * t)) / (mu - theta)
    return (1.0 - wait) * math.exp(-mu * t) + wait * both


def mmc_response_quantile(lam: float, mu: float, c: int, q: float) -> float:
    """The ``q`` quantile of the time in system of FCFS M/M/c (solves
    ``P(T > t) = 1 - q`` by bisection on the closed-form tail, to 1e-12 relative)."""
    _check(lam, mu, c)
    if isinstance(q, bool) or not isinstance(q, int | float) or not 0.0 < q < 1.0:
        raise ValidationError("need 0 < q < 1", field="q", value=q)
    lo, hi = 0.0, 1.0 / mu
    while mmc_response_tail(lam, mu, c, hi) > 1.0 - q:
        lo, hi = hi, hi * 2.0
    while hi - lo > 1e-12 * hi:
        mid = (lo + hi) / 2.0
        if mmc_response_tail(lam, mu, c, mid) > 1.0 - q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def mg1_mean_response(lam: float, mean: float, second_moment: float) -> float:
    """Mean time in system of M/G/1 (Pollaczek–Khinchine):
    ``mean + lam E[S^2] / (2 (1 - rho))``."""
    mean = _positive(mean, "mean")
    if not is_finite_number(second_moment) or second_moment < mean * mean * (1 - 1e-9):
        raise ValidationError(
            "second_moment must be finite and >= mean**2",
            field="second_moment",
            value=second_moment,
        )
    rho = _check(lam, 1.0 / mean, 1)
    return mean + lam * second_moment / (2.0 * (1.0 - rho))


def md1_mean_response(lam: float, service: float) -> float:
    """Mean time in system of M/D/1: ``D + rho D / (2 (1 - rho))``."""
    service = _positive(service, "service")
    return mg1_mean_response(lam, service, service * service)


__all__ = [
    "erlang_c",
    "md1_mean_response",
    "mg1_mean_response",
    "mmc_mean_response",
    "mmc_response_quantile",
    "mmc_response_tail",
]
