"""The nothing-lost checker: read an :class:`~videoflow_aio.observe.ObservationLog`, say what
was acknowledged and lost, what was decided twice, and how every ambiguous outcome resolved.

``check_nothing_lost(log)`` returns a :class:`LossReport`; ``report.ok`` is False when any
acknowledged item was lost or any answer was contradicted by the final state. It reads three
families of events (the messaging and payload names are those the reference models record, so
a model's own log can be checked as is; a client recording its calls uses the same names):

Publications (``subject`` = channel, ``ident`` = publication id)
    ``publish`` (``duplicate=False``: stored; ``msg_kind``), ``publication_unknown``,
    ``reject``, ``cancel``; per subscription (attr ``subscription``, or ``subscriptions`` on a
    ``drop``) the fates ``settle``, ``dead_letter``, ``drop``, ``unresolved`` and ``retained``
    (still stored at the end, as a final observation), and ``settle_unknown``. Who must see
    a publication: the ``subscription_created`` events of its channel (``ident`` = name) whose
    kind (``kinds``, default ``data``) is its ``msg_kind``, or ``expected(event)``.
    Every accepted publication ends in exactly one fate per subscription: none is *lost*,
    two or more a *double fate* (e.g. an acknowledged settle undone, redelivered and settled
    again). A ``reject``/``cancel`` that was delivered after all is *contradicted*.
Compare-and-swap (``subject`` = key, ``ident`` = operation id)
    ``cas`` with ``outcome`` ``ok`` (confirmed), ``conflict`` (returned False),
    ``not_applied`` (refused before applying) or ``unknown``; ``cas_final`` (per key, attr
    ``applied``: the operation ids visible in the final value). A confirmed CAS missing from
    the final value is *lost*; a refused one present is *contradicted*; one never attempted a
    *phantom*; an unknown one resolves ``applied`` or ``not_applied``.
Payload puts (``subject`` = key, ``ident`` = generation)
    ``put`` (acknowledged), ``put_unknown`` (``ident`` empty: the generation is unknown); the
    fates ``reclaim``, ``evict``, ``delete``, ``corrupt``, ``truncate``, ``expire``
    (``what="object"``), a ``release`` with ``outcome="reclaimed"`` (attr ``generation``) and a
    later ``put`` with ``replaced`` = the generation; the final state is the last ``read`` of
    the key (attrs ``generation``, ``outcome`` = ``PayloadBytes``/``Missing``/…). An
    acknowledged put neither readable nor with a fate is *lost*; one never read is
    *unverified*; a ``release_unknown`` (attr ``generation``: a release whose answer was
    lost) is an ambiguous fate, resolved by the final read.

``fault`` events (``subject`` = member, attr ``action``) are counted: kills and pauses as
injected faults.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from typing import Literal

import msgspec

from .observe import Event, ObservationLog

ViolationKind = Literal["lost", "double_fate", "contradicted", "phantom", "duplicate_accept"]
Resolution = Literal["applied", "not_applied", "unresolved"]

TERMINAL = ("settle", "dead_letter", "drop")
"""Fates that end a publication's life for a subscription."""
OPEN_FATES = ("unresolved", "retained")
"""Fates of a publication still stored at the end (past max_deliver, or not yet consumed)."""
OBJECT_FATES = frozenset({"reclaim", "evict", "delete", "corrupt", "truncate"})
OPERATIONS = frozenset(
    {
        "publish",
        "publication_unknown",
        "reject",
        "settle",
        "settle_unknown",
        "settle_stale",
        "cas",
        "put",
        "put_unknown",
        "release",
        "release_unknown",
    }
)
"""Event kinds counted as operations."""
INJECTED = frozenset({"kill", "pause", "kill-leader", "pause-leader", "stop", "partition"})
"""``fault`` actions counted as injected faults (restarts and resumes are recoveries)."""


class Violation(msgspec.Struct, frozen=True):
    """One broken promise: ``what`` (publication, cas, put) ``ident`` on ``subject``."""

    kind: ViolationKind
    what: str
    subject: str
    ident: str
    detail: str


