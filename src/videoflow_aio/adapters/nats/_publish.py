"""``publish`` and ``observe_publication``: a request per publication, its PubAck decoded.

* ``Accepted`` is the server's PubAck (``duplicate`` when the ``Nats-Msg-Id`` was stored
  already); ``Rejected`` an error reply or a request that never left this client;
  ``PublicationUnknown`` no answer before the deadline (it may still be stored later).
* ``observe_publication`` returns what this client recorded — the stored sequence, as
  ``Accepted(duplicate=False)``: whether *that* publish call was a duplicate is the call's
  answer, not a fact about the publication — and resolves a ``PublicationUnknown`` by an
  idempotent re-publish inside the dedup window (see ``docs/nats.md``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import msgspec

from ...contracts.errors import NotFound, ValidationError
from ...contracts.messaging import (
    Accepted,
    Envelope,
    PublicationUnknown,
    PublicationUnresolvable,
    PublishOutcome,
    Rejected,
)
from . import _api, _codec, _profiles
from ._api import CallFailed, NoAnswer, NoResponders, NotSent
from ._channels import chan
from ._connection import Client, await_leader, loop_time
from ._state import ChanState
from ._wire import decode_pub_ack

DUPLICATE_IN_PROCESS = 10158
"""JetStream (clustered): "duplicate message id is in process" — the same publication id is
still being replicated: its outcome is not known yet."""

_index_enc = msgspec.json.Encoder().encode


class IndexRecord(msgspec.Struct, array_like=True):
    """One index record: the slot stream incarnation it is about (its ``created`` stamp: a
    stream deleted and created again starts its sequences over) and ``(sequence, kind,
    partition key)`` of each publication."""

    stream: str
    entries: list[tuple[int, str, str | None]]


INDEX_LIMIT = 1 << 20
"""Most sequences kept in a channel's publish index; past it the oldest half is forgotten
(their subjects then come from the index stream)."""
INDEX_BATCH = 256
"""Publications per index record: a full batch is written at once."""
INDEX_LINGER = 0.02
"""Seconds a partial batch waits before it is written."""
CANCELLED = "the publish was cancelled in flight; it may have been sent and stored"


def _index(c: Client, chs: ChanState, seq: int, env: Envelope, created: str) -> bool:
    """Record a stored publication in this client's index and in the next index record;
    True when that record is full (write it now). ``created``: the stream incarnation the
    publish was sent to; a PubAck that comes back after this client saw the stream created
    again names a sequence of the old one and is not recorded."""
    if created != chs.created:
        return False
    chs.index[seq] = (env.kind, env.partition_key, len(env.body))
    chs.acked_last = max(chs.acked_last, seq)
    if len(chs.index) > INDEX_LIMIT:
        chs.trim_index(INDEX_LIMIT // 2)
    chs.unindexed.append((seq, env.kind, env.partition_key))
    if len(chs.unindexed) >= INDEX_BATCH:
        return True
    if chs.index_timer is None:
        loop = asyncio.get_running_loop()
        chs.index_timer = loop.call_later(INDEX_LINGER, _spawn, c, chs)
    return False


def _spawn(c: Client, chs: ChanState) -> None:
    """The linger passed: write the partial batch in a task the client owns (``keep``: it
    records acknowledged publications, so closing the client awaits it)."""
    chs.index_timer = None
    c.tasks.spawn(flush_index(c, chs), name=f"index write of {chs.id}", keep=True)


async def flush_index(c: Client, chs: ChanState) -> None:
    """Write this client's pending index entries of ``chs`` as one record. A record lost with
    the connection leaves those sequences unattributable, never wrong: the failure is noted
    (logged, counted in ``c.tasks``), not raised."""
    if chs.index_timer is not None:
        chs.index_timer.cancel()
        chs.index_timer = None
    batch, chs.unindexed = chs.unindexed, []
    nc = c.nc
    if not batch or nc is None or nc.is_closed:
        return
    try:
        record = IndexRecord(chs.created, batch)
        await _api.publish(nc, c.names.index_subject(chs.id), _index_enc(record))
    except CallFailed as exc:
        c.tasks.note(f"index write of {chs.id}", exc)


async def flush_all(c: Client) -> None:
    for chs in list(c.chans.values()):
        if chs.unindexed:
            await flush_index(c, chs)


SUBJECTS = 4096
"""Most publish subjects cached per channel (past it the cache starts over)."""


def subject(c: Client, chs: ChanState, kind: str, partition_key: str | None) -> str:
    """``c.names.subject`` of ``chs``'s channel, computed once per kind and partition key."""
    key = (kind, partition_key)
    cached = chs.subjects.get(key)
    if cached is None:
        if len(chs.subjects) >= SUBJECTS:
            chs.subjects.clear()
        cached = chs.subjects[key] = c.names.subject(chs.id, kind, partition_key)
    return cached


