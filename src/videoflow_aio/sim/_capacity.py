"""Capacity answers: replications with confidence intervals, sequential stopping, SLO
checks, and sweeps that search for the smallest value meeting every SLO.

A point (one spec) runs ``replications`` independent replications, then — with a
``precision`` — more, until every target figure's interval half-width is within
``precision × estimate`` (the SLOs' figures; without SLOs every end-to-end latency figure),
or ``max_virtual_seconds`` of load (``run.duration_seconds`` per replication) is spent, or,
with SLOs, the point is already **not met** with the stated confidence (its interval wholly
beyond a target: more replications would only narrow it there). How many replications run
depends only on the results, never on the executor: the same seeds give the same JSON.

A sweep validates every value first, screens each point analytically (:mod:`._screen`; an
overloaded point is **not met** without a run) and, for a key along which the figures are
monotone, orders and prunes: for ``*.replicas`` (more replicas never make latency worse) it
starts at the smallest stable value whose closed-form estimate meets the SLOs, walks down
while points are met and up while they are not, and does not simulate the points the
monotonicity decides (each says why in ``pruned``). Other keys run every stable point — at
once, on an executor with workers — except that past a point **not met** along a key that
only makes things worse (``rate_hz``, ``streams``, a service time) the rest are pruned
(those run one after another).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .._finite import is_finite_number
from ._ci import Interval
from ._executor import Executor, InProcess
from ._overrides import apply_overrides, parse_value
from ._replicate import CI_FIGURES, Figures, raise_if_failed, replication_seed, summarise
from ._screen import estimate_ms, offered_loads, unstable, warnings_for
from ._slo import Slo, SloCheck, combine, judge
from ._spec_types import SimSpec, SpecError

DEFAULT_BUDGET_REPLICATIONS = 40
"""Without ``max_virtual_seconds``: at most this many replications' load per point."""

MAX_REPLICATIONS = 100_000
"""The most replications a point may ask for up front."""

Progress = Callable[[int, int, str], None]
"""``(jobs done, jobs planned so far, what is running)``."""


@dataclass(frozen=True, slots=True)
class Plan:
    """How many replications a point runs: ``replications`` first; with ``precision``, more
    until it is reached or ``max_virtual_seconds`` is spent; intervals at ``confidence``."""

    replications: int = 1
    confidence: float = 0.95
    precision: float | None = None
    max_virtual_seconds: float | None = None

    def __post_init__(self) -> None:
        r, c, p, m = self.replications, self.confidence, self.precision, self.max_virtual_seconds
        checks = (
            (
                "replications",
                isinstance(r, int) and not isinstance(r, bool) and 1 <= r <= MAX_REPLICATIONS,
                f"must be an integer in [1, {MAX_REPLICATIONS:,}]",
            ),
            ("confidence", is_finite_number(c) and 0.0 < c < 1.0, "must be between 0 and 1"),
            (
                "precision",
                p is None or (is_finite_number(p) and 0.0 < p < 1.0),
                "must be between 0 and 1",
            ),
            (
                "max_virtual_seconds",
                m is None or (is_finite_number(m) and m > 0),
                "must be a finite number > 0",
            ),
        )
        for name, ok, why in checks:
            if not ok:
                raise SpecError(f"{name} {why}", field=name, value=getattr(self, name))

    def budget(self, spec: SimSpec) -> float:
        """The load seconds a point may spend."""
        if self.max_virtual_seconds is not None:
            return self.max_virtual_seconds
        return DEFAULT_BUDGET_REPLICATIONS * spec.run.duration_seconds


