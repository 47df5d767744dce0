"""Typed JetStream replies (``adapters.nats._wire``): every reply the adapter reads is a Struct."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest

from videoflow_aio.adapters.nats import JetStreamMessagingBackend, _api, _channels, _wire
from videoflow_aio.contracts.messaging import (
    Accepted,
    PublicationUnknown,
    Rejected,
    make_channel,
    make_envelope,
)


class _Msg:
    def __init__(self, data: bytes) -> None:
        self.data = data


class _Answers:
    """A stand-in nats-py client answering each request with the next canned reply."""

    is_closed = False

    def __init__(self, *replies: bytes) -> None:
        self.replies = list(replies)

    async def request(self, subject: str, payload: bytes, **_: Any) -> _Msg:
        return _Msg(self.replies.pop(0))


def test_an_info_reply_decodes_with_the_servers_defaults() -> None:
    raw = b'{"config":{"name":"S","metadata":{"a":"1"}},"state":{"last_seq":7},"created":"t"}'
    si = _wire.decoder(_wire.StreamInfo).decode(raw)
    assert (si.config.name, si.config.meta, si.state.last_seq, si.state.messages) == (
        "S",
        {"a": "1"},
        7,
        0,
    )
    assert si.config.max_msgs == -1 and si.error is None and si.cluster is None
    ci = _wire.decoder(_wire.ConsumerInfo).decode(b'{"ack_floor":{"stream_seq":3}}')
    assert (ci.ack_floor.stream_seq, ci.config.opt_start_seq, ci.config.meta) == (3, None, {})


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_error_reply_is_a_typed_api_error_and_garbage_no_answer() -> None:
    nc = _Answers(
        b'{"error":{"code":404,"err_code":10059,"description":"stream not found"}}', b"<html>"
    )
    with pytest.raises(_api.ApiError) as info:
        await _api.api(nc, "$JS.API.STREAM.INFO.S", None, 1.0, _wire.StreamInfo)
    assert (info.value.code, info.value.err_code) == (404, _api.STREAM_NOT_FOUND)
    with pytest.raises(_api.NoAnswer, match="undecodable"):
        await _api.api(nc, "$JS.API.STREAM.INFO.S", None, 1.0, _wire.StreamInfo)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_publish_reads_the_pub_ack_typed() -> None:
    b = JetStreamMessagingBackend("nats://127.0.0.1:1")
    c = b._c
    c.nc = _Answers(
        b'{"stream":"S","seq":5,"duplicate":true}',
        b'{"error":{"code":503,"err_code":10077,"description":"maximum messages exceeded"}}',
        b'{"stream":"S"}',  # no sequence: not a PubAck
    )
    c.loop = asyncio.get_running_loop()
    ch = make_channel("f", "r", "n", "work", retention="limits")
    c.chans[ch.channel] = _channels.new_chan(c, ch, "created")
    deadline = anyio.current_time() + 5
    out = [await b.publish(make_envelope(ch.channel, f"p{i}"), deadline) for i in range(3)]
    assert out[0] == Accepted("p0", 5, True)
    assert isinstance(out[1], Rejected) and "(503/10077)" in out[1].reason
    assert isinstance(out[2], PublicationUnknown) and "without a sequence" in out[2].reason
