"""Streaming latency statistics in constant memory.

:class:`LatencyHistogram` keeps count, sum, min and max exactly and the distribution in
log-linear buckets: each power of two is split into ``2**precision_bits`` equal buckets, so
a bucket's width is at most ``2**-precision_bits`` of its lower edge. A percentile is the
midpoint of the bucket holding the nearest-rank sample (rank ``ceil(q * count)``), clamped to
``[min, max]``: its relative error is at most ``2**-(precision_bits + 1)`` (0.049 % at the
default 10 bits). Memory is bounded by the number of distinct buckets (at most
``2**precision_bits`` per octave of the range seen), never by the number of samples; two
histograms built from the same samples in the same order are identical, bit for bit.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence

from .._finite import is_finite_number
from ..contracts.errors import ValidationError

DEFAULT_PRECISION_BITS = 10
"""The default ``precision_bits`` of a :class:`LatencyHistogram`: percentiles within a relative
error of 2^-(bits + 1), about 0.05 % at 10."""

_frexp = math.frexp


class LatencyHistogram:
    """Count, mean, min, max exactly; percentiles within ``relative_error``."""

    __slots__ = ("_buckets", "_scale", "_shift", "_zeros", "count", "max", "min", "total")

    def __init__(self, precision_bits: int = DEFAULT_PRECISION_BITS) -> None:
        if isinstance(precision_bits, bool) or not isinstance(precision_bits, int):
            raise ValidationError(
                "precision_bits must be an int", field="precision_bits", value=precision_bits
            )
        if not 1 <= precision_bits <= 20:
            raise ValidationError(
                "precision_bits must be in [1, 20]", field="precision_bits", value=precision_bits
            )
        self._shift = precision_bits + 1
        self._scale = float(1 << (precision_bits + 1))
        self._buckets: dict[int, int] = {}
        self._zeros = 0
        self.count = 0
        self.total = 0.0
        self.min = math.inf
        self.max = -math.inf

    @property
    def relative_error(self) -> float:
        """The bound on a percentile's relative error (half a bucket's relative width)."""
        return 1.0 / self._scale

    def add(self, value: float) -> None:
        """Record one sample (seconds, or any finite non-negative quantity); ValidationError
        for a negative, NaN or infinite one, or one that is not a number (nothing recorded)."""
        try:
            positive = value > 0.0
        except TypeError:  # not a number: str, None, ... (zero cost when it does not raise)
            positive = False
        if positive and type(value) is not float and not _is_number(value):
            positive = False
        if positive:  # the common case first (NaN and negatives fail this test)
            try:
                m, e = _frexp(value)
                i = (e << self._shift) + int(m * self._scale)
            except OverflowError:  # inf (frexp hands it back as the mantissa), or an int
                # too large for a float
                raise ValidationError(
                    "a sample must be finite", field="value", value=value
                ) from None
            b = self._buckets
            b[i] = b.get(i, 0) + 1
        elif _is_number(value) and value == 0.0:
            self._zeros += 1
        elif not _is_number(value):
            raise ValidationError("a sample must be a number", field="value", value=value)
        else:
            raise ValidationError("a sample must be >= 0", field="value", value=value)
        self.count += 1
        self.total += value
        if value > self.max:
            self.max = value
        if value < self.min:
            self.min = value

    def extend(self, values: Iterable[float]) -> None:
        if not isinstance(values, Iterable) or isinstance(values, str | bytes):
            raise ValidationError(
                "values must be an iterable of numbers", field="values", value=values
            )
        for v in values:
            self.add(v)

    @property
    def mean(self) -> float:
        """The exact mean; NaN when empty."""
        return self.total / self.count if self.count else math.nan

    def _value_of(self, index: int) -> float:
        shift = self._shift
        e = index >> shift
        k = index - (e << shift)
        return math.ldexp((k + 0.5) / self._scale, e)

    def percentiles(self, qs: Sequence[float]) -> list[float]:
        """The nearest-rank percentiles ``qs`` (fractions in ``[0, 1]``); NaN when empty."""
        if not isinstance(qs, Sequence) or isinstance(qs, str | bytes):
            raise ValidationError("qs must be a sequence of fractions", field="qs", value=qs)
        for q in qs:
            if not _is_number(q) or not 0.0 <= q <= 1.0:
                raise ValidationError("a quantile must be in [0, 1]", field="q", value=q)
        if not self.count:
            return [math.nan for _ in qs]
        ranks = [max(1, math.ceil(q * self.count)) for q in qs]
        order = sorted(range(len(qs)), key=lambda j: ranks[j])
        out = [0.0] * len(qs)
        seen = self._zeros
        keys = iter(sorted(self._buckets))
        current = 0.0
        for j in order:
            rank = ranks[j]
            if rank <= self._zeros:
                out[j] = 0.0
                continue
            while seen < rank:
                index = next(keys)
                seen += self._buckets[index]
                current = self._value_of(index)
            out[j] = min(max(current, self.min), self.max)
        return out

    def percentile(self, q: float) -> float:
        return self.percentiles([q])[0]

    def merge(self, other: LatencyHistogram) -> None:
        """Add ``other``'s samples (same precision) to this histogram."""
        if not isinstance(other, LatencyHistogram):
            raise ValidationError("other must be a LatencyHistogram", field="other", value=other)
        if other._shift != self._shift:
            raise ValidationError(
                "cannot merge histograms of different precision", field="other", value=other
            )
        self.count += other.count
        self.total += other.total
        self.min = min(self.min, other.min)
        self.max = max(self.max, other.max)
        self._zeros += other._zeros
        b = self._buckets
        for k, v in other._buckets.items():
            b[k] = b.get(k, 0) + v

    def summary(self, scale: float = 1.0) -> dict[str, float | None]:
        """``mean, p50, p90, p99, p999, max`` times ``scale`` (e.g. 1000 for milliseconds);
        None for each when empty. ``scale`` must be a finite number > 0."""
        if not _is_number(scale) or not (scale > 0 and is_finite_number(scale)):
            raise ValidationError("scale must be a finite number > 0", field="scale", value=scale)
        if not self.count:
            return dict.fromkeys(("mean", "p50", "p90", "p99", "p999", "max"))
        p50, p90, p99, p999 = self.percentiles((0.5, 0.9, 0.99, 0.999))
        return {
            "mean": self.mean * scale,
            "p50": p50 * scale,
            "p90": p90 * scale,
            "p99": p99 * scale,
            "p999": p999 * scale,
            "max": self.max * scale,
        }


def _is_number(value: object) -> bool:
    """A real number, not a bool (numpy's scalars included)."""
    return not isinstance(value, bool) and isinstance(value, numbers.Real)


__all__ = ["DEFAULT_PRECISION_BITS", "LatencyHistogram"]
