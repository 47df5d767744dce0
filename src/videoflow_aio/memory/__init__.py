"""Reference in-memory models: the executable specification of each contract.

Each model implements its contract faithfully (retention, leases, dedup windows, obligation
ledgers, CAS ownership, MIG geometry) on the running loop's (virtual) time, with model
controls for fault injection that are not part of the contract.
"""

from __future__ import annotations

from .allocation import MemoryAllocationBackend, NodeFixture, pack_whole_devices
from .clock import FakeClock
from .messaging import MemoryMessagingBackend, make_channel, make_envelope, make_subscription
from .mig_geometry import Family, Profile, check_layout, family_for, smallest_profile
from .payload import MemoryPayloadStore, StaticLedger
from .runtime_store import FileRuntimeStore, MemoryRuntimeStore

__all__ = [
    "FakeClock",
    "Family",
    "FileRuntimeStore",
    "MemoryAllocationBackend",
    "MemoryMessagingBackend",
    "MemoryPayloadStore",
    "MemoryRuntimeStore",
    "NodeFixture",
    "Profile",
    "StaticLedger",
    "check_layout",
    "family_for",
    "make_channel",
    "make_envelope",
    "make_subscription",
    "pack_whole_devices",
    "smallest_profile",
]
