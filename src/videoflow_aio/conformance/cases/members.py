"""Fault cases on replicated deployments (…-8xx): a workload runs while one member is killed
and restarted on its data, or paused and resumed; then the nothing-lost checker reads what the
client saw. They need the ``replicated`` capability (the cluster providers) and the member
controls; everywhere else they skip.

What must hold, whatever the timing: every acknowledged write is in the final state, no
write reported as refused is there, every ambiguous outcome resolves one way or the other
(``videoflow_aio.checks``). Whether a given write was confirmed or unknown depends on when the
fault struck; the cases check truthfulness, not luck.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from ...checks import LossReport, check_nothing_lost
from ...contracts.messaging import make_channel, make_subscription
from ...observe import ObservationLog
from ...testing import workload
from .._case import case
from .._controls import MemberControls
from .._harness import Harness, MessagingHarness, PayloadHarness, RuntimeStoreHarness

FAULT_AFTER = 1.0  # case seconds of workload before the fault
FAULT_FOR = 5.0  # case seconds the member stays down or paused
RECOVERED_FOR = 2.0  # case seconds of workload after the member is back
CAP = 300.0  # case seconds a workload may run at most (scaled: seconds on a real cluster)
OPS = 2000  # most operations per worker (the schedule's end stops the workload first)
KILL = ("leader", "kill_member", "restart_member")
PAUSE = ("leader", "pause_member", "resume_member")


async def _schedule(
    h: Harness[Any, Any],
    controls: MemberControls,
    log: ObservationLog,
    pause: bool,
    stop: anyio.Event,
    leader: Callable[[], Awaitable[str]] | None = None,
) -> None:
    """After ``FAULT_AFTER``: kill -9 (or pause) the leader (``leader()``, default the
    deployment's); ``FAULT_FOR`` later, restart it on its data (or resume it);
    ``RECOVERED_FOR`` later, stop the workload."""
    try:
        await h.sleep(FAULT_AFTER)
        member = await (leader or controls.leader)()
        log.record("fault", subject=member, action="pause" if pause else "kill")
        await (controls.pause_member if pause else controls.kill_member)(member)
        await h.sleep(FAULT_FOR)
        log.record("fault", subject=member, action="resume" if pause else "restart")
        await (controls.resume_member if pause else controls.restart_member)(member)
        await h.sleep(RECOVERED_FOR)
    finally:
        stop.set()


EVIDENCE = ("fault", "drained", "final_observation")
"""Events a failed verdict quotes: when the fault struck, when the workload stopped, and what
it saw last (a loss with messages still stored is a stop on a stale view, not a lost write)."""


def _evidence(log: ObservationLog) -> str:
    start = next(iter(log)).at if len(log) else 0.0
    lines = [
        f"{e.at - start:8.3f} s {e.kind} {e.subject} {e.ident} {e.attrs}"
        for e in log.events(EVIDENCE)
    ]
    return "evidence (case seconds from the first event):\n  " + "\n  ".join(lines)


def _verdict(h: Harness[Any, Any], report: LossReport, log: ObservationLog) -> None:
    h.check(report.faults == 1, f"one fault injected: {report.faults}")
    h.check(report.acknowledged > 0, f"something was acknowledged:\n{report.summary()}")
    summary = f"{report.summary()}\n{_evidence(log)}" if not report.ok else ""
    h.check(report.ok, f"nothing acknowledged lost, nothing contradicted:\n{summary}")
    unresolved = [a for a in report.ambiguous if a.resolution == "unresolved"]
    h.check(not unresolved, f"every ambiguous outcome resolved: {unresolved[:5]}")
    h.check(not report.unverified, f"the final state was read: {report.unverified[:5]}")


Load = Callable[[ObservationLog, anyio.Event], Awaitable[None]]


async def _under_fault(
    h: Harness[Any, Any],
    controls: MemberControls,
    load: Load,
    pause: bool = False,
    leader: Callable[[], Awaitable[str]] | None = None,
) -> None:
    """``load(log, stop)`` beside the fault schedule, then the checker's verdict."""
    log, stop = ObservationLog(), anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_schedule, h, controls, log, pause, stop, leader)
        await load(log, stop)
    _verdict(h, check_nothing_lost(log), log)


async def _cas_under_fault(h: RuntimeStoreHarness, pause: bool) -> None:
    store = await h.open()
    cas = functools.partial(
        workload.cas_workload, store, keys=2, workers=3, ops=OPS, deadline=h.deadline(CAP)
    )
    await _under_fault(h, h.controls(store), lambda log, stop: cas(log, stop=stop), pause)


@case(
    "RTS-801",
    "CAS increments while the leader is killed and restarted: every confirmed CAS is kept",
    contract="runtime_store",
    needs=("replicated",),
    controls=KILL,
)
async def cas_leader_killed(h: RuntimeStoreHarness) -> None:
    await _cas_under_fault(h, pause=False)


@case(
    "RTS-802",
    "CAS increments while the leader is paused (a partition): every confirmed CAS is kept",
    contract="runtime_store",
    needs=("replicated",),
    controls=PAUSE,
)
async def cas_leader_paused(h: RuntimeStoreHarness) -> None:
    await _cas_under_fault(h, pause=True)


@case(
    "PAY-801",
    "puts and releases while the leader is killed and restarted: acknowledged puts are kept",
    contract="payload",
    needs=("replicated",),
    controls=KILL,
)
async def puts_leader_killed(h: PayloadHarness) -> None:
    store = await h.open()
    puts = functools.partial(workload.payload_workload, store, puts=OPS, deadline=h.deadline(CAP))
    await _under_fault(h, h.controls(store), lambda log, stop: puts(log, stop=stop))


@case(
    "MSG-801",
    "publish, receive, settle while the stream's leader is killed and restarted: one fate each",
    contract="messaging",
    needs=("replicated",),
    controls=("channel_leader", "kill_member", "restart_member"),
)
async def messages_leader_killed(h: MessagingHarness) -> None:
    backend = await h.open()
    controls = h.controls(backend)
    spec = make_channel(
        "flow", "run", "node", "work", "limits", max_msgs=100_000, replicas=3, persistence=True
    )
    await backend.ensure_channel(spec, "op-ch")
    sub = make_subscription(spec.channel, "w", ack_wait_seconds=h.seconds(30), max_deliver=-1)
    await backend.ensure_subscription(sub, "op-sub")
    messages = functools.partial(
        workload.messaging_workload, backend, sub=sub, publications=OPS,
        publish_seconds=h.seconds(20), receive_seconds=h.seconds(5), deadline=h.deadline(CAP),
    )  # fmt: skip
    leader = functools.partial(controls.channel_leader, spec.channel)
    await _under_fault(h, controls, lambda log, stop: messages(log, stop=stop), leader=leader)


# cases register themselves by ID (``case``) and run through the registry: none is imported by
# name, so the module exports nothing
__all__: list[str] = []
