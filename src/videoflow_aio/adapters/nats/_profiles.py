"""The optional profiles on JetStream: durable control records and the archive.

* ``durable_control`` (MSG-018): a per-channel stream ``…__ctl`` on ``<base>.ctl.<key>`` with
  ``max_msgs_per_subject=1``. A record's version is its stream sequence; ``commit_control`` is a
  publish with ``Nats-Expected-Last-Subject-Sequence`` (0: must not exist), so the server
  decides the compare-and-set (``10071 wrong last sequence`` → False).
* ``archive`` (MSG-024): a per-channel stream ``…__arc`` on ``<base>.arc.<event id>`` with
  ``max_age`` = the horizon and one message per event id; every accepted publication is copied
  there. ``close`` does not delete it, so a replay outlives the run's channels; the server
  expires it past the horizon.
"""

from __future__ import annotations

import base64
from typing import Any

from ...contracts.errors import BackendUnavailable, OutcomeUnknown
from ...contracts.messaging import ChannelId, Envelope
from . import _api, _codec
from ._api import ApiError, CallFailed, NoAnswer, map_exceptions, unavailable
from ._names import Names, escape
from ._wire import Api, MsgGet, StoredMessage, decode_pub_ack

NS = 1_000_000_000
WRONG_LAST_SEQUENCE = 10071


def ctl_stream(names: Names, ch: ChannelId) -> str:
    return names.stream(ch) + "__ctl"


def arc_stream(names: Names, ch: ChannelId) -> str:
    return names.stream(ch) + "__arc"


def ctl_subject(names: Names, ch: ChannelId, key: str) -> str:
    return f"{names.base(ch)}.ctl.{escape(key)}"


def arc_subject(names: Names, ch: ChannelId, event_id: str) -> str:
    return f"{names.base(ch)}.arc.{escape(event_id)}"


def stream_configs(
    names: Names, ch: ChannelId, replicas: int, control: bool, horizon: float | None
) -> list[dict[str, Any]]:
    """The side streams the offered profiles need for channel ``ch``."""
    out: list[dict[str, Any]] = []
    if control:
        out.append(
            {
                "name": ctl_stream(names, ch),
                "subjects": [f"{names.base(ch)}.ctl.>"],
                "storage": "file",
                "num_replicas": replicas,
                "max_msgs_per_subject": 1,
                "duplicate_window": NS,
            }
        )
    if horizon is not None:
        out.append(
            {
                "name": arc_stream(names, ch),
                "subjects": [f"{names.base(ch)}.arc.>"],
                "storage": "file",
                "num_replicas": replicas,
                "max_msgs_per_subject": 1,
                "max_age": int(horizon * NS),
                "duplicate_window": min(int(horizon * NS), 120 * NS),
            }
        )
    return out


async def commit(
    nc: Any, names: Names, ch: ChannelId, key: str, expected: str | None, value: bytes, t: float
) -> bool:
    """Write ``value`` under ``key`` if its version is ``expected``; False when it moved on."""
    if expected is None:
        last = "0"
    else:
        if not expected.isdigit():
            return False  # not a version this adapter issued: it cannot be current
        last = expected
    hdrs = {"Nats-Expected-Last-Subject-Sequence": last}
    errors = map_exceptions(
        {
            NoAnswer: lambda e: OutcomeUnknown(
                f"commit_control {key!r}: {e}", operation="commit_control"
            ),
            CallFailed: lambda e: BackendUnavailable(
                f"commit_control {key!r}: {e}", backend="nats"
            ),
        }
    )
    with errors:
        msg = await _api.request(nc, ctl_subject(names, ch, key), value, t, headers=hdrs)
    err = decode_pub_ack(msg.data).error
    if err is not None:
        if err.err_code == WRONG_LAST_SEQUENCE:
            return False
        raise BackendUnavailable(f"commit_control {key!r}: {_api.api_error(err)}", backend="nats")
    return True


async def last(api: Api, stream: str, subject: str) -> tuple[StoredMessage | None, bytes | None]:
    """The newest message on ``subject`` (the stored message and its body), or (None, None)."""
    with unavailable(f"cannot read {subject}"):
        try:
            got = await api(f"STREAM.MSG.GET.{stream}", {"last_by_subj": subject}, MsgGet)
        except ApiError as exc:
            if exc.err_code in (_api.NO_MESSAGE_FOUND, _api.STREAM_NOT_FOUND):
                return None, None
            raise
    m = got.message
    return m, base64.b64decode(m.data or "")


def archive_headers(env: Envelope, base: dict[str, str]) -> dict[str, str]:
    hdrs = dict(base)
    hdrs["Vf-Kind"] = env.kind
    if env.partition_key is not None:
        hdrs["Vf-Pk"] = env.partition_key
    hdrs.setdefault("Vf-Pid", env.publication_id)
    hdrs.pop("Nats-Msg-Id", None)
    return hdrs


async def replay(api: Api, names: Names, ch: ChannelId, event_id: str) -> Envelope | None:
    """The archived envelope of ``event_id``, or None (expired, or never archived)."""
    m, body = await last(api, arc_stream(names, ch), arc_subject(names, ch, event_id))
    if m is None or body is None:
        return None
    src = _codec.parse_headers(base64.b64decode(m.hdrs or ""))
    meta = _codec.meta_dec(src["Vf"]) if "Vf" in src else _codec.Meta()
    pid = src.get("Vf-Pid", event_id)
    return Envelope(
        channel=ch,
        publication_id=pid,
        body=body,
        event_id=pid if meta.e is None else meta.e,
        kind=src.get("Vf-Kind", "data"),
        partition_key=src.get("Vf-Pk"),
        event_ts=meta.ts,
        source_epoch=meta.ep,
        source_offset=meta.off,
        headers=meta.h,
    )
