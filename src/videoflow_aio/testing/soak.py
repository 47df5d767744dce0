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

import dataclasses
import random
import time
import uuid
from collections import Counter
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
from .clusters import ClusterProcess, Member, NatsCluster, RedisReplicaSet, redis_call, redis_info
from .servers import HOST

ACTIONS = ("kill-leader", "pause-leader", "kill", "pause")
"""The schedule's faults, taken in turn: kill -9 or SIGSTOP the leader, then a member."""
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


@dataclass(frozen=True)
class Schedule:
    """A bounded fault schedule: ``faults`` times, wait ``every`` s, then the next of
    ``actions`` in turn — kill -9 or SIGSTOP the leader (``kill-leader``, ``pause-leader``),
    or a member chosen by ``seed`` (``kill``, ``pause``); ``down_for`` s later restart it on
    its data or resume it, and wait until the cluster has formed again. ``leader`` finds the
    leader (default: the cluster's; e.g. a NATS stream's leader instead of the meta
    leader)."""

    faults: int = 4
    seed: int = 1
    every: float = 1.0
    down_for: float = 2.0
    actions: Sequence[str] = ACTIONS
    leader: Callable[[], Member | None] | None = None


async def fault_schedule(
    cluster: ClusterProcess, log: ObservationLog, stop: anyio.Event, schedule: Schedule
) -> None:
    """Run ``schedule`` on ``cluster``, recording each fault; sets ``stop`` when done (or on
    error)."""
    rng = random.Random(schedule.seed)
    find_leader = schedule.leader or cluster.leader
    try:
        for n in range(schedule.faults):
            await anyio.sleep(schedule.every)
            action = schedule.actions[n % len(schedule.actions)]
            member = await _target(cluster, rng, action, find_leader)
            log.record("fault", subject=member.name, action=action)
            await _blocking(member.pause if action.startswith("pause") else member.kill)
            await anyio.sleep(schedule.down_for)
            log.record("fault", subject=member.name, action=_undo(action))
            await _blocking(member.resume if action.startswith("pause") else member.restart)
            await _blocking(lambda: cluster.wait_formed(FORM_TIMEOUT))
        await anyio.sleep(schedule.every)  # some workload on the healed cluster
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
    schedule: Schedule | None = None,
) -> SoakResult:
    """Run ``workloads`` (each called with the log and the stop event) beside the fault
    ``schedule``; check the log."""
    log, stop = ObservationLog(), anyio.Event()
    t0 = anyio.current_time()
    async with anyio.create_task_group() as tg:
        tg.start_soon(fault_schedule, cluster, log, stop, schedule or Schedule())
        for w in workloads:
            tg.start_soon(w, log, stop)
    faults = " ".join(f"{e.attrs['action']}:{e.subject}" for e in log.events("fault"))
    return SoakResult(
        name, check_nothing_lost(log), anyio.current_time() - t0, {"schedule": faults}
    )


# -- the three deployments --------------------------------------------------------------------
CAP = 120.0  # seconds any one workload may run


def _counts(c: Counter[str]) -> str:
    return " ".join(f"{k}={v}" for k, v in sorted(c.items())) or "none"


def _cas(store: Any, keys: int = 3, workers: int = 4) -> Workload:
    async def run(log: ObservationLog, stop: anyio.Event) -> None:
        await workload.cas_workload(
            store, log, keys=keys, workers=workers, ops=100_000,
            deadline=anyio.current_time() + CAP, stop=stop,
        )  # fmt: skip

    return run


async def etcd(cluster: ClusterProcess, schedule: Schedule) -> SoakResult:
    """CAS increments from 4 workers on 3 keys, EtcdRuntimeStore given every endpoint."""
    from ..adapters.etcd import EtcdRuntimeStore

    ns = f"soak{uuid.uuid4().hex[:6]}"
    store = EtcdRuntimeStore(endpoints=cluster.urls, namespace=ns, timeout=2.0)
    try:
        result = await soak("etcd 3 members", cluster, [_cas(store)], schedule)
        result.extra["lost replies the adapter resolved"] = _counts(store.resolutions)
        await store.drop_namespace()
    finally:
        await store.aclose()
    return result


