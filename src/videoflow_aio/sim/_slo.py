"""Service-level objectives (``--slo``) and how a simulated point is judged against them.

Grammar: ``[<stage>|end_to_end.]<figure><op><value>[ms]`` with ``op`` one of ``<=``, ``<``,
``>=``, ``>``:

* latency: ``end_to_end.p99<=200ms``, ``detect.mean<15ms`` (figures ``mean``, ``p50``,
  ``p90``, ``p99``, ``p999``; the ``ms`` suffix is optional);
* ``throughput_hz>=750`` (end to end unless a stage is named);
* ``dropped<=0`` (frames end to end, messages at a stage): judged on every replication —
  the largest count any replication saw — since a mean of counts would hide the one run
  that dropped.

A latency or throughput objective is judged on its confidence interval: **met** when the
whole interval satisfies it, **not met** when none of it does, **uncertain** (None) when it
straddles the target (or there is no interval: one replication).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import msgspec

from ..pipeline import LatencyHistogram
from . import _limits as L
from ._ci import Interval
from ._result_types import SloFraction
from ._spec_types import SimSpec, SpecError

LATENCY_FIGURES = ("mean", "p50", "p90", "p99", "p999")
OTHER_FIGURES = ("throughput_hz", "dropped")
Op = Literal["<=", "<", ">=", ">"]
_OPS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    "<": operator.lt,
    ">=": operator.ge,
    ">": operator.gt,
}
_RE = re.compile(
    r"^\s*(?:(?P<where>[^.<>=\s]+)\.)?(?P<figure>[a-z0-9_]+)\s*(?P<op><=|>=|<|>)\s*"
    r"(?P<value>[-+0-9.eE]+)\s*(?P<unit>ms|hz)?\s*$"
)


@dataclass(frozen=True, slots=True)
class Slo:
    """One objective: ``where`` (a stage name or ``end_to_end``), ``figure``, ``op``,
    ``target`` (ms for latency figures)."""

    where: str
    figure: str
    op: Op
    target: float
    text: str

    @property
    def latency(self) -> bool:
        """Whether the figure is a latency (in ms)."""
        return self.figure in LATENCY_FIGURES

    @property
    def upper(self) -> bool:
        """Whether the target is an upper bound (``<=``, ``<``)."""
        return self.op in ("<=", "<")

    def holds(self, value: float) -> bool:
        """Whether ``value`` satisfies the objective."""
        return _OPS[self.op](value, self.target)

    def label(self) -> str:
        """``end_to_end.p99 <= 200 ms``."""
        unit = " ms" if self.latency else (" Hz" if self.figure == "throughput_hz" else "")
        return f"{self.where}.{self.figure} {self.op} {self.target:g}{unit}"


def parse_slo(text: str, stages: Sequence[str] = ()) -> Slo:
    """Parse one ``--slo``; SpecError naming it when malformed (or naming a stage that is
    not in ``stages``, when given)."""
    m = _RE.match(text)
    if m is None:
        raise _bad(text, "expected e.g. end_to_end.p99<=200ms, throughput_hz>=750, dropped<=0")
    where = m["where"] or "end_to_end"
    figure = m["figure"]
    if figure not in LATENCY_FIGURES + OTHER_FIGURES:
        raise _bad(
            text, f"unknown figure {figure!r}; one of {', '.join(LATENCY_FIGURES + OTHER_FIGURES)}"
        )
    if m["unit"] == "ms" and figure not in LATENCY_FIGURES:
        raise _bad(text, f"{figure} is not a latency: no ms")
    try:
        target = float(m["value"])
    except ValueError:
        raise _bad(text, f"not a number: {m['value']!r}") from None
    if not target >= 0 or target == float("inf"):
        raise _bad(text, "the target must be a finite number >= 0")
    if stages and where != "end_to_end" and where not in stages:
        raise _bad(text, f"no stage {where!r} (stages: {', '.join(stages)}; or end_to_end)")
    op: Op = m["op"]  # type: ignore[assignment]
    return Slo(where=where, figure=figure, op=op, target=target, text=text.strip())


def _bad(text: str, message: str) -> SpecError:
    return SpecError(f"--slo {text!r}: {message}", field="--slo", value=text)


@dataclass(frozen=True, slots=True)
class SloCheck:
    """One objective judged at one point: ``met`` True / False / None (uncertain), the
    estimate and its interval (``low``/``high``; for ``dropped`` the largest count of any
    replication, no interval)."""

    slo: Slo
    met: bool | None
    estimate: float | None
    low: float | None
    high: float | None
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON entry of ``slo.checks``."""
        out: dict[str, Any] = {
            "slo": self.slo.text,
            "where": self.slo.where,
            "figure": self.slo.figure,
            "op": self.slo.op,
            "target": self.slo.target,
            "met": self.met,
            "estimate": self.estimate,
            "interval": None if self.low is None or self.high is None else [self.low, self.high],
        }
        if self.reason is not None:
            out["reason"] = self.reason
        return out


