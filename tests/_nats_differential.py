"""The differential harness of issue #14: one schedule, run on the memory model and on the
NATS adapter, every answer compared; on NATS also read back from the server by a raw nats-py
client (:class:`RawWatch`), as the issue's reporter did.

A schedule is ``async def schedule(w: World) -> None``: it drives clients of a
:class:`World` (``w.client(i)``: client 0 first, others are more backends on their own
connections) and an administrator / a server crash (``w.purge``, ``w.restart``, …) through
the ``World``'s recording helpers (``w.publish``, ``w.receive``, ``w.settle``, ``w.observe``
…). Every answer goes into ``w.trace`` under a label, normalised so both worlds compare:
sequences become publication ids or ranks, outcomes their type.

* :class:`ModelWorld` runs on virtual time in a worker thread (``vtime.run``): instant.
* :class:`NatsWorld` runs in real time on a nats-server; it can restart a server it owns.

:func:`compare` walks both traces: a NATS answer must equal the model's, or be ``Unknown``
(``SettleUnknown``, ``observe_*`` ``Unknown``) — never a different definite value — except
for the declared differences of ``docs/nats.md`` (``redelivered``; an ack floor that lags).
The raw watch checks what the model cannot: every ``SettleConfirmed`` of NATS has the server's
evidence (an ack metric / nak advisory for that very delivery), no ``SettleStale`` was
applied, and at a quiescent point the adapter's counts are the server's (:func:`raw_truth`).
"""

from __future__ import annotations

import abc
import bisect
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread
import msgspec
import nats

from videoflow_aio import vtime
from videoflow_aio.adapters._trio_bridge import Affinity, bridged
from videoflow_aio.adapters.nats import (
    CoreNatsMessagingBackend,
    JetStreamAdmin,
    JetStreamMessagingBackend,
)
from videoflow_aio.conformance.providers.nats import restarted
from videoflow_aio.contracts import Known, Unknown
from videoflow_aio.contracts.errors import VideoflowError
from videoflow_aio.contracts.messaging import (
    Accepted,
    ChannelId,
    ChannelObservation,
    ChannelSpec,
    Completed,
    Delivery,
    LeaseObservation,
    PublicationUnknown,
    Retry,
    SettleConfirmed,
    SettleOutcome,
    SettleStale,
    SettleUnknown,
    SubscriptionId,
    SubscriptionObservation,
    SubscriptionSpec,
    Terminal,
    make_envelope,
)
from videoflow_aio.memory.messaging import MemoryMessagingBackend
from videoflow_aio.testing.servers import ServerProcess, start_nats

Schedule = Callable[["World"], Awaitable[None]]
BIG = 1 << 20


# -- the worlds ------------------------------------------------------------------------------


@dataclass
class Token:
    """One delivery as a schedule sees it (the same index in both worlds)."""

    delivery: Delivery
    client: int


@dataclass
class SettleCall:
    """A settle or renew made on NATS, with its answer (for the raw evidence checks)."""

    sub: SubscriptionId
    sseq: int
    dseq: int
    what: str  # "ack" | "nak" | "renew"
    answer: str  # the answer's type name, "duplicate", "held", "not held" or "cancelled"


