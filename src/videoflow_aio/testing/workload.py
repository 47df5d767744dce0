"""Workloads that record what a client saw, for :func:`videoflow_aio.checks.check_nothing_lost`.

Each workload drives one contract through its public methods only, records every answer into
an :class:`~videoflow_aio.observe.ObservationLog` in the checker's vocabulary, and ends with a
final phase that records the state the checker compares against (a drain, a final read).
Faults happen meanwhile, from elsewhere (a fault schedule killing and pausing members); a
workload treats :class:`~videoflow_aio.contracts.errors.BackendUnavailable` on a read as "try
again later" and records every write exactly as answered — confirmed, refused, or unknown.

Every loop is bounded by a count and by ``deadline`` (an absolute time on the running loop's
clock), and ends early once ``stop`` (an :class:`anyio.Event`, e.g. set by the fault
schedule when it is done) is set; a final phase that cannot finish by the deadline records
nothing more, and the checker then reports the items it could not verify.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio

from ..contracts import Known
from ..contracts.errors import BackendUnavailable, VideoflowError
from ..contracts.messaging import (
    Accepted,
    Completed,
    Envelope,
    MessagingBackend,
    PublicationUnknown,
    PublicationUnresolvable,
    PublishOutcome,
    Rejected,
    SettleConfirmed,
    SettleStale,
    SettleUnknown,
    SubscriptionSpec,
    make_envelope,
)
from ..contracts.payload import PayloadBytes, PayloadStore, RetentionContract
from ..contracts.runtime_store import RuntimeStore
from ..observe import ObservationLog

T = TypeVar("T")
RETRY_PAUSE = 0.05  # seconds between tries of a read that found no member answering


class OutOfTime(Exception):
    """The workload's deadline passed before a read could be answered."""


async def retry_read(call: Callable[[], Awaitable[T]], deadline: float) -> T:
    """``await call()`` until it answers (BackendUnavailable: pause and try again); OutOfTime
    once ``deadline`` passes."""
    while True:
        try:
            return await call()
        except BackendUnavailable:
            if anyio.current_time() >= deadline:
                raise OutOfTime from None
            await anyio.sleep(RETRY_PAUSE)


def _over(deadline: float, stop: anyio.Event | None) -> bool:
    return anyio.current_time() >= deadline or (stop is not None and stop.is_set())


def write_outcome(exc: BaseException) -> str:
    """How the checker files a write that raised ``exc``: ``not_applied`` (refused before
    applying) or ``unknown``."""
    if isinstance(exc, BackendUnavailable) and exc.fields.get("applied") is False:
        return "not_applied"
    return "unknown"


# -- runtime store ----------------------------------------------------------------------------
def _ids(value: bytes | None) -> list[str]:
    return [op for op in (value or b"").decode().split(",") if op]


async def cas_workload(
    store: RuntimeStore,
    log: ObservationLog,
    *,
    keys: int = 2,
    workers: int = 3,
    ops: int = 20,
    prefix: str = "ctr",
    deadline: float,
    stop: anyio.Event | None = None,
) -> None:
    """``workers`` tasks each try ``ops`` CAS increments on one of ``keys`` keys; a value is
    the comma-separated ids of the CASes applied to it (so the final value lists them).
    Records ``cas`` (outcome ``ok``/``conflict``/``not_applied``/``unknown``) per attempt,
    then ``cas_final`` per key."""

    async def worker(w: int) -> None:
        key = f"{prefix}{w % keys}"
        for n in range(ops):
            if _over(deadline, stop):
                return
            op = f"w{w}n{n}"
            try:
                value, version = await retry_read(functools.partial(store.get, key), deadline)
            except OutOfTime:
                return
            try:  # version None: the key is absent and this CAS creates it
                ok = await store.cas(key, version, (value or b"") + f"{op},".encode())
            except VideoflowError as exc:
                log.record("cas", subject=key, ident=op, outcome=write_outcome(exc))
                continue
            log.record("cas", subject=key, ident=op, outcome="ok" if ok else "conflict")

    async with anyio.create_task_group() as tg:
        for w in range(workers):
            tg.start_soon(worker, w)
    for k in range(keys):
        key = f"{prefix}{k}"
        try:
            value, _ = await retry_read(functools.partial(store.get, key), deadline)
        except OutOfTime:
            continue
        log.record("cas_final", subject=key, applied=_ids(value))