class Ambiguity(msgspec.Struct, frozen=True):
    """An outcome the client could not know at the time, and what the final state says."""

    what: str
    subject: str
    ident: str
    resolution: Resolution
    how: str


class LossReport(msgspec.Struct, frozen=True):
    """What :func:`check_nothing_lost` found. ``acknowledged``: accepted publications (per
    subscription that must see them), confirmed CAS, acknowledged puts."""

    operations: int
    faults: int
    acknowledged: int
    violations: tuple[Violation, ...]
    ambiguous: tuple[Ambiguity, ...]
    unverified: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """No acknowledged item lost, no answer contradicted."""
        return not self.violations

    @property
    def lost(self) -> tuple[Violation, ...]:
        """Acknowledged, then gone."""
        return tuple(v for v in self.violations if v.kind == "lost")

    def resolutions(self) -> dict[str, dict[str, int]]:
        """``{what: {resolution: count}}`` over the ambiguous outcomes."""
        out: dict[str, Counter[str]] = defaultdict(Counter)
        for a in self.ambiguous:
            out[a.what][a.resolution] += 1
        return {what: dict(c) for what, c in sorted(out.items())}

    def summary(self) -> str:
        """The figure, one line per fact."""
        lines = [
            f"operations: {self.operations}",
            f"faults injected: {self.faults}",
            f"acknowledged: {self.acknowledged}",
            f"acknowledged-and-lost: {len(self.lost)}",
            f"other violations: {len(self.violations) - len(self.lost)}",
            f"ambiguous: {len(self.ambiguous)} "
            + (
                " ".join(
                    f"{what}[{', '.join(f'{r}={n}' for r, n in sorted(c.items()))}]"
                    for what, c in self.resolutions().items()
                )
                or ""
            ),
            f"unverified: {len(self.unverified)}",
        ]
        lines += [
            f"  {v.kind}: {v.what} {v.ident} on {v.subject}: {v.detail}"
            for v in self.violations[:20]
        ]
        return "\n".join(lines)


Expected = Callable[[Event], Iterable[str]]


def check_nothing_lost(
    log: ObservationLog | Iterable[Event],
    *,
    kinds: Mapping[str, str] | None = None,
    expected: Expected | None = None,
) -> LossReport:
    """Check ``log`` (see the module docs for the events read); never raises on bad news."""
    events = list(log)
    violations: list[Violation] = []
    ambiguous: list[Ambiguity] = []
    unverified: list[str] = []
    acked = _check_publications(events, kinds or {}, expected, violations, ambiguous)
    acked += _check_cas(events, violations, ambiguous, unverified)
    acked += _check_puts(events, violations, ambiguous, unverified)
    return LossReport(
        operations=sum(e.kind in OPERATIONS for e in events),
        faults=sum(e.kind == "fault" and e.attrs.get("action") in INJECTED for e in events),
        acknowledged=acked,
        violations=tuple(violations),
        ambiguous=tuple(ambiguous),
        unverified=tuple(unverified),
    )


# -- publications -----------------------------------------------------------------------------
def _subscribers(events: list[Event], kinds: Mapping[str, str]) -> Expected:
    subs: dict[str, list[str]] = defaultdict(list)
    for e in events:
        if e.kind == "subscription_created" and e.ident not in subs[e.subject]:
            subs[e.subject].append(e.ident)

    def expected(e: Event) -> list[str]:
        kind = e.attrs.get("msg_kind") or "data"
        return [s for s in subs.get(e.subject, []) if kinds.get(s, "data") == kind]

    return expected


def _fates(events: list[Event]) -> dict[tuple[str, str], list[str]]:
    """(publication id, subscription) → fate event kinds, in order."""
    out: dict[tuple[str, str], list[str]] = defaultdict(list)
    for e in events:
        if e.kind == "drop":
            names = e.attrs.get("subscriptions") or []
            for name in names if isinstance(names, list) else [str(names)]:
                out[(e.ident, name)].append("drop")
        elif e.kind in (*TERMINAL, *OPEN_FATES, "settle_unknown"):
            out[(e.ident, str(e.attrs.get("subscription", "")))].append(e.kind)
    return out


