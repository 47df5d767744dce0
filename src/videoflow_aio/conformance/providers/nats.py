"""The ``nats`` provider: the messaging cases on a real nats-server (JetStream and Core NATS).

Without ``url=`` it starts one ``nats-server -js`` on 127.0.0.1 (once, in ``setup``), its
JetStream store in a directory of its own; with ``url=`` it uses that server. Every
``h.open()`` gets its own namespace (stream and subject prefix), so cases never see each
other's channels; it is dropped when the case ends. ``h.open(core_only=True)`` gives a
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
import os
import shutil
import signal
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from ...adapters import missing_extra
from ...contracts.messaging import ChannelId, MessagingCapabilities, PublishOutcome, SubscriptionId
from ...testing.servers import NatsServer
from .._capabilities import CapabilityStruct
from .._case import Case
from .._controls import offered_controls
from .._harness import Harness, Skip
from .._server_provider import MAIN, ServerProvider, Startable

SERVER_PROCESS_CONTROLS = frozenset({"pause_acceptance", "resume_acceptance", "restart_server"})
"""Controls that act on the server process: only on a server this provider started."""
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
RECONNECT_WITHIN = 10.0


if TYPE_CHECKING:
    from ...adapters.nats import NatsConnection


class NatsControls:
    """The controls the nats provider performs for one backend (see the module docstring)."""

    def __init__(self, provider: NatsProvider, backend: Any) -> None:
        self._provider = provider
        self._backend = backend

    # -- another process ------------------------------------------------------------------
    async def another_client(self) -> Any:
        """A new backend like this one, on its own connection, in the same namespace."""
        return await self._provider.open_peer(self._backend)

    async def lose_reply(self, subscription: SubscriptionId) -> None:
        """The adapter's next settle on the subscription is sent and applied by the server
        (a barrier's reply says so), and every confirmation of it dropped: its evidence and
        the reply (``adapters.nats._settle._lost``)."""
        client = getattr(self._backend, "_c", None)
        if client is None or not hasattr(client, "lose_replies"):
            raise Skip("core NATS has nothing to settle")
        client.lose_replies.add(subscription)

    # -- an administrator -----------------------------------------------------------------
    async def _as_admin(self, act: Callable[[Any], Awaitable[object]]) -> None:
        """``act(admin)`` on an administrator's own connection to this backend's namespace."""
        from ...adapters.nats import JetStreamAdmin, JetStreamMessagingBackend

        b = self._backend
        if not isinstance(b, JetStreamMessagingBackend):
            raise Skip("core NATS keeps nothing an administrator could purge or delete")
        names = b.names
        admin = JetStreamAdmin(
            b.connection, stream_prefix=names.stream_prefix, subject_prefix=names.subject_prefix
        )
        try:
            await act(admin)
        finally:
            await admin.aclose()

    async def purge(self, channel_id: ChannelId) -> None:
        """Purge the channel's stream (the server tells no consumer)."""
        await self._as_admin(lambda a: a.purge(channel_id))

    async def delete_message(self, channel_id: ChannelId, sequence: int) -> None:
        """Delete one message of the channel by sequence."""
        await self._as_admin(lambda a: a.delete_message(channel_id, sequence))

    async def delete_subscription(self, subscription: SubscriptionId) -> None:
        """Delete the subscription's consumer."""
        await self._as_admin(lambda a: a.delete_subscription(subscription))

    # -- the server process -----------------------------------------------------------------
    def _signal(self, sig: int) -> int:
        server = self._provider.started(MAIN)
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

    async def resume_acceptance(self, channel_id: ChannelId) -> list[PublishOutcome]:
        """Continue the server: what it received while stopped is stored now. The outcomes of
        held publications are not reported back by the server, so the list is empty."""
        self._signal(signal.SIGCONT)
        return []

    async def restart_server(self) -> None:
        """kill -9 the server, start it again on the same port and store, and wait until every
        client of the case is connected again."""
        if self._provider.started(MAIN) is None:
            raise Skip("restart needs the test-owned server (not given url=)")
        await restarted(self._provider.case_backends, self._provider.restart)


async def restarted(backends: Sequence[Any], restart: Callable[[], None]) -> None:
    """``restart()`` the server (in a thread), then wait until every backend that had a
    connection has re-established it. Its ``connected`` alone would not do: right after the
    kill a client has not noticed yet, and still says True."""
    before = [(b, b.reconnects) for b in backends if _opened(b)]  # the others connect anew
    await anyio.to_thread.run_sync(restart)
    with anyio.fail_after(RECONNECT_WITHIN):
        for b, count in before:
            while b.reconnects <= count or not b.connected:  # noqa: ASYNC110 - nats-py reconnects
                await anyio.sleep(0.02)


def _opened(backend: Any) -> bool:
    """Whether the backend has made its connection (a new one reconnects after a restart)."""
    nc = getattr(getattr(backend, "_c", None), "nc", None) or getattr(backend, "_nc", None)
    return nc is not None


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


class NatsProvider(ServerProvider):
    """Runs the messaging cases on nats-server."""

    request_timeout_floor = 1.0
    """The least a JetStream API request waits for its reply (the cases' scaled 20 s
    otherwise)."""
    connect_timeout = 10.0
    """Seconds a backend's first connection may take: nats-py's 2 s default timed out once
    on trio at a load average of 18 (no case connects to a server that is down)."""

    name = "nats"
    client_modules = ("nats",)

    def __init__(self, url: str | None = None, scale: float = 0.05) -> None:
        super().__init__(urls={MAIN: url}, scale=scale)
        self._given = url is not None
        self._store: Path | None = None
        self._case: Case | None = None
        self._made: dict[int, tuple[bool, dict[str, Any]]] = {}  # id(backend) -> made how
        self._peers: list[Any] = []
        self.case_backends: list[Any] = []

    def contracts(self) -> frozenset[str]:
        return frozenset({"messaging"})

    def connection(self) -> NatsConnection:
        """The connection every backend of this provider is made on (TLS, credentials:
        ``nats-secure``); its admins take the backend's."""
        from ...adapters.nats import NatsConnection

        return NatsConnection(self.url(), connect_timeout=self.connect_timeout)

    def subject_for(self, namespace: str) -> str:
        """The subject prefix of a backend in ``namespace`` (``nats-secure``: under the root
        its user may publish on)."""
        return namespace

    def unavailable(self) -> str | None:
        return missing_extra("nats") or super().unavailable()  # the extra named, then the binary

    def server_options(self) -> Mapping[str, Startable]:
        return {MAIN: NatsServer(data_dir=self._store)}

    def offered(self, contract: str) -> Sequence[CapabilityStruct]:
        return [
            MessagingCapabilities(
                backend="nats-jetstream", latest_per_key=True, durable_control=True, archive=True
            ),
            MessagingCapabilities(backend="nats-core", core_only=True),
        ]

    def controls(self, contract: str) -> frozenset[str] | None:
        offered = offered_controls(contract, NatsControls)
        return offered - SERVER_PROCESS_CONTROLS if self._given else offered

    def controls_for(self, backend: Any) -> Any:
        return NatsControls(self, backend)

    # -- the server process ---------------------------------------------------------------------
    def setup(self) -> None:
        if not self._given and self._store is None:
            self._store = Path(tempfile.mkdtemp(prefix="videoflow-nats-store-"))
        super().setup()

    def restart(self) -> None:
        """kill -9 the test-owned server; a new one on the same port and store (blocking)."""
        old = self.started(MAIN)
        assert old is not None and self._store is not None
        with contextlib.suppress(ProcessLookupError):
            os.kill(old.pid, signal.SIGKILL)
        old.stop()  # reaps it; the store is not in its directory
        options = old.options or NatsServer(data_dir=self._store)
        self._started[MAIN] = replace(options, args=["-p", str(old.port)]).start()

    def _resume(self) -> None:
        server = self.started(MAIN)
        if server is not None:  # never leave the shared server stopped
            with contextlib.suppress(ProcessLookupError):
                os.kill(server.pid, signal.SIGCONT)

    def close(self) -> None:
        self._resume()
        super().close()
        if self._store is not None:
            shutil.rmtree(self._store, ignore_errors=True)
            self._store = None

    # -- backends ---------------------------------------------------------------------------------
    def harness(self, case: Case) -> AbstractAsyncContextManager[Harness]:
        return self._case_harness(case)

    @asynccontextmanager
    async def _case_harness(self, case: Case) -> AsyncIterator[Harness]:
        self._case, self._made, self._peers, self.case_backends = case, {}, [], []
        async with self._harness(case) as h:
            try:
                yield h
            finally:
                self._resume()
                with anyio.CancelScope(shield=True):
                    for b in reversed(self._peers):
                        await self.discard(b)

    async def open_backend(self, case: Case, namespace: str, options: dict[str, Any]) -> Any:
        core = bool(options.pop("core_only", False))
        allowed = _CORE_OPTIONS if core else _JS_OPTIONS
        extra = sorted(k for k in options if k not in allowed + _IGNORED)
        if extra:
            raise Skip(f"the nats provider cannot honour {extra} (model-only options)")
        return self._make(core, namespace, {k: v for k, v in options.items() if k in allowed})

    def _make(self, core: bool, namespace: str, options: dict[str, Any]) -> Any:
        from ...adapters.nats import CoreNatsMessagingBackend

        backend: Any
        subjects, connection = self.subject_for(namespace), self.connection()
        if core:
            backend = CoreNatsMessagingBackend(connection, subject_prefix=subjects, **options)
        else:
            backend = self.jetstream_class()(
                connection,
                stream_prefix=namespace,
                subject_prefix=subjects,
                request_timeout=max(self.request_timeout_floor, 20 * self.scale),
                **options,
            )
        self._made[id(backend)] = (core, options)
        self.case_backends.append(backend)
        return backend

    def jetstream_class(self) -> Any:
        """The JetStream backend class this provider opens (the cluster provider's raises
        every channel's replicas)."""
        from ...adapters.nats import JetStreamMessagingBackend

        return JetStreamMessagingBackend

    async def open_peer(self, backend: Any) -> Any:
        """Another client like ``backend``, in its namespace (closed when the case ends)."""
        core, options = self._made[id(backend)]
        peer = self._make(core, backend.namespace, dict(options))
        self._peers.append(peer)
        return peer


__all__ = ["NatsControls", "NatsProvider", "restarted"]
