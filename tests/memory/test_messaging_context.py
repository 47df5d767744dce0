"""Every messaging backend is an async context manager, and ``close`` is not ``aclose``.

``async with Backend(...) as b:`` gives the backend itself and closes the client on the way
out (``aclose``), even when the block raises; the channels on the broker stay. ``close(owned,
expected_generation)`` is the other one: it deletes channels and leaves the client open.
"""

from __future__ import annotations

import anyio
import pytest

from videoflow_aio import vtime
from videoflow_aio.adapters.nats import CoreNatsMessagingBackend, JetStreamMessagingBackend
from videoflow_aio.contracts.messaging import MessagingBackend, make_channel
from videoflow_aio.memory.messaging import MemoryMessagingBackend
from videoflow_aio.testing.servers import ServerProcess

BACKENDS: list[vtime.Backend] = ["asyncio", "trio"]


class Counting(MemoryMessagingBackend):
    """The model, counting its ``aclose`` calls."""

    def __init__(self) -> None:
        super().__init__()
        self.aclosed = 0

    async def aclose(self) -> None:
        self.aclosed += 1
        await super().aclose()


@pytest.mark.parametrize("backend", BACKENDS)
def test_async_with_yields_the_backend_and_acloses_it_even_on_error(
    backend: vtime.Backend,
) -> None:
    async def main() -> None:
        spec = make_channel("f", "r", "n", "work", "limits")
        async with Counting() as b:
            assert isinstance(b, Counting)
            await b.ensure_channel(spec, "op-1")
        assert b.aclosed == 1
        assert await b.channel_ids() == [spec.channel]  # aclose deleted nothing
        with pytest.raises(RuntimeError, match="boom"):
            async with b:
                raise RuntimeError("boom")
        assert b.aclosed == 2

    vtime.run(main, backend=backend)


def test_the_protocol_is_defined_once_on_the_contract() -> None:
    for cls in (MemoryMessagingBackend, JetStreamMessagingBackend, CoreNatsMessagingBackend):
        assert issubclass(cls, MessagingBackend)
        # no backend re-implements it; the NATS ones are only wrapped by the trio bridge
        entry = getattr(cls.__aexit__, "__wrapped__", cls.__aexit__)
        assert entry is MessagingBackend.__aexit__, cls


@pytest.mark.parametrize("backend", BACKENDS)
def test_nats_backends_close_their_connection_and_keep_the_channels(
    nats_srv: ServerProcess, backend: vtime.Backend
) -> None:
    async def main() -> None:
        spec = make_channel("ctx", backend, "n", "work", "limits")
        async with JetStreamMessagingBackend(nats_srv.url) as b:
            await b.ensure_channel(spec, "op-1")
            assert b._c.nc is not None and b._c.nc.is_connected
        assert b._c.nc is None  # the connection is closed...
        async with JetStreamMessagingBackend(nats_srv.url) as again:
            assert spec.channel in await again.channel_ids()  # ...the stream is not
            removed = await again.close([spec.channel], "")  # close() deletes it
            assert removed.removed == (spec.channel,)
            assert spec.channel not in await again.channel_ids()
        async with CoreNatsMessagingBackend(nats_srv.url) as core:
            await core.ensure_channel(spec, "op-2")
            assert core._nc is not None
        assert core._nc is None

    anyio.run(main, backend=backend)