def _check_publications(
    events: list[Event],
    kinds: Mapping[str, str],
    expected: Expected | None,
    violations: list[Violation],
    ambiguous: list[Ambiguity],
) -> int:
    who = expected or _subscribers(events, kinds)
    fates = _fates(events)
    delivered = {pid for pid, _ in fates} | {e.ident for e in events if e.kind == "deliver"}
    stored: dict[str, Event] = {}  # a duplicate=True answer proves an earlier store too
    new: set[str] = set()
    for e in events:
        if e.kind != "publish":
            continue
        stored.setdefault(e.ident, e)
        if not e.attrs.get("duplicate"):
            if e.ident in new:
                violations.append(
                    Violation("duplicate_accept", "publication", e.subject, e.ident,
                              "stored twice (dedup failed)")
                )  # fmt: skip
            new.add(e.ident)
    acked = 0
    for pid, event in stored.items():
        for sub in who(event):
            acked += 1
            _one_fate(pid, event.subject, sub, fates.get((pid, sub), []), violations, ambiguous)
    _resolve_publications(events, stored, delivered, violations, ambiguous)
    return acked


def _one_fate(
    pid: str,
    channel: str,
    sub: str,
    fates: list[str],
    violations: list[Violation],
    ambiguous: list[Ambiguity],
) -> None:
    final = [f for f in fates if f in TERMINAL]
    unknown = fates.count("settle_unknown")
    if len(final) > 1:
        detail = f"{len(final)} fates for {sub}: {', '.join(final)}"
        violations.append(Violation("double_fate", "publication", channel, pid, detail))
    elif not final and not any(f in OPEN_FATES for f in fates):
        if unknown:  # the settle whose answer was lost took effect: nothing came back
            ambiguous.append(
                Ambiguity("settle", channel, f"{pid}@{sub}", "applied", "never redelivered")
            )
        else:
            violations.append(Violation("lost", "publication", channel, pid, f"no fate for {sub}"))
    elif unknown:
        how = "redelivered and settled" if final else "still stored"
        ambiguous.extend(
            Ambiguity("settle", channel, f"{pid}@{sub}", "not_applied", how) for _ in range(unknown)
        )


def _resolve_publications(
    events: list[Event],
    stored: dict[str, Event],
    delivered: set[str],
    violations: list[Violation],
    ambiguous: list[Ambiguity],
) -> None:
    seen: set[str] = set()
    for e in events:
        if e.kind in ("reject", "cancel") and e.ident in delivered:
            violations.append(
                Violation("contradicted", "publication", e.subject, e.ident,
                          f"{e.kind}ed, then delivered")
            )  # fmt: skip
        if e.kind != "publication_unknown" or e.ident in seen:
            continue
        seen.add(e.ident)
        if e.ident in stored or e.ident in delivered:
            how = "stored (accepted on retry)" if e.ident in stored else "delivered"
            ambiguous.append(Ambiguity("publication", e.subject, e.ident, "applied", how))
        else:
            ambiguous.append(
                Ambiguity("publication", e.subject, e.ident, "not_applied", "never delivered")
            )


# -- compare-and-swap -------------------------------------------------------------------------
def _check_cas(
    events: list[Event],
    violations: list[Violation],
    ambiguous: list[Ambiguity],
    unverified: list[str],
) -> int:
    attempts: dict[str, dict[str, str]] = defaultdict(dict)  # key -> op -> outcome
    final: dict[str, set[str]] = {}
    for e in events:
        if e.kind == "cas":
            attempts[e.subject][e.ident] = str(e.attrs.get("outcome", "unknown"))
        elif e.kind == "cas_final":
            ids = e.attrs.get("applied") or []
            final[e.subject] = set(ids) if isinstance(ids, list) else {str(ids)}
    acked = 0
    for key, ops in attempts.items():
        acked += sum(o == "ok" for o in ops.values())
        if key not in final:
            unverified.extend(f"cas {op} on {key}" for op, o in ops.items() if o == "ok")
            continue
        applied = final[key]
        for op, outcome in ops.items():
            _one_cas(key, op, outcome, op in applied, violations, ambiguous)
        for op in sorted(applied - ops.keys()):
            violations.append(Violation("phantom", "cas", key, op, "applied, never attempted"))
    return acked


