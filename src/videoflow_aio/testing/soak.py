"""Fault soaks: a workload on a cluster while a seeded schedule kills and pauses its members,
then the nothing-lost checker's figures.

Each soak is bounded by its fault count, its per-fault times and a deadline, and runs on
clusters started with :mod:`videoflow_aio.testing.clusters` (every process stopped by PID by
their owner); waiting on real processes is wall-clock work (``time.sleep``/``time.monotonic``
below are deliberate and marked). The result's :meth:`SoakResult.figure` is the line printed by
``benchmarks/cluster_soak.py`` and ``.ci/run``: operations, faults injected,
acknowledged-and-lost, ambiguous outcomes and how they resolved.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.to_thread

from ..checks import LossReport, check_nothing_lost
from ..contracts.errors import VideoflowError
from ..observe import ObservationLog
from . import workload
from ._link import Link
from .clusters import ClusterProcess, Member, RedisReplicaSet, redis_call, redis_info
from .servers import HOST

ACTIONS = ("kill-leader", "pause-leader", "kill", "pause")
FORM_TIMEOUT = 60.0


@dataclass
class SoakResult:
    """One soak: the deployment's name, the checker's report, its wall seconds, and any
    deployment-specific figures (``extra``)."""

    deployment: str
    report: LossReport
    seconds: float
    extra: dict[str, Any] = field(default_factory=dict)

    def figure(self) -> str:
        """One line: the figures of this soak."""
        r = self.report
        res = "; ".join(
            f"{what} {', '.join(f'{k} {n}' for k, n in sorted(c.items()))}"
            for what, c in r.resolutions().items()
        )
        extra = "".join(f", {k} {v}" for k, v in self.extra.items())
        return (
            f"{self.deployment}: {r.operations} operations, {r.faults} faults injected, "
            f"{r.acknowledged} acknowledged, {len(r.lost)} acknowledged-and-lost, "
            f"{len(r.violations) - len(r.lost)} other violations, "
            f"{len(r.ambiguous)} ambiguous ({res or 'none'}), {len(r.unverified)} unverified, "
            f"{self.seconds:.1f} s{extra}"
        )


async def _blocking(fn: Callable[[], Any]) -> Any:
    return await anyio.to_thread.run_sync(fn)


async def fault_schedule(
    cluster: ClusterProcess,
    log: ObservationLog,
    stop: anyio.Event,
    *,
    faults: int = 4,
    seed: int = 1,
    every: float = 1.0,
    down_for: float = 2.0,
    actions: Sequence[str] = ACTIONS,
    leader: Callable[[], Member | None] | None = None,
) -> None:
    """``faults`` times: wait ``every`` s, then the next of ``actions`` in turn — kill -9 or
    SIGSTOP the leader (``kill-leader``, ``pause-leader``), or a member chosen by ``seed``
    (``kill``, ``pause``); ``down_for`` s later restart it on its data or resume it, and wait
    until the cluster has formed again. ``leader`` finds the leader (default: the cluster's,
    e.g. a NATS stream's leader instead of the meta leader). Sets ``stop`` when done (or on
    error)."""
    rng = random.Random(seed)
    try:
        for n in range(faults):
            await anyio.sleep(every)
            action = actions[n % len(actions)]
            member = await _target(cluster, rng, action, leader or cluster.leader)
            log.record("fault", subject=member.name, action=action)
            await _blocking(member.pause if action.startswith("pause") else member.kill)
            await anyio.sleep(down_for)
            log.record("fault", subject=member.name, action=_undo(action))
            await _blocking(member.resume if action.startswith("pause") else member.restart)
            await _blocking(lambda: cluster.wait_formed(FORM_TIMEOUT))
        await anyio.sleep(every)  # some workload on the healed cluster
    finally:
        stop.set()


def _follow(replica: Member, port: int, timeout: float = 10.0) -> None:
    """Make ``replica`` replicate from ``HOST:port`` and wait until it is in sync."""
    redis_call(replica.port, "REPLICAOF", HOST, port)
    deadline = time.monotonic() + timeout  # wall-clock: a real replica syncing
    while time.monotonic() < deadline:  # wall-clock: as above
        if redis_info(replica.port).get("master_link_status") == "up":
            return
        time.sleep(0.02)  # wall-clock: polling a real server
    raise TimeoutError(f"replica {replica.name} did not sync through port {port}")


def _undo(action: str) -> str:
    return "resume" if action.startswith("pause") else "restart"


async def _target(
    cluster: ClusterProcess,
    rng: random.Random,
    action: str,
    find_leader: Callable[[], Member | None],
) -> Member:
    if action.endswith("-leader"):
        leader = await _blocking(find_leader)
        if leader is not None:
            return leader  # type: ignore[no-any-return]
    return rng.choice(cluster.members)


Workload = Callable[[ObservationLog, anyio.Event], Coroutine[Any, Any, None]]


async def soak(
    name: str,
    cluster: ClusterProcess,
    workloads: Sequence[Workload],
    *,
    faults: int = 4,
    seed: int = 1,
    every: float = 1.0,
    down_for: float = 2.0,
    actions: Sequence[str] = ACTIONS,
    leader: Callable[[], Member | None] | None = None,
) -> SoakResult:
    """Run ``workloads`` (each called with the log and the stop event) beside the fault
    schedule; check the log."""
    log, stop = ObservationLog(), anyio.Event()
    t0 = anyio.current_time()
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: fault_schedule(
                cluster, log, stop, faults=faults, seed=seed, every=every,
                down_for=down_for, actions=actions, leader=leader,
            )
        )  # fmt: skip
        for w in workloads:
            tg.start_soon(w, log, stop)
    schedule = " ".join(f"{e.attrs['action']}:{e.subject}" for e in log.events("fault"))
    return SoakResult(
        name, check_nothing_lost(log), anyio.current_time() - t0, {"schedule": schedule}
    )


async def redis_failover(
    cluster: ClusterProcess,
    *,
    wait_replicas: int,
    writers: int = 8,
    run_for: float = 0.5,
    partition: bool = False,
    namespace: str = "fo",
) -> SoakResult:
    """``writers`` clients write to the primary as fast as they can; after ``run_for`` s the
    primary is killed -9 in the middle of them and the replica promoted by hand (Sentinel's
    failover, without Sentinel): how many writes the old primary acknowledged are missing on
    the new one. ``partition``: the replica follows the primary through a :class:`Link`
    that is cut for the second half of the run (what the primary sends is lost, as in a
    network partition), then promoted — the scenario in which Jepsen saw Sentinel lose
    acknowledged writes. With ``wait_replicas=0`` Redis promises nothing here; with 1, no confirmed
    write may be lost."""
    from ..adapters.redis import RedisRuntimeStore

    spec = cluster.options
    assert isinstance(spec, RedisReplicaSet)
    old = await _blocking(cluster.leader)
    new = next(m for m in cluster.members if m is not old)
    log = ObservationLog()
    t0 = anyio.current_time()
    async with Link(old.port) as link:
        if partition:  # the replica follows the primary through a link that can be cut
            await _blocking(lambda: _follow(new, link.port))
        store = RedisRuntimeStore(old.url, namespace=namespace, wait_replicas=wait_replicas)
        killed = anyio.Event()

        async def writer(w: int) -> None:
            for i in range(1_000_000):  # bounded; ends at the kill
                key = f"w{w}k{i}"
                try:
                    ok = await store.cas(key, None, key.encode())
                except VideoflowError as exc:  # every answer is recorded
                    outcome = workload.write_outcome(exc)
                    log.record("cas", subject=key, ident=key, outcome=outcome)
                    if killed.is_set():
                        return
                    continue
                log.record("cas", subject=key, ident=key, outcome="ok" if ok else "conflict")

        async def killer() -> None:
            await anyio.sleep(run_for / 2)
            if partition:
                log.record("fault", subject=new.name, action="partition")
                link.cut()
            await anyio.sleep(run_for / 2)
            log.record("fault", subject=old.name, action="kill-leader")
            await _blocking(old.kill)
            killed.set()

        async with anyio.create_task_group() as tg:
            for w in range(writers):
                tg.start_soon(writer, w)
            tg.start_soon(killer)
        await store.aclose()
        await _blocking(lambda: spec.promote(cluster, new))
    after = RedisRuntimeStore(new.url, namespace=namespace)
    for e in log.events("cas"):
        value, _ = await after.get(e.subject)
        log.record("cas_final", subject=e.subject, applied=[e.subject] if value else [])
    await after.aclose()
    label = (
        f"redis failover{' after a partition' if partition else ''} (wait_replicas={wait_replicas})"
    )
    report = check_nothing_lost(log)
    return SoakResult(label, report, anyio.current_time() - t0, {"writes": len(log.events("cas"))})


__all__ = ["ACTIONS", "SoakResult", "fault_schedule", "redis_failover", "soak"]
