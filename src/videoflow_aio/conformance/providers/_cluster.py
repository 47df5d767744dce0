"""What the cluster providers share: member controls on the clusters they started, and healing
the cluster after every case (a killed member restarted, a paused one resumed).

A cluster given by URL (``url=``) is not ours: no member controls are offered and the
``replicated`` fault cases skip.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread

from ...testing.clusters import ClusterProcess
from .._case import Case
from .._controls import MemberControls, control_names
from .._harness import Harness, Skip
from .._server_provider import ServerProvider

MEMBER_CONTROLS = control_names(MemberControls)
FORM_TIMEOUT = 60.0  # seconds a cluster may take to elect a leader after a fault


class ClusterControls:
    """:class:`~videoflow_aio.conformance.MemberControls` on a running cluster (blocking
    process work runs in a worker thread)."""

    def __init__(self, cluster: ClusterProcess | None) -> None:
        self._cluster = cluster

    def _ours(self) -> ClusterProcess:
        if self._cluster is None:
            raise Skip("member faults need a cluster this provider started (not given url=)")
        return self._cluster

    async def _run(self, fn: Callable[[], Any]) -> Any:
        return await anyio.to_thread.run_sync(fn)

    async def members(self) -> list[str]:
        return [m.name for m in self._ours().members]

    async def leader(self) -> str:
        cluster = self._ours()
        leader = await self._run(cluster.leader) or await self._run(
            lambda: cluster.wait_formed(FORM_TIMEOUT)
        )
        return str(leader.name)

    async def kill_member(self, member: str) -> None:
        await self._run(self._ours().member(member).kill)

    async def restart_member(self, member: str) -> None:
        cluster = self._ours()
        await self._run(cluster.member(member).restart)
        await self._run(lambda: cluster.wait_formed(FORM_TIMEOUT))

    async def pause_member(self, member: str) -> None:
        await self._run(self._ours().member(member).pause)

    async def resume_member(self, member: str) -> None:
        await self._run(self._ours().member(member).resume)


def heal(cluster: ClusterProcess) -> None:
    """Every member running and unpaused again, the cluster formed (blocking)."""
    for m in cluster.members:
        if m.paused:
            m.resume()
        if not m.alive():
            m.restart()
    cluster.wait_formed(FORM_TIMEOUT)


class ClusterProvider(ServerProvider):
    """A :class:`ServerProvider` whose servers are clusters: ``replicated`` and the member
    controls when it started them, healing after every case."""

    def clusters(self) -> list[ClusterProcess]:
        """The clusters this provider started."""
        return [c for c in self._started.values() if isinstance(c, ClusterProcess)]

    def owns_clusters(self) -> bool:
        """True when it starts (or started) its clusters itself: member faults are possible."""
        return bool(self.clusters()) or all(
            self.urls.get(role) is None for role in self.server_options()
        )

    def capabilities(self, contract: str) -> frozenset[str] | None:
        base = super().capabilities(contract) or frozenset()
        return base | {"replicated"} if self.owns_clusters() else base

    def member_controls(self) -> frozenset[str]:
        return MEMBER_CONTROLS if self.owns_clusters() else frozenset()

    def cluster(self, role: str) -> ClusterProcess | None:
        """The ``role`` cluster this provider started (None when its URL was given)."""
        started = self._started.get(role)
        return started if isinstance(started, ClusterProcess) else None

    def cluster_controls(self, role: str) -> ClusterControls:
        return ClusterControls(self.cluster(role))

    async def primary_url(self, role: str) -> str:
        """The URL of the member leading ``role``'s cluster now (the given URL if not ours)."""
        cluster = self.cluster(role)
        if cluster is not None:
            leader = await anyio.to_thread.run_sync(cluster.leader)
            if leader is not None:
                return leader.url
        return self.url(role)

    def harness(self, case: Case) -> Any:
        return self._healing(case)

    @asynccontextmanager
    async def _healing(self, case: Case) -> AsyncIterator[Harness]:
        async with self._harness(case) as h:
            try:
                yield h
            finally:  # before the namespaces are dropped: those calls need a formed cluster
                with anyio.CancelScope(shield=True):
                    for cluster in self.clusters():
                        await anyio.to_thread.run_sync(heal, cluster)


__all__ = ["MEMBER_CONTROLS", "ClusterControls", "ClusterProvider", "heal"]
