"""The ``videoflow-aio explore`` sub-command (its arguments are parsed in
:mod:`videoflow_aio.cli`): :func:`run_explore` explores, :func:`run_replay` replays one run.
Everything a program needs from the explorer itself is in :mod:`videoflow_aio.explore`."""

from __future__ import annotations

from ._command import run_explore, run_replay

__all__ = ["run_explore", "run_replay"]
