"""Stage workers: receive → handle → forward → settle, on any messaging provider.

A :class:`StageWorker` runs ``replicas`` worker tasks per input subscription (competing on
it), one lease-renewal task, and — when given end-of-stream subscriptions — a task that
stops the stage once every input has sent ``eos`` and the stage has drained, then forwards
``eos`` downstream. No task is created per message.

For each delivery a replica: reads the payload the envelope references (``vf-payload``), calls
the handler, publishes the handler's outputs to the output channel (publication id
``<event id>@<stage>``, ``#i`` appended for the i-th of several; ``event_ts`` carried over, so
end-to-end latency can be measured at any stage), settles ``Completed`` — or what the
:class:`~videoflow_aio.pipeline.ExceptionPolicy` says when the handler raised — and, once
``Completed`` is confirmed, releases its payload obligation.

Guarantees:

* Nothing is settled that was not done: a worker cancelled (or crashed) at any await holds
  its leases until they expire and the messages redeliver; outputs already published are
  deduplicated when the redelivered message publishes them again under the same ids.
* A lease held longer than half its length is renewed (by the renewal task, every quarter
  lease), so a slow handler does not lose its message.
* ``BaseException`` from a handler (cancellation, :class:`~videoflow_aio.faults.SimulatedCrash`)
  kills the replica without settling; ``Exception`` is settled per the policy.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import math
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypedDict, Unpack

import anyio
import msgspec
import sniffio

from .. import faults
from ..contracts import Known, unchecked
from ..contracts.errors import BackendUnavailable, ValidationError
from ..contracts.messaging import (
    Accepted,
    ChannelId,
    Completed,
    Delivery,
    Envelope,
    MessagingBackend,
    PublishOutcome,
    Rejected,
    Retry,
    SettleConfirmed,
    SettleOutcome,
    SettleUnknown,
    SubscriptionId,
    Terminal,
)
from ..contracts.payload import (
    ImmutablePayloadRef,
    PayloadBytes,
    PayloadStore,
    TransientFailure,
)
from ..faults import SimulatedCrash
from ._errors import (
    BadHandler,
    HandlerCancelled,
    HandlerTimeout,
    PipelineError,
    PipelineStalled,
    StageStopped,
)
from ._policy import ExceptionPolicy, RetryLater
from ._publish import PAYLOAD_HEADER, Publisher, decode_ref
from ._time import Clock, Sleep, check_seconds, loop_clock
from ._topology import Pipeline


class Output(msgspec.Struct, frozen=True, kw_only=True):
    """One output of a handler: ``body`` goes in the envelope; ``data`` (if any) is put into
    the payload store and referenced from it."""

    body: bytes = b""
    data: bytes | None = None
    partition_key: str | None = None
    headers: dict[str, str] = {}


Result = Sequence[Output | bytes] | None
PayloadRead = tuple[bytes | None, ImmutablePayloadRef | None, SettleOutcome]
"""A delivery's payload bytes, their ref, and the outcome so far (``Completed``: go on)."""
Handler = Callable[[Delivery, bytes | None], Awaitable[Result]]
"""``await handler(delivery, payload_bytes_or_None)`` → outputs to forward (or None)."""
Observer = Callable[[Delivery, float], None]
"""Called with each delivery whose ``Completed`` settle was confirmed, and the time."""

_COMPLETED = Completed()
_faults_active = faults.active
_UNSET: Any = object()
_DEFAULT_POLICY = ExceptionPolicy()
MAX_REPLICAS = 10_000
"""The most replicas a worker runs per input subscription (one task each)."""
MAX_BATCH = 1_000_000
MAX_BYTE_CREDIT = 1 << 62
DEFAULT_HANDLER_TIMEOUT = 600.0
"""Seconds a handler may run on one message before it is cancelled (``handler_timeout_seconds``)."""
DEFAULT_IDLE_LIMIT = 3600.0
"""Virtual seconds a stage may wait without progress (``idle_limit_seconds``)."""


class StageOptions(TypedDict, total=False):
    """The keyword options :func:`run_stage` and :func:`stage_worker` pass on to
    :class:`StageWorker` (which documents each and its default); a type checker checks
    each one's type and rejects any other keyword."""

    replicas: int
    batch: int
    payload: PayloadStore | None
    policy: ExceptionPolicy | None
    call_timeout: float
    poll_seconds: float
    byte_credit: int
    observe: Observer | None
    payload_ttl_seconds: float
    obligation_seconds: float
    handler_timeout_seconds: float | None
    idle_limit_seconds: float | None


