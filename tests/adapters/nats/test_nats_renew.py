"""``renew`` is sent as ``-NAK {"delay": ack_wait}`` (confirmed by its MSG_NAKED advisory), not
``+WPI`` (which the server answers the same whether or not it applied). On the real server,
both ways of renewing must be the same lease as far as the model can tell: the attempt count,
``max_deliver``, ``num_redelivered``, the order of redeliveries and the shared item credit
(``max_ack_pending``). Each test renews one delivery through the adapter (-NAK) and the
other with a raw ``+WPI`` on the same consumer, and compares.
"""

from __future__ import annotations

from typing import Any

import anyio
import nats
import pytest

from _nats_helpers import backend, raw
from videoflow_aio.contracts.messaging import (
    Accepted,
    Completed,
    Delivery,
    SettleConfirmed,
    make_channel,
    make_envelope,
    make_subscription,
)
from videoflow_aio.testing.servers import ServerProcess

pytestmark = [pytest.mark.anyio, pytest.mark.server, pytest.mark.vtime(False)]
AW = 0.6


@pytest.fixture
def srv(nats_srv: ServerProcess) -> ServerProcess:
    return nats_srv


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # a raw nats-py client sends the +WPI


async def _setup(srv: ServerProcess, **sub_kw: Any) -> tuple[Any, Any, Any, Any]:
    b = backend(srv)
    ch = make_channel("f", "r", "n", "work", "limits")
    await b.ensure_channel(ch, "op-c")
    sub = make_subscription(ch.channel, "w", ack_wait_seconds=AW, **sub_kw)
    await b.ensure_subscription(sub, "op-s")
    for pid in ("nak", "wpi"):
        out = await b.publish(make_envelope(ch.channel, pid), anyio.current_time() + 1)
        assert isinstance(out, Accepted)
    nc = await nats.connect(srv.url)
    return b, ch, sub, nc


async def _renew_both(b: Any, nc: Any, got: list[Delivery]) -> None:
    """Renew ``nak`` through the adapter and ``wpi`` with a raw +WPI request."""
    by = {d.envelope.publication_id: d for d in got}
    assert (await b.renew(by["nak"].token)).held
    await nc.request(by["wpi"].token.opaque, b"+WPI", timeout=1.0)


async def _info(b: Any, ch: Any) -> Any:
    return await raw(b, f"CONSUMER.INFO.{b.names.stream(ch.channel)}.w")


async def test_a_renewed_lease_lapses_into_the_same_next_attempt(srv: ServerProcess) -> None:
    """Renewed twice, then left to lapse: both come back as attempt 2 — a -NAK renewal is
    not counted as a delivery attempt, as +WPI is not — and num_redelivered is unchanged
    by the renewals."""
    b, ch, sub, nc = await _setup(srv, max_deliver=3)
    got = await b.receive(sub.id, 2, 1 << 20, anyio.current_time() + 1)
    for _ in range(2):
        await anyio.sleep(AW / 2)
        await _renew_both(b, nc, got)
        assert (await _info(b, ch))["num_redelivered"] == 0
    again: list[Delivery] = []
    with anyio.fail_after(5):
        while len(again) < 2:
            again += await b.receive(sub.id, 2, 1 << 20, anyio.current_time() + 1)
    assert sorted((d.envelope.publication_id, d.attempt) for d in again) == [
        ("nak", 2),
        ("wpi", 2),
    ]
    assert (await _info(b, ch))["num_redelivered"] == 2
    await nc.close()
    await b.aclose()


async def test_a_renewed_lease_holds_the_item_credit(srv: ServerProcess) -> None:
    """item_credit=2 (max_ack_pending): both renewed leases keep their slot past the first
    ack wait; settled, they free it. Nothing is redelivered meanwhile."""
    b, ch, sub, nc = await _setup(srv, item_credit=2, max_deliver=3)
    await b.publish(make_envelope(ch.channel, "third"), anyio.current_time() + 1)
    got = await b.receive(sub.id, 3, 1 << 20, anyio.current_time() + 1)
    assert len(got) == 2  # the credit
    for _ in range(3):  # past the first ack wait
        await anyio.sleep(AW / 2)
        await _renew_both(b, nc, got)
    assert await b.receive(sub.id, 3, 1 << 20, anyio.current_time() + 0.2) == []
    info = await _info(b, ch)
    assert (info["num_ack_pending"], info["num_pending"], info["num_redelivered"]) == (2, 1, 0)
    by = {d.envelope.publication_id: d for d in got}
    ans = await b.settle(by["nak"].token, Completed(), "s")
    assert isinstance(ans, SettleConfirmed) and not ans.duplicate
    await nc.request(by["wpi"].token.opaque, b"+ACK", timeout=1.0)  # its lease is not ours
    third = await b.receive(sub.id, 3, 1 << 20, anyio.current_time() + 1)
    assert [(d.envelope.publication_id, d.attempt) for d in third] == [("third", 1)]
    await nc.close()
    await b.aclose()


async def test_renewals_keep_the_order_of_redeliveries(srv: ServerProcess) -> None:
    """Two leases renewed at different times lapse in the order of their renewals, -NAK or
    +WPI alike: the one renewed earlier is redelivered first."""
    b, _ch, sub, nc = await _setup(srv, max_deliver=3)
    got = await b.receive(sub.id, 2, 1 << 20, anyio.current_time() + 1)
    by = {d.envelope.publication_id: d for d in got}
    await anyio.sleep(AW / 3)
    await nc.request(by["wpi"].token.opaque, b"+WPI", timeout=1.0)  # renewed first
    await anyio.sleep(AW / 3)
    assert (await b.renew(by["nak"].token)).held  # renewed second
    first = await b.receive(sub.id, 1, 1 << 20, anyio.current_time() + 3)
    assert [(d.envelope.publication_id, d.attempt) for d in first] == [("wpi", 2)]
    second = await b.receive(sub.id, 1, 1 << 20, anyio.current_time() + 3)
    assert [(d.envelope.publication_id, d.attempt) for d in second] == [("nak", 2)]
    await nc.close()
    await b.aclose()


async def test_where_they_differ_a_lapsed_lease_renewed(srv: ServerProcess) -> None:
    """The one difference, and why -NAK: a lease that has lapsed on the server but was not
    redelivered yet (a renewal racing the expiry). -NAK with a delay takes it off the
    redelivery queue — the renewal holds, and says so; +WPI leaves it there — the message is
    redelivered although the renewer was told nothing else (+WPI has no answer of its own).
    The adapter sends neither past its own (earlier) deadline: this is the race window."""
    b, _ch, sub, nc = await _setup(srv, max_deliver=3)
    got = await b.receive(sub.id, 2, 1 << 20, anyio.current_time() + 1)
    by = {d.envelope.publication_id: d for d in got}
    await anyio.sleep(AW + 0.2)  # lapsed on the server: both wait for redelivery
    delay = f'-NAK {{"delay": {int(AW * 1e9)}}}'.encode()
    await nc.request(by["nak"].token.opaque, delay, timeout=1.0)
    await nc.request(by["wpi"].token.opaque, b"+WPI", timeout=1.0)
    again = await b.receive(sub.id, 2, 1 << 20, anyio.current_time() + 0.3)
    assert [(d.envelope.publication_id, d.attempt) for d in again] == [("wpi", 2)]
    await nc.close()
    await b.aclose()
