"""The cluster state behind the allocation model: what an API server and the GPU operator's
mig-manager hold, written only through audited, version-checked updates.

* nodes (``NodeFixture``, live) with a ``resource_version`` every write bumps;
* the shared mig-parted config (entries, version, tombstone) and the manager's pointer to it;
* the manager: a pointer write gets ``pending`` for its generation at once and ``success`` /
  ``failed`` ``mig_apply_seconds`` later, from a timer; stale answers are ignored;
* the audit: every change as ``(kind, subject, by, detail)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import anyio

from .. import faults
from ..contracts.allocation import OwnershipConflict
from ..gpu import labels as gfd
from ..observe import ObservationLog
from ._allocation_fixture import NodeFixture
from ._allocation_timer import TimerClock, call_later

DEFAULT_POINTER = "default-mig-parted-config"
SHARED_CONFIG = "videoflow-mig-config"
CONFIG_RETRIES = 16
Mutation = tuple[str, str, str, str]


@dataclass
class Job:
    """A geometry write the manager has not answered yet."""

    generation: int
    due: float
    layout: dict[str, int]


class Cluster:
    """Nodes, the shared MIG config, the manager and the audit (see the module doc)."""

    def __init__(
        self,
        nodes: dict[str, NodeFixture],
        clock: TimerClock | None,
        mig_apply_seconds: float,
        log: ObservationLog | None,
    ) -> None:
        self.nodes = nodes
        self.clock = clock
        self.mig_apply_seconds = mig_apply_seconds
        self.log = log
        self.mutations: list[Mutation] = []
        self.jobs: dict[str, Job] = {}
        self.failing_geometry: set[str] = set()
        self.restore_layouts: dict[str, dict[str, int]] = {}
        self.config: dict[str, dict[str, int]] = {}
        self.config_version = 1
        self.config_tombstoned = False
        self.pointer = DEFAULT_POINTER
        self.pointer_original: str | None = None

    # -- time and the manager ------------------------------------------------------------------
    def now(self) -> float | None:
        """The model's time (the clock's, else the running loop's); None outside a loop."""
        if self.clock is not None:
            return self.clock.monotonic()
        try:
            return anyio.current_time()
        except anyio.NoEventLoopError:  # no running loop: nothing can have come due
            return None

    def settle(self) -> None:
        """Answer every geometry write whose delay has passed (the timers' backstop)."""
        now = self.now()
        if now is None or not self.jobs:
            return
        for name, job in sorted(self.jobs.items(), key=lambda kv: (kv[1].due, kv[0])):
            if job.due <= now:
                self.answer(name, job.generation)

    def answer(self, name: str, generation: int) -> None:
        """The manager finishes the write ``generation`` on ``name`` (stale answers ignored)."""
        job = self.jobs.get(name)
        if job is None or job.generation != generation:
            return
        del self.jobs[name]
        node = self.nodes[name]
        failed = name in self.failing_geometry
        node.mig_state = "failed" if failed else "success"
        node.mig_state_generation = generation
        node.labels[gfd.MIG_STATE] = node.mig_state
        if not failed:
            node.mig_layout = dict(job.layout)
            node.applied_by_model = True
        node.resource_version += 1
        self.mutate("node.mig-state", name, "mig-manager", f"{node.mig_state}@{generation}")

    def _start_manager(self, name: str, generation: int, layout: dict[str, int]) -> None:
        node = self.nodes[name]
        node.mig_state = "pending"
        node.mig_state_generation = generation
        node.labels[gfd.MIG_STATE] = "pending"
        node.resource_version += 1
        self.mutate("node.mig-state", name, "mig-manager", f"pending@{generation}")
        now = self.now() or 0.0
        self.jobs[name] = Job(generation, now + self.mig_apply_seconds, dict(layout))
        call_later(self.clock, self.mig_apply_seconds, lambda: self.answer(name, generation))

    # -- audit ---------------------------------------------------------------------------------
    def mutate(self, kind: str, subject: str, by: str, detail: str) -> None:
        self.mutations.append((kind, subject, by, detail))
        if self.log is not None:
            self.log.record(
                f"alloc.{kind}", subject=subject, ident=by, at=self.now(), detail=detail
            )

    # -- writes --------------------------------------------------------------------------------
    def cas_node(
        self,
        node: NodeFixture,
        expected: int,
        by: str,
        kind: str,
        detail: str,
        apply: Callable[[NodeFixture], None],
    ) -> int:
        """Update ``node`` if its version is still ``expected`` (else 409); returns the new one."""
        if node.resource_version != expected:
            raise OwnershipConflict(
                f"node {node.name} moved from resource_version {expected} to "
                f"{node.resource_version} (409 Conflict)",
                resource=f"node/{node.name}",
                expected=expected,
                actual=node.resource_version,
            )
        apply(node)
        node.resource_version += 1
        self.mutate(kind, node.name, by, detail)
        return node.resource_version

    def set_owner(self, name: str, owner: str | None, epoch: str | None, by: str) -> None:
        """Write the node's owner at its current version (the caller holds or just read it)."""
        node = self.nodes[name]

        def own(n: NodeFixture) -> None:
            n.owner = owner
            n.owner_epoch = epoch

        self.cas_node(node, node.resource_version, by, "node.owner", f"owner={owner}", own)

    async def write_config(
        self, by: str, set_entries: Mapping[str, dict[str, int]], drop_entries: Sequence[str] = ()
    ) -> bool:
        """Update the shared config under CAS: read it, change the entries, write naming the
        version read; on a conflict read again and reapply (as a ConfigMap client retries a
        409). The map is never deleted: emptied, it becomes an entry-less tombstone and the
        manager's pointer goes back to the original. Returns True when it is a tombstone."""
        for _ in range(CONFIG_RETRIES):
            read = self.config_version
            entries = {k: dict(v) for k, v in self.config.items() if k not in drop_entries}
            entries.update({k: dict(v) for k, v in set_entries.items()})
            await faults.reach("config.read.after", operation_id=by, resource_version=read)
            if self.config_version != read:
                continue  # 409: read again (a lost CAS changes nothing, so it is not audited)
            self.config = entries
            self.config_tombstoned = not entries
            self.config_version += 1
            self.mutate(
                "config.update",
                SHARED_CONFIG,
                by,
                "tombstone" if not entries else ",".join(sorted(entries)),
            )
            self._repoint(by, bool(entries))
            return not entries
        raise OwnershipConflict(
            f"shared config kept moving ({CONFIG_RETRIES} conflicts)",
            resource=f"configmap/{SHARED_CONFIG}",
            expected=None,
            actual=self.config_version,
        )

    def _repoint(self, by: str, live: bool) -> None:
        """The manager reads the shared config while it has entries, the original after."""
        if live and self.pointer != SHARED_CONFIG:
            self.pointer_original = self.pointer
            self.pointer = SHARED_CONFIG
            self.mutate("config.pointer", SHARED_CONFIG, by, SHARED_CONFIG)
        elif not live and self.pointer == SHARED_CONFIG:
            self.pointer = self.pointer_original or DEFAULT_POINTER
            self.pointer_original = None
            self.mutate("config.pointer", SHARED_CONFIG, by, self.pointer)

    def point(self, name: str, config: str, layout: dict[str, int], by: str) -> int:
        """Point ``name`` at config entry ``config`` (remembering the original pointer and
        layout once); the manager starts on it. Returns the write's generation."""
        node = self.nodes[name]

        def point(n: NodeFixture) -> None:
            if n.restore_record is None:
                n.restore_record = n.mig_config
                self.restore_layouts[name] = dict(n.mig_layout)
            n.mig_config = config
            n.labels[gfd.MIG_CONFIG] = config

        generation = self.cas_node(
            node, node.resource_version, by, "node.mig-config", config, point
        )
        self._start_manager(name, generation, layout)
        return generation

    def restore(self, name: str, by: str) -> None:
        """Point ``name`` back at its original config; the manager restores the old layout."""
        node = self.nodes[name]
        original = node.restore_record or "all-disabled"
        layout = self.restore_layouts.pop(name, {})

        def restore(n: NodeFixture) -> None:
            n.restore_record = None
            n.mig_config = original
            n.labels[gfd.MIG_CONFIG] = original

        generation = self.cas_node(
            node, node.resource_version, by, "node.mig-config", original, restore
        )
        self._start_manager(name, generation, layout)


__all__ = ["DEFAULT_POINTER", "SHARED_CONFIG", "Cluster", "Job", "Mutation"]
