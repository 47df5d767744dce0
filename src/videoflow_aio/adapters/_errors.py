"""The one error-mapping mechanism of every adapter, and the failures they share.

Each adapter states, per call site, a table from the engine's exceptions to the contract's
(:func:`map_exceptions`, in the style of httpcore's): the first entry whose key matches wins,
the original is chained as ``__cause__``, anything else (cancellation included) passes
through untouched. A table value is an exception class (called with the original's text) or
a function of the original returning the exception to raise — or ``None`` to let the
original through (an entry that only applies under a condition).

Between the engine and the contract, adapters speak of a request in three typed ways:

* :class:`NotSent` — it never left this client (no connection, pool exhausted, closed): it
  cannot have applied; ``security`` names the :class:`AuthenticationFailed` reason when the
  server or the TLS stack refused the client;
* :class:`ReplyLost` — it was sent and its answer did not come back: it may have applied
  (NATS: a publish becomes ``PublicationUnknown``; etcd and Redis: the write's request marker
  resolves it);
* any other :class:`CallFailed` — the server answered with a refusal (nothing applied).

Where an engine classifies a failure only in its message text (gRPC's "failed to connect to
all addresses", redis-py's pool and ACL-in-a-script messages), the text is matched in the
adapter's own table next to its codes, never at a call site.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Literal, TypeAlias

from ..contracts.errors import VideoflowError


class CallFailed(VideoflowError):
    """A request to the server failed; the subclass says how."""


class NotSent(CallFailed):
    """The request never left the client: nothing applied. ``security``: the
    :class:`~videoflow_aio.contracts.errors.AuthenticationFailed` reason when the server or
    TLS refused the client, else None."""

    security: str | None

    def __init__(self, message: str, *, security: str | None = None) -> None:
        super().__init__(message)
        self.security = security


class ReplyLost(CallFailed):
    """The request was sent and its reply lost (deadline, connection lost): it may have
    applied; ``__cause__`` says how."""


Source: TypeAlias = type[BaseException] | tuple[type[BaseException], ...]
Target: TypeAlias = type[BaseException] | Callable[[BaseException], BaseException | None]
ExceptionMapping: TypeAlias = Mapping[Source, Target]


class map_exceptions:
    """Re-raise an exception matching a key of ``mapping`` as its value says (module
    docstring); usable as ``with`` and ``async with``."""

    __slots__ = ("mapping",)

    def __init__(self, mapping: ExceptionMapping) -> None:
        self.mapping = mapping

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, et: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        if exc is None:
            return False
        for source, target in self.mapping.items():
            if isinstance(exc, source):
                mapped = target(str(exc)) if isinstance(target, type) else target(exc)
                if mapped is None:
                    return False
                raise mapped from exc
        return False

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(
        self, et: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> Literal[False]:
        return self.__exit__(et, exc, tb)


__all__ = ["CallFailed", "ExceptionMapping", "NotSent", "ReplyLost", "map_exceptions"]
