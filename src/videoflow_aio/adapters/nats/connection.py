"""``NatsConnection``: how every NATS class reaches the server, and as whom — defined once.

A :class:`NatsConnection` holds the server URL(s), the credentials and TLS
(:class:`NatsAuthOptions`, the one definition of the six security keywords), and the
connect policy. Every NATS class — :class:`JetStreamMessagingBackend`,
:class:`CoreNatsMessagingBackend`, :class:`JetStreamAdmin`, the conformance providers'
controls — takes one in place of a URL::

    conn = NatsConnection("nats://h1:4222,nats://h2:4222", token=secret)
    backend = JetStreamMessagingBackend(conn, stream_prefix="VF")
    admin = JetStreamAdmin(backend.connection, stream_prefix="VF")

A URL and keywords still work (``JetStreamMessagingBackend(url, token=…)``): the class makes
the connection from them. Each user opens its own nats-py client from the connection
(:meth:`NatsConnection.connect`: fail fast, refusals classified), which owns its background
tasks (a :class:`~videoflow_aio.adapters._tasks.TaskOwner`: cancelled or awaited on
``aclose``, errors surfaced), maps nats-py's errors through one table
(``_api``: ``adapters._errors.map_exceptions``) and decodes every JetStream reply into a
typed Struct (``_wire``). A connection holds no socket itself: it can be shared by any number
of backends and admins, each closing only its own client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Unpack

from ...contracts.errors import ValidationError
from .._options import refuse_beside
from .._tasks import TaskOwner
from ._connection import connect, server_list
from ._security import NatsAuth, NatsAuthOptions, check_connect_options

DEFAULT_URL = "nats://127.0.0.1:4222"
CONNECT_TIMEOUT = 2.0


class NatsConnection:
    """How to reach a NATS server or cluster and as whom (see the module docstring).

    * ``url``: one or more server URLs (``nats://h1:4222,nats://h2:4222`` or a list).
    * ``connect_timeout``: seconds each URL gets to answer the first connection; when every
      URL failed, ``BackendUnavailable`` names them and the cause.
    * ``buffer_while_disconnected``: False (default) makes a request attempted while
      disconnected fail at once (definitely not sent); True lets nats-py buffer it and replay
      it after a reconnect, which turns a reported failure into a possible late acceptance.
    * ``connect_options``: passed on to nats-py; may not carry a security option nor
      ``servers`` (such a key is a ``ValidationError`` naming the argument to use).
    * security: :class:`NatsAuthOptions`. A refused connection is ``AuthenticationFailed``.
    """

    def __init__(
        self,
        url: str | Sequence[str] = DEFAULT_URL,
        *,
        connect_timeout: float = CONNECT_TIMEOUT,
        buffer_while_disconnected: bool = False,
        connect_options: Mapping[str, Any] | None = None,
        **auth: Unpack[NatsAuthOptions],
    ) -> None:
        if connect_timeout <= 0:
            raise ValidationError(
                "connect_timeout must be > 0", field="connect_timeout", value=connect_timeout
            )
        check_connect_options(connect_options or {})
        self.servers, self.auth = NatsAuth.from_args(server_list(url), **auth)
        self.connect_timeout = float(connect_timeout)
        self.buffer_while_disconnected = buffer_while_disconnected
        self.connect_options: dict[str, Any] = dict(connect_options or {})

    @classmethod
    def of(
        cls,
        url: str | Sequence[str] | NatsConnection,
        *,
        connect_timeout: float = CONNECT_TIMEOUT,
        buffer_while_disconnected: bool = False,
        connect_options: Mapping[str, Any] | None = None,
        **auth: Unpack[NatsAuthOptions],
    ) -> NatsConnection:
        """``url`` itself when it is a connection (then no other argument may be given: they
        belong to the connection), else a connection made from the URL and the keywords."""
        if not isinstance(url, NatsConnection):
            return cls(
                url,
                connect_timeout=connect_timeout,
                buffer_while_disconnected=buffer_while_disconnected,
                connect_options=connect_options,
                **auth,
            )
        given = [k for k, v in auth.items() if v is not None]
        if connect_timeout != CONNECT_TIMEOUT:
            given.append("connect_timeout")
        if buffer_while_disconnected:
            given.append("buffer_while_disconnected")
        if connect_options:
            given.append("connect_options")
        refuse_beside("NatsConnection", given)
        return url

    def __repr__(self) -> str:
        return f"NatsConnection({', '.join(self.servers)!r})"

    async def connect(self, opts: Mapping[str, Any], connect_timeout: float | None = None) -> Any:
        """A new nats-py client on this connection's servers with its credentials and TLS
        (``opts``: nats-py's options besides those; ``connect_options`` win): every URL tried
        once within ``connect_timeout`` (default: the connection's), ``BackendUnavailable``
        naming them when none answered, ``AuthenticationFailed`` at the first refusal."""
        merged = {"servers": self.servers, **opts, **self.connect_options}
        timeout = self.connect_timeout if connect_timeout is None else connect_timeout
        return await connect(merged, self.servers, timeout, self.auth)

    def tasks(self, owner: str, timeout: float) -> TaskOwner:
        """The task group of one client opened on this connection (``adapters._tasks``)."""
        return TaskOwner(f"{owner} on {', '.join(self.servers)}", timeout)


__all__ = ["NatsAuthOptions", "NatsConnection"]