class World(abc.ABC):
    """What a schedule drives (see the module docstring)."""

    name = ""

    def __init__(self, **options: Any) -> None:
        self.options = options
        self.trace: list[tuple[str, Any]] = []
        self.clients: list[Any] = []
        self.stored: list[int] = []  # stream sequences of stored publications, sorted
        self.pid_of: dict[int, str] = {}
        self.published: dict[int, tuple[str, str | None]] = {}  # seq -> (kind, key)
        self.calls: list[SettleCall] = []
        self.unknowns: list[str] = []
        self.problems: list[str] = []  # what the raw server view contradicts (NATS only)

    # what each world provides
    @abc.abstractmethod
    async def new_client(self) -> Any: ...

    @abc.abstractmethod
    async def purge(self, ch: ChannelId) -> None: ...

    @abc.abstractmethod
    async def purge_kind(self, ch: ChannelId, kind: str) -> None: ...

    @abc.abstractmethod
    async def delete_message(self, ch: ChannelId, seq: int) -> None: ...

    @abc.abstractmethod
    async def delete_subscription(self, sid: SubscriptionId) -> None: ...

    @abc.abstractmethod
    async def restart(self) -> None: ...

    @abc.abstractmethod
    async def lose_reply(self, i: int, sid: SubscriptionId) -> None:
        """Client ``i``'s next settle or renew on ``sid`` applies and its answer is lost."""

    async def sleep(self, seconds: float) -> None:
        await anyio.sleep(seconds)

    async def settled(self) -> None:  # noqa: B027 - a no-op on the model
        """Let the server act on its own timers (lease expiry, advisories): a no-op on the
        model, whose timers fire exactly when due."""

    def dl(self, seconds: float = 1.0) -> float:
        return anyio.current_time() + seconds

    async def client(self, i: int) -> Any:
        while len(self.clients) <= i:
            self.clients.append(await self.new_client())
        return self.clients[i]

    async def close(self) -> None:
        for c in self.clients:
            with anyio.CancelScope(shield=True):
                await c.aclose()

    def order(self, d: Delivery) -> Any:
        """How a receive's deliveries are listed (by sequence: the order among redeliveries,
        or among publishers, is free)."""
        if self.options.get("core_only") or isinstance(self, CoreWorld):
            return d.envelope.publication_id  # no sequence across clients
        return d.sequence

    def rec(self, label: str, value: Any) -> None:
        self.trace.append((label, value))

    async def watch(self, spec: SubscriptionSpec) -> None:  # noqa: B027 - NATS only
        """Follow ``spec``'s consumer with a raw client (NATS only)."""

    async def check_truth(  # noqa: B027 - NATS only
        self, i: int, spec: SubscriptionSpec, label: str, every: bool = False
    ) -> None:
        """Client ``i``'s observation against the raw server view (NATS only; quiescent
        points: no delivery in flight)."""

    # recording helpers
    async def ensure(self, i: int, *specs: ChannelSpec | SubscriptionSpec) -> None:
        b = await self.client(i)
        for spec in specs:
            if isinstance(spec, ChannelSpec):
                await b.ensure_channel(spec, f"op-{spec.channel.node}-{i}")
            else:
                await b.ensure_subscription(spec, f"op-{spec.id.consumer}-{i}")

    async def publish(
        self, i: int, ch: ChannelId, pid: str, label: str = "", wait: float = 2.0, **kw: Any
    ) -> Any:
        b = await self.client(i)
        env = make_envelope(ch, pid, **kw)
        out = await b.publish(env, self.dl(wait))
        if isinstance(out, Accepted) and not out.duplicate and out.sequence not in self.pid_of:
            bisect.insort(self.stored, out.sequence)
            self.pid_of[out.sequence] = pid
            self.published[out.sequence] = (env.kind, env.partition_key)
        self.rec(label or f"publish {pid} by {i}", self.norm_publish(out))
        return out

    async def receive(
        self, i: int, sid: SubscriptionId, n: int = 64, wait: float = 0.3, label: str = ""
    ) -> list[Token]:
        b = await self.client(i)
        try:
            got = await b.receive(sid, n, BIG, self.dl(wait))
        except VideoflowError as exc:
            self.rec(label or f"receive by {i}", type(exc).__name__)
            return []
        got = sorted(got, key=self.order)  # the order among redeliveries is free
        self.rec(
            label or f"receive by {i}",
            [(d.envelope.publication_id, d.attempt) for d in got],
        )
        return [Token(d, i) for d in got]

    async def receive_until(
        self, i: int, sid: SubscriptionId, count: int, within: float, label: str = ""
    ) -> list[Token]:
        """Receive until ``count`` deliveries came or ``within`` seconds passed (what a
        server redelivers only when a lease it lost track of lapses arrives late)."""
        b = await self.client(i)
        got: list[Delivery] = []
        with anyio.move_on_after(within):
            while len(got) < count:
                got += await b.receive(sid, count - len(got), BIG, self.dl(within))
        got = sorted(got, key=self.order)
        self.rec(
            label or f"receive until {count} by {i}",
            [(d.envelope.publication_id, d.attempt) for d in got],
        )
        return [Token(d, i) for d in got]

    async def settle(
        self,
        t: Token,
        outcome: SettleOutcome,
        sid: str = "",
        by: int | None = None,
        label: str = "",
    ) -> Any:
        i = t.client if by is None else by
        b = await self.client(i)
        d = t.delivery
        ans = await b.settle(d.token, outcome, sid or f"s-{d.envelope.publication_id}-{d.attempt}")
        self.note(d, "nak" if isinstance(outcome, Retry) else "ack", ans)
        name = type(ans).__name__
        if isinstance(ans, SettleConfirmed) and ans.duplicate:
            name += "(duplicate)"
        if isinstance(ans, SettleUnknown):
            self.unknowns.append(f"{label}: {ans.reason}")
        self.rec(label or f"settle {d.envelope.publication_id}#{d.attempt} by {i}", name)
        return ans

    async def renew(self, t: Token, label: str = "") -> LeaseObservation:
        b = await self.client(t.client)
        lease: LeaseObservation = await b.renew(t.delivery.token)
        self.note(t.delivery, "renew", lease)
        held = "Unknown" if lease.held is None else lease.held  # no confirmation: undecided
        self.rec(label or f"renew {t.delivery.envelope.publication_id}", held)
        return lease

    def note(self, d: Delivery, what: str, ans: Any) -> None:
        """A settle / renew answer, for the raw evidence checks (NATS tokens only)."""
        parts = d.token.lease_id.split(".")
        if len(parts) < 2 or not parts[1].isdigit():
            return
        dseq = parts[1]
        if isinstance(ans, LeaseObservation):
            answer = {True: "held", False: "not held", None: "SettleUnknown"}[ans.held]
        elif isinstance(ans, SettleConfirmed) and ans.duplicate:
            answer = "duplicate"
        else:
            answer = type(ans).__name__
        self.calls.append(SettleCall(d.token.subscription, d.sequence, int(dseq), what, answer))

    async def pending_total(self, sid: SubscriptionId, label: str) -> None:
        """The sum of every client's ``pending`` (Core NATS: each has its own queue)."""
        total = 0
        for i in range(len(self.clients)):
            o = await (await self.client(i)).observe_subscription(sid)
            total += o.value.pending if isinstance(o, Known) else 0
        self.rec(label, total)

    async def observe(self, i: int, sid: SubscriptionId, label: str = "") -> Any:
        b = await self.client(i)
        label = label or f"observe {sid.consumer} by {i}"
        try:
            o = await b.observe_subscription(sid)
        except VideoflowError as exc:
            self.rec(label, type(exc).__name__)
            return None
        self.rec(label, self.norm_sub(o))
        if isinstance(o, Unknown):
            self.unknowns.append(f"{label}: {o.reason}")
        return o

    async def observe_channel(self, i: int, ch: ChannelId, label: str = "") -> Any:
        b = await self.client(i)
        try:
            o = await b.observe_channel(ch)
        except VideoflowError as exc:
            self.rec(label or f"channel by {i}", type(exc).__name__)
            return None
        self.rec(label or f"channel by {i}", self.norm_chan(o))
        return o

    async def observe_publication(self, i: int, ch: ChannelId, pid: str, label: str = "") -> Any:
        b = await self.client(i)
        out = await b.observe_publication(make_envelope(ch, pid))
        self.rec(label or f"observe_publication {pid} by {i}", self.norm_publish(out))
        return out

    # normalisation: sequences as ranks among stored publications, or publication ids
    def rank(self, seq: int) -> int:
        return bisect.bisect_right(self.stored, seq)

    def norm_publish(self, out: Any) -> Any:
        if isinstance(out, Accepted):
            return ("Accepted", self.pid_of.get(out.sequence, "?"), out.duplicate)
        return type(out).__name__

    def norm_sub(self, o: Any) -> Any:
        if isinstance(o, Unknown):
            return "Unknown"
        v: SubscriptionObservation = o.value
        return {
            "pending": v.pending,
            "leased": v.leased,
            "unresolved": v.unresolved,
            "dropped": v.dropped,
            "dead_lettered": v.dead_lettered,
            "ack_floor": self.rank(v.ack_floor),
        }

    def norm_chan(self, o: Any) -> Any:
        if isinstance(o, Unknown):
            return "Unknown"
        v: ChannelObservation = o.value
        return {
            "messages": v.messages,
            "first": self.rank(v.first_sequence - 1),
            "last": self.rank(v.last_sequence),
            "dead_letters": v.dead_letters,
        }


