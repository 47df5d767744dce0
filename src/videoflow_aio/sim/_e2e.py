"""End to end, frame by frame: each frame counted once, as completed, lost or unfinished.

A frame is **completed** when every copy of it owed to a sink has been settled
``Completed`` there; its end-to-end latency is from its capture (``event_ts``) to the last
of those settles. How many sink settles a frame owes comes from the graph: the pipeline
forwards a frame under ``<frame>@<stage>``, so each stage's output channel carries one copy
of it (the messaging model deduplicates the others), and a sink settles one copy per input
that carries it. So a source's frames owe, over the sinks reachable from it, one settle per
sink input reachable from the source (fan-out to two sinks: 2; a diamond into one sink: 2;
a diamond feeding a stage that feeds the sink: 1; a joining sink settles once per frame).

A frame a stage drops on purpose (a join's timeout: :meth:`FrameLedger.lost`) is
**dropped** with that reason. A frame that did not complete is **dropped** or
**unresolved** if the messaging model dropped a message of it or gave up on one
(``max_deliver`` attempts, a dead letter) on any path, or its source's publish was
refused — counted once, by the first loss; else it is **unfinished** when the run ends.
A message evicted while a replica works on it is still forwarded: a loss does not decide
a frame's fate while copies of it are alive.

Two ledgers: :class:`FrameLedger` knows only completions, which is exact when the model
lost nothing (its ledger says so at the end); :class:`LossLedger` also follows every copy
of every frame through the model's observation log (publish, settle, drop, unresolved, dead
letter), so it knows when a frame with a loss has no copy left. Both remember a frame only
while it is in flight.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..observe import AttrValue, Event, ObservationLog
from ..pipeline import Pipeline
from ._record import WindowedLatency
from ._spec_types import SimSpec


def owed_settles(spec: SimSpec) -> dict[str, int]:
    """Per source: the sink settles each of its frames owes (see the module docstring)."""
    readers: dict[str, list[str]] = {}
    for st in spec.stages:
        for inp in st.inputs:
            readers.setdefault(inp, []).append(st.name)
    sinks = {st.name for st in spec.stages if st.name not in readers}
    inputs = {st.name: st.inputs for st in spec.stages}
    joins = {st.name for st in spec.stages if st.join}  # settles one copy for all inputs
    owed: dict[str, int] = {}
    for src in spec.sources:
        reached = {src.name}
        todo = [src.name]
        while todo:
            for r in readers.get(todo.pop(), ()):
                if r not in reached:
                    reached.add(r)
                    todo.append(r)
        owed[src.name] = sum(
            1 if t in joins else sum(1 for i in inputs[t] if i in reached)
            for t in sinks
            if t in reached
        )
    return owed


class FrameLedger:
    """The frames in flight and each frame's fate (see the module docstring).

    A source calls :meth:`published` before each publish (and :meth:`refused` when the
    publish was refused); sink stages' recorders call :meth:`settled`; :meth:`close` once
    the run is over. Exact only when the model lost no message.
    """

    __slots__ = (
        "_latency",
        "completed",
        "dropped",
        "histogram",
        "inflight",
        "owed",
        "reasons",
        "series",
        "unresolved",
    )

    def __init__(
        self,
        owed: Mapping[str, int],
        start: float,
        window: tuple[float, float],
        bin_seconds: float,
        nbins: int,
    ) -> None:
        self.owed = dict(owed)
        self.inflight: dict[str, int] = {}
        self._latency = WindowedLatency(start, window, bin_seconds, nbins)
        self.histogram = self._latency.histogram
        self.series = self._latency.series
        self.completed = self.dropped = self.unresolved = 0
        self.reasons: dict[str, int] = {}

    def lost(self, frame: str, reason: str) -> None:
        """A stage dropped ``frame`` on purpose (``reason``, e.g. ``join_timeout``): it is
        counted dropped, once, and its later copies are ignored."""
        if self._forget(frame):
            self.dropped += 1
            self.reasons[reason] = self.reasons.get(reason, 0) + 1

    def _forget(self, frame: str) -> bool:
        return self.inflight.pop(frame, None) is not None

    def start_at(self, start: float) -> None:
        """The load starts at ``start`` (capture times are binned from there)."""
        self._latency.start = start

    @property
    def unfinished(self) -> int:
        """Frames published that neither completed nor were lost (so far)."""
        return len(self.inflight)

    def published(self, frame: str, source: str) -> None:
        self.inflight[frame] = self.owed[source]

    def refused(self, frame: str) -> None:
        """The source's publish was refused: the frame never entered the pipeline."""
        if self.inflight.pop(frame, None) is not None:
            self.dropped += 1

    def settled(self, frame: str, ts: float, now: float) -> None:
        """A sink settled a copy of ``frame`` (captured at ``ts``) ``Completed`` at ``now``."""
        inflight = self.inflight
        owed = inflight.get(frame)
        if owed is None:  # completed or lost already
            return
        if owed > 1:
            inflight[frame] = owed - 1
            return
        self._complete(frame, ts, now)

    def close(self) -> None:
        """The run is over: what is still in flight is unfinished."""

    def log(self) -> ObservationLog | None:
        """The observation log the messaging model should keep for this ledger: none."""
        return None

    def _complete(self, frame: str, ts: float, now: float) -> None:
        del self.inflight[frame]
        self._count_completed(ts, now)

    def _count_completed(self, ts: float, now: float) -> None:
        self.completed += 1
        self._latency.add(ts, now - ts)


