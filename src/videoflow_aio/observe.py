"""ObservationLog: what happened, when (virtual time), to what — as a list you can compare.

Backends record events (publish, deliver, settle, drop, put, release, reserve, …). Checking
"nothing lost" becomes a list comparison over ``events(kind)``. The log exports and imports
as JSON lines through msgspec.

Latency helpers: :func:`latencies` pairs two event kinds for the same message (per stage:
``publish`` → ``settle`` on one channel; end to end: the source channel's ``publish`` → the
last stage's ``settle``, keyed by event id), :func:`percentiles` and :func:`summarize` read
the distribution exactly (nearest rank).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import anyio
import msgspec

from .contracts.errors import ValidationError

AttrValue = str | int | float | bool | None | list[str]
"""A value an event attribute may hold (JSON-serialisable as is)."""


class Event(msgspec.Struct, frozen=True):
    """One recorded event. ``subject`` names the resource (channel, key, node), ``ident`` the
    item (publication id, object key, claim id); ``attrs`` carry the rest."""

    seq: int
    at: float
    kind: str
    subject: str = ""
    ident: str = ""
    attrs: dict[str, AttrValue] = {}


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(Event)


def _loop_time() -> float:
    """The running loop's time; 0.0 outside any loop (there is no loop time to read)."""
    try:
        return anyio.current_time()
    except anyio.NoEventLoopError:
        return 0.0


class ObservationLog:
    """An append-only, in-order record of backend events."""

    def __init__(self) -> None:
        self._events: list[Event] = []
        self._by_kind: dict[str, list[Event]] = {}

    def record(
        self,
        kind: str,
        *,
        subject: str = "",
        ident: str = "",
        at: float | None = None,
        **attrs: AttrValue,
    ) -> Event:
        """Append an event; ``at`` defaults to the running loop's (virtual) time (0.0 when
        recorded outside any loop)."""
        event = Event(
            seq=len(self._events),
            at=_loop_time() if at is None else at,
            kind=kind,
            subject=subject,
            ident=ident,
            attrs=attrs,
        )
        self._events.append(event)
        self._by_kind.setdefault(kind, []).append(event)
        return event

    def _of_kind(self, kind: str | Iterable[str] | None) -> list[Event]:
        if kind is None:
            return self._events
        if isinstance(kind, str):
            return self._by_kind.get(kind, [])
        wanted = set(kind)
        return [e for e in self._events if e.kind in wanted]

    def events(
        self,
        kind: str | Iterable[str] | None = None,
        *,
        subject: str | None = None,
        ident: str | None = None,
    ) -> list[Event]:
        """Events in order, filtered by kind(s), subject and ident."""
        selected = self._of_kind(kind)
        if subject is not None:
            selected = [e for e in selected if e.subject == subject]
        if ident is not None:
            selected = [e for e in selected if e.ident == ident]
        return list(selected)

    def kinds(self) -> list[str]:
        """Every kind recorded, in order of first appearance."""
        return list(self._by_kind)

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[Event]:
        return iter(list(self._events))

    def export_jsonl(self) -> bytes:
        """The whole log as JSON lines."""
        return b"".join(_encoder.encode(e) + b"\n" for e in self._events)

    def write(self, path: str | Path) -> None:
        Path(path).write_bytes(self.export_jsonl())

    @classmethod
    def from_jsonl(cls, data: bytes) -> ObservationLog:
        """Rebuild a log from :meth:`export_jsonl` output."""
        log = cls()
        for line in data.splitlines():
            if line.strip():
                event = _decoder.decode(line)
                log._events.append(event)
                log._by_kind.setdefault(event.kind, []).append(event)
        return log

    @classmethod
    def read(cls, path: str | Path) -> ObservationLog:
        return cls.from_jsonl(Path(path).read_bytes())


def ident_key(event: Event) -> str:
    """The key :func:`latencies` matches on by default: the event's ``ident`` (for messaging
    events, the publication id)."""
    return event.ident


def event_key(event: Event) -> str:
    """The message's event id under the pipeline toolkit's naming: a stage forwards event
    ``e`` as publication ``e@stage``, so the part before the first ``@`` names the event
    on every channel it crosses."""
    return event.ident.partition("@")[0]


def latencies(
    log: ObservationLog,
    start: str,
    end: str,
    *,
    start_subject: str | None = None,
    end_subject: str | None = None,
    key: Callable[[Event], str] = ident_key,
) -> dict[str, float]:
    """Seconds from the first ``start`` event to the first ``end`` event at or after it, per
    message (``key`` of the events), over the events whose subject matches.

    Messages with a start and no end (in flight, dropped, unresolved) are absent from the
    result; compare its keys with the starts to find them. Example, per stage:
    ``latencies(log, "publish", "settle", start_subject=ch, end_subject=ch)``.
    """
    started: dict[str, float] = {}
    for e in log.events(start, subject=start_subject):
        started.setdefault(key(e), e.at)
    out: dict[str, float] = {}
    for e in log.events(end, subject=end_subject):
        k = key(e)
        t0 = started.get(k)
        if t0 is not None and k not in out and e.at >= t0:
            out[k] = e.at - t0
    return out


def percentiles(values: Iterable[float], qs: Sequence[float]) -> list[float]:
    """Exact nearest-rank percentiles: for each fraction ``q`` in ``qs``, the sample of rank
    ``ceil(q * n)`` (at least 1) in sorted order. NaN for each when there are no values."""
    data = sorted(values)
    for q in qs:
        if not 0.0 <= q <= 1.0:
            raise ValidationError(f"a quantile must be in [0, 1], got {q!r}", field="q", value=q)
    if not data:
        return [math.nan for _ in qs]
    n = len(data)
    return [data[max(1, math.ceil(q * n)) - 1] for q in qs]


def summarize(values: Iterable[float], scale: float = 1.0) -> dict[str, float | None]:
    """``count`` and ``mean, p50, p90, p99, p999, max`` times ``scale`` (exact; None for each
    statistic when there are no values)."""
    data = sorted(values)
    names = ("mean", "p50", "p90", "p99", "p999", "max")
    out: dict[str, float | None] = {"count": float(len(data))}
    if not data:
        out.update(dict.fromkeys(names))
        return out
    p50, p90, p99, p999 = percentiles(data, (0.5, 0.9, 0.99, 0.999))
    stats = (math.fsum(data) / len(data), p50, p90, p99, p999, data[-1])
    out.update({name: v * scale for name, v in zip(names, stats, strict=True)})
    return out


__all__ = [
    "AttrValue",
    "Event",
    "ObservationLog",
    "event_key",
    "ident_key",
    "latencies",
    "percentiles",
    "summarize",
]
