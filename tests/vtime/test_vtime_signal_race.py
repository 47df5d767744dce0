"""Issue 26 item 13: Ctrl-C into an endless virtual loop on asyncio raised
``InvalidStateError`` now and then: ``asyncio.run``'s SIGINT handler (a Python signal handler,
run between two bytecodes) cancels the main task — and the sleep future it awaits — between
the loop's "not cancelled?" check and its ``set_result``. The race is injected here at exactly
that point, deterministically."""

from __future__ import annotations

import asyncio
from asyncio.futures import _set_result_unless_cancelled  # type: ignore[attr-defined]
from typing import Any

import pytest

from videoflow_aio import vtime


class CancelledAfterTheCheck(asyncio.Future[None]):
    """A future that is cancelled right after its first ``done()``/``cancelled()`` check
    answered "not yet" — as if a signal handler ran between that check and the set."""

    armed = True

    def _race(self, answer: bool) -> bool:
        if self.armed:
            self.armed = False
            self.cancel()
        return answer

    def done(self) -> bool:
        return self._race(super().done())

    def cancelled(self) -> bool:
        return self._race(super().cancelled())


@pytest.mark.parametrize("callback", ["asyncio", "loop"])
def test_a_sleep_cancelled_between_check_and_set_result_stays_cancelled(callback: str) -> None:
    # before: InvalidStateError out of the loop (the inlined timer path) instead of the
    # cancellation, which asyncio.run turns into KeyboardInterrupt
    from videoflow_aio.vtime import _loop

    wake: Any = _set_result_unless_cancelled if callback == "asyncio" else None
    errors: list[dict[str, Any]] = []

    async def main() -> str:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _, context: errors.append(context))
        fut = CancelledAfterTheCheck(loop=loop)
        if wake is not None:
            loop.call_later(1.0, wake, fut, None)
        else:
            loop.call_later(1.0, _loop._set_result_unless_cancelled, fut)
        try:
            await fut
        except asyncio.CancelledError:
            return "cancelled"
        return "woke"

    assert vtime.run(main, backend="asyncio") == "cancelled"
    assert errors == []  # nothing reported to the exception handler either


def test_a_real_sigint_mid_sleep_is_a_keyboard_interrupt() -> None:
    """The whole path: the SIGINT handler cancels the main task while a virtual sleep is
    pending; the run ends with KeyboardInterrupt."""
    import os
    import signal

    handler: list[object] = []

    async def main() -> None:
        handler.append(signal.getsignal(signal.SIGINT))  # asyncio.Runner's, if it installed one
        loop = asyncio.get_running_loop()
        loop.call_later(5.0, os.kill, os.getpid(), signal.SIGINT)  # at a virtual instant
        for _ in range(100_000):  # "endless": a lost SIGINT fails in a second, not a hang
            await asyncio.sleep(1.0)

    # Ctrl-C in a terminal: Python's own handler. A process started in the background by a
    # non-interactive shell (`cmd &`, as CI may start this suite) inherits SIGINT ignored,
    # and asyncio.run installs its handler only over Python's: the test hung there.
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            vtime.run(main, backend="asyncio")
            pytest.fail(f"no KeyboardInterrupt; the SIGINT handler in the run was {handler}")
    finally:
        signal.signal(signal.SIGINT, inherited)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_signal_sent_at_a_virtual_instant_is_received_at_that_instant(backend: str) -> None:
    """Item 14: signals do not hold the clock (docs/vtime.md, "Signals"); one raised at a
    virtual instant is handled there, before time jumps on (before, on asyncio: the loop
    jumped to the timeout without reading the self-pipe, and the signal was lost)."""
    import os
    import signal

    import anyio

    async def main() -> tuple[object, float]:
        clock = vtime.current_clock()
        clock.at(5, lambda: os.kill(os.getpid(), signal.SIGUSR1))
        with anyio.open_signal_receiver(signal.SIGUSR1) as signals, anyio.move_on_after(60):
            async for received in signals:
                return received, clock.monotonic()
        return None, clock.monotonic()

    assert vtime.run(main, backend=backend) == (signal.SIGUSR1, 1005.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_signal_handler_does_not_hold_the_clock(backend: str) -> None:
    """The documented choice: waiting for a signal is not real I/O; time jumps on."""
    import signal

    import anyio

    async def main() -> float:
        clock = vtime.current_clock()
        with anyio.open_signal_receiver(signal.SIGUSR2) as signals, anyio.move_on_after(60):
            async for _ in signals:
                break
        return clock.monotonic()

    assert vtime.run(main, backend=backend) == 1060.0  # type: ignore[arg-type]
