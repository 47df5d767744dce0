"""Every registered conformance case on every provider available here.

One test per (case, provider, backend), e.g. ``TestConformance::MSG-001[memory-asyncio]``.
Providers whose server is missing skip here, and fail when ``VIDEOFLOW_REQUIRE_SERVERS=1``.

The providers run under asyncio and trio. Their secured and clustered variants
(``*-secure``, ``*-cluster``, ``*-replicated``: the same adapters over TLS and auth, or on a
cluster) run under asyncio here: from trio an adapter's calls cross the same bridge whatever
the server behind it, and that bridge is covered by the plain providers under trio. This
keeps CI under its time budget; ``videoflow-aio conformance --provider all`` runs every
variant under both backends.
"""

from __future__ import annotations

from fnmatch import fnmatch

from videoflow_aio.conformance import conformance_suite, provider_names, select_cases

pytest_plugins = ["videoflow_aio.conformance.pytest_plugin"]

VARIANTS = [n for n in provider_names() if n.endswith(("-secure", "-cluster", "-replicated"))]
#: on the JetStream cluster, under pytest, the MSG cases whose reads follow a write the
#: consumers' raft groups apply after its request was answered (each met that window in CI
#: before the adapter read its own writes there: docs/clusters.md, "Read-your-writes") and the
#: fault cases. ``videoflow-aio conformance --provider nats-cluster`` runs every MSG case
#: (MSG-009, which timed the redelivery from after the receive, failed 2 of 5 runs there under
#: two CPU hogs until it timed from before the delivery, with the provider's scheduling slack
#: on its upper bound); the rest are left out here for CI's time budget.
CLUSTER_RUN_APART = "nats-cluster"
CLUSTER_CASES = ("MSG-001", "MSG-043", "MSG-047", "MSG-050", "MSG-054", "MSG-073", "MSG-8*")

TestConformance = conformance_suite([n for n in provider_names() if n not in VARIANTS])
TestConformanceVariants = conformance_suite(
    [n for n in VARIANTS if n != CLUSTER_RUN_APART], backends=["asyncio"]
)
TestConformanceNatsCluster = conformance_suite(
    [CLUSTER_RUN_APART],
    backends=["asyncio"],
    select=",".join(
        c.id
        for c in select_cases(contract="messaging")
        if any(fnmatch(c.id, p) for p in CLUSTER_CASES)
    ),
)
