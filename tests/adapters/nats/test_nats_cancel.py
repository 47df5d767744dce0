"""A settle cancelled at the exact await where the server's evidence had just arrived (real
nats-server, asyncio and trio).

``test_nats_differential.py::TestCancellation`` once saw the adapter report 5 drops where the
server had 4 (trio, a loaded CI machine): a settle cancelled after the server's ack metric had
woken it, but before it looked, consumed the evidence and dropped it. Retried, the settle found
no evidence (the server had applied the first ack), answered ``SettleStale`` and counted the
message as removed under a live lease: once evicted it was a drop, though the server had it
acked. Load made the window; here the cancellation is injected at that await: the asyncio task
running ``_settle._send`` is cancelled by the metric's own callback, right after it set the
waiter — the same on both backends (the trio bridge cancels that task the same way).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from _nats_helpers import backend
from videoflow_aio.adapters.nats import _settle
from videoflow_aio.contracts import Known
from videoflow_aio.contracts.messaging import (
    Accepted,
    Completed,
    SettleConfirmed,
    SettleOutcome,
    Terminal,
    make_channel,
    make_envelope,
    make_subscription,
)
from videoflow_aio.testing.servers import ServerProcess

pytestmark = [pytest.mark.anyio, pytest.mark.server, pytest.mark.vtime(False)]


class Interrupted(Exception):
    """The injected cancellation, as it leaves the adapter (a plain exception: the test's own
    scope is not cancelled, so both backends see the same thing)."""


@pytest.fixture
def srv(nats_srv: ServerProcess) -> ServerProcess:
    return nats_srv


def dl(s: float = 2.0) -> float:
    return anyio.current_time() + s


class CancelOnEvidence:
    """Cancels the task running ``_send`` once the evidence for its settle woke it (armed
    for one settle)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.armed = False
        self.fired = False
        self.task: asyncio.Task[Any] | None = None
        send, recorder = _settle._send, _settle.Evidence._recorder

        async def cancellable_send(*args: Any, **kwargs: Any) -> Any:
            task = asyncio.current_task()
            assert task is not None
            self.task = task
            try:
                return await send(*args, **kwargs)
            except asyncio.CancelledError:
                if not self.fired:
                    raise
                task.uncancel()
                raise Interrupted from None
            finally:
                self.task = None

        def cancelling_recorder(ev: Any, nak: bool) -> Callable[[Any], Any]:
            inner = recorder(ev, nak)

            async def record(msg: Any) -> None:
                woke = len(ev.waiting)
                await inner(msg)
                if self.armed and self.task is not None and len(ev.waiting) < woke:
                    self.armed, self.fired = False, True
                    self.task.cancel()  # the settle is woken; cancelled before it looks

            return record

        monkeypatch.setattr(_settle, "_send", cancellable_send)
        monkeypatch.setattr(_settle.Evidence, "_recorder", cancelling_recorder)


@pytest.mark.parametrize("outcome", [Completed(), Terminal("bad")], ids=["ack", "term"])
async def test_a_settle_cancelled_as_its_evidence_came_is_confirmed_on_retry(
    srv: ServerProcess, monkeypatch: pytest.MonkeyPatch, outcome: SettleOutcome
) -> None:
    inject = CancelOnEvidence(monkeypatch)
    b = backend(srv)
    ch = make_channel("f", "r", "c", "work", "limits", max_msgs=2)
    sub = make_subscription(ch.channel, "w", ack_wait_seconds=10.0)
    await b.ensure_channel(ch, "op-c")
    await b.ensure_subscription(sub, "op-s")
    try:
        first = await b.publish(make_envelope(ch.channel, "p1"), dl())
        assert isinstance(first, Accepted), first
        (d,) = await b.receive(sub.id, 1, 1 << 20, dl())
        inject.armed = True
        with pytest.raises(Interrupted):
            await b.settle(d.token, outcome, "s1")
        assert inject.fired
        again = await b.settle(d.token, outcome, "s1")  # the caller retries what it never heard
        for pid in ("p2", "p3"):  # p1 is evicted, acked
            assert isinstance(await b.publish(make_envelope(ch.channel, pid), dl()), Accepted)
        seen = await b.observe_subscription(sub.id)
        assert isinstance(seen, Known), seen
        # was (SettleStale, 1): the acked p1 counted as removed under a live lease
        assert (type(again), seen.value.dropped) == (SettleConfirmed, 0), (again, seen.value)
        assert seen.value.pending == 2, seen.value
    finally:
        await b.aclose()
