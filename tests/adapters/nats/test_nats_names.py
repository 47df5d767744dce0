"""Server-side names of the NATS adapter: escaping is reversible and never collides."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from videoflow_aio.adapters.nats import _publish
from videoflow_aio.adapters.nats._names import Names, escape, unescape
from videoflow_aio.contracts.messaging import ChannelId, SubscriptionId

token = st.text(min_size=1, max_size=12).filter(lambda t: not any(c in t for c in " .*>\t\n"))


@given(token)
def test_escape_round_trips_into_a_safe_name(t: str) -> None:
    e = escape(t)
    assert unescape(e) == t
    assert "__" not in e
    assert all(c.isascii() and (c.isalnum() or c in "-_") for c in e)


@given(token, token, token, token, token, token)
def test_streams_of_different_channels_differ(
    a: str, b: str, c: str, x: str, y: str, z: str
) -> None:
    names = Names()
    one, two = ChannelId(a, b, c), ChannelId(x, y, z)
    assert names.channel_of(names.stream(one)) == one
    assert (names.stream(one) == names.stream(two)) == (one == two)
    assert names.channel_of(names.dlq_stream(one)) is None  # side streams are not channels


def test_subjects_and_filters() -> None:
    n = Names("VF", "vf")
    ch = ChannelId("f", "r", "n")
    assert n.subject(ch, "data", None) == "vf.f.r.n.data.n"
    assert n.subject(ch, "eos", "3") == "vf.f.r.n.eos.k.3"
    assert n.filter(ch, "data", None) == "vf.f.r.n.data.>"
    assert n.filter(ch, "data", 3) == "vf.f.r.n.data.k.3"
    assert n.kind_of(ch, "vf.f.r.n.eos.k.3") == ("eos", "3")
    assert n.kind_of(ch, "vf.f.r.n.data.n") == ("data", None)
    assert n.kind_of(ch, "vf.f.r.n.dlq.w.17.k.3") == ("dlq", "3")
    assert n.filter(ch, "dlq", 3) == "vf.f.r.n.dlq.*.*.k.3"
    sub = SubscriptionId(ch, "w")
    assert n.dlq_subject(sub, 17, "3") == "vf.f.r.n.dlq.w.17.k.3"
    assert n.dlq_count_filter(sub, 17) == "vf.f.r.n.dlq.w.17.>"


def test_publish_subjects_are_cached_per_channel_and_bounded(monkeypatch: Any) -> None:
    """The publish path's subject cache answers what ``Names.subject`` answers, for every
    kind and partition key, and starts over past its bound."""
    names = Names("VF", "vf")
    ch = ChannelId("f", "r", "n")
    client: Any = SimpleNamespace(names=names)
    chs: Any = SimpleNamespace(id=ch, subjects={})
    monkeypatch.setattr(_publish, "SUBJECTS", 8)
    for _ in range(2):  # the second pass reads the cache (and refills it past the bound)
        for kind in ("data", "eos"):
            for key in (None, *map(str, range(6))):
                assert _publish.subject(client, chs, kind, key) == names.subject(ch, kind, key)
                assert len(chs.subjects) <= 8