class ModelWorld(World):
    """The memory model (virtual time: run it with :func:`run_model`)."""

    name = "model"

    async def pending_total(self, sid: SubscriptionId, label: str) -> None:
        o = await (await self.client(0)).observe_subscription(sid)  # one queue for all
        self.rec(label, o.value.pending)

    def norm_publish(self, out: Any) -> Any:
        if self.options.get("core_only"):
            return type(out).__name__  # as CoreWorld
        return super().norm_publish(out)

    async def new_client(self) -> Any:
        if not self.clients:
            opts = {k: v for k, v in self.options.items() if k != "request_timeout"}
            opts.setdefault("persistent", True)
            return MemoryMessagingBackend(**opts)
        return self.clients[0].another_client()

    async def purge(self, ch: ChannelId) -> None:
        (await self.client(0)).purge(ch)

    async def purge_kind(self, ch: ChannelId, kind: str) -> None:
        b = await self.client(0)
        for seq, (k, _key) in sorted(self.published.items()):
            if k == kind:
                b.delete_message(ch, seq)  # no-op for one already gone

    async def delete_message(self, ch: ChannelId, seq: int) -> None:
        (await self.client(0)).delete_message(ch, seq)

    async def delete_subscription(self, sid: SubscriptionId) -> None:
        (await self.client(0)).delete_subscription(sid)

    async def restart(self) -> None:
        (await self.client(0)).restart_server()

    async def lose_reply(self, i: int, sid: SubscriptionId) -> None:
        (await self.client(i)).lose_reply(sid)