@dataclass(frozen=True, slots=True)
class PointResult:
    """One configuration's outcome. ``document`` is the result (the single-run JSON shape
    with intervals, ``docs/simulate.md``), None when the point was not simulated
    (``pruned`` says why). ``met``: every SLO met (True), one not met (False), or uncertain
    (None; also None for a pruned point the search did not need)."""

    value: Any
    document: dict[str, Any] | None
    figures: Figures
    checks: tuple[SloCheck, ...]
    met: bool | None
    pruned: str | None = None
    warnings: tuple[dict[str, Any], ...] = ()
    stopped: str = "fixed"
    offered: dict[str, float] = field(default_factory=dict)

    def interval(self, figure: str = "p99", where: str = "end_to_end") -> Interval | None:
        """A figure's interval (``mean`` … ``p999``, ``throughput_hz``, ``utilization``)."""
        return self.figures.get(where, {}).get(figure)

    def slo_json(self) -> dict[str, Any]:
        """``{"met": …, "checks": [...]}``."""
        return {"met": self.met, "checks": [c.to_json() for c in self.checks]}

    def to_json(self) -> dict[str, Any]:
        """The entry of ``sweep.points``."""
        return {
            "value": self.value,
            "result": self.document,
            "slo": self.slo_json(),
            "pruned": self.pruned,
            "offered_load": self.offered,
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True, slots=True)
class SweepResult:
    """A sweep of ``key`` over ``values``: every point (in value order), the ``answer`` (the
    smallest value meeting every SLO with the confidence, or None and ``reason``)."""

    key: str
    values: tuple[Any, ...]
    slos: tuple[Slo, ...]
    points: tuple[PointResult, ...]
    answer: PointResult | None
    reason: str | None
    plan: Plan
    wall_seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The JSON document: ``{"sweep": {...}, "warnings": [...]}`` (``docs/simulate.md``)."""
        answer = None
        if self.answer is not None:
            answer = {
                "value": self.answer.value,
                "checks": [c.to_json() for c in self.answer.checks],
            }
        warnings = [{"value": p.value, **w} for p in self.points for w in p.warnings]
        return {
            "sweep": {
                "key": self.key,
                "values": list(self.values),
                "slo": [s.text for s in self.slos],
                "confidence": self.plan.confidence,
                "precision": self.plan.precision,
                "points": [p.to_json() for p in self.points],
                "answer": answer,
                "reason": self.reason,
                "pruned": [{"value": p.value, "reason": p.pruned} for p in self.points if p.pruned],
                "replications": sum(
                    p.document["run"]["replications"] for p in self.points if p.document
                ),
                "wall_seconds": self.wall_seconds,
            },
            "warnings": warnings,
        }


def _targets(figures: Figures, slos: Sequence[Slo]) -> list[Interval | None]:
    """The intervals precision applies to: the SLOs' latency and throughput figures, or
    every end-to-end latency figure without SLOs."""
    keys = [(s.where, s.figure) for s in slos if s.figure != "dropped"]
    if not slos:
        keys = [("end_to_end", f) for f in CI_FIGURES]
    return [figures.get(w, {}).get(f) for w, f in keys]


def _checks(figures: Figures, slos: Sequence[Slo]) -> tuple[SloCheck, ...]:
    out = []
    for s in slos:
        group = figures.get(s.where, {})
        if s.figure == "dropped":
            worst = group.get("dropped_worst")
            out.append(judge(s, None, None if worst is None else worst.estimate))
        else:
            out.append(judge(s, group.get(s.figure)))
    return tuple(out)


def evaluate(
    spec: SimSpec,
    slos: Sequence[Slo],
    plan: Plan,
    executor: Executor,
    *,
    value: Any = None,
    progress: Progress | None = None,
    label: str = "",
) -> PointResult:
    """Run one point to the plan (see the module docstring) and judge it."""
    duration = spec.run.duration_seconds
    budget = plan.budget(spec)
    n = max(plan.replications, 2 if plan.precision is not None else 1)
    n = max(1, min(n, int(budget // duration))) if plan.precision is not None else n
    docs: list[dict[str, Any]] = []
    planned = [n]
    ticks = [0]

    def done() -> None:
        ticks[0] += 1
        if progress is not None:
            progress(1, 0, label)

    if progress is not None:
        progress(0, n, label)
    while True:
        jobs = [(spec, replication_seed(spec.run.seed, i)) for i in range(len(docs), n)]
        batch = executor.run(jobs, done)
        for d in batch:
            raise_if_failed(d)
        docs += batch
        doc, figures = summarise(docs, plan.confidence)
        checks = _checks(figures, slos)
        if plan.precision is None:
            stopped, worst = "fixed", None
            break
        ratios = [
            iv.relative_half_width() if iv is not None else None for iv in _targets(figures, slos)
        ]
        worst = max((math.inf if r is None else r) for r in ratios) if ratios else 0.0
        if worst <= plan.precision:
            stopped = "precision"
            break
        if slos and combine(checks) is False:
            stopped = "decided"
            break
        room = int((budget - n * duration) // duration)
        if room < 1:
            stopped = "budget"
            break
        # a tiny precision asks for more than a float can count: then double, as for inf
        want = n * (worst / plan.precision) ** 2 if math.isfinite(worst) else math.inf
        need = math.ceil(want) if want < 2.0**53 else 2 * n
        add = min(max(need - n, 1), n, room)
        if progress is not None:
            progress(0, add, label)
        n += add
        planned.append(add)
    doc["run"]["precision"] = {
        "target": plan.precision,
        "stopped": stopped,
        "worst_relative_half_width": worst,
        "max_virtual_seconds": budget if plan.precision is not None else None,
        "budget_spent": stopped == "budget",
    }
    warnings = tuple(warnings_for(spec))
    doc["warnings"] = list(warnings)
    met = combine(checks) if slos else None
    if slos:
        doc["slo"] = {"met": met, "checks": [c.to_json() for c in checks]}
    return PointResult(value, doc, figures, checks, met, None, warnings, stopped, _offered(spec))


def _offered(spec: SimSpec) -> dict[str, float]:
    return {ld.stage: ld.utilization for ld in offered_loads(spec)}


def _overloaded(value: Any, spec: SimSpec, slos: Sequence[Slo]) -> PointResult:
    bad = unstable(spec)
    names = ", ".join(f"{ld.stage} at {ld.utilization:.2f}" for ld in bad)
    reason = f"overload: offered load ≥ 1 ({names}): unstable, not simulated"
    checks = tuple(
        SloCheck(
            s,
            False if s.latency else None,
            None,
            None,
            None,
            "overloaded: the queue grows without bound",
        )
        for s in slos
    )
    return PointResult(
        value, None, {}, checks, False, reason, tuple(warnings_for(spec)), "pruned", _offered(spec)
    )


def _skipped(value: Any, reason: str, spec: SimSpec) -> PointResult:
    return PointResult(
        value, None, {}, (), None, reason, tuple(warnings_for(spec)), "pruned", _offered(spec)
    )


def monotone(key: str) -> int:
    """+1 when raising ``key`` can only help (``*.replicas``), -1 when it can only hurt
    (a source's ``rate_hz`` or ``streams``, a service time), 0 when neither is known."""
    last = key.rsplit(".", 1)[-1]
    if key.startswith("stage.") and last == "replicas":
        return 1
    if key.startswith("source.") and last in ("rate_hz", "streams"):
        return -1
    if key.startswith("stage.") and ".service." in key and last in ("mean_ms", "value_ms"):
        return -1
    return 0


def _estimate_meets(spec: SimSpec, slos: Sequence[Slo]) -> bool:
    for s in slos:
        est = estimate_ms(spec, s)
        if est is not None and not s.holds(est):
            return False
    return True


def sweep(
    spec: SimSpec,
    key: str,
    values: Sequence[Any],
    slos: Sequence[Slo],
    plan: Plan,
    executor: Executor | None = None,
    *,
    overrides: Sequence[tuple[str, Any]] = (),
    progress: Progress | None = None,
) -> SweepResult:
    """Sweep ``key`` over ``values`` (see the module docstring); SpecError before anything
    runs when a value makes a bad spec."""
    ex = executor if executor is not None else InProcess()
    try:
        order = sorted(range(len(values)), key=lambda i: values[i])
    except TypeError:  # values of mixed types: in the order given
        order = list(range(len(values)))
    vals = [values[i] for i in order]
    specs = [apply_overrides(spec, [*overrides, (key, v)]) for v in vals]
    results: dict[int, PointResult] = {}
    stable = []
    for i, s in enumerate(specs):
        if unstable(s):
            results[i] = _overloaded(vals[i], s, slos)
        else:
            stable.append(i)

    def run(i: int) -> PointResult:
        results[i] = evaluate(
            specs[i], slos, plan, ex, value=vals[i], progress=progress, label=f"{key}={vals[i]}"
        )
        return results[i]

    direction = monotone(key) if slos else 0
    if direction == 1 and stable:
        start = next((i for i in stable if _estimate_meets(specs[i], slos)), stable[-1])
        pos = stable.index(start)
        if run(start).met is True:
            j = pos - 1
            while j >= 0 and stable[j] == stable[j + 1] - 1 and run(stable[j]).met is True:
                j -= 1
        else:
            j = pos + 1
            while j < len(stable) and run(stable[j]).met is not True:
                j += 1
        met = [i for i in results if results[i].met is True and results[i].pruned is None]
        best = min(met) if met else None
        for i in stable:
            if i in results:
                continue
            if best is not None and i > best:
                why = (
                    f"not needed: {key} = {vals[best]} meets every SLO and more replicas only help"
                )
            else:
                below = min(k for k in results if k > i and results[k].pruned is None)
                why = (
                    f"not needed: {key} = {vals[below]} is not met with the stated confidence"
                    " and fewer replicas only hurt"
                )
            results[i] = _skipped(vals[i], why, specs[i])
    elif direction == 0 and len(stable) > 1 and not isinstance(ex, InProcess):
        # no pruning along this key: every stable point runs, all at once (each point's
        # replications are decided by its own results, so the outcome is the same)
        with ThreadPoolExecutor(len(stable)) as points_pool:
            for i, point in zip(stable, points_pool.map(run, stable), strict=True):
                results[i] = point
    else:
        stop: int | None = None
        for i in stable:
            if stop is not None:
                results[i] = _skipped(
                    vals[i],
                    f"not needed: {key} = {vals[stop]} is not met"
                    f" and a larger {key.rsplit('.', 1)[-1]} only hurts",
                    specs[i],
                )
                continue
            if run(i).met is False and direction == -1:
                stop = i
    points = tuple(results[i] for i in range(len(vals)))
    answer = next((p for p in points if p.met is True and p.pruned is None), None)
    reason = None
    if not slos:
        reason = "no --slo: nothing to answer"
    elif answer is None:
        reason = _no_answer(key, points)
    return SweepResult(key, tuple(vals), tuple(slos), points, answer, reason, plan)


def _no_answer(key: str, points: Sequence[PointResult]) -> str:
    over = [p.value for p in points if p.pruned and p.pruned.startswith("overload")]
    unsure = [p.value for p in points if p.met is None and p.pruned is None]
    notmet = [p.value for p in points if p.met is False and not p.pruned]
    parts = []
    if over:
        parts.append(f"overloaded at {', '.join(map(str, over))}")
    if notmet:
        parts.append(f"not met at {', '.join(map(str, notmet))}")
    if unsure:
        parts.append(
            f"uncertain at {', '.join(map(str, unsure))} (the interval straddles a target)"
        )
    return f"no value of {key} meets every SLO: " + "; ".join(parts or ["nothing was simulated"])


def parse_values(text: str) -> list[Any]:
    """``A..B`` (integers, step 1), ``A..B:STEP``, or ``v1,v2,v3`` (TOML scalars)."""

    def bad(msg: str) -> SpecError:
        return SpecError(f"--sweep values {text!r}: {msg}", field="--sweep", value=text)

    if ".." in text:
        span, _, step_s = text.partition(":")
        a_s, _, b_s = span.partition("..")
        a, b = parse_value(a_s.strip()), parse_value(b_s.strip())
        step = parse_value(step_s.strip()) if step_s else 1
        nums = (a, b, step)
        if not all(isinstance(x, int | float) and not isinstance(x, bool) for x in nums):
            raise bad("A..B[:STEP] needs numbers")
        if not step > 0:
            raise bad("STEP must be > 0")
        if b < a:
            raise bad("B must be >= A")
        count = math.floor((b - a) / step + 1e-9) + 1
        if count > 1000:
            raise bad(f"{count} points: at most 1000")
        if all(isinstance(x, int) for x in nums):
            return [a + k * step for k in range(count)]
        return [round(a + k * step, 12) for k in range(count)]
    vals = [parse_value(v.strip()) for v in text.split(",") if v.strip()]
    if not vals:
        raise bad("no values")
    if len(set(map(repr, vals))) != len(vals):
        raise bad("a value is listed twice")
    return vals


def parse_sweep(text: str) -> tuple[str, list[Any]]:
    """``KEY=VALUES`` as ``(KEY, values)``."""
    if not isinstance(text, str):
        raise TypeError(f"--sweep must be a str KEY=VALUES, not {text!r:.80}")
    key, sep, rest = text.partition("=")
    if not sep or not key.strip():
        raise SpecError(
            f"--sweep {text!r}: expected KEY=A..B, KEY=A..B:STEP or KEY=v1,v2",
            field="--sweep",
            value=text,
        )
    return key.strip(), parse_values(rest.strip())


__all__ = [
    "DEFAULT_BUDGET_REPLICATIONS",
    "Plan",
    "PointResult",
    "Progress",
    "SweepResult",
    "evaluate",
    "monotone",
    "parse_sweep",
    "parse_values",
    "sweep",
]
