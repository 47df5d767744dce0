"""Independent replications of one spec and their summary with confidence intervals.

Replication ``i`` runs the spec with seed :func:`replication_seed` ``(run.seed, i)``:
replication 0 keeps ``run.seed`` (so one replication is today's single run, byte for byte),
the others derive theirs from it by SHA-256 — distinct, deterministic, and the same whichever
executor runs them. Every point of a sweep uses the same seeds (common random numbers: the
difference between two points is not blurred by different draws).

The summary document has the single run's shape; what changes (``docs/simulate.md``):

* ``latency_ms`` (and ``waiting_ms``) figures ``mean, p50, p90, p99, p999``, each ``slo``
  entry's ``fraction_over``, ``throughput_hz`` and ``utilization``
  are the **mean over the replications** (each replication's figure is one sample; the
  Student-t interval is on that mean); ``latency_ms.max`` is the largest of any replication;
* next to them ``latency_ms_ci``/``waiting_ms_ci`` (same keys, each ``[low, high]``; None
  with one replication), ``slo[i].fraction_over_ci``, ``throughput_hz_ci`` and
  ``utilization_ci`` (the stage's mean busy fraction);
* a join's ``timed_out``/``incomplete``, ``dropped_reasons`` and each failure process's
  ``events``/``down_seconds`` are totals too; a failure's ``availability`` is the mean,
  with ``availability_ci``;
* counts (frames, completed, dropped, redeliveries, events, …) are **totals** over the
  replications; ``series`` and ``faults`` are replication 0's;
* ``run`` adds ``replications``, ``confidence`` and ``seeds``; ``virtual_seconds`` and
  ``wall_seconds`` are totals.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from ._ci import Interval, mean_interval
from ._run import simulate
from ._spec_types import SimError, SimSpec

_ERROR = "__sim_error__"

CI_FIGURES = ("mean", "p50", "p90", "p99", "p999")
_STAGE_COUNTS = (
    "redeliveries",
    "dropped",
    "unresolved",
    "unfinished",
    "completed",
    "retried",
    "dead_lettered",
    "stale_settles",
    "crashes",
    "lease_renewals",
    "payload_failures",
)
_E2E_COUNTS = (
    "redeliveries",
    "dropped",
    "unresolved",
    "unfinished",
    "frames",
    "completed",
    "measured",
)
_SOURCE_COUNTS = ("frames", "rejected", "ambiguous_publishes_retried")


def replication_seed(seed: int, index: int) -> int:
    """The seed of replication ``index`` (0: ``seed`` itself; else a 63-bit hash of both)."""
    if index == 0:
        return seed
    digest = hashlib.sha256(f"{seed}/replication/{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def run_replication(spec: SimSpec, seed: int) -> dict[str, Any]:
    """One run of ``spec`` with ``run.seed = seed``: the unit of work an executor runs
    (a module-level function, so a process pool or a Dask worker can import it)."""
    run = msgspec.structs.replace(spec.run, seed=seed)
    try:
        return simulate(msgspec.structs.replace(spec, run=run))
    except SimError as exc:  # an exception with keyword fields does not cross processes
        return {_ERROR: exc.message, "field": exc.field}


def raise_if_failed(doc: Mapping[str, Any]) -> None:
    """Raise the :class:`SimError` a replication returned in place of its result."""
    if _ERROR in doc:
        raise SimError(doc[_ERROR], field=doc["field"])


def _insert_after(d: dict[str, Any], after: str, key: str, value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        out[k] = v
        if k == after:
            out[key] = value
    return out


def _interval(values: Sequence[float | None], confidence: float) -> Interval | None:
    got = [v for v in values if v is not None]
    return mean_interval(got, confidence) if got else None


def _section(
    entries: Sequence[Mapping[str, Any]], counts: Sequence[str], confidence: float
) -> tuple[dict[str, Any], dict[str, Interval | None]]:
    """One summarised entry (a stage's, or end to end) from the replications' ``entries``,
    and its intervals by figure name."""
    base = dict(entries[0])
    intervals: dict[str, Interval | None] = {}
    lat = dict(base["latency_ms"])
    ci: dict[str, list[float] | None] = {}
    for f in CI_FIGURES:
        iv = _interval([e["latency_ms"][f] for e in entries], confidence)
        intervals[f] = iv
        lat[f] = None if iv is None else iv.estimate
        ci[f] = None if iv is None else iv.pair()
    maxes = [e["latency_ms"]["max"] for e in entries if e["latency_ms"]["max"] is not None]
    lat["max"] = max(maxes) if maxes else None
    base["latency_ms"] = lat
    if "waiting_ms" in base:
        waiting = dict(base["waiting_ms"])
        wci: dict[str, list[float] | None] = {}
        for f in CI_FIGURES:
            iv = _interval([e["waiting_ms"][f] for e in entries], confidence)
            waiting[f] = None if iv is None else iv.estimate
            wci[f] = None if iv is None else iv.pair()
        maxes = [e["waiting_ms"]["max"] for e in entries if e["waiting_ms"]["max"] is not None]
        waiting["max"] = max(maxes) if maxes else None
        base["waiting_ms"] = waiting
        base = _insert_after(base, "waiting_ms", "waiting_ms_ci", wci)
    if base.get("slo"):
        slo = []
        for k, entry in enumerate(base["slo"]):
            iv = _interval([e["slo"][k]["fraction_over"] for e in entries], confidence)
            intervals[f"over:{entry['target_ms']}"] = iv
            slo.append(
                {
                    "target_ms": entry["target_ms"],
                    "fraction_over": None if iv is None else iv.estimate,
                    "fraction_over_ci": None if iv is None else iv.pair(),
                }
            )
        base["slo"] = slo
    thr = mean_interval([e["throughput_hz"] for e in entries], confidence)
    intervals["throughput_hz"] = thr
    base["throughput_hz"] = thr.estimate
    util = [e["utilization"] for e in entries]
    if isinstance(util[0], list):
        means = [sum(u) / len(u) if u else 0.0 for u in util]
        base["utilization"] = [sum(col) / len(col) for col in zip(*util, strict=True)]
    else:
        means = [u for u in util if u is not None]
        base["utilization"] = sum(means) / len(means) if means else None
    uiv = mean_interval(means, confidence) if means else None
    intervals["utilization"] = uiv
    for c in counts:
        base[c] = sum(e[c] for e in entries)
    if base.get("join") is not None:
        join = dict(base["join"])
        for c in ("timed_out", "incomplete"):
            join[c] = sum(e["join"][c] for e in entries)
        base["join"] = join
    if "dropped_reasons" in base:
        reasons: dict[str, int] = {}
        for e in entries:
            for k, v in e["dropped_reasons"].items():
                reasons[k] = reasons.get(k, 0) + v
        base["dropped_reasons"] = reasons
    intervals["dropped_worst"] = Interval(
        float(max(e["dropped"] for e in entries)), None, None, len(entries), confidence
    )
    base = _insert_after(base, "latency_ms", "latency_ms_ci", ci)
    base = _insert_after(base, "throughput_hz", "throughput_hz_ci", thr.pair())
    base = _insert_after(base, "utilization", "utilization_ci", None if uiv is None else uiv.pair())
    return base, intervals


Figures = dict[str, dict[str, Interval | None]]
"""Per ``end_to_end`` or stage name: its intervals by figure (``mean`` … ``p999``,
``throughput_hz``, ``utilization``, ``dropped_worst``)."""


def summarise(
    docs: Sequence[Mapping[str, Any]], confidence: float
) -> tuple[dict[str, Any], Figures]:
    """The summary document of replications ``docs`` (in replication order) and every
    figure's interval (see the module docstring)."""
    first = copy.deepcopy(dict(docs[0]))
    figures: Figures = {}
    stages: dict[str, Any] = {}
    for name in first["stages"]:
        stages[name], figures[name] = _section(
            [d["stages"][name] for d in docs], _STAGE_COUNTS, confidence
        )
    e2e, figures["end_to_end"] = _section([d["end_to_end"] for d in docs], _E2E_COUNTS, confidence)
    run = dict(first["run"])
    run["virtual_seconds"] = sum(d["run"]["virtual_seconds"] for d in docs)
    run["wall_seconds"] = sum(d["run"]["wall_seconds"] for d in docs)
    run["passes"] = max(d["run"]["passes"] for d in docs)
    run["events"] = sum(d["run"]["events"] for d in docs)
    run["drained"] = all(d["run"]["drained"] for d in docs)
    run["replications"] = len(docs)
    run["confidence"] = confidence
    run["seeds"] = [d["run"]["seed"] for d in docs]
    sources = {}
    for name, src in first["sources"].items():
        s = dict(src)
        for c in _SOURCE_COUNTS:
            s[c] = sum(d["sources"][name][c] for d in docs)
        sources[name] = s
    out = dict(first)
    out.update(run=run, stages=stages, end_to_end=e2e, sources=sources)
    if "failures" in first:
        out["failures"] = [
            _failure([d["failures"][i] for d in docs], confidence)
            for i in range(len(first["failures"]))
        ]
    return out, figures


def _failure(entries: Sequence[Mapping[str, Any]], confidence: float) -> dict[str, Any]:
    """One failure process over the replications: ``events`` and ``down_seconds`` summed
    per process, ``availability`` the mean with ``availability_ci``; the instants are
    replication 0's."""
    base = dict(entries[0])
    base["events"] = [sum(col) for col in zip(*(e["events"] for e in entries), strict=True)]
    base["down_seconds"] = [
        sum(col) for col in zip(*(e["down_seconds"] for e in entries), strict=True)
    ]
    iv = mean_interval([e["availability"] for e in entries], confidence)
    base["availability"] = iv.estimate
    return _insert_after(base, "availability", "availability_ci", iv.pair())


__all__ = [
    "CI_FIGURES",
    "Figures",
    "raise_if_failed",
    "replication_seed",
    "run_replication",
    "summarise",
]
