"""The seed's name for the MIG geometry oracle, which lives in :mod:`videoflow_aio.gpu.geometry`.

A thin re-export: ``Family``, ``Profile``, ``check_layout``, ``families``, ``family_for`` and
``smallest_profile`` are the very objects of ``videoflow_aio.gpu``.
"""

from __future__ import annotations

from ..gpu.geometry import Family, Profile, check_layout, families, family_for, smallest_profile

__all__ = ["Family", "Profile", "check_layout", "families", "family_for", "smallest_profile"]