class WorkerOptions(StageOptions, total=False):
    """:class:`StageOptions` plus the wiring keywords (``name``, ``output``, ``readers``,
    ``eos``): what a :class:`StageWorker` subclass passes on to it."""

    name: str | None
    output: ChannelId | None
    readers: Sequence[str]
    eos: Sequence[SubscriptionId]


@dataclass(slots=True)
class StageCounters:
    """What a stage did. ``busy_seconds[i]``: time replica ``i`` held messages (from the
    receive that returned them to the settle of the last); ``redelivered``: deliveries
    with attempt > 1 this stage received."""

    busy_seconds: list[float] = field(default_factory=list)
    received: int = 0
    redelivered: int = 0
    completed: int = 0
    retried: int = 0
    terminal: int = 0
    stale: int = 0
    settle_unknown: int = 0
    forwarded: int = 0
    renewals: int = 0
    crashes: int = 0
    receive_errors: int = 0
    payload_failures: int = 0

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


class _Replica:
    __slots__ = (
        "alive",
        "busy",
        "crash_pending",
        "deadlines",
        "died",
        "index",
        "kill_pending",
        "leases",
        "scope",
        "sub",
    )

    def __init__(self, index: int, sub: SubscriptionId) -> None:
        self.index = index
        self.sub = sub
        self.scope: anyio.CancelScope | None = None
        self.alive = False
        self.busy = False
        self.crash_pending = False
        self.kill_pending = False
        self.leases: dict[int, Delivery] = {}  # sequence -> delivery held
        self.deadlines: dict[int, float] = {}  # sequence -> renewed lease deadline
        self.died: anyio.Event | None = None


