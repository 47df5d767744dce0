"""ObservationLog: what happened, when (virtual time), to what — as a list you can compare.

Backends record events (publish, deliver, settle, drop, put, release, reserve, …). Checking
"nothing lost" becomes a list comparison over ``events(kind)``. The log exports and imports
as JSON lines through msgspec.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import anyio
import msgspec

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

    def events(
        self,
        kind: str | Iterable[str] | None = None,
        *,
        subject: str | None = None,
        ident: str | None = None,
    ) -> list[Event]:
        """Events in order, filtered by kind(s), subject and ident."""
        if kind is None:
            selected: list[Event] = self._events
        elif isinstance(kind, str):
            selected = self._by_kind.get(kind, [])
        else:
            wanted = set(kind)
            selected = [e for e in self._events if e.kind in wanted]
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


__all__ = ["AttrValue", "Event", "ObservationLog"]