class NatsWorld(World):
    """The JetStream adapter on a real server; ``store`` makes the server this world's own
    (restartable: kill -9 and a new process on the same port and store)."""

    name = "nats"

    def __init__(self, srv: ServerProcess, prefix: tuple[str, str], **options: Any) -> None:
        super().__init__(**options)
        self.srv = srv
        self.prefix = prefix
        self.store: Path | None = None
        self.raw: RawWatch | None = None
        self.watched: SubscriptionId | None = None
        self.publishers: set[int] = set()  # the clients that published: see observe

    @property
    def url(self) -> str:
        return str(self.srv.url)

    async def new_client(self) -> Any:
        sp, subp = self.prefix
        opts = dict(self.options)
        opts.setdefault("request_timeout", 2.0)
        return JetStreamMessagingBackend(self.url, stream_prefix=sp, subject_prefix=subp, **opts)

    async def lose_reply(self, i: int, sid: SubscriptionId) -> None:
        (await self.client(i))._c.lose_replies.add(sid)  # the provider control's fault

    async def publish(
        self, i: int, ch: ChannelId, pid: str, label: str = "", wait: float = 2.0, **kw: Any
    ) -> Any:
        out = await super().publish(i, ch, pid, label, wait, **kw)
        self.publishers.add(i)
        return out

    async def observe(self, i: int, sid: SubscriptionId, label: str = "") -> Any:
        """As the model's, once every other client that published has observed ``sid`` itself
        (unrecorded): JetStream counts a publication into a consumer after the PubAck, so
        another client's read may miss it for a moment (3 in 2,000 reads right after one, on
        a loaded machine); the publisher's own observation waits until it is counted."""
        for k in sorted(self.publishers - {i}):
            with contextlib.suppress(VideoflowError):
                await (await self.client(k)).observe_subscription(sid)
        return await super().observe(i, sid, label)

    def admin(self) -> JetStreamAdmin:
        sp, subp = self.prefix
        return JetStreamAdmin(self.url, stream_prefix=sp, subject_prefix=subp)

    async def _as_admin(self, act: Callable[[JetStreamAdmin], Awaitable[Any]]) -> Any:
        a = self.admin()
        try:
            return await act(a)
        finally:
            await a.aclose()

    async def purge(self, ch: ChannelId) -> None:
        await self._as_admin(lambda a: a.purge(ch))

    async def purge_kind(self, ch: ChannelId, kind: str) -> None:
        _sp, subp = self.prefix
        stream = (await self.client(0)).names.stream(ch)
        subject = f"{subp}.{ch.flow_id}.{ch.run_id}.{ch.node}.{kind}.>"
        await self._as_admin(lambda a: a.request(f"STREAM.PURGE.{stream}", {"filter": subject}))

    async def delete_message(self, ch: ChannelId, seq: int) -> None:
        await self._as_admin(lambda a: a.delete_message(ch, seq))

    async def delete_subscription(self, sid: SubscriptionId) -> None:
        await self._as_admin(lambda a: a.delete_subscription(sid))

    async def delete_channel(self, ch: ChannelId) -> None:
        stream = (await self.client(0)).names.stream(ch)
        await self._as_admin(lambda a: a.request(f"STREAM.DELETE.{stream}"))
        self.published.clear()  # its sequences start again
        self.stored.clear()
        self.pid_of.clear()

    async def restart(self) -> None:
        assert self.store is not None, "restart needs a world with its own server"
        await anyio.sleep(0.3)  # the consumer state flusher writes every ~100 ms
        await self.kill_and_restart()

    async def kill_and_restart(self) -> None:
        def restart() -> None:
            os.kill(self.srv.pid, signal.SIGKILL)
            self.srv.stop()
            self.srv = start_nats(data_dir=self.store, args=["-p", str(self.srv.port)])

        raw = self.raw.nc.stats["reconnects"] if self.raw is not None else 0
        await restarted(self.clients, restart)
        if self.raw is not None:
            await self.raw.reconnected(raw)

    async def settled(self) -> None:
        await anyio.sleep(0.25)

    async def watch(self, spec: SubscriptionSpec) -> None:
        b = await self.client(0)
        self.watched = spec.id
        self.raw = RawWatch(self.url, b.names.stream(spec.channel), b.names.consumer(spec.id))
        await self.raw.start()

    async def check_truth(
        self, i: int, spec: SubscriptionSpec, label: str, every: bool = False
    ) -> None:
        assert self.raw is not None
        b = await self.client(i)
        truth = await raw_truth(self, self.raw, spec, every)
        obs = await b.observe_subscription(spec.id)
        self.problems += truth_violations(label, obs, truth)

    async def close(self) -> None:
        if self.raw is not None and self.watched is not None:
            with anyio.CancelScope(shield=True):
                await self.raw.caught_up()
                self.problems += evidence_violations(self, self.raw, self.watched)
                await self.raw.aclose()
        await super().close()


