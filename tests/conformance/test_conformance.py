"""Every registered conformance case on every provider available here, under asyncio and trio.

One test per (case, provider, backend), e.g. ``TestConformance::MSG-001[memory-asyncio]``.
Providers whose server is missing skip here, and fail when ``VIDEOFLOW_REQUIRE_SERVERS=1``.
"""

from __future__ import annotations

from videoflow_aio.conformance import conformance_suite

pytest_plugins = ["videoflow_aio.conformance.pytest_plugin"]

TestConformance = conformance_suite()
