"""The ``nats`` provider: the messaging cases on a real nats-server (JetStream and Core NATS).

Without ``url=`` it starts one ``nats-server -js`` on 127.0.0.1 (once, in ``setup``); with
``url=`` it uses that server. Every ``h.open()`` gets its own stream/subject prefix (so cases
never see each other's channels), deleted when the case ends. ``h.open(core_only=True)`` gives
a :class:`CoreNatsMessagingBackend`.

Cases run in real time with durations scaled by ``scale`` (default 0.05: a case's ack wait of
30 s becomes 1.5 s, a 5 s deadline 0.25 s).

Controls: ``pause_acceptance`` / ``resume_acceptance`` stop and continue the test-owned server
process (SIGSTOP / SIGCONT): a publish that timed out meanwhile is stored late, exactly as in
the model. With ``url=`` the server is not ours, so they are not offered. Every other model
control (``cancel_publication``, ``fail_observation``, …) has no counterpart on a real server
and its cases skip with that reason.

Runs under asyncio and trio: under trio the adapters cross ``adapters._trio_bridge`` (one
trio-asyncio loop per case run, where the nats-py connection lives), and so does the clean-up.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from ...adapters._extras import missing
from ...contracts.messaging import ChannelId, PublishOutcome
from ...testing.servers import ServerProcess, binary_unavailable, start_nats
from .._case import Case
from .._harness import Harness, Skip
from .._provider import Provider, register_provider

SERVER_CONTROLS = frozenset({"pause_acceptance", "resume_acceptance"})
# options the JetStream adapter takes from a case's h.open(...)
_JS_OPTIONS = (
    "max_payload_bytes",
    "dedup_window_seconds",
    "latest_per_key",
    "durable_control",
    "archive",
    "archive_horizon_seconds",
)
_CORE_OPTIONS = ("client_queue_limit", "max_payload_bytes")
_count = itertools.count(1)


class ServerControls:
    """The model controls a real server can perform: pause/resume acceptance by SIGSTOP/SIGCONT
    of the test-owned ``nats-server`` process (every channel pauses together)."""

    def __init__(self, server: ServerProcess | None) -> None:
        self._server = server

    def _signal(self, sig: int) -> int:
        if self._server is None:
            raise Skip("pause/resume need the test-owned server (not given url=)")
        os.kill(self._server.pid, sig)
        return self._server.pid

    async def pause_acceptance(self, channel_id: ChannelId) -> None:
        """Stop the whole server: publications get no answer until resumed. Returns once
        every thread of the process is stopped (SIGSTOP takes effect asynchronously)."""
        pid = self._signal(signal.SIGSTOP)
        with anyio.move_on_after(2.0):
            while not _all_stopped(pid):  # noqa: ASYNC110 - polling another process
                await anyio.sleep(0.001)

    def resume_acceptance(self, channel_id: ChannelId) -> list[PublishOutcome]:
        """Continue the server: what it received while stopped is stored now. The outcomes of
        held publications are not reported back by the server, so the list is empty."""
        self._signal(signal.SIGCONT)
        return []


def _all_stopped(pid: int) -> bool:
    """Whether every thread of ``pid`` is in state T (stopped); True where /proc is absent."""
    tasks = Path(f"/proc/{pid}/task")
    if not tasks.is_dir():
        return True
    for t in tasks.iterdir():
        try:
            stat = (t / "stat").read_text()
        except OSError:
            continue
        if stat.rsplit(")", 1)[-1].split()[0] not in ("T", "t"):
            return False
    return True


class NatsProvider(Provider):
    """Runs the messaging cases on nats-server."""

    name = "nats"
    real_time = True

    def __init__(self, url: str | None = None, scale: float = 0.05) -> None:
        self.url = url
        self.scale = scale
        self._server: ServerProcess | None = None

    def contracts(self) -> frozenset[str]:
        return frozenset({"messaging"})

    def unavailable(self) -> str | None:
        why = missing("nats")
        if why is not None:
            return why
        if self.url is None:
            return binary_unavailable("nats-server")
        return None

    def capabilities(self, contract: str) -> frozenset[str] | None:
        return frozenset({"core_only", "latest_per_key", "durable_control", "archive"})

    def controls(self, contract: str) -> frozenset[str] | None:
        return SERVER_CONTROLS if self.url is None or self._server is not None else frozenset()

    def setup(self) -> None:
        if self.url is None:
            self._server = start_nats()
            self.url = self._server.url

    def close(self) -> None:
        if self._server is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._server.pid, signal.SIGCONT)
            self._server.stop()
            self._server = None
            self.url = None

    @asynccontextmanager
    async def harness(self, case: Case) -> AsyncIterator[Harness]:
        from ...adapters.nats import CoreNatsMessagingBackend, JetStreamMessagingBackend

        assert self.url is not None, "setup() was not called"
        url = self.url
        opened: list[Any] = []
        tag = f"{case.id.replace('-', '')}x{next(_count)}x{uuid.uuid4().hex[:6]}"

        async def factory(**options: Any) -> Any:
            core = bool(options.pop("core_only", False))
            allowed = _CORE_OPTIONS if core else _JS_OPTIONS
            extra = sorted(k for k in options if k not in allowed)
            if extra:
                raise Skip(f"the nats provider cannot honour {extra} (model-only options)")
            backend: Any
            if core:
                backend = CoreNatsMessagingBackend(url, subject_prefix=f"c{tag}", **options)
            else:
                backend = JetStreamMessagingBackend(
                    url,
                    stream_prefix=f"T{tag}",
                    subject_prefix=f"t{tag}",
                    request_timeout=max(1.0, 20 * self.scale),
                    **options,
                )
            opened.append(backend)
            return backend

        try:
            yield Harness(
                provider=self.name,
                contract=case.contract,
                factory=factory,
                controls_for=lambda _b: ServerControls(self._server),
                scale=self.scale,
                allowed_controls=case.controls,
            )
        finally:
            if self._server is not None:  # never leave the shared server stopped
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self._server.pid, signal.SIGCONT)
            for b in reversed(opened):
                await _cleanup(b)


async def _cleanup(backend: Any) -> None:
    """Delete the case's streams (best effort: the case is over), then close the client."""
    from ...adapters.nats import JetStreamMessagingBackend
    from ...adapters.nats._bridge import on_client_loop

    if isinstance(backend, JetStreamMessagingBackend):
        with contextlib.suppress(Exception):
            await on_client_loop(backend, _drop_streams, backend)
    await backend.aclose()


async def _drop_streams(backend: Any) -> None:
    page = await backend._api("STREAM.NAMES", {})
    for name in page.get("streams") or []:
        if name.startswith(backend.names.stream_prefix + "__"):
            await backend._api(f"STREAM.DELETE.{name}")


register_provider("nats", NatsProvider)
