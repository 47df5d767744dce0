"""A toy with a planted order-dependent bug: the explorer's own test subject (and the worked
example of docs/explore.md).

``ToyLease`` is a leader lease. Its holder renews every ``TTL`` seconds — at the very
instant its lease runs out (a timing slip) — and ``renew`` has the planted bug: it does not
check who holds the lease, so a holder whose lease a candidate has just taken at that
instant takes it back, and both believe they lead. The bug needs a candidate's attempt to
land on a renewal instant *and* to run before the renewal there. FIFO order never does
that (the holder's timer was set first); seeded orders do, now and then.

Load it into the CLI with ``videoflow-aio explore --load tests/_planted.py``.
"""

from __future__ import annotations

import math

import anyio

from videoflow_aio import explore

TTL = 10.0
ROUNDS = 6
POLLS = (3.5, 6.0, 7.5, 8.5)  # a candidate's waits between attempts (all < TTL)


class ToyLease:
    """A lease with one holder until ``expires`` (planted bug in :meth:`renew`)."""

    def __init__(self) -> None:
        self.holder: str | None = None
        self.expires = -math.inf

    def acquire(self, who: str, now: float) -> bool:
        if self.holder is None or now >= self.expires:
            self.holder, self.expires = who, now + TTL
            return True
        return False

    def renew(self, who: str, now: float) -> bool:
        if now > self.expires:  # planted bug: it should refuse unless who holds it
            return False
        self.holder, self.expires = who, now + TTL
        return True


@explore.program("TOY-LEASE", "toy leader lease: never two leaders at once (planted bug)")
async def toy_lease(ctx: explore.Context) -> None:
    lease = ToyLease()
    terms: list[tuple[str, float, float]] = []  # (leader, from, until) of each success

    def led(who: str) -> None:
        now = anyio.current_time()
        terms.append((who, now, now + TTL))
        ctx.log.record("lead", subject="lease", ident=who, until=now + TTL)

    async def holder() -> None:
        assert lease.acquire("holder", anyio.current_time())
        led("holder")
        for _ in range(ROUNDS):
            await anyio.sleep(TTL)
            if not lease.renew("holder", anyio.current_time()):
                return
            led("holder")

    async def candidate(name: str, waits: list[float]) -> None:
        for wait in waits:
            await anyio.sleep(wait)
            if lease.acquire(name, anyio.current_time()):
                led(name)

    rng = ctx.rng
    async with anyio.create_task_group() as tg:
        tg.start_soon(holder)
        tg.start_soon(candidate, "candidate", [rng.choice(POLLS) for _ in range(5)])
    for i, (who, start, end) in enumerate(terms):
        for other, start2, end2 in terms[i + 1 :]:
            assert who == other or end <= start2 or end2 <= start, (
                f"two leaders at once: {who} [{start}, {end}) and {other} [{start2}, {end2})"
            )