class CoreWorld(NatsWorld):
    """Core NATS (``CoreNatsMessagingBackend``) on a real server. Declared differences
    (docs/nats.md): a publication's sequence is this client's count (Core NATS has none), and
    a subscription is this client's queue (a competing one ensured by two clients is split
    between them by the server)."""

    def norm_publish(self, out: Any) -> Any:
        return type(out).__name__

    async def new_client(self) -> Any:
        opts = dict(self.options)
        opts.pop("core_only", None)
        opts.setdefault("request_timeout", 2.0)
        return CoreNatsMessagingBackend(self.url, subject_prefix=self.prefix[1], **opts)

    async def restart(self) -> None:
        assert self.store is not None, "restart needs a world with its own server"
        await self.kill_and_restart()


async def run_model(schedule: Schedule, **options: Any) -> ModelWorld:
    """``schedule`` on the model, on virtual time in a worker thread (asyncio's loop)."""

    async def main() -> ModelWorld:
        w = ModelWorld(**options)
        try:
            await schedule(w)
        finally:
            await w.close()
        return w

    def in_thread() -> ModelWorld:
        return vtime.run(main, backend="asyncio")

    return await anyio.to_thread.run_sync(in_thread)


W = TypeVar("W", bound="NatsWorld")


async def run_nats(schedule: Schedule, w: W) -> W:
    """``schedule`` on NATS (``w``'s server and namespace), its namespace dropped after."""
    try:
        await schedule(w)
    finally:
        await w.close()
        with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
            await w._as_admin(lambda a: a.drop_namespace())
    return w


