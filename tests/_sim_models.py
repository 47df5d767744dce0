"""Small SimPy models of the simulator's new constructs, with the same semantics, to check
the simulator against where no closed form exists; and a Welch interval for comparing
per-replication means."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import simpy

from videoflow_aio.sim import mean_interval, t_quantile


def simpy_batch_mean(
    *,
    rate_hz: float,
    fixed_mean_s: float,
    per_item_s: float,
    max_items: int,
    max_wait_s: float,
    duration_s: float,
    warmup_s: float,
    seed: int,
) -> float:
    """Mean sojourn (capture → batch done) of Poisson arrivals served by one replica that
    takes up to ``max_items`` queued items, waits at most ``max_wait_s`` after the first for
    a fuller batch, and serves the batch in ``Exp(fixed_mean_s) + n × per_item_s``."""
    rng = random.Random(seed)
    env = simpy.Environment()
    queue: simpy.Store = simpy.Store(env)
    total = [0.0, 0]

    def source() -> simpy.events.ProcessGenerator:
        while True:
            yield env.timeout(rng.expovariate(rate_hz))
            if env.now >= duration_s:
                return
            yield queue.put(env.now)

    def server() -> simpy.events.ProcessGenerator:
        while True:
            batch = [(yield queue.get())]
            until = env.now + max_wait_s
            while len(batch) < max_items:
                if queue.items:
                    batch.append((yield queue.get()))
                    continue
                if env.now >= until:
                    break
                get = queue.get()
                got = yield get | env.timeout(until - env.now)
                if get in got:
                    batch.append(got[get])
                else:
                    get.cancel()
                    break
            yield env.timeout(rng.expovariate(1.0 / fixed_mean_s) + per_item_s * len(batch))
            for at in batch:
                if warmup_s <= at < duration_s:
                    total[0] += env.now - at
                    total[1] += 1

    env.process(source())
    env.process(server())
    env.run(until=duration_s + 60.0)
    return total[0] / total[1]


def welch_contains_zero(a: Sequence[float], b: Sequence[float], confidence: float) -> bool:
    """Whether the Welch interval of ``mean(a) - mean(b)`` at ``confidence`` contains 0."""
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    va = sum((x - ma) ** 2 for x in a) / (len(a) - 1) / len(a)
    vb = sum((x - mb) ** 2 for x in b) / (len(b) - 1) / len(b)
    df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1))
    half = t_quantile(0.5 + confidence / 2, df) * math.sqrt(va + vb)
    return abs(ma - mb) <= half


def contains(values: Sequence[float], target: float, confidence: float) -> bool:
    """Whether the Student-t interval of the mean of ``values`` contains ``target``."""
    iv = mean_interval(values, confidence)
    assert iv.low is not None and iv.high is not None
    return iv.low <= target <= iv.high
