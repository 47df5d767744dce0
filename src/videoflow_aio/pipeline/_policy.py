"""What a stage worker settles when its handler raises.

A handler signals its intent with :class:`RetryLater` (settle ``Retry(delay)``) or
:class:`GiveUp` (settle ``Terminal(reason)``: a dead letter). Any other ``Exception`` goes
through the worker's :class:`ExceptionPolicy`. ``BaseException`` (cancellation, a simulated
crash) is never settled: the worker dies holding the lease, which then expires and
redelivers, exactly as when a process dies.
"""

from __future__ import annotations

from ..contracts.errors import ValidationError
from ..contracts.messaging import Delivery, Retry, SettleOutcome, Terminal
from ._time import check_seconds


class RetryLater(Exception):
    """Raised by a handler: redeliver after ``delay_seconds`` (counts toward max_deliver)."""

    def __init__(self, reason: str = "retry", delay_seconds: float = 0.0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.delay_seconds = check_seconds(delay_seconds, "delay_seconds")


class GiveUp(Exception):
    """Raised by a handler: settle ``Terminal(reason)`` (never redelivered; dead-lettered)."""

    def __init__(self, reason: str = "terminal") -> None:
        super().__init__(reason)
        self.reason = reason


class ExceptionPolicy:
    """Maps a handler's exception to a settle outcome.

    ``terminal``: exception types settled ``Terminal`` (besides :class:`GiveUp`); every other
    ``Exception`` is settled ``Retry(retry_delay_seconds)`` — the subscription's
    ``max_deliver`` then bounds the attempts (the message becomes *unresolved*).
    """

    def __init__(
        self,
        terminal: tuple[type[Exception], ...] = (),
        retry_delay_seconds: float = 1.0,
    ) -> None:
        if isinstance(terminal, type) or not isinstance(terminal, tuple | list):
            raise ValidationError(
                "terminal must be a tuple of Exception subclasses", field="terminal", value=terminal
            )
        for t in terminal:
            if not (isinstance(t, type) and issubclass(t, Exception)):
                raise ValidationError(
                    "terminal must hold Exception subclasses", field="terminal", value=t
                )
        self.terminal = tuple(terminal)
        self.retry_delay_seconds = check_seconds(retry_delay_seconds, "retry_delay_seconds")

    def outcome(self, exc: Exception, delivery: Delivery) -> SettleOutcome:
        """The outcome to settle ``delivery`` with after its handler raised ``exc``."""
        if isinstance(exc, RetryLater):
            return Retry(exc.delay_seconds)
        if isinstance(exc, GiveUp):
            return Terminal(exc.reason)
        if self.terminal and isinstance(exc, self.terminal):
            return Terminal(f"{type(exc).__name__}: {exc}")
        return Retry(self.retry_delay_seconds)


__all__ = ["ExceptionPolicy", "GiveUp", "RetryLater"]