def judge(slo: Slo, interval: Interval | None, worst_count: float | None = None) -> SloCheck:
    """Judge ``slo`` on a figure's ``interval`` (latency, throughput), or for ``dropped`` on
    ``worst_count`` (the largest count over the replications)."""
    if slo.figure == "dropped":
        if worst_count is None:
            return SloCheck(slo, None, None, None, None, "not measured")
        return SloCheck(slo, slo.holds(worst_count), worst_count, None, None)
    if interval is None:
        return SloCheck(slo, False, None, None, None, "nothing completed: no latency to judge")
    lo, hi = interval.low, interval.high
    if lo is None or hi is None:
        return SloCheck(slo, None, interval.estimate, None, None, "one replication: no interval")
    # the worst end of the interval decides met; the best end decides not met
    worst, best = (hi, lo) if slo.upper else (lo, hi)
    met: bool | None
    if slo.holds(worst):
        met = True
    elif not slo.holds(best):
        met = False
    else:
        met = None
    return SloCheck(slo, met, interval.estimate, lo, hi)


def combine(checks: Sequence[SloCheck]) -> bool | None:
    """Every check met → True; any not met → False; otherwise None (uncertain)."""
    if any(c.met is False for c in checks):
        return False
    if all(c.met is True for c in checks):
        return True
    return None


def figure_of(doc: Mapping[str, Any], slo: Slo) -> Mapping[str, Any]:
    """The result's entry an objective reads: ``end_to_end`` or ``stages[where]``."""
    entry: Mapping[str, Any] = (
        doc["end_to_end"] if slo.where == "end_to_end" else doc["stages"][slo.where]
    )
    return entry


def with_slo_targets(spec: SimSpec, slos: Sequence[Slo]) -> SimSpec:
    """``spec`` with the latency objectives' targets added to ``run.slo_ms`` (so each run
    reports the fraction of messages over each: :func:`fraction_over`)."""
    targets = {s.target for s in slos if s.latency} | set(spec.run.slo_ms)
    if len(targets) > L.MAX_SLO_TARGETS:
        raise SpecError(
            f"--slo: more than {L.MAX_SLO_TARGETS} latency targets", field="--slo", value=None
        )
    if targets == set(spec.run.slo_ms):
        return spec
    run = msgspec.structs.replace(spec.run, slo_ms=tuple(sorted(targets)))
    return msgspec.structs.replace(spec, run=run)


def fraction_over(h: LatencyHistogram, target: float) -> float | None:
    """The fraction of ``h``'s samples above ``target`` (same unit), None when empty.
    Exact but for samples within the histogram's relative error of ``target`` (a bucket
    counts as over when its midpoint is)."""
    if not h.count:
        return None
    if target < 0:
        return 1.0
    over = sum(n for k, n in h._buckets.items() if h._value_of(k) > target)
    return over / h.count


def slo_fractions(h: LatencyHistogram, targets_ms: Sequence[float]) -> list[SloFraction]:
    """P(latency > t) for each target ``t`` (ms) of a histogram in seconds
    (``fraction_over`` None when nothing was measured)."""
    return [
        SloFraction(target_ms=t, fraction_over=fraction_over(h, t / 1000.0)) for t in targets_ms
    ]


__all__ = [
    "LATENCY_FIGURES",
    "Slo",
    "SloCheck",
    "combine",
    "figure_of",
    "fraction_over",
    "judge",
    "parse_slo",
    "slo_fractions",
    "with_slo_targets",
]
