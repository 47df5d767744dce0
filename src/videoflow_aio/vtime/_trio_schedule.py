"""Seeded batch order for trio: take over the PRNG trio's run loop shuffles each batch with.

trio runs its tasks in batches (every task runnable at the start of a pass) and permutes
each batch with a module-level ``random.Random``, ``trio._core._run._r``. With the module
flag ``_ALLOW_DETERMINISTIC_SCHEDULING`` set (what Hypothesis's trio plugin does), trio
first sorts the batch by task creation (``Task._counter``) and then calls
``_r.shuffle(batch)``, and runs the batch from its end (``batch.pop()``); without the
flag, it reverses the batch on a coin flip of ``_r`` — which
leaves the order of the batch itself (as tasks were rescheduled, which for equal
deadlines depends on memory addresses) to chance.

While a seeded run is active, this module sets that flag and puts a stand-in for ``_r``
in its place: in a seeded run's own thread, ``shuffle`` permutes from that run's PRNG; in
any other trio run it defers to trio's own ``_r``. Both are restored when the last seeded
run ends. The private names are checked on first use (:func:`check_trio`) and pinned by
``tests/vtime/test_vtime_seed_trio.py``: an incompatible trio fails loudly, never silently
unseeded.
"""

from __future__ import annotations

import random
import threading
from collections.abc import MutableSequence
from typing import Any

import trio
from trio._core import _run as _trio_run

from .._seeded import shuffle

_FLAG = "_ALLOW_DETERMINISTIC_SCHEDULING"
_PRNG = "_r"
_lock = threading.Lock()


def check_trio() -> None:
    """RuntimeError unless this trio has the scheduler hooks seeded runs take over."""
    prng = getattr(_trio_run, _PRNG, None)
    if not hasattr(_trio_run, _FLAG) or not callable(getattr(prng, "shuffle", None)):
        raise RuntimeError(
            f"seeded schedules on trio need trio._core._run.{_PRNG} and {_FLAG} (trio's batch "
            f"shuffle), which trio {trio.__version__} does not have: run unseeded on trio, "
            "or use a trio this library supports"
        )


class _SeededPRNG:
    """Stands in for trio's ``_r``: seeded runs shuffle from their own PRNG, the rest from
    trio's."""

    def __init__(self, original: random.Random) -> None:
        self.original = original
        self.runs: dict[Any, random.Random] = {}  # trio Runner -> its clock's PRNG

    def shuffle(self, batch: MutableSequence[Any]) -> None:
        rng = self.runs.get(getattr(_trio_run.GLOBAL_RUN_CONTEXT, "runner", None))
        if rng is None:
            self.original.shuffle(batch)
        else:
            shuffle(batch, rng.random)
            batch.reverse()  # trio runs the batch from its end (batch.pop())

    def __getattr__(self, name: str) -> Any:
        return getattr(self.original, name)


_active: _SeededPRNG | None = None
_saved_flag = False


def begin(runner: Any, rng: random.Random) -> None:
    """Make ``runner``'s batches follow ``rng`` until :func:`end`."""
    global _active, _saved_flag
    check_trio()
    with _lock:
        if _active is None:
            _active = _SeededPRNG(getattr(_trio_run, _PRNG))
            _saved_flag = getattr(_trio_run, _FLAG)
            setattr(_trio_run, _PRNG, _active)
            setattr(_trio_run, _FLAG, True)
        _active.runs[runner] = rng


def end(runner: Any) -> None:
    """``runner`` has finished; restore trio's own PRNG after the last seeded run."""
    global _active
    with _lock:
        if _active is None:
            return
        _active.runs.pop(runner, None)
        if not _active.runs:
            setattr(_trio_run, _PRNG, _active.original)
            setattr(_trio_run, _FLAG, _saved_flag)
            _active = None


class SeededRun(trio.abc.Instrument):
    """Ends a seeded run's takeover when trio's run loop closes (``after_run``)."""

    def __init__(self, runner: Any) -> None:
        self._runner = runner

    def after_run(self) -> None:
        end(self._runner)
