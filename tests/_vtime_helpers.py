"""Helpers for the virtual-time tests."""

from __future__ import annotations

import socket
import threading
import time

BACKENDS = ("asyncio", "trio")


def _schedstat() -> tuple[float, float] | None:
    """Seconds this thread has spent on a CPU and runnable in a queue (Linux), or None."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            on_cpu, queued = (int(x) for x in f.read().split()[:2])
    except (OSError, ValueError):
        return None
    return on_cpu / 1e9, queued / 1e9


def unqueued_seconds() -> float:
    """A wall clock that stops while this thread waits for a CPU (runnable, queued): what a
    "takes no real time" bound should read on a loaded machine. Linux's schedstat gives the
    queued time; elsewhere it is the plain wall clock."""
    wall = time.perf_counter()  # wall-clock: the point of the tests that use it
    stat = _schedstat()
    return wall if stat is None else wall - stat[1]


def blocked_seconds() -> float:
    """Wall seconds this thread has spent neither running nor waiting for a CPU: asleep (a
    real wait). Linux's schedstat splits the rest into time on a CPU and time runnable in a
    queue, which a loaded machine inflates; elsewhere all wall time counts."""
    wall = time.perf_counter()  # wall-clock: the point of the tests that use it
    stat = _schedstat()
    return wall if stat is None else wall - stat[0] - stat[1]


class DelayedEchoServer:
    """A loopback TCP server on a plain thread: echoes each message after ``delay`` real s.

    It is deliberately not an anyio worker thread, so only the real-I/O rule of the loop
    (not the worker-thread rule) keeps the clock from jumping over the round trip.
    """

    def __init__(self, delay: float, reply: bool = True) -> None:
        self.delay = delay
        self.reply = reply
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._stop = threading.Event()

    def __enter__(self) -> DelayedEchoServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._sock.close()
        self._thread.join(timeout=5)

    def _serve(self) -> None:
        self._sock.settimeout(0.05)
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2.0)
                try:
                    data = conn.recv(1024)
                    time.sleep(self.delay)  # the peer's real processing time
                    if self.reply and data:
                        conn.sendall(data)
                    else:
                        self._stop.wait(2.0)
                except OSError:
                    pass


async def wake_order(n: int) -> list[int]:
    """``n`` tasks started in order, each sleeping 1 s: the order they run in once woken
    together (works under asyncio and trio, seeded or not)."""
    import anyio

    order: list[int] = []

    async def task(i: int) -> None:
        await anyio.sleep(1)
        order.append(i)

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(task, i)
    return order
