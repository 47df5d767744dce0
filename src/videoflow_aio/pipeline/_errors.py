"""The pipeline toolkit's own errors: how a stage that cannot go on says why, and the
exceptions a stage worker hands its :class:`~videoflow_aio.pipeline.ExceptionPolicy` for a
handler that overran its deadline or cancelled itself."""

from __future__ import annotations

from typing import Any

from ..contracts.errors import VideoflowError


class PipelineError(VideoflowError):
    """A stage worker stopped without finishing; ``stage`` names it."""

    stage: str

    def __init__(self, message: str, *, stage: str, **fields: Any) -> None:
        super().__init__(message, stage=stage, **fields)


class StageStopped(PipelineError):
    """Every task of a stage ended without end-of-stream, :meth:`StageWorker.stop` or a
    cancellation from outside: :meth:`StageWorker.run` raises this instead of returning as if
    the stage had finished."""


class PipelineStalled(PipelineError):
    """On virtual time, a stage made no progress for ``idle_seconds`` while it waited:
    ``waiting`` names the end-of-stream inputs not seen yet, ``pending`` the messages its
    data subscriptions still hold (pending + leased, per subscription)."""

    idle_seconds: float
    waiting: tuple[str, ...]
    pending: dict[str, int]

    def __init__(
        self,
        message: str,
        *,
        stage: str,
        idle_seconds: float,
        waiting: tuple[str, ...],
        pending: dict[str, int],
    ) -> None:
        super().__init__(
            message, stage=stage, idle_seconds=idle_seconds, waiting=waiting, pending=pending
        )


class BadHandler(PipelineError, TypeError):
    """A handler that does not keep the handler protocol: it returned no awaitable, or a
    result that is neither None nor a sequence of ``Output``/``bytes``. Raised by
    ``StageWorker.run`` (a bug in the handler: retrying the message would not help)."""


class HandlerTimeout(Exception):
    """Handed to the exception policy when a handler ran past ``handler_timeout_seconds``
    (it was cancelled): by default the message is retried, and ``max_deliver`` bounds it;
    list it in ``ExceptionPolicy(terminal=...)`` to dead-letter at once."""


class HandlerCancelled(Exception):
    """Handed to the exception policy when a handler raised a cancellation that was not
    the worker's own (asyncio's bare ``CancelledError`` raised or leaked by handler code)."""


__all__ = [
    "BadHandler",
    "HandlerCancelled",
    "HandlerTimeout",
    "PipelineError",
    "PipelineStalled",
    "StageStopped",
]
