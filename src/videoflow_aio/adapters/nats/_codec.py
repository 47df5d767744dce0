"""Envelopes on the wire: the headers a publication carries and how they read back.

A message carries ``Nats-Msg-Id`` (the publication id, when the channel dedups) or ``Vf-Pid``,
and in ``Vf`` (JSON) the envelope fields beyond id, kind and partition key — which the subject
carries (see ``_names``).
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from ...contracts.messaging import ChannelId, Envelope
from ._names import Names


class Meta(msgspec.Struct, omit_defaults=True):
    """Envelope fields beyond id/kind/partition, carried in the ``Vf`` header."""

    e: str | None = None
    ts: float | None = None
    ep: str | None = None
    off: int | None = None
    h: dict[str, str] = {}


meta_enc = msgspec.json.Encoder().encode
meta_dec = msgspec.json.Decoder(Meta).decode
_EMPTY = Meta()


def headers(env: Envelope, dedup: bool) -> dict[str, str]:
    """The headers publishing ``env`` sends (``Nats-Msg-Id`` only when the channel dedups)."""
    hdrs = {"Nats-Msg-Id" if dedup else "Vf-Pid": env.publication_id}
    if (
        env.event_id == env.publication_id
        and env.event_ts is None
        and env.source_epoch is None
        and env.source_offset is None
        and not env.headers
    ):
        return hdrs  # nothing beyond the id (the common case: no Meta to build)
    meta = Meta(
        e=None if env.event_id == env.publication_id else env.event_id,
        ts=env.event_ts,
        ep=env.source_epoch,
        off=env.source_offset,
        h=env.headers,
    )
    if meta != _EMPTY:
        hdrs["Vf"] = meta_enc(meta).decode()
    return hdrs


def envelope(
    names: Names,
    ch: ChannelId,
    subject: str,
    body: bytes,
    hdrs: Mapping[str, str] | None,
    seq: int,
) -> Envelope:
    """The envelope a stored message at ``seq`` on ``subject`` stands for."""
    hdrs = hdrs or {}
    kind, pk = names.kind_of(ch, subject)
    pid = hdrs.get("Nats-Msg-Id") or hdrs.get("Vf-Pid") or f"#{seq}"
    raw = hdrs.get("Vf")
    meta = meta_dec(raw) if raw else _EMPTY
    return Envelope(
        channel=ch,
        publication_id=pid,
        body=body,
        event_id=pid if meta.e is None else meta.e,
        kind=kind,
        partition_key=pk,
        event_ts=meta.ts,
        source_epoch=meta.ep,
        source_offset=meta.off,
        headers=meta.h,
    )


def parse_headers(raw: bytes) -> dict[str, str]:
    """``NATS/1.0\\r\\nKey: value\\r\\n…`` → dict (the raw form STREAM.MSG.GET returns)."""
    out: dict[str, str] = {}
    for line in raw.decode(errors="replace").split("\r\n")[1:]:
        key, sep, value = line.partition(":")
        if sep:
            out[key.strip()] = value.strip()
    return out