async def redis(cluster: ClusterProcess, schedule: Schedule) -> SoakResult:
    """CAS increments and payload puts + releases on the primary, ``wait_replicas=1``."""
    from ..adapters.redis import RedisPayloadStore, RedisRuntimeStore

    url, ns = cluster.members[0].url, f"soak{uuid.uuid4().hex[:6]}"
    rts = RedisRuntimeStore(url, namespace=ns, wait_replicas=1, wait_timeout=1.0)
    pay = RedisPayloadStore(url, namespace=ns + "p", wait_replicas=1, wait_timeout=1.0)

    async def puts(log: ObservationLog, stop: anyio.Event) -> None:
        deadline = anyio.current_time() + CAP
        await workload.payload_workload(pay, log, puts=100_000, deadline=deadline, stop=stop)

    try:
        result = await soak(
            "redis primary+replica, wait_replicas=1", cluster, [_cas(rts), puts], schedule
        )
        resolved = rts.resolutions + pay.resolutions
        result.extra["lost replies the adapters resolved"] = _counts(resolved)
        for store in (rts, pay):
            await store.drop_namespace()
    finally:
        await rts.aclose()
        await pay.aclose()
    return result


async def nats(cluster: ClusterProcess, schedule: Schedule) -> SoakResult:
    """Publish, two competing consumers, settle, on a file-stored R3 channel; the schedule's
    leader is the channel's stream leader."""
    from ..contracts.messaging import make_channel, make_subscription
    from .replicated import replicated_backend

    options = cluster.options
    assert isinstance(options, NatsCluster)
    tag = uuid.uuid4().hex[:6]
    backend = replicated_backend(
        cluster.urls, 3, stream_prefix=f"SOAK{tag}", subject_prefix=f"soak{tag}",
        request_timeout=2.0,
    )  # fmt: skip
    spec = make_channel("f", "r", "n", "work", "limits", max_msgs=1_000_000, persistence=True)
    sub = make_subscription(spec.channel, "w", ack_wait_seconds=2.0, max_deliver=-1)
    try:
        with anyio.fail_after(30):
            while True:  # a new R3 stream elects its leader first
                try:
                    await backend.ensure_channel(spec, "op-ch")
                    await backend.ensure_subscription(sub, "op-sub")
                    break
                except VideoflowError:
                    await anyio.sleep(0.1)

        async def messages(log: ObservationLog, stop: anyio.Event) -> None:
            await workload.messaging_workload(
                backend, log, sub, publications=100_000, publish_seconds=2.0,
                deadline=anyio.current_time() + CAP, stop=stop,
            )  # fmt: skip

        stream = backend.names.stream(spec.channel)
        schedule = dataclasses.replace(
            schedule, leader=lambda: options.stream_leader(cluster, stream)
        )
        return await soak("nats 3 nodes R3", cluster, [messages], schedule)
    finally:
        await backend.aclose()


ACK_WAIT = 30.0
"""Seconds :func:`redis_failover` waits for a first acknowledged write before it times its
run (and, partitioned without ``WAIT``, for one acknowledged by the primary alone)."""


async def redis_failover(
    cluster: ClusterProcess,
    *,
    wait_replicas: int,
    writers: int = 8,
    run_for: float = 0.5,
    partition: bool = False,
    namespace: str = "fo",
) -> SoakResult:
    """``writers`` clients write to the primary as fast as they can; ``run_for`` s after the
    first acknowledged write the primary is killed -9 in the middle of them and the replica
    promoted by hand (Sentinel's failover, without Sentinel): how many writes the old primary
    acknowledged are missing on the new one. ``partition``: the replica follows the primary
    through a :class:`Link` that is cut for the second half of the run (what the primary
    sends is lost, as in a network partition), then promoted — the scenario in which Jepsen
    saw Sentinel lose acknowledged writes. With ``wait_replicas=0`` Redis promises nothing
    here; with 1, no confirmed write may be lost."""
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
        acked = [anyio.Event(), anyio.Event()]  # a write acknowledged before / after the cut
        cut = False

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
                if ok:
                    acked[cut].set()

        async def killer() -> None:
            nonlocal cut
            # run_for counts from the first acknowledged write: on a loaded machine no write
            # was acknowledged in the whole 0.5 s, and the run showed nothing
            with anyio.move_on_after(ACK_WAIT):
                await acked[0].wait()
            await anyio.sleep(run_for / 2)
            if partition:
                log.record("fault", subject=new.name, action="partition")
                link.cut()
                cut = True
            await anyio.sleep(run_for / 2)
            if partition and not wait_replicas:  # the primary acknowledges alone now
                with anyio.move_on_after(ACK_WAIT):
                    await acked[1].wait()
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


__all__ = [
    "ACTIONS",
    "Schedule",
    "SoakResult",
    "etcd",
    "fault_schedule",
    "nats",
    "redis",
    "redis_failover",
    "soak",
]