# -- payload ----------------------------------------------------------------------------------
async def payload_workload(
    store: PayloadStore,
    log: ObservationLog,
    *,
    puts: int = 20,
    prefix: str = "obj",
    size: int = 256,
    ttl_seconds: float = 3600.0,
    deadline: float,
    stop: anyio.Event | None = None,
) -> None:
    """``puts`` puts of fresh keys, each with one obligation; every other one released at
    once. Records ``put`` (ident = generation) or ``put_unknown``, ``release`` (with its
    outcome and generation) or ``release_unknown``, then a final ``read`` of every key."""
    contract = RetentionContract(
        ttl_seconds=ttl_seconds, obligations=("reader",), obligation_seconds=ttl_seconds
    )
    refs = {}
    attempted = 0
    for i in range(puts):
        if _over(deadline, stop):
            break
        attempted = i + 1
        key = f"{prefix}{i}"
        try:
            ref = await store.put(bytes([i % 251]) * size, key, contract)
        except VideoflowError as exc:
            if write_outcome(exc) == "unknown":
                log.record("put_unknown", subject=key, reason=type(exc).__name__)
            continue
        refs[key] = ref
        log.record("put", subject=key, ident=ref.generation, generation=ref.generation)
        if i % 2:
            try:
                receipt = await store.release_obligation(ref, "reader", f"done-{i}")
            except VideoflowError as exc:
                if write_outcome(exc) == "unknown":  # it may have reclaimed the object
                    log.record(
                        "release_unknown", subject=key, ident="reader", generation=ref.generation
                    )
                continue
            log.record(
                "release",
                subject=key,
                ident="reader",
                generation=ref.generation,
                outcome=receipt.outcome,
            )
    for i in range(attempted):
        key = f"{prefix}{i}"
        try:
            await _final_read(store, log, key, refs.get(key), deadline)
        except OutOfTime:
            return


async def _final_read(
    store: PayloadStore, log: ObservationLog, key: str, ref: Any, deadline: float
) -> None:
    if ref is None:
        ref = await retry_read(functools.partial(store.ref_for_key, key), deadline)
        if not ref.generation:
            log.record("read", subject=key, ident="final", outcome="Missing")
            return
    while True:
        got = await store.read(ref, "final")
        if type(got).__name__ != "TransientFailure":
            break
        if anyio.current_time() >= deadline:
            raise OutOfTime
        await anyio.sleep(RETRY_PAUSE)
    generation = got.ref.generation if isinstance(got, PayloadBytes) else ref.generation
    log.record(
        "read", subject=key, ident="final", generation=generation, outcome=type(got).__name__
    )


# -- messaging --------------------------------------------------------------------------------
async def messaging_workload(
    backend: MessagingBackend,
    log: ObservationLog,
    sub: SubscriptionSpec,
    *,
    publications: int = 50,
    consumers: int = 2,
    publish_seconds: float = 2.0,
    receive_seconds: float = 0.5,
    prefix: str = "p",
    deadline: float,
    stop: anyio.Event | None = None,
) -> None:
    """One publisher (``publications`` envelopes, each with ``publish_seconds`` to be
    answered) and ``consumers`` competing consumers settling ``Completed``; an ambiguous
    publication is resolved with ``observe_publication`` once publishing ends; then the
    subscription is drained until it holds nothing (``observe_subscription``). Records
    ``subscription_created``, ``publish``/``publication_unknown``/``reject``, ``deliver``,
    ``settle``/``settle_unknown``/``settle_stale``, ``drained`` (attr ``consumer``) when a
    consumer stops on an empty observation and, at the end, a ``final_observation`` of the
    subscription. Give ``sub`` ``max_deliver=-1``: a message that exhausted its
    deliveries stays stored but is never delivered again, and the checker needs its fate."""
    channel = sub.id.channel
    log.record("subscription_created", subject=channel.name, ident=sub.id.name)
    done = anyio.Event()
    unknown: list[Envelope] = []

    async def publisher() -> None:
        try:
            for i in range(publications):
                if _over(deadline, stop):
                    break
                env = make_envelope(channel, f"{prefix}{i}", b"m%d" % i)
                try:
                    out = await backend.publish(env, anyio.current_time() + publish_seconds)
                except VideoflowError as exc:
                    out = PublicationUnknown(env.publication_id, f"{type(exc).__name__}: {exc}")
                if _record_publish(log, channel.name, env, out):
                    unknown.append(env)
            await _resolve_publications(backend, log, channel.name, unknown, deadline)
        finally:
            done.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(publisher)
        for c in range(consumers):
            tg.start_soon(_consume, backend, log, sub, done, receive_seconds, deadline, c)
    await _final_observation(backend, log, sub, deadline)