_Copy = tuple[str, int, str]
"""A message's copy for one subscription: (channel name, sequence, subscription name)."""


class _Frame:
    """A frame in flight, as the loss ledger follows it."""

    __slots__ = ("held", "live", "lost", "orphans", "owed", "unresolved_on")

    def __init__(self, owed: int) -> None:
        self.owed = owed  # sink settles still owed
        self.live = 0  # stored copies not yet settled or lost (one per reading subscription)
        self.held: set[_Copy] = set()  # copies under a lease (a replica works on them)
        self.orphans = 0  # copies dropped while held: the replica may still forward them
        self.lost: str | None = None  # the first loss: "drop" or "unresolved"
        self.unresolved_on: set[tuple[str, str]] | None = None  # (message, subscription)


class LossLedger(FrameLedger):
    """A :class:`FrameLedger` that also follows every copy of every frame through the
    messaging model's observation log (see the module docstring): a frame with a loss is
    counted lost once no copy of it is left — none stored, none in a replica's hands (a
    message dropped while leased is still forwarded by the replica that holds it, which
    then settles it stale). :meth:`wire` tells it the pipeline's channels and sink
    subscriptions before the load starts."""

    __slots__ = ("_orphans", "_readers", "_sink_subs", "frames")

    def __init__(self, *args: Any) -> None:
        """As :class:`FrameLedger`'s."""
        super().__init__(*args)
        self.frames: dict[str, _Frame] = {}  # the frames in flight (``inflight`` stays empty)
        self._orphans: dict[_Copy, str] = {}  # copy dropped while held -> its frame
        self._readers: dict[str, int] = {}
        self._sink_subs: set[str] = set()

    def wire(self, pipe: Pipeline) -> None:
        """Copies per stored message (the channel's reading subscriptions), and which
        subscriptions are sinks' (their settles come through :meth:`settled`)."""
        self._readers = {pipe.channels[n].name: len(r) for n, r in pipe.readers.items() if r}
        self._sink_subs = {
            sub.name for n, r in pipe.readers.items() if not r for sub in pipe.subscriptions[n]
        }

    @property
    def unfinished(self) -> int:
        return len(self.frames)

    def _forget(self, frame: str) -> bool:
        return self.frames.pop(frame, None) is not None

    def published(self, frame: str, source: str) -> None:
        self.frames[frame] = _Frame(self.owed[source])

    def refused(self, frame: str) -> None:
        if self.frames.pop(frame, None) is not None:
            self.dropped += 1

    def settled(self, frame: str, ts: float, now: float) -> None:
        f = self.frames.get(frame)
        if f is None:
            return
        f.live -= 1
        f.owed -= 1
        if f.owed <= 0:  # every owed settle happened: completed, whatever was lost on the way
            del self.frames[frame]
            self._count_completed(ts, now)
        else:
            self._settle_if_gone(frame, f)

    def close(self) -> None:
        """Frames with a loss but a copy still somewhere (queued, or in the hands of a
        replica that died) are lost too."""
        for frame, f in list(self.frames.items()):
            if f.lost is not None:
                self._count_loss(frame, f)
        self._orphans.clear()

    def log(self) -> ObservationLog:
        return _FrameLog(self)

    def event(self, kind: str, subject: str, ident: str, attrs: dict[str, AttrValue]) -> None:
        """One of the model's events (see :class:`_FrameLog`)."""
        sub = attrs.get("subscription")
        if kind == "settle_stale":  # the message may be gone: its ident is then "#<seq>"
            frame = self._orphans.pop((subject, _int(attrs.get("seq")), str(sub)), None)
            f = self.frames.get(frame) if frame is not None else None
            if frame is not None and f is not None:
                f.orphans -= 1
                self._settle_if_gone(frame, f)
            return
        frame = ident.partition("@")[0]
        f = self.frames.get(frame)
        if f is None:
            return
        if kind == "publish":
            if not attrs.get("duplicate"):
                f.live += self._readers.get(subject, 0)
            return
        copy = (subject, _int(attrs.get("seq")), str(sub))
        if kind == "deliver":
            f.held.add(copy)
            return
        f.held.discard(copy)
        if kind == "settle":
            if sub not in self._sink_subs:
                f.live -= 1
                self._settle_if_gone(frame, f)
            return
        if kind == "drop":
            subs = attrs.get("subscriptions")
            assert isinstance(subs, list)
            for name in subs:
                if f.unresolved_on is not None and (ident, name) in f.unresolved_on:
                    continue  # given up on already: the same loss
                f.live -= 1
                lost = (subject, copy[1], name)
                if lost in f.held:
                    f.held.discard(lost)
                    f.orphans += 1
                    self._orphans[lost] = frame
            f.lost = f.lost or "drop"
        elif kind in ("unresolved", "dead_letter"):
            if f.unresolved_on is None:
                f.unresolved_on = set()
            f.unresolved_on.add((ident, str(sub)))
            f.live -= 1
            f.lost = f.lost or "unresolved"
        else:  # retry, expire: the lease ended, the copy stays stored
            return
        self._settle_if_gone(frame, f)

    def _settle_if_gone(self, frame: str, f: _Frame) -> None:
        if f.lost is not None and f.live <= 0 and f.orphans <= 0:
            self._count_loss(frame, f)

    def _count_loss(self, frame: str, f: _Frame) -> None:
        del self.frames[frame]
        if f.lost == "drop":
            self.dropped += 1
        else:
            self.unresolved += 1


def _int(value: AttrValue) -> int:
    return value if isinstance(value, int) else -1


_NOTHING = Event(seq=-1, at=0.0, kind="", subject="", ident="")
_FOLLOWED = frozenset(
    (
        "publish",
        "deliver",
        "settle",
        "settle_stale",
        "retry",
        "expire",
        "drop",
        "unresolved",
        "dead_letter",
    )
)


class _FrameLog(ObservationLog):
    """Keeps no events; hands the ones that follow a frame's copies to a :class:`LossLedger`."""

    def __init__(self, ledger: LossLedger) -> None:
        super().__init__()
        self._event = ledger.event

    def record(self, kind: str, **attrs: Any) -> Event:
        if kind in _FOLLOWED:
            self._event(kind, attrs.get("subject", ""), attrs.get("ident", ""), attrs)
        return _NOTHING


__all__ = ["FrameLedger", "LossLedger", "owed_settles"]