def _one_cas(
    key: str,
    op: str,
    outcome: str,
    visible: bool,
    violations: list[Violation],
    ambiguous: list[Ambiguity],
) -> None:
    if outcome == "ok" and not visible:
        violations.append(Violation("lost", "cas", key, op, "confirmed, not in the final value"))
    elif outcome in ("conflict", "not_applied") and visible:
        violations.append(Violation("contradicted", "cas", key, op, f"{outcome}, yet applied"))
    elif outcome not in ("ok", "conflict", "not_applied"):
        resolution: Resolution = "applied" if visible else "not_applied"
        ambiguous.append(Ambiguity("cas", key, op, resolution, "final value"))


# -- payload puts -----------------------------------------------------------------------------
def _object_fates(events: list[Event]) -> set[tuple[str, str]]:
    out: set[tuple[str, str]] = set()
    for e in events:
        if e.kind in OBJECT_FATES or (e.kind == "expire" and e.attrs.get("what") == "object"):
            out.add((e.subject, e.ident))
        elif e.kind == "release" and e.attrs.get("outcome") == "reclaimed":
            out.add((e.subject, str(e.attrs.get("generation", ""))))
        elif e.kind == "put" and e.attrs.get("replaced"):
            out.add((e.subject, str(e.attrs["replaced"])))
    return out


def _check_puts(
    events: list[Event],
    violations: list[Violation],
    ambiguous: list[Ambiguity],
    unverified: list[str],
) -> int:
    fates = _object_fates(events)
    last_read: dict[str, Event] = {}
    for e in events:
        if e.kind == "read":
            last_read[e.subject] = e
    releases = {(e.subject, str(e.attrs.get("generation", ""))) for e in events
                if e.kind == "release_unknown"}  # fmt: skip
    acked = 0
    for e in events:
        if e.kind == "put":
            acked += 1
            if (e.subject, e.ident) not in fates:
                _one_put(e, last_read.get(e.subject), (e.subject, e.ident) in releases,
                         violations, ambiguous, unverified)  # fmt: skip
        elif e.kind == "put_unknown":
            read = last_read.get(e.subject)
            readable = read is not None and read.attrs.get("outcome") == "PayloadBytes"
            resolution: Resolution = "applied" if readable else "not_applied"
            if read is None:
                resolution = "unresolved"
            ambiguous.append(Ambiguity("put", e.subject, e.ident, resolution, "final read"))
    return acked


def _one_put(
    put: Event,
    read: Event | None,
    release_in_doubt: bool,
    violations: list[Violation],
    ambiguous: list[Ambiguity],
    unverified: list[str],
) -> None:
    """An acknowledged put without a recorded fate: readable at the end, or lost — unless a
    release whose answer was lost explains its absence."""
    key, gen = put.subject, put.ident
    if read is None or read.seq < put.seq:
        unverified.append(f"put {gen} of {key}")
        return
    readable = read.attrs.get("outcome") == "PayloadBytes" and (
        read.attrs.get("generation") in (None, "", gen)
    )
    if release_in_doubt:
        resolution: Resolution = "not_applied" if readable else "applied"
        ambiguous.append(Ambiguity("release", key, gen, resolution, "final read"))
    elif not readable:
        detail = f"no fate, final read {read.attrs.get('outcome')}"
        violations.append(Violation("lost", "put", key, gen, detail))


__all__ = [
    "Ambiguity",
    "LossReport",
    "Violation",
    "check_nothing_lost",
]