def _record_publish(log: ObservationLog, channel: str, env: Envelope, out: PublishOutcome) -> bool:
    """Record ``out``; True when it is still unknown."""
    pid = env.publication_id
    if isinstance(out, Accepted):
        log.record("publish", subject=channel, ident=pid, seq=out.sequence, duplicate=out.duplicate)
    elif isinstance(out, Rejected):
        log.record("reject", subject=channel, ident=pid, reason=out.reason)
    elif isinstance(out, PublicationUnresolvable):
        log.record("publication_unresolvable", subject=channel, ident=pid, reason=out.reason)
    else:
        log.record("publication_unknown", subject=channel, ident=pid, reason=out.reason)
        return True
    return False


async def _resolve_publications(
    backend: MessagingBackend,
    log: ObservationLog,
    channel: str,
    pending: list[Envelope],
    deadline: float,
) -> None:
    """Ask about each unknown publication until the answer is definite (or time is up)."""
    while pending and anyio.current_time() < deadline:
        env = pending.pop(0)
        try:
            out = await backend.observe_publication(env)
        except VideoflowError as exc:
            out = PublicationUnknown(env.publication_id, str(exc))
        if isinstance(out, PublicationUnknown):
            pending.append(env)
            await anyio.sleep(RETRY_PAUSE)
        else:
            _record_publish(log, channel, env, out)


async def _consume(
    backend: MessagingBackend,
    log: ObservationLog,
    sub: SubscriptionSpec,
    done: anyio.Event,
    receive_seconds: float,
    deadline: float,
    c: int,
) -> None:
    """Receive and settle until publishing is done and the subscription looks empty."""
    channel, name = sub.id.channel.name, sub.id.name
    empty = 0
    while anyio.current_time() < deadline:
        try:
            batch = await backend.receive(
                sub.id, 8, 1 << 20, anyio.current_time() + receive_seconds
            )
        except VideoflowError:
            await anyio.sleep(RETRY_PAUSE)
            continue
        if not batch:
            empty = empty + 1 if done.is_set() else 0
            if empty >= 2 and await _drained(backend, sub, deadline):
                log.record("drained", subject=channel, ident=name, consumer=c)
                return
            continue
        empty = 0
        for d in batch:
            pid = d.envelope.publication_id
            log.record("deliver", subject=channel, ident=pid, subscription=name, attempt=d.attempt)
            try:
                answer = await backend.settle(d.token, Completed(), f"c{c}-{pid}-{d.attempt}")
            except VideoflowError as exc:
                answer = SettleUnknown(str(exc))
            kind = {SettleConfirmed: "settle", SettleStale: "settle_stale"}.get(
                type(answer), "settle_unknown"
            )
            log.record(kind, subject=channel, ident=pid, subscription=name)


async def _drained(backend: MessagingBackend, sub: SubscriptionSpec, deadline: float) -> bool:
    """True when a Known observation holds nothing pending or leased for ``sub`` and its ack
    floor has reached the channel's last sequence (a consumer's counts can lag its stream
    on a cluster; the floor against the stream's own last sequence cannot pass a message
    still to come). Anything unknown is not "empty"."""
    try:
        obs = await backend.observe_subscription(sub.id)
        floor = await backend.observe_ack_floor(sub.id)
        chan = await backend.observe_channel(sub.id.channel)
    except VideoflowError:
        return False
    if not (isinstance(obs, Known) and isinstance(floor, Known) and isinstance(chan, Known)):
        return False
    v = obs.value
    return v.pending + v.leased == 0 and floor.value >= chan.value.last_sequence


async def _final_observation(
    backend: MessagingBackend, log: ObservationLog, sub: SubscriptionSpec, deadline: float
) -> None:
    """Record how many messages a final observation still holds (unresolved ones)."""
    try:
        obs = await backend.observe_subscription(sub.id)
    except VideoflowError:
        return
    if isinstance(obs, Known):
        v = obs.value
        log.record(
            "final_observation",
            subject=sub.id.channel.name,
            ident=sub.id.name,
            pending=v.pending,
            leased=v.leased,
            unresolved=v.unresolved,
        )


__all__ = [
    "OutOfTime",
    "cas_workload",
    "messaging_workload",
    "payload_workload",
    "retry_read",
    "write_outcome",
]