async def send(c: Client, nc: Any, chs: ChanState, env: Envelope, seconds: float) -> PublishOutcome:
    pid = env.publication_id
    subject_ = subject(c, chs, env.kind, env.partition_key)
    hdrs = _codec.headers(env, chs.spec.dedup_window_seconds > 0)
    end = loop_time() + seconds
    while True:
        try:
            msg = await _api.request(
                nc, subject_, env.body, max(end - loop_time(), 0.001), headers=hdrs
            )
            break
        except NoAnswer as exc:
            return PublicationUnknown(
                pid, f"no acknowledgement before the deadline ({exc}); it may still be stored"
            )
        except NotSent as exc:
            return Rejected(pid, f"not sent: {exc}")
        except NoResponders as exc:
            # nothing took the message: not stored, so sending it again stores it at most once.
            # On a cluster a stream whose leader is being elected (or a new stream whose
            # leader's interest has not reached this server) has no responder either: "no
            # channel" only when the stream is gone, else again until the deadline
            if await _stream_gone(c, chs, end):
                c.forget_channel(chs.id)
                raise NotFound(
                    f"no channel {chs.id} (no stream answers)", kind="channel", name=chs.id.name
                ) from exc
            if not await await_leader(end):
                return Rejected(pid, f"not stored: no stream leader answered ({exc})")
    try:
        ack = decode_pub_ack(msg.data)
    except msgspec.DecodeError:
        return PublicationUnknown(pid, f"undecodable acknowledgement {msg.data[:80]!r}")
    err = ack.error
    if err is not None:
        desc = err.description
        if err.err_code == DUPLICATE_IN_PROCESS:  # the first attempt is being stored
            return PublicationUnknown(pid, f"{desc}: an earlier attempt is still in flight")
        return Rejected(pid, f"{desc} ({err.code}/{err.err_code})")
    if ack.seq <= 0:  # not a PubAck (JetStream sequences start at 1)
        return PublicationUnknown(pid, f"acknowledgement without a sequence {msg.data[:80]!r}")
    return Accepted(pid, ack.seq, ack.duplicate)


async def _stream_gone(c: Client, chs: ChanState, until: float) -> bool:
    """True only when ``STREAM.INFO``, answered before the loop-clock ``until`` (the
    publication's deadline), says the channel's stream does not exist."""
    with anyio.CancelScope(deadline=until):
        try:
            return await c.stream_info(chs.stream) is None
        except CallFailed:
            pass
    return False  # cannot tell (a leaderless stream's read may go unanswered): not "gone"


async def publish(
    c: Client, envelope: Envelope, deadline: float, limit: int, archive: bool
) -> PublishOutcome:
    pid = envelope.publication_id
    if envelope.kind == "dlq":
        raise ValidationError(
            "dead letters are stored by settle(Terminal), not published",
            field="kind",
            value="dlq",
        )
    nc = c.ready() or await c.conn()
    chs = c.chans.get(envelope.channel) or await chan(c, envelope.channel)
    size = len(envelope.body)
    if size > limit:
        return Rejected(pid, f"payload {size} bytes exceeds max_payload_bytes {limit}")
    now = loop_time()
    if deadline <= now:
        return Rejected(pid, "deadline passed before the publication was sent")
    pubs, created = c.pubs, chs.created
    try:
        out = await send(c, nc, chs, envelope, deadline - now)
    except BaseException:  # cancelled in flight: the request may have left (a late store)
        if pubs.get(pid) is None:
            pubs.put(pid, (PublicationUnknown(pid, CANCELLED), now, envelope))
        raise
    first = pubs.get(pid)
    if first is None or not isinstance(first[0], Accepted):  # once stored, it stays stored
        pubs.put(pid, (out, now if first is None else first[1], envelope))
    if isinstance(out, Accepted) and not out.duplicate:
        if _index(c, chs, out.sequence, envelope, created):
            await flush_index(c, chs)  # a buffered publish: no round trip
        if archive:
            await archive_copy(c, nc, chs, envelope)
    return out


async def archive_copy(c: Client, nc: Any, chs: ChanState, env: Envelope) -> None:
    """Copy an accepted publication to the channel's archive (one per event id). A failed
    copy does not undo the publication; it is kept in ``c.archive_errors``."""
    subject = _profiles.arc_subject(c.names, chs.id, env.event_id)
    hdrs = _profiles.archive_headers(env, _codec.headers(env, False))
    try:
        msg = await _api.request(nc, subject, env.body, c.request_timeout, headers=hdrs)
        answer = decode_pub_ack(msg.data).error
        err = "" if answer is None else str(_api.api_error(answer))
    except (CallFailed, msgspec.DecodeError) as exc:
        err = str(exc)
    if err:
        c.archive_errors.append(f"{env.publication_id}: {err}")
        del c.archive_errors[:-64]


async def observe_publication(c: Client, envelope: Envelope) -> PublishOutcome:
    """What this client knows about ``envelope.publication_id`` (see the module docstring)."""
    pid = envelope.publication_id
    chs = await chan(c, envelope.channel)
    entry = c.pubs.get(pid)
    if entry is None:
        return PublicationUnresolvable(
            pid, "this client never sent it; JetStream has no lookup by publication id"
        )
    out, first_at, env = entry
    if isinstance(out, Accepted):
        return Accepted(pid, out.sequence, False)
    if not isinstance(out, PublicationUnknown):
        return out  # type: ignore[no-any-return]
    window = chs.spec.dedup_window_seconds
    now = loop_time()
    if window <= 0 or now >= first_at + window:
        return PublicationUnresolvable(
            pid, "outside the dedup window: a re-publish would store a second copy"
        )
    nc = await c.conn()
    timeout = min(c.request_timeout, first_at + window - now)
    created = chs.created
    res = await send(c, nc, chs, env, timeout)
    if isinstance(res, Accepted):
        c.pubs.put(pid, (res, first_at, env))
        # stored at res.sequence is our own envelope (first write wins, and it was ours)
        if _index(c, chs, res.sequence, env, created):
            await flush_index(c, chs)
        return Accepted(pid, res.sequence, False)
    if isinstance(res, Rejected) and res.reason.startswith(_SAYS_NOTHING_OF_THE_FIRST):
        # the re-publish was not sent, or no stream leader answered it (one is being elected):
        # that is about this attempt; the first may still have been stored by a majority
        return PublicationUnknown(pid, f"still unknown: {res.reason}")
    return res


#: reasons of a re-publish's Rejected that say nothing about the first attempt
_SAYS_NOTHING_OF_THE_FIRST = ("not sent", "not stored: no stream leader answered")
