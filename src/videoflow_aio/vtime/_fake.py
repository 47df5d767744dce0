"""``FakeClock``: the source document's controllable clock, as a manual-mode VirtualClock (the
seed's import path ``videoflow_aio.memory.clock`` re-exports it)."""

from __future__ import annotations

from ._clock import VirtualClock


class FakeClock(VirtualClock):
    """Monotonic and wall time advance together, only when asked; timers fire on advance."""

    def __init__(self, start: float = 1000.0, wall_start: float = 1_700_000_000.0) -> None:
        super().__init__(start=start, wall_start=wall_start, autojump=False)
