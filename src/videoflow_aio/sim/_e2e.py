"""End to end, frame by frame: each frame counted once, as completed, lost or unfinished.

A frame is **completed** when every copy of it owed to a sink has been settled
``Completed`` there; its end-to-end latency is from its capture (``event_ts``) to the last
of those settles. How many sink settles a frame owes comes from the graph: the pipeline
forwards a frame under ``<frame>@<stage>``, so each stage's output channel carries one copy
of it (the messaging model deduplicates the others), and a sink settles one copy per input
that carries it. So a source's frames owe, over the sinks reachable from it, one settle per
sink input reachable from the source (fan-out to two sinks: 2; a diamond into one sink: 2;
a diamond feeding a stage that feeds the sink: 1).

A frame is **dropped** or **unresolved** when the messaging model drops a message of it or
marks one unresolved (``max_deliver`` attempts) on any path before it completed, or when
its source's publish was refused — counted once, by the first loss. What is left at the end
of the run is **unfinished**. Frames are remembered only while in flight (published, not yet
completed or lost), so memory follows the frames in flight, not the run's length.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..observe import AttrValue, Event, ObservationLog
from ..pipeline import LatencyHistogram
from ._record import Series
from ._spec import SimSpec

LOSSES = ("drop", "unresolved")
"""The messaging model's events that lose a message (and so its frame)."""


def owed_settles(spec: SimSpec) -> dict[str, int]:
    """Per source: the sink settles each of its frames owes (see the module docstring)."""
    readers: dict[str, list[str]] = {}
    for st in spec.stages:
        for inp in st.inputs:
            readers.setdefault(inp, []).append(st.name)
    sinks = {st.name for st in spec.stages if st.name not in readers}
    inputs = {st.name: st.inputs for st in spec.stages}
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
            sum(1 for i in inputs[t] if i in reached) for t in sinks if t in reached
        )
    return owed


class FrameLedger:
    """The frames in flight and each frame's fate (see the module docstring).

    A source calls :meth:`published` before each publish (and :meth:`refused` when the
    publish was refused); sink stages' recorders call :meth:`settled`; the messaging model
    reports losses through :meth:`log`.
    """

    __slots__ = (
        "_start",
        "bin_seconds",
        "completed",
        "dropped",
        "histogram",
        "inflight",
        "nbins",
        "owed",
        "series",
        "unresolved",
        "window",
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
        self._start = start
        self.window = window
        self.bin_seconds = bin_seconds
        self.nbins = nbins
        self.histogram = LatencyHistogram()
        self.series = Series(bin_seconds, nbins)
        self.completed = self.dropped = self.unresolved = 0

    def start_at(self, start: float) -> None:
        """The load starts at ``start`` (capture times are binned from there)."""
        self._start = start

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
        del inflight[frame]
        self.completed += 1
        total = now - ts
        rel = ts - self._start
        lo, hi = self.window
        if lo <= rel < hi:
            self.histogram.add(total)
        b = int(rel // self.bin_seconds)
        if 0 <= b < self.nbins:
            self.series.add(b, total)

    def lost(self, kind: str, publication_id: str) -> None:
        """The model dropped (or gave up on) a message: its frame is lost, counted once."""
        frame = publication_id.partition("@")[0]
        if self.inflight.pop(frame, None) is None:
            return
        if kind == "drop":
            self.dropped += 1
        else:
            self.unresolved += 1

    def log(self) -> ObservationLog:
        """An observation log for the messaging model that keeps nothing and reports each
        loss to this ledger."""
        return _LossLog(self.lost)


_NOTHING = Event(seq=-1, at=0.0, kind="", subject="", ident="")


class _LossLog(ObservationLog):
    """Keeps no events; hands the losses to a callback."""

    def __init__(self, on_loss: Callable[[str, str], None]) -> None:
        super().__init__()
        self._on_loss = on_loss

    def record(
        self,
        kind: str,
        *,
        subject: str = "",
        ident: str = "",
        at: float | None = None,
        **attrs: AttrValue,
    ) -> Event:
        if kind in LOSSES:
            self._on_loss(kind, ident)
        return _NOTHING


__all__ = ["FrameLedger", "owed_settles"]