# -- comparing -------------------------------------------------------------------------------

SUB_EXACT = ("pending", "leased", "unresolved", "dropped", "dead_lettered")


def dump(model: World, real: World) -> str:
    """Both traces side by side (for a failure message)."""
    rows = [
        f"{i:3} {ml}: model={mv!r} nats={rv!r}"
        for i, ((ml, mv), (_rl, rv)) in enumerate(zip(model.trace, real.trace, strict=False))
    ]
    return "\n".join(rows)


UNDECIDED = frozenset({"Unknown", "SettleUnknown", "PublicationUnknown", "PublicationUnresolvable"})


def _diff_value(label: str, model: Any, real: Any) -> str | None:
    """Why ``real`` (NATS) is not an acceptable answer where the model said ``model``."""
    if isinstance(real, str) and real in UNDECIDED:
        return None  # undecidable is always allowed
    if isinstance(model, dict) and isinstance(real, dict):
        bad = [k for k in SUB_EXACT if k in model and model[k] != real[k]]
        if "pending" in model and set(bad) == {"pending", "leased"}:
            k = model["pending"] - real["pending"]
            if k > 0 and real["leased"] - model["leased"] == k:
                bad = []  # declared: another client's give-back is leased until redelivered
        if "ack_floor" in model and real["ack_floor"] > model["ack_floor"]:
            bad.append("ack_floor")  # a floor may lag (declared), never lead
        for k in ("messages", "first", "last", "dead_letters"):
            if k in model and model[k] != real[k]:
                bad.append(k)
        if not bad:
            return None
        return f"{label}: {', '.join(f'{k} model={model[k]} nats={real[k]}' for k in bad)}"
    if model != real:
        return f"{label}: model={model!r} nats={real!r}"
    return None


def compare(model: World, real: World) -> list[str]:
    """Every NATS answer that is neither the model's nor an allowed Unknown."""
    out = []
    for step, ((ml, mv), (rl, rv)) in enumerate(zip(model.trace, real.trace, strict=False)):
        if ml != rl:
            out.append(f"schedules diverged: model at {ml!r}, nats at {rl!r}")
            break
        why = _diff_value(ml, mv, rv)
        if why is not None:
            out.append(f"step {step} {why}")
    if len(model.trace) != len(real.trace):
        out.append(f"trace lengths differ: model {len(model.trace)}, nats {len(real.trace)}")
    return out


# -- the raw watch ---------------------------------------------------------------------------


