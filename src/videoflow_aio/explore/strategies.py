"""Hypothesis strategies for seeded schedules (needs ``hypothesis``, a test dependency).

``seeds()`` draws integer seeds: a failing property shrinks to the smallest failing seed it
finds, and the falsifying example names a seed ``vtime.run(..., seed=N)`` and
``videoflow-aio explore --replay`` reproduce. ``schedules()`` draws the schedule itself: a
:class:`ScriptedRandom` holding the draws the run will take, to pass as ``seed=``; a
failure then shrinks towards the plain order (every draw 0.0: tasks in the order they were
started, no jitter, no fault), so the minimal example is the fewest reorderings that still
fail, and its repr replays it.

    from hypothesis import given
    from videoflow_aio import vtime
    from videoflow_aio.explore.strategies import schedules, seeds

    @given(seed=seeds())
    def test_no_lost_update(seed):
        vtime.run(program, seed=seed)

    @given(schedule=schedules())
    def test_no_lost_update_minimal(schedule):
        vtime.run(program, clock=vtime.VirtualClock(seed=schedule))
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from hypothesis import strategies as st

MAX_SEED = 2**32 - 1
"""The largest seed :func:`seeds` draws by default."""


def seeds(max_value: int = MAX_SEED) -> st.SearchStrategy[int]:
    """Integer seeds in ``[0, max_value]`` (they shrink towards 0)."""
    return st.integers(min_value=0, max_value=max_value)


class ScriptedRandom(random.Random):
    """A ``random.Random`` whose ``random()`` returns ``draws`` in order, then 0.0 forever
    (what the seeded schedule, jitter and fault injection draw from). Never raises, so it
    is safe inside an event loop's run loop."""

    def __init__(self, draws: Sequence[float] = ()) -> None:
        super().__init__(0)
        self.draws = list(draws)
        self._next = 0

    def random(self) -> float:
        i = self._next
        if i < len(self.draws):
            self._next = i + 1
            return self.draws[i]
        return 0.0

    def __repr__(self) -> str:
        return f"ScriptedRandom({self.draws!r})"


def schedules(max_draws: int = 200) -> st.SearchStrategy[ScriptedRandom]:
    """A schedule as its first ``max_draws`` draws (then 0.0): pass it as ``seed=`` to a
    clock or a fault injector. Draws shrink towards fewer and smaller values, i.e. towards
    the unperturbed schedule."""
    draw = st.floats(min_value=0.0, max_value=1.0, exclude_max=True)
    return st.lists(draw, max_size=max_draws).map(ScriptedRandom)


__all__ = ["MAX_SEED", "ScriptedRandom", "schedules", "seeds"]
