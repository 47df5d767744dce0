"""videoflow_aio: async backends for distributed video pipelines.

Four contracts (messaging, payload, runtime store, accelerator allocation), each with an
in-memory reference model that runs on virtual time, real adapters, and conformance cases
that run unchanged against every provider under asyncio and trio.
"""

from __future__ import annotations

__version__ = "0.1.0"
"""The installed version of videoflow_aio."""

__all__ = ["__version__"]
