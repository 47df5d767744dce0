"""The seed's name for :class:`~videoflow_aio.vtime.FakeClock`, which lives in
:mod:`videoflow_aio.vtime`: a pure re-export, kept so the source document's import path works."""

from __future__ import annotations

from ..vtime import FakeClock

__all__ = ["FakeClock"]
