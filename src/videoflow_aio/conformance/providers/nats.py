"""The ``nats`` provider: the messaging cases on a real nats-server (JetStream and Core NATS).

Without ``url=`` it starts one ``nats-server -js`` on 127.0.0.1 (once, in ``setup``), its
JetStream store in a directory of its own; with ``url=`` it uses that server. Every
``h.open()`` gets its own stream/subject prefix (so cases never see each other's channels),
deleted when the case ends. ``h.open(core_only=True)`` gives a
:class:`CoreNatsMessagingBackend`.

Cases run in real time with durations scaled by ``scale`` (default 0.05: a case's ack wait of
30 s becomes 1.5 s, a 5 s deadline 0.25 s).

Controls (:class:`NatsControls`):

* ``another_client`` — a new backend of the same kind on its own connection, in the same
  namespace (another process of the pipeline);
* ``purge``, ``delete_message``, ``delete_subscription`` — an administrator acting out of band
  on its own connection (:class:`~videoflow_aio.adapters.nats.JetStreamAdmin`);
* ``pause_acceptance`` / ``resume_acceptance`` — SIGSTOP / SIGCONT of the test-owned server
  (every channel pauses together): a publish that timed out meanwhile is stored late, as in
  the model;
* ``restart_server`` — kill -9 of the test-owned server and a restart on the same port and
  store; returns once every client of the case is connected again.

With ``url=`` the server is not ours: pause, resume and restart are not offered. The other
model controls (``cancel_publication``, ``fail_observation``) have no counterpart on a real
server and their cases skip with that reason.

Runs under asyncio and trio: under trio the adapters cross ``adapters._trio_bridge`` (one
trio-asyncio loop per case run, where the nats-py connection lives), and so does the clean-up.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import tempfile
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from ...adapters._servers import ServerProcess, binary_unavailable, start_nats
from ...contracts.messaging import ChannelId, PublishOutcome, SubscriptionId
from .._case import Case
from .._harness import Harness, Skip
from .._provider import Provider, register_provider

SERVER_CONTROLS = frozenset({"pause_acceptance", "resume_acceptance", "restart_server"})
ANY_SERVER_CONTROLS = frozenset(
    {"another_client", "purge", "delete_message", "delete_subscription"}
)
# options the JetStream adapter takes from a case's h.open(...)
_JS_OPTIONS = (
    "max_payload_bytes",
    "dedup_window_seconds",
    "latest_per_key",
    "durable_control",
    "archive",
    "archive_horizon_seconds",
)
_IGNORED = ("persistent",)  # JetStream is persistent: the option the model needs for it
_CORE_OPTIONS = ("client_queue_limit", "max_payload_bytes")
_count = itertools.count(1)
RECONNECT_WITHIN = 10.0


class NatsControls:
    """The controls the nats provider performs for one backend (see the module docstring)."""

    def __init__(self, provider: NatsProvider, backend: Any, reopen: Callable[[Any], Any]) -> None:
        self._provider = provider
        self._backend = backend
        self._reopen = reopen

    # -- another process ------------------------------------------------------------------
    async def another_client(self) -> Any:
        """A new backend like this one, on its own connection, in the same namespace."""
        return await self._reopen(self._backend)

    # -- an administrator -----------------------------------------------------------------
    def _admin(self) -> Any:
        from ...adapters.nats import JetStreamAdmin, JetStreamMessagingBackend

        b = self._backend
        if not isinstance(b, JetStreamMessagingBackend):
            raise Skip("core NATS keeps nothing an administrator could purge or delete")
        names = b.names
        return JetStreamAdmin(
            b.servers, stream_prefix=names.stream_prefix, subject_prefix=names.subject_prefix
        )

    async def purge(self, channel_id: ChannelId) -> None:
        """Purge the channel's stream (the server tells no consumer)."""
        admin = self._admin()
        try:
            await admin.purge(channel_id)
        finally:
            await admin.aclose()

    async def delete_message(self, channel_id: ChannelId, sequence: int) -> None:
        """Delete one message of the channel by sequence."""
        admin = self._admin()
        try:
            await admin.delete_message(channel_id, sequence)
        finally:
            await admin.aclose()

    async def delete_subscription(self, subscription: SubscriptionId) -> None:
        """Delete the subscription's consumer."""
        admin = self._admin()
        try:
            await admin.delete_subscription(subscription)
        finally:
            await admin.aclose()

    # -- the server process -----------------------------------------------------------------
    def _signal(self, sig: int) -> int:
        server = self._provider.server
        if server is None:
            raise Skip("pause/resume need the test-owned server (not given url=)")
        os.kill(server.pid, sig)
        return server.pid

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

    async def restart_server(self) -> None:
        """kill -9 the server, start it again on the same port and store, and wait until every
        client of the case is connected again."""
        if self._provider.server is None:
            raise Skip("restart needs the test-owned server (not given url=)")
        await anyio.to_thread.run_sync(self._provider.restart)
        with anyio.fail_after(RECONNECT_WITHIN):
            for b in self._provider.case_backends:
                while not b.connected:  # noqa: ASYNC110 - nats-py reconnects on its own
                    await anyio.sleep(0.02)


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
        self.server: ServerProcess | None = None
        self._store: Path | None = None
        self.case_backends: list[Any] = []

    def contracts(self) -> frozenset[str]:
        return frozenset({"messaging"})

    def unavailable(self) -> str | None:
        try:
            import nats  # noqa: F401
        except ImportError as exc:  # pragma: no cover - nats-py is a test dependency
            return f"nats-py is not installed: {exc}"
        if self.url is None:
            return binary_unavailable("nats-server")
        return None

    def capabilities(self, contract: str) -> frozenset[str] | None:
        return frozenset({"core_only", "latest_per_key", "durable_control", "archive"})

    def controls(self, contract: str) -> frozenset[str] | None:
        if self.url is None or self.server is not None:
            return SERVER_CONTROLS | ANY_SERVER_CONTROLS
        return ANY_SERVER_CONTROLS

    def setup(self) -> None:
        if self.url is None:
            self._store = Path(tempfile.mkdtemp(prefix="videoflow-nats-store-"))
            self.server = start_nats(data_dir=self._store)
            self.url = self.server.url

    def restart(self) -> None:
        """kill -9 the test-owned server; a new one on the same port and store (blocking)."""
        old = self.server
        assert old is not None and self._store is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(old.pid, signal.SIGKILL)
        old.stop()  # reaps it; the store is not in its directory
        self.server = start_nats(data_dir=self._store, args=["-p", str(old.port)])

    def close(self) -> None:
        if self.server is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.server.pid, signal.SIGCONT)
            self.server.stop()
            self.server = None
            self.url = None
        if self._store is not None:
            shutil.rmtree(self._store, ignore_errors=True)
            self._store = None

    @asynccontextmanager
    async def harness(self, case: Case) -> AsyncIterator[Harness]:
        from ...adapters.nats import CoreNatsMessagingBackend, JetStreamMessagingBackend

        assert self.url is not None, "setup() was not called"
        url = self.url
        opened: list[Any] = []
        self.case_backends = opened
        made: dict[int, tuple[bool, dict[str, Any]]] = {}  # id(backend) -> how it was made
        tag = f"{case.id.replace('-', '')}x{next(_count)}x{uuid.uuid4().hex[:6]}"

        def make(core: bool, options: dict[str, Any]) -> Any:
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
            made[id(backend)] = (core, options)
            opened.append(backend)
            return backend

        async def factory(**options: Any) -> Any:
            core = bool(options.pop("core_only", False))
            allowed = _CORE_OPTIONS if core else _JS_OPTIONS
            extra = sorted(k for k in options if k not in allowed + _IGNORED)
            if extra:
                raise Skip(f"the nats provider cannot honour {extra} (model-only options)")
            return make(core, {k: v for k, v in options.items() if k not in _IGNORED})

        async def reopen(backend: Any) -> Any:
            core, options = made[id(backend)]
            return make(core, dict(options))

        try:
            yield Harness(
                provider=self.name,
                contract=case.contract,
                factory=factory,
                controls_for=lambda b: NatsControls(self, b, reopen),
                scale=self.scale,
                allowed_controls=case.controls,
            )
        finally:
            if self.server is not None:  # never leave the shared server stopped
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.server.pid, signal.SIGCONT)
            with anyio.CancelScope(shield=True):
                for b in reversed(opened):
                    await _cleanup(b)


async def _cleanup(backend: Any) -> None:
    """Delete the case's streams (best effort: the case is over), then close the client."""
    from ...adapters.nats import JetStreamAdmin, JetStreamMessagingBackend

    if isinstance(backend, JetStreamMessagingBackend):
        names = backend.names
        admin = JetStreamAdmin(
            backend.servers,
            stream_prefix=names.stream_prefix,
            subject_prefix=names.subject_prefix,
        )
        with contextlib.suppress(Exception):
            await admin.drop_namespace()
        await admin.aclose()
    await backend.aclose()


register_provider("nats", NatsProvider)