class _Event(msgspec.Struct):
    stream_seq: int = 0
    consumer_seq: int = 0
    reason: str = ""


_event_dec = msgspec.json.Decoder(_Event).decode


@bridged
class RawWatch:
    """A raw nats-py client following one consumer's ack metrics and advisories: what the
    server itself says happened to each delivery (``(stream seq, delivery seq)``)."""

    def __init__(self, url: str, stream: str, consumer: str) -> None:
        self.url = url
        self.stream = stream
        self.consumer = consumer
        self.acked: set[tuple[int, int]] = set()
        self.naked: set[tuple[int, int]] = set()
        self.exhausted: set[int] = set()
        self.deleted: set[int] = set()
        self.nc: Any = None
        self._side = Affinity()

    async def start(self) -> None:
        self.nc = await nats.connect(self.url, max_reconnect_attempts=-1, reconnect_time_wait=0.1)
        tail = f"{self.stream}.{self.consumer}"
        follows: list[tuple[str, Callable[[_Event], None]]] = [
            (f"$JS.EVENT.METRIC.CONSUMER.ACK.{tail}", self._ack),
            (f"$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.{tail}", self._nak),
            (f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{tail}", self._max),
            (f"$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.{tail}", self._term),
        ]
        for subject, fn in follows:
            await self.nc.subscribe(subject, cb=self._cb(fn))
        await self.nc.flush()

    def _cb(self, fn: Callable[[_Event], None]) -> Any:
        async def cb(msg: Any) -> None:
            fn(_event_dec(msg.data))

        return cb

    def _ack(self, e: _Event) -> None:
        self.acked.add((e.stream_seq, e.consumer_seq))

    def _nak(self, e: _Event) -> None:
        self.naked.add((e.stream_seq, e.consumer_seq))

    def _max(self, e: _Event) -> None:
        self.exhausted.add(e.stream_seq)

    def _term(self, e: _Event) -> None:
        if e.reason == "Unacknowledged message was deleted":
            self.deleted.add(e.stream_seq)

    async def reconnected(self, before: int) -> None:
        with anyio.fail_after(10):
            while self.nc.stats["reconnects"] <= before or not self.nc.is_connected:  # noqa: ASYNC110
                await anyio.sleep(0.02)
        await self.nc.flush()

    async def api(self, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = b"" if body is None else msgspec.json.encode(body)
        msg = await self.nc.request(f"$JS.API.{subject}", data, timeout=2.0)
        out: dict[str, Any] = msgspec.json.decode(msg.data)
        return out

    async def request(self, subject: str, data: bytes) -> Any:
        """A raw request (a publish another program makes, say)."""
        return await self.nc.request(subject, data, timeout=2.0)

    async def caught_up(self) -> None:
        """Everything the server sent before now has been handled."""
        await self.nc.flush()
        await anyio.sleep(0.05)

    async def aclose(self) -> None:
        if self.nc is not None:
            await self.nc.close()


def acked_seqs(watch: RawWatch) -> set[int]:
    return {s for s, _d in watch.acked}


def evidence_violations(w: World, watch: RawWatch, sid: SubscriptionId) -> list[str]:
    """Settle / renew answers on ``sid`` the server's own evidence contradicts."""
    out: list[str] = []
    by_token: dict[tuple[str, int, int], list[str]] = {}
    for call in w.calls:
        if call.sub != sid:
            continue
        what = "nak" if call.what == "renew" else call.what  # a renewal is a nak too
        key = (what, call.sseq, call.dseq)
        by_token.setdefault(key, []).append(call.answer)
    for (what, sseq, dseq), answers in sorted(by_token.items()):
        seen = (sseq, dseq) in (watch.naked if what == "nak" else watch.acked)
        confirmed = any(a in ("SettleConfirmed", "held") for a in answers)
        maybe = any(a in ("cancelled", "SettleUnknown", "duplicate") for a in answers)
        if confirmed and not seen:
            out.append(f"{what} of delivery ({sseq}, {dseq}) answered {answers}: no evidence")
        if seen and not confirmed and not maybe:
            out.append(f"{what} of delivery ({sseq}, {dseq}) applied but answered {answers}")
    return out


@dataclass
class Truth:
    """A subscription's counts as the server's own evidence decides them."""

    dropped: int
    unresolved: int
    outstanding: int  # retained, matching, neither settled nor exhausted (pending + leased)
    detail: dict[str, list[int]] = field(default_factory=dict)


async def raw_truth(
    w: World, watch: RawWatch, spec: SubscriptionSpec, every: bool = False
) -> Truth:
    """The subscription's counts from the raw server view: the stream's retained range and
    deletions, the ack metrics and advisories of its consumer. ``every``: every sequence of
    the stream matches ``spec`` (publications whose outcome the schedule does not know, a
    cancelled publish say, count too)."""
    await watch.caught_up()
    si = await watch.api(f"STREAM.INFO.{watch.stream}", {"deleted_details": True})
    st = si["state"]
    first = int(st.get("first_seq") or 0)
    if int(st.get("messages", 0)) == 0:
        first = int(st.get("last_seq", 0)) + 1
    deleted = set(st.get("deleted") or [])
    ci = await watch.api(f"CONSUMER.INFO.{watch.stream}.{watch.consumer}")
    start = int(ci["config"].get("opt_start_seq", 1) or 1)
    acked = acked_seqs(watch)
    if every:
        mine = list(range(start, int(st.get("last_seq", 0)) + 1))
    else:
        mine = [
            s
            for s, (kind, key) in w.published.items()
            if s >= start
            and kind == spec.kind
            and (spec.partition is None or key == str(spec.partition))
        ]
    removed = {s for s in mine if s < first or s in deleted}
    dropped = sorted(s for s in removed if s not in acked)
    unresolved = sorted(
        s for s in mine if s in watch.exhausted and s not in removed and s not in acked
    )
    rest = sorted(
        s for s in mine if s not in removed and s not in acked and s not in watch.exhausted
    )
    return Truth(
        len(dropped),
        len(unresolved),
        len(rest),
        {"dropped": dropped, "unresolved": unresolved, "outstanding": rest},
    )


def truth_violations(label: str, obs: Any, truth: Truth) -> list[str]:
    """The adapter's observation against the raw truth (Unknown always passes)."""
    if not isinstance(obs, Known):
        return []
    v: SubscriptionObservation = obs.value
    got = (v.dropped, v.unresolved, v.pending + v.leased)
    want = (truth.dropped, truth.unresolved, truth.outstanding)
    if got == want:
        return []
    return [
        f"{label}: adapter (dropped, unresolved, pending+leased)={got}, "
        f"server {want} {truth.detail}"
    ]


async def settle_cancellable(
    w: World, t: Token, outcome: SettleOutcome, sid: str, within: float
) -> Any:
    """``settle`` under a cancel scope of ``within`` seconds; None when cancelled."""
    b = await w.client(t.client)
    d = t.delivery
    what = "nak" if isinstance(outcome, Retry) else "ack"
    with anyio.move_on_after(within) as scope:
        ans = await b.settle(d.token, outcome, sid)
    if scope.cancelled_caught:
        dseq = d.token.lease_id.split(".")[1]
        w.calls.append(SettleCall(d.token.subscription, d.sequence, int(dseq), what, "cancelled"))
        return None
    w.note(d, what, ans)
    return ans


__all__ = [
    "BIG",
    "Completed",
    "CoreNatsMessagingBackend",
    "ModelWorld",
    "NatsWorld",
    "PublicationUnknown",
    "RawWatch",
    "Retry",
    "SettleStale",
    "Terminal",
    "Token",
    "World",
    "compare",
    "evidence_violations",
    "raw_truth",
    "run_model",
    "run_nats",
    "settle_cancellable",
    "truth_violations",
]