class StageWorker:
    """One pipeline stage's workers. See the module docstring for what they guarantee.

    ``subscription``: the data subscription(s) to serve (``replicas`` workers on each).
    ``output``: the channel outputs go to (None: a sink; a handler's outputs are dropped).
    ``readers``: consumers of ``output`` (one payload obligation each). ``eos``: end-of-stream
    subscriptions; when given, :meth:`run` returns once each delivered ``eos`` and the data
    subscriptions drained. ``call_timeout``: seconds each publish attempt may wait;
    ``poll_seconds``: how long an idle receive waits before looking again.
    ``observe``: called after each confirmed ``Completed``.

    ``handler_timeout_seconds`` (default 600; ``None`` or ``inf``: none): a handler still
    running that long after it was called is cancelled and the message goes to the exception
    policy as :class:`~videoflow_aio.pipeline.HandlerTimeout` (by default retried, so
    ``max_deliver`` bounds it; dead-lettered when listed in ``terminal``).
    ``idle_limit_seconds`` (default 3600; ``None``: none), on virtual time only: a stage
    waiting for end-of-stream that has received nothing for that long raises
    :class:`~videoflow_aio.pipeline.PipelineStalled` naming what it still waits for.

    The handler must be an ``async def`` (or a callable returning an awaitable); a plain
    ``def`` function is refused here, and a handler that returns no awaitable, or a result
    that is neither None nor a sequence of :class:`Output`/``bytes``, makes :meth:`run` raise
    :class:`~videoflow_aio.pipeline.BadHandler` (nothing settled: its leases redeliver).
    """

    def __init__(
        self,
        backend: MessagingBackend,
        subscription: SubscriptionId | Sequence[SubscriptionId],
        handler: Handler,
        *,
        replicas: int = 1,
        batch: int = 1,
        name: str | None = None,
        output: ChannelId | None = None,
        readers: Sequence[str] = (),
        eos: Sequence[SubscriptionId] = (),
        payload: PayloadStore | None = None,
        policy: ExceptionPolicy | None = None,
        call_timeout: float = 5.0,
        poll_seconds: float = 1.0,
        byte_credit: int = 1 << 26,
        observe: Observer | None = None,
        payload_ttl_seconds: float = 3600.0,
        obligation_seconds: float = 600.0,
        handler_timeout_seconds: float | None = DEFAULT_HANDLER_TIMEOUT,
        idle_limit_seconds: float | None = DEFAULT_IDLE_LIMIT,
    ) -> None:
        subs = _subscriptions(subscription, "subscription", empty=False)
        eos_subs = _subscriptions(eos, "eos", empty=True)
        _check_handler(handler)
        counts = (
            ("replicas", replicas, MAX_REPLICAS),
            ("batch", batch, MAX_BATCH),
            ("byte_credit", byte_credit, MAX_BYTE_CREDIT),
        )
        for name_, value, most in counts:
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
                raise ValidationError(
                    f"{name_} must be an int in [1, {most}]",
                    field=name_,
                    value=value if isinstance(value, int) and value < 1 << 64 else type(value),
                )
        if name is not None and (not isinstance(name, str) or not name):
            raise ValidationError("name must be a non-empty string", field="name", value=name)
        if output is not None and not isinstance(output, ChannelId):
            raise ValidationError(
                "output must be a ChannelId or None", field="output", value=output
            )
        if not all(hasattr(backend, m) for m in ("receive", "settle", "renew", "publish")):
            raise ValidationError(
                "backend must be a MessagingBackend", field="backend", value=type(backend).__name__
            )
        if payload is not None and not all(hasattr(payload, m) for m in ("read", "put")):
            raise ValidationError(
                "payload must be a PayloadStore or None", field="payload", value=payload
            )
        if (
            not isinstance(readers, Sequence)
            or isinstance(readers, str)
            or not all(isinstance(r, str) for r in readers)
        ):
            raise ValidationError(
                "readers must be a sequence of names", field="readers", value=readers
            )
        if policy is not None and not isinstance(policy, ExceptionPolicy):
            raise ValidationError(
                "policy must be an ExceptionPolicy or None", field="policy", value=policy
            )
        if observe is not None and not callable(observe):
            raise ValidationError(
                "observe must be callable or None", field="observe", value=observe
            )
        self.handler_timeout = _optional_seconds(handler_timeout_seconds, "handler_timeout_seconds")
        self.idle_limit = _optional_seconds(idle_limit_seconds, "idle_limit_seconds")
        self.backend = backend
        self.subscriptions = subs
        self.handler = handler
        self.replicas = replicas
        self.batch = batch
        self.name = name or subs[0].consumer
        self.output = output
        self.eos = eos_subs
        self.payload = payload
        self.policy = policy or _DEFAULT_POLICY
        self.call_timeout = check_seconds(call_timeout, "call_timeout", positive=True)
        self.poll_seconds = check_seconds(poll_seconds, "poll_seconds", positive=True)
        self.byte_credit = byte_credit
        self.observe = observe
        self.counters = StageCounters([0.0] * (replicas * len(subs)))
        self.publisher = (
            Publisher(
                backend,
                output,
                timeout=call_timeout,
                payload=payload,
                readers=readers,
                ttl_seconds=payload_ttl_seconds,
                obligation_seconds=obligation_seconds,
            )
            if output is not None
            else None
        )
        self._settle_completed = unchecked(backend.settle)
        self.draining = False
        self.finished = False
        self._replicas = [_Replica(i, subs[i // replicas]) for i in range(replicas * len(subs))]
        self._holders: list[_Replica] = list(self._replicas)  # whose leases are renewed
        self._parts = False  # a JoinWorker's replicas hand each delivery to _part
        self._tg: anyio.abc.TaskGroup | None = None
        self._now: Clock = anyio.current_time
        self._sleep: Sleep = anyio.sleep
        self._lease_seconds: float | None = None
        self._lease_known: anyio.Event | None = None
        self._stopped = False
        self._asyncio = False
        self._progress = -1
        self._progress_at = 0.0

    # -- control ---------------------------------------------------------------------------
    async def run(self) -> StageCounters:
        """Run until ``eos`` arrived on every ``eos`` subscription and the stage drained (or
        until cancelled, or :meth:`stop`). Returns the counters."""
        if self._tg is not None:
            raise RuntimeError("this StageWorker is already running")
        self._now, self._sleep = loop_clock()
        self._asyncio = sniffio.current_async_library() == "asyncio"
        self._stopped = False
        self._progress = -1
        if self.publisher is not None:
            self.publisher._clock, self.publisher._sleep = self._now, self._sleep
        self._lease_known = anyio.Event()
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                for r in self._replicas:
                    r.alive = True  # from now: crash() before its first step still applies
                    tg.start_soon(self._replica, r)
                tg.start_soon(self._renew_leases)
                for task in self._more_tasks():
                    tg.start_soon(task)
                if self.eos:
                    tg.start_soon(self._finish_on_eos)
        except BaseExceptionGroup as group:
            raise _only_pipeline_error(group) from None
        finally:
            self._tg = None
        if not self.finished and not self._stopped:
            raise StageStopped(
                f"stage {self.name!r}: every task ended without end-of-stream, stop() or a "
                "cancellation (a handler's cancellation escaped?)",
                stage=self.name,
            )
        return self.counters

    def _more_tasks(self) -> list[Callable[[], Coroutine[Any, Any, None]]]:
        """Tasks a subclass runs beside the replicas (in the same task group)."""
        return []

    def stop(self) -> None:
        """Stop every task now (cancellation: held leases expire and redeliver)."""
        if self._tg is not None:
            self._stopped = True
            self._tg.cancel_scope.cancel()

    def alive(self) -> list[bool]:
        """Per replica: whether its task is running."""
        return [r.alive for r in self._replicas]

    def busy(self) -> list[bool]:
        """Per replica: whether it holds messages now."""
        return [r.busy for r in self._replicas]

    def crash(self, replica: int, *, mid_message: bool = True) -> None:
        """Kill replica ``replica`` as a process dies: its leases are neither settled nor
        renewed. ``mid_message``: if it holds nothing now, it dies at the start of its next
        message (right after the receive that leased it) instead of at once. A replica of a
        worker not running yet dies when it starts (or at its first message)."""
        r = self._replica_at(replica)
        if not r.alive and self._tg is not None:
            return  # already dead
        if mid_message and not r.busy:
            r.crash_pending = True
            return
        if r.scope is None:  # not started yet: it dies as it starts
            r.kill_pending = True
            return
        self.counters.crashes += 1
        r.leases.clear()
        r.deadlines.clear()
        r.scope.cancel()

    async def wait_dead(self, replica: int) -> None:
        """Return once replica ``replica`` is not running (at once if it is not)."""
        r = self._replica_at(replica)
        if not r.alive:
            return
        if r.died is None:
            r.died = anyio.Event()
        await r.died.wait()

    def restart(self, replica: int) -> bool:
        """Start replica ``replica`` again if it is dead; False when it is alive."""
        r = self._replica_at(replica)
        if r.alive or self._tg is None or self.finished:
            return False
        r.alive = True  # taken now: two restarts in a row start one task
        r.crash_pending = r.kill_pending = False
        self._tg.start_soon(self._replica, r)
        return True

    def _replica_at(self, replica: int) -> _Replica:
        """Replica ``replica``; ValidationError for an index it does not have (a negative
        one must not silently name a replica from the end)."""
        n = len(self._replicas)
        if isinstance(replica, bool) or not isinstance(replica, int) or not 0 <= replica < n:
            raise ValidationError(
                f"replica must be an int in [0, {n})", field="replica", value=replica
            )
        return self._replicas[replica]

    # -- replicas --------------------------------------------------------------------------
    async def _replica(self, r: _Replica) -> None:
        try:
            if r.kill_pending:
                r.kill_pending = False
                raise SimulatedCrash(f"{self.name}[{r.index}] killed before it started")
            with anyio.CancelScope() as scope:
                r.scope = scope
                await self._serve(r)
        except SimulatedCrash:
            self.counters.crashes += 1
        finally:
            r.alive = False
            r.busy = False
            r.scope = None
            r.leases.clear()
            r.deadlines.clear()
            died, r.died = r.died, None
            if died is not None:
                died.set()

    async def _serve(self, r: _Replica) -> None:
        receive = self.backend.receive
        sub = r.sub
        batch = self.batch
        byte_credit = self.byte_credit
        now = self._now
        poll = self.poll_seconds
        counters = self.counters
        one = self._one
        while True:
            try:
                got = await receive(sub, batch, byte_credit, now() + poll)
            except BackendUnavailable:
                counters.receive_errors += 1
                await self._sleep(poll)
                continue
            # the boundary accepted these arguments; only the deadline changes, a float
            # from the loop clock: every later receive goes straight to the provider
            receive = unchecked(receive)
            if not got:
                continue
            started = now()
            self._take(r, got, started)
            for d in got:
                await one(r, d)
            r.busy = False
            counters.busy_seconds[r.index] += now() - started

    def _take(self, r: _Replica, got: list[Delivery], now: float) -> None:
        """Book deliveries ``r`` just received: it is busy and holds their leases (a crash
        pending for ``r`` strikes here, mid-message)."""
        counters = self.counters
        r.busy = True
        counters.received += len(got)
        leases = r.leases
        for d in got:
            leases[d.sequence] = d
            if d.attempt > 1:
                counters.redelivered += 1
        if self._lease_seconds is None:
            self._learn_lease(got[0], now)
        if r.crash_pending:
            raise SimulatedCrash(f"{self.name}[{r.index}] crash")

    async def _one(self, r: _Replica, d: Delivery) -> None:
        """Serve one delivery and settle it (inline: this runs for every message)."""
        env = d.envelope
        headers = env.headers
        raw = headers.get(PAYLOAD_HEADER) if headers else None
        if raw is not None and self.payload is not None:
            data, ref, outcome = await self._read_payload(raw)
        else:
            data, ref, outcome = None, None, _COMPLETED
        if _faults_active():  # the replica dies holding the message, mid-message
            await faults.reach("pipeline.handle.before", stage=self.name, replica=r.index)
        if self._parts:  # a join: the part waits for the frame's others
            await self._part(r, d, (data, ref, outcome))
            return
        if outcome is _COMPLETED:
            outcome = (await self._invoke(self.handler, (d, data), d, env))[1]
        await self._settle(r, d, outcome, ref)

    async def _part(self, r: _Replica, d: Delivery, read: PayloadRead) -> None:
        """A join's handling of one part (with ``_parts`` set), its payload read."""
        raise NotImplementedError

    async def _invoke(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        d: Delivery,
        env: Envelope | None,
    ) -> tuple[object, SettleOutcome]:
        """Call ``fn(*args)`` under the handler deadline and, when ``env`` is given, forward
        its outputs as ``env``'s; the result and the outcome to settle with (``Completed``,
        or what the policy says for an exception, judged on ``d``)."""
        pending: Any = _UNSET
        result: object = None
        try:
            pending = fn(*args)
            if self.handler_timeout is None:
                result = await pending
            else:
                with anyio.CancelScope(deadline=self._now() + self.handler_timeout) as scope:
                    result = await pending
                if scope.cancelled_caught:
                    raise HandlerTimeout(
                        f"handler of {self.name!r} ran past {self.handler_timeout:g} s"
                    )
            if env is not None and result is not None:
                if type(result) is not list and type(result) is not tuple:
                    self._check_result(result)
                if result:
                    await self._forward(env, result)  # type: ignore[arg-type]
        except BadHandler:
            raise
        except Exception as exc:
            if type(exc) is TypeError and pending is not _UNSET:
                self._check_awaitable(pending)
            return None, self.policy.outcome(exc, d)
        except asyncio.CancelledError:
            if not self._asyncio or _cancelling():
                raise  # the worker itself is being cancelled
            return None, self.policy.outcome(
                HandlerCancelled(f"handler of {self.name!r} raised CancelledError"), d
            )
        return result, _COMPLETED

    async def _settle(
        self,
        r: _Replica,
        d: Delivery,
        outcome: SettleOutcome,
        ref: ImmutablePayloadRef | None,
    ) -> None:
        """Settle ``d`` (held in ``r.leases``) with ``outcome``, count it, and release its
        payload obligation once ``Completed`` is confirmed."""
        token = d.token
        settlement_id = f"{d.sequence}:{token.lease_id}"
        # the token is the provider's own (from its receive), the id built here: with the
        # library's Completed nothing is left for the boundary to check
        settle = self._settle_completed if outcome is _COMPLETED else self.backend.settle
        answer = await settle(token, outcome, settlement_id)
        if type(answer) is SettleUnknown:  # idempotent by settlement id: ask once more
            answer = await settle(token, outcome, settlement_id)
        seq = d.sequence
        r.leases.pop(seq, None)
        if r.deadlines:
            r.deadlines.pop(seq, None)
        counters = self.counters
        if type(answer) is not SettleConfirmed:
            if type(answer) is SettleUnknown:
                counters.settle_unknown += 1
            else:
                counters.stale += 1
        elif outcome is _COMPLETED:
            counters.completed += 1
            observe = self.observe
            if observe is not None:
                observe(d, self._now())
            if ref is not None:
                await self.payload.release_obligation(ref, self.name, settlement_id)  # type: ignore[union-attr]
        elif type(outcome) is Retry:
            counters.retried += 1
        else:
            counters.terminal += 1

    def _check_awaitable(self, pending: object) -> None:
        """BadHandler when the handler returned no awaitable (``await`` raised TypeError)."""
        if not inspect.isawaitable(pending):
            raise BadHandler(
                f"handler of {self.name!r} returned {type(pending).__name__}, not an awaitable: "
                "make it an async def",
                stage=self.name,
            ) from None

    def _check_result(self, result: object) -> None:
        if isinstance(result, str | bytes | bytearray | memoryview) or not isinstance(
            result, Sequence
        ):
            raise BadHandler(
                f"handler of {self.name!r} returned {type(result).__name__}: expected None or "
                "a sequence of Output or bytes",
                stage=self.name,
            )

    async def _read_payload(self, raw: str) -> PayloadRead:
        """The bytes an envelope references, or the outcome to settle it with instead."""
        assert self.payload is not None
        try:
            ref = decode_ref(raw)
        except ValidationError as exc:
            self.counters.payload_failures += 1
            return None, None, Terminal(str(exc))
        try:
            got = await self.payload.read(ref, self.name)
        except ValidationError as exc:  # a ref this store cannot serve (foreign)
            self.counters.payload_failures += 1
            return None, ref, Terminal(f"payload ref refused: {exc}")
        if type(got) is PayloadBytes:
            return got.data, ref, _COMPLETED
        self.counters.payload_failures += 1
        if type(got) is TransientFailure:
            return None, ref, Retry(self.policy.retry_delay_seconds)
        # Missing or Corrupt: the bytes will not come back
        return None, ref, Terminal(f"payload {type(got).__name__.lower()}: {got}")

    async def _forward(self, env: Envelope, result: Sequence[Output | bytes]) -> None:
        publisher = self.publisher
        if publisher is None:
            return
        name = self.name
        event_id = env.event_id or env.publication_id
        several = len(result) > 1
        for i, out in enumerate(result):
            pid = f"{event_id}@{name}#{i}" if several else f"{event_id}@{name}"
            eid = f"{event_id}#{i}" if several and i else event_id
            if type(out) is bytes:
                outcome = await publisher.send(pid, out, event_id=eid, event_ts=env.event_ts)
            else:
                if not isinstance(out, Output):
                    raise BadHandler(
                        f"handler of {name!r} returned a {type(out).__name__} among its outputs: "
                        "expected Output or bytes",
                        stage=name,
                    )
                outcome = await publisher.send(
                    pid,
                    out.body,
                    event_id=eid,
                    event_ts=env.event_ts,
                    data=out.data,
                    partition_key=out.partition_key,
                    headers=out.headers,
                )
            if type(outcome) is not Accepted:
                _not_forwarded(outcome, pid)
            self.counters.forwarded += 1

    # -- leases ----------------------------------------------------------------------------
    def _learn_lease(self, d: Delivery, now: float) -> None:
        length = d.lease_deadline - now
        if length > 0 and math.isfinite(length):
            self._lease_seconds = length
            if self._lease_known is not None:
                self._lease_known.set()

    async def _renew_leases(self) -> None:
        """Every quarter lease, renew each lease held for more than half its length."""
        assert self._lease_known is not None
        await self._lease_known.wait()
        lease = self._lease_seconds
        assert lease is not None
        renew = self.backend.renew
        while True:
            await self._sleep(lease / 4)
            now = self._now()
            for r in self._holders:
                if not r.leases:
                    continue
                for seq, d in list(r.leases.items()):
                    deadline = r.deadlines.get(seq, d.lease_deadline)
                    if deadline - now > lease / 2:
                        continue
                    obs = await renew(d.token)
                    # not held, or unknown (held None): the deadline stays as it was, so
                    # this lease is renewed again at the next tick, while the work goes on
                    # (its settle says whether the lease still held)
                    if obs.held and obs.lease_deadline is not None and seq in r.leases:
                        r.deadlines[seq] = obs.lease_deadline
                        self.counters.renewals += 1

    # -- end of stream ---------------------------------------------------------------------
    async def _finish_on_eos(self) -> None:
        """Wait for ``eos`` on every input, drain, stop the replicas, forward ``eos``."""
        got: list[Delivery] = []
        held: dict[int, float] = {}
        limit = self.idle_limit if _on_virtual_time() else None
        for i, sub in enumerate(self.eos):
            while True:
                batch = await self.backend.receive(
                    sub, 1, self.byte_credit, self._now() + self.poll_seconds
                )
                if batch:
                    got.extend(batch)
                    break
                await self._renew_eos(got, held)
                if limit is not None:
                    await self._check_idle(limit, self.eos[i:])
        self.draining = True
        while not await self._drained():
            await self._renew_eos(got, held)
            await self._sleep(self.poll_seconds)
            if limit is not None:
                await self._check_idle(limit, ())
        self.finished = True
        for r in self._replicas:
            if r.scope is not None:
                r.scope.cancel()
        if self.publisher is not None:
            await self._forward_eos(got, held)
        for d in got:
            await self.backend.settle(d.token, _COMPLETED, f"{d.sequence}:{d.token.lease_id}")
        assert self._tg is not None
        self._tg.cancel_scope.cancel()

    async def _forward_eos(self, got: list[Delivery], held: dict[int, float]) -> None:
        """Publish ``eos@<stage>`` until it is stored: a full ``reject`` channel downstream
        refuses it until its readers catch up (the inputs' ``eos`` stay leased meanwhile)."""
        assert self.publisher is not None
        pid = f"eos@{self.name}"
        while type(await self.publisher.send(pid, b"", kind="eos")) is not Accepted:
            await self._renew_eos(got, held)
            await self._sleep(self.poll_seconds)

    async def _renew_eos(self, got: list[Delivery], held: dict[int, float]) -> None:
        lease = self._lease_seconds
        now = self._now()
        for d in got:
            deadline = held.get(d.sequence, d.lease_deadline)
            if lease is None or deadline - now <= lease / 2:
                obs = await self.backend.renew(d.token)
                if obs.held and obs.lease_deadline is not None:
                    held[d.sequence] = obs.lease_deadline

    async def _check_idle(self, limit: float, waiting: Sequence[SubscriptionId]) -> None:
        """PipelineStalled once no replica held a message and nothing was received or
        settled for ``limit`` (a handler at work is progress: its own deadline bounds it)."""
        c = self.counters
        progress = c.received + c.completed + c.retried + c.terminal + c.stale
        now = self._now()
        if progress != self._progress or any(r.busy for r in self._replicas):
            self._progress, self._progress_at = progress, now
            return
        if now - self._progress_at < limit:
            return
        pending: dict[str, int] = {}
        for sub in self.subscriptions:
            obs = await self.backend.observe_subscription(sub)
            if isinstance(obs, Known):
                pending[sub.name] = obs.value.pending + obs.value.leased
        names = tuple(s.channel.name for s in waiting)
        what = (
            f"end-of-stream from {', '.join(names)}"
            if names
            else f"its inputs to drain ({', '.join(f'{k}: {v}' for k, v in pending.items())})"
        )
        raise PipelineStalled(
            f"stage {self.name!r} made no progress for {now - self._progress_at:g} virtual s "
            f"waiting for {what}; pending messages: {pending} (idle_limit_seconds={limit:g})",
            stage=self.name,
            idle_seconds=now - self._progress_at,
            waiting=names,
            pending=pending,
        )

    async def _drained(self) -> bool:
        """No replica holds a message and no subscription has one pending or leased."""
        if any(r.busy for r in self._replicas):
            return False
        for sub in self.subscriptions:
            obs = await self.backend.observe_subscription(sub)
            if not isinstance(obs, Known):  # an unreadable count is not "drained"
                return False
            if obs.value.pending or obs.value.leased:
                return False
        return not any(r.busy for r in self._replicas)


def _subscriptions(value: object, field: str, *, empty: bool) -> tuple[SubscriptionId, ...]:
    """``value`` as a tuple of SubscriptionIds (one, or a sequence); ValidationError else."""
    if isinstance(value, SubscriptionId):
        return (value,)
    if (
        isinstance(value, Sequence)
        and not isinstance(value, str | bytes)
        and (empty or value)
        and all(isinstance(s, SubscriptionId) for s in value)
    ):
        return tuple(value)
    what = "a sequence" if empty else "a SubscriptionId or a non-empty sequence"
    raise ValidationError(f"{field} must be {what} of SubscriptionIds", field=field, value=value)


def _check_handler(handler: object) -> None:
    """A handler is an async callable: a plain ``def`` function (it returns no awaitable)
    is refused; other callables are checked at their first call."""
    if not callable(handler):
        raise ValidationError("handler must be an async function", field="handler", value=handler)
    target: object = handler
    while isinstance(target, functools.partial):
        target = target.func
    if inspect.iscoroutinefunction(target):
        return
    if inspect.isfunction(target) or inspect.ismethod(target) or inspect.isbuiltin(target):
        raise ValidationError(
            f"handler {getattr(target, '__qualname__', target)!r} is a plain def: a handler "
            "must be an async def (await handler(delivery, data) -> outputs or None)",
            field="handler",
            value=handler,
        )


def _optional_seconds(value: float | None, field: str) -> float | None:
    """None (and ``inf``) for no bound, else a finite number > 0."""
    if value is None or (isinstance(value, float) and value == math.inf):
        return None
    return check_seconds(value, field, positive=True)


def _cancelling() -> int:
    task = asyncio.current_task()
    return task.cancelling() if task is not None else 1


def _on_virtual_time() -> bool:
    from ..vtime import current_clock

    try:
        current_clock()
    except RuntimeError:
        return False
    return True


def _only_pipeline_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first PipelineError of a group holding nothing else but cancellations; else the
    group itself."""
    match, rest = group.split(PipelineError)
    if match is None:
        return group
    if rest is not None and rest.split(anyio.get_cancelled_exc_class())[1] is not None:
        return group
    leaf: BaseException = match
    while isinstance(leaf, BaseExceptionGroup):
        leaf = leaf.exceptions[0]
    return leaf


def _not_forwarded(outcome: PublishOutcome, pid: str) -> None:
    """A forward that did not store (rejected, unknown, unresolvable) retries the input."""
    reason = getattr(outcome, "reason", type(outcome).__name__)
    if type(outcome) is Rejected:
        raise RetryLater(f"forward of {pid} rejected: {reason}", 1.0)
    raise RetryLater(f"forward of {pid} not confirmed: {reason}", 1.0)


async def run_stage(
    backend: MessagingBackend,
    subscription: SubscriptionId | Sequence[SubscriptionId],
    handler: Handler,
    *,
    name: str | None = None,
    output: ChannelId | None = None,
    readers: Sequence[str] = (),
    eos: Sequence[SubscriptionId] = (),
    **options: Unpack[StageOptions],
) -> StageCounters:
    """Run one stage until end of stream; returns its counters. The keyword arguments are
    :class:`StageWorker`'s."""
    return await StageWorker(
        backend,
        subscription,
        handler,
        name=name,
        output=output,
        readers=readers,
        eos=eos,
        **options,
    ).run()


def stage_worker(
    backend: MessagingBackend,
    pipeline: Pipeline,
    stage: str,
    handler: Handler,
    **options: Unpack[StageOptions],
) -> StageWorker:
    """A :class:`StageWorker` for ``stage`` of ``pipeline`` (from
    :func:`~videoflow_aio.pipeline.ensure_pipeline`), wired as it says: the stage's input
    and end-of-stream subscriptions, its output channel and that channel's readers. The
    keyword arguments are the worker's."""
    subs, wiring = stage_wiring(pipeline, stage)
    return StageWorker(backend, subs, handler, **wiring, **options)


class Wiring(TypedDict):
    """The keyword arguments that wire a worker to its stage of a :class:`Pipeline`."""

    name: str
    output: ChannelId | None
    readers: Sequence[str]
    eos: Sequence[SubscriptionId]


def stage_wiring(pipeline: Pipeline, stage: str) -> tuple[tuple[SubscriptionId, ...], Wiring]:
    """``stage``'s input subscriptions and the keyword arguments that wire a worker to it
    (name, output channel, its readers, end-of-stream subscriptions); ValidationError for
    something that is not a Pipeline or a stage of it."""
    if not isinstance(pipeline, Pipeline):
        raise ValidationError(
            "pipeline must be a Pipeline (from ensure_pipeline)", field="pipeline", value=pipeline
        )
    if not isinstance(stage, str) or stage not in pipeline.subscriptions:
        raise ValidationError(
            f"no stage {stage!r} in this pipeline (stages: {', '.join(pipeline.subscriptions)})",
            field="stage",
            value=stage,
        )
    wiring = Wiring(
        name=stage,
        output=pipeline.output(stage),
        readers=pipeline.readers[stage],
        eos=pipeline.eos_subscriptions[stage],
    )
    return pipeline.subscriptions[stage], wiring


__all__ = [
    "DEFAULT_HANDLER_TIMEOUT",
    "DEFAULT_IDLE_LIMIT",
    "MAX_REPLICAS",
    "Handler",
    "Observer",
    "Output",
    "Result",
    "StageCounters",
    "StageOptions",
    "StageWorker",
    "Wiring",
    "WorkerOptions",
    "run_stage",
    "stage_wiring",
    "stage_worker",
]
