"""The ``videoflow-aio simulate`` sub-command, for the ``videoflow-aio`` parser to mount: its
arguments (:func:`add_parser`) and what it does with them (:func:`cmd_simulate`). Everything a
program needs from the simulator itself is in :mod:`videoflow_aio.sim`."""

from __future__ import annotations

from ._cli import add_parser, cmd_simulate

__all__ = ["add_parser", "cmd_simulate"]
