"""Helpers for the NATS adapter tests: fresh backends on one server, pausing it, raw API calls."""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from videoflow_aio.adapters.nats import JetStreamAdmin, JetStreamMessagingBackend
from videoflow_aio.conformance.providers.nats import _all_stopped
from videoflow_aio.contracts.messaging import Accepted, make_envelope
from videoflow_aio.testing.servers import ServerProcess, start_nats

_n = itertools.count(1)


def prefix() -> tuple[str, str]:
    """A fresh (stream_prefix, subject_prefix) pair, so tests never see each other's streams."""
    i = next(_n)
    return f"P{os.getpid()}x{i}", f"p{os.getpid()}x{i}"


def backend(srv: ServerProcess, names: tuple[str, str] | None = None, **kw: Any) -> Any:
    sp, subp = names or prefix()
    kw.setdefault("request_timeout", 1.0)
    return JetStreamMessagingBackend(srv.url, stream_prefix=sp, subject_prefix=subp, **kw)


@contextlib.asynccontextmanager
async def paused(srv: ServerProcess) -> AsyncIterator[None]:
    """SIGSTOP the server (every thread stopped) for the block; SIGCONT after, always."""
    os.kill(srv.pid, signal.SIGSTOP)
    try:
        with anyio.fail_after(2):
            while not _all_stopped(srv.pid):  # noqa: ASYNC110 - polling another process
                await anyio.sleep(0.001)
        yield
    finally:
        os.kill(srv.pid, signal.SIGCONT)


async def publish(b: Any, ch: Any, *pids: str, within: float = 2.0) -> list[int]:
    """Publish one message per id into ``ch`` (a ChannelSpec); each must be Accepted: their
    sequences."""
    out = []
    for pid in pids:
        res = await b.publish(make_envelope(ch.channel, pid), anyio.current_time() + within)
        assert isinstance(res, Accepted), res
        out.append(res.sequence)
    return out


async def eventually(
    probe: Callable[[], Awaitable[Any]], ok: Callable[[Any], bool], within: float = 5.0
) -> Any:
    """Call ``probe`` until ``ok(result)`` (real time; a server acts on its own clock)."""
    last: Any = None
    with anyio.move_on_after(within):
        while True:
            last = await probe()
            if ok(last):
                return last
            await anyio.sleep(0.05)
    return last


def admin(b: JetStreamMessagingBackend) -> JetStreamAdmin:
    """An administrator's own connection to ``b``'s server and namespace (close it after)."""
    names = b.names
    return JetStreamAdmin(
        b.servers, stream_prefix=names.stream_prefix, subject_prefix=names.subject_prefix
    )


async def raw(
    b: JetStreamMessagingBackend, subject: str, body: dict[str, Any] | None = None
) -> Any:
    """A raw JetStream API call on an administrator's connection (errors raised)."""
    a = admin(b)
    try:
        return await a.request(subject, body)
    finally:
        await a.aclose()


def start_restartable(store: Path) -> ServerProcess:
    """A nats-server keeping JetStream in ``store`` (outlives the process)."""
    return start_nats(data_dir=store)


def kill9_and_restart(srv: ServerProcess, store: Path) -> ServerProcess:
    """SIGKILL the server (no clean shutdown: what it had not flushed is lost) and start a
    new one on the same port and store; clients reconnect to it."""
    os.kill(srv.pid, signal.SIGKILL)
    srv.stop()  # reaps the dead process; the store is not in its directory
    return start_nats(data_dir=store, args=["-p", str(srv.port)])
