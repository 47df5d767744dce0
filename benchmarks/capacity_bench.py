"""Time to answer the newcomer's capacity question: videoflow-aio against a SimPy user.

    .venv/bin/python benchmarks/capacity_bench.py [--quick] [--points 9..14] [--precision 0.05]
                                                  [--max-replications 20] [--simpy-only]

The question (issue #22): 30 cameras at 25 fps; decode (4 replicas, exponential, mean 3 ms)
→ detect (N replicas, lognormal, mean 12 ms, p99 30 ms) → track (2 replicas, exponential,
1.5 ms) → sink (1 replica, 0.5 ms). How many detector replicas keep end-to-end p99 at or
under 200 ms?

- **The SimPy user** writes the tandem pipeline by hand (one process per frame, one
  ``simpy.Resource`` of ``replicas`` servers per stage, FIFO; the arrivals exactly as the
  simulator makes them: each camera periodic from a uniformly random phase in its first
  period, the same seeded random streams) and sweeps N by hand: for each N, independent
  replications (seed, seed + 1, …) of the spec's run, frames captured in the warm-up left out,
  until the Student-t interval's half-width of the end-to-end p99 (the mean of the
  replications' p99s) is within ``--precision`` of the estimate, or ``--max-replications``
  were run. A point is *met* when the precision was reached and the interval's upper bound is
  within 200 ms, *not met* when its lower bound is above, *uncertain* otherwise; the answer is
  the smallest N met. N = 9 carries exactly the offered load (750 frames/s × 12 ms / 9 =
  ρ 1.00): without screening the user simulates it, its p99 grows with the run's length and
  its replications do not settle — it costs the replication cap, as it would cost a user who
  set one, and the user does not take it as met even when the capped interval lies under the
  target (with 60-second runs it does: a p99 of the run's length, not of the queue).
- **videoflow-aio**: the same spec (:data:`SPEC_TOML`, written to a temporary file) through
  ``videoflow-aio simulate SPEC --sweep stage.detect.replicas=A..B
  --slo 'end_to_end.p99<=200ms' --precision P --json - --workers 1`` in a subprocess, in one
  process as the SimPy user runs: its wall time and CPU (``RUSAGE_CHILDREN``), its answer
  from the JSON (without ``--workers 1`` the runs spread over the CPUs: less wall, same CPU). On a
  tree without those options the benchmark says so and prints the SimPy half alone.

Both halves print their time to answer; the ratios (videoflow ÷ SimPy, wall and CPU) and
whether the answers agree close the run. Before the sweep, two checks of the SimPy model: an
M/M/c queue against its closed forms (Erlang C mean response, the response-time tail's p99),
and one replication against ``videoflow_aio.sim.simulate`` with the same seed (the same
frames, so the same p99 to the simulator's histogram resolution).

``--quick`` is a smoke run of a few seconds (10-second runs, two points, a small cap).
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from videoflow_aio.sim import (  # noqa: E402
    erlang_c,
    mmc_mean_response,
    parse_spec,
    sampler,
    simulate,
)
from videoflow_aio.sim._spec import SimSpec  # noqa: E402

SPEC_TOML = """\
# The newcomer's capacity question (issue #22): 30 cameras at 25 fps through decode, detect,
# track and a sink. How many detector replicas keep end-to-end p99 at or under 200 ms?
#
#   videoflow-aio simulate examples/detector-replicas.toml \\
#       --sweep stage.detect.replicas=9..14 --slo 'end_to_end.p99<=200ms' --precision 0.05
#
# Offered load on detect: 30 × 25 = 750 frames/s × 12 ms = 9 replica-seconds per second, so
# 9 replicas are exactly saturated (utilisation 1.00) and 10 run at 90 %.
# Keys are described in docs/simulate.md.

[run]
seed = 1
duration_seconds = 60        # virtual time, per replication
warmup_seconds = 10          # frames captured earlier are left out

[[source]]
name = "cams"
streams = 30
rate_hz = 25                 # per stream: 750 frames/s in all
arrival = "periodic"         # each camera from a random phase in its first period

[[stage]]
name = "decode"
inputs = ["cams"]
replicas = 4
service = { dist = "exponential", mean_ms = 3.0 }

[[stage]]
name = "detect"
inputs = ["decode"]
replicas = 10                # the question: how many?
service = { dist = "lognormal", mean_ms = 12.0, p99_ms = 30.0 }

[[stage]]
name = "track"
inputs = ["detect"]
replicas = 2
service = { dist = "exponential", mean_ms = 1.5 }

[[stage]]
name = "sink"
inputs = ["track"]
replicas = 1
service = { dist = "constant", value_ms = 0.5 }
"""
"""The question as a spec; ``examples/detector-replicas.toml`` holds the same."""

SWEPT_STAGE = "detect"
SLO_MS = 200.0
SLO_TEXT = "end_to_end.p99<=200ms"
EXAMPLE = ROOT / "examples" / "detector-replicas.toml"


# --- statistics a careful user would use ------------------------------------------------------


def t_two_sided(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with ``df`` degrees of freedom (the finite series for an
    integer ``df``, Abramowitz & Stegun 26.7.3-4)."""
    if df < 1:
        raise ValueError("df must be >= 1")
    theta = math.atan(t / math.sqrt(df))
    s, c = math.sin(theta), math.cos(theta)
    c2 = c * c
    term = total = 1.0
    if df % 2:
        for k in range(1, (df - 3) // 2 + 1):
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        return 2.0 / math.pi * (theta + (s * c * total if df >= 3 else 0.0))
    for k in range(1, (df - 2) // 2 + 1):
        term *= c2 * (2 * k - 1) / (2 * k)
        total += term
    return s * total


def t_quantile(confidence: float, df: int) -> float:
    """The ``t`` with P(|T| <= t) = ``confidence`` (bisection, to 1e-10)."""
    lo, hi = 0.0, 1.0
    while t_two_sided(hi, df) < confidence:
        hi *= 2.0
    while hi - lo > 1e-10 * max(1.0, hi):
        mid = (lo + hi) / 2.0
        if t_two_sided(mid, df) < confidence:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def t_interval(values: Sequence[float], confidence: float) -> tuple[float, float]:
    """``(mean, half-width)`` of the Student-t interval of the mean (inf for one value)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, math.inf
    sd = statistics.stdev(values)
    return mean, t_quantile(confidence, len(values) - 1) * sd / math.sqrt(len(values))


def nearest_rank(sorted_values: Sequence[float], q: float) -> float:
    """The sample of rank ``ceil(q n)`` of already sorted values (NaN when empty)."""
    if not sorted_values:
        return math.nan
    return sorted_values[max(1, math.ceil(q * len(sorted_values))) - 1]


# --- the spec ----------------------------------------------------------------------------------


def question_spec(
    detect_replicas: int,
    seed: int,
    duration: float | None = None,
    warmup: float | None = None,
    text: str = SPEC_TOML,
) -> SimSpec:
    """:data:`SPEC_TOML` with the detector's replicas, the seed and optionally the run's
    length replaced (validated by the simulator's own parser)."""
    doc = tomllib.loads(text)
    doc["run"]["seed"] = seed
    if duration is not None:
        doc["run"]["duration_seconds"] = duration
    if warmup is not None:
        doc["run"]["warmup_seconds"] = warmup
    for st in doc["stage"]:
        if st["name"] == SWEPT_STAGE:
            st["replicas"] = detect_replicas
    return parse_spec(doc)


def detect_utilisation(spec: SimSpec, detect_replicas: int) -> float:
    """Offered load ÷ replicas of the swept stage (every source feeds it once)."""
    rate = sum(s.streams * s.rate_hz for s in spec.sources)
    st = next(s for s in spec.stages if s.name == SWEPT_STAGE)
    return rate * (st.service.mean_ms or 0.0) / 1000.0 / detect_replicas


# --- the SimPy model ---------------------------------------------------------------------------


def tandem_latencies(spec: SimSpec) -> list[float]:
    """One replication of ``spec`` (a chain of stages fed by one source) in SimPy: the
    end-to-end latencies (s) of the frames captured in ``[warmup, duration)``, in completion
    order.

    The arrivals and service times come from the simulator's own seeded streams
    (``"{seed}/source/{name}"``: each stream's phase, then Poisson gaps if any;
    ``"{seed}/stage/{name}"``: one draw per service start), so a replication sees the frames
    ``videoflow-aio simulate`` would with that seed.
    """
    import simpy

    chain = _chain(spec)
    run = spec.run
    env = simpy.Environment()
    servers = [
        (
            simpy.Resource(env, capacity=st.replicas),
            sampler(st.service, random.Random(f"{run.seed}/stage/{st.name}")),
        )
        for st in chain
    ]
    lo, hi, end = run.warmup_seconds, run.duration_seconds, run.duration_seconds
    latencies: list[float] = []
    keep = latencies.append
    timeout = env.timeout

    def frame(ts: float) -> Generator[Any, Any, None]:
        for server, draw in servers:
            req = server.request()
            yield req
            yield timeout(draw())
            server.release(req)
        if lo <= ts < hi:
            keep(env.now - ts)

    def source(src: Any) -> Generator[Any, Any, None]:
        # the simulator's generator (sim/_load.py): streams in capture-time order, ties by
        # stream number
        rng = random.Random(f"{run.seed}/source/{src.name}")
        rate, period = src.rate_hz, 1.0 / src.rate_hz
        poisson = src.arrival == "poisson"
        phases: list[float] = []
        firsts: list[float] = []
        for _ in range(src.streams):
            phase = rng.random() * period
            phases.append(phase)
            firsts.append(rng.expovariate(rate) if poisson else phase)
        heap = [(at, k, 0) for k, at in enumerate(firsts)]
        heapq.heapify(heap)
        process = env.process
        while heap:
            at, k, n = heap[0]
            if at >= end:
                break
            if at > env.now:
                yield timeout(at - env.now)
            process(frame(at))
            nxt = at + rng.expovariate(rate) if poisson else phases[k] + (n + 1) * period
            heapq.heapreplace(heap, (nxt, k, n + 1))

    for src in spec.sources:
        env.process(source(src))
    env.run()
    return latencies


def _chain(spec: SimSpec) -> list[Any]:
    """The stages in order, checking the spec is what the hand model knows: one source, a
    chain of stages taking one item per receive, no faults. (Its queues are unbounded: the
    simulator's channel bound, 10,000 messages by default, is far from reached here.)"""
    if len(spec.sources) != 1 or spec.faults:
        raise ValueError("the SimPy model runs one source and no faults")
    chain = list(spec.stages)
    for i, st in enumerate(chain):
        feed = spec.sources[0].name if i == 0 else chain[i - 1].name
        if tuple(st.inputs) != (feed,) or st.batch != 1:
            raise ValueError(f"the SimPy model runs a chain; stage {st.name!r} is not a link")
    return chain


# --- the SimPy user's sweep --------------------------------------------------------------------


@dataclass
class Point:
    """One swept value as the SimPy user settled it."""

    value: int
    utilisation: float
    p99s_ms: list[float] = field(default_factory=list)
    cpu_seconds: float = 0.0
    wall_seconds: float = 0.0
    estimate_ms: float = math.nan
    half_width_ms: float = math.inf
    converged: bool = False

    @property
    def low(self) -> float:
        return self.estimate_ms - self.half_width_ms

    @property
    def high(self) -> float:
        return self.estimate_ms + self.half_width_ms

    @property
    def met(self) -> bool | None:
        """False when even the interval's lower bound is above the target; True when its
        upper bound is within it and the precision was reached; else None (undecided). A
        point that ran into the replication cap is not taken as met: its interval is not the
        one the precision asked for (at utilisation 1, p99 grows with the run's length, and
        an interval over short runs says nothing about the queue's behaviour)."""
        if self.low > SLO_MS:
            return False
        if self.high <= SLO_MS and self.converged:
            return True
        return None

    def verdict(self) -> str:
        if self.converged or self.met is False:
            return {True: "met", False: "not met", None: "uncertain"}[self.met]
        side = "within" if self.high <= SLO_MS else "straddling"
        return f"unsettled: cap reached, precision not ({side} the target)"


@dataclass
class Settings:
    """How the sweep is run: the user's choices, shared with the videoflow side."""

    points: list[int]
    precision: float
    confidence: float
    min_replications: int
    max_replications: int
    duration: float | None = None
    warmup: float | None = None
    seed: int = 1


def simpy_point(value: int, s: Settings) -> Point:
    """Replications of one point until the precision is met or the cap is reached."""
    spec0 = question_spec(value, s.seed, s.duration, s.warmup)
    point = Point(value, detect_utilisation(spec0, value))
    cpu0 = time.process_time()
    wall0 = time.perf_counter()  # wall-clock: the benchmark's measurement
    for r in range(s.max_replications):
        lat = tandem_latencies(question_spec(value, s.seed + r, s.duration, s.warmup))
        lat.sort()
        point.p99s_ms.append(nearest_rank(lat, 0.99) * 1000.0)
        if len(point.p99s_ms) >= max(2, s.min_replications):
            point.estimate_ms, point.half_width_ms = t_interval(point.p99s_ms, s.confidence)
            if point.half_width_ms <= s.precision * point.estimate_ms:
                point.converged = True
                break
    if not point.converged and len(point.p99s_ms) < 2:
        point.estimate_ms, point.half_width_ms = t_interval(point.p99s_ms, s.confidence)
    point.cpu_seconds = time.process_time() - cpu0
    point.wall_seconds = time.perf_counter() - wall0  # wall-clock: idem
    return point


def simpy_answer(points: Sequence[Point]) -> int | None:
    """The smallest value met (see :attr:`Point.met`)."""
    met = [p.value for p in points if p.met is True]
    return min(met) if met else None


# --- checks of the SimPy model -----------------------------------------------------------------


def mmc_response_p99(lam: float, mu: float, c: int, q: float = 0.99) -> float:
    """The ``q`` quantile of the M/M/c FCFS response time: T = W + S with S ~ Exp(mu), W = 0
    with probability 1 − C and else ~ Exp(c mu − lam), C the Erlang C probability."""
    wait_prob = erlang_c(c, lam / mu)
    theta = c * mu - lam

    def tail(t: float) -> float:
        if abs(theta - mu) < 1e-12 * mu:
            both = math.exp(-mu * t) * (1.0 + mu * t)
        else:
            both = (theta * math.exp(-mu * t) - mu * math.exp(-theta * t)) / (theta - mu)
        return (1.0 - wait_prob) * math.exp(-mu * t) + wait_prob * both

    lo, hi = 0.0, 1.0 / mu
    while tail(hi) > 1.0 - q:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        lo, hi = (mid, hi) if tail(mid) > 1.0 - q else (lo, mid)
    return (lo + hi) / 2.0


@dataclass
class ClosedFormCheck:
    """The SimPy model's M/M/c queue against its closed forms."""

    replicas: int
    utilisation: float
    customers: int
    mean_ms: tuple[float, float]
    mean_theory_ms: float
    p99_ms: tuple[float, float]
    p99_theory_ms: float

    @property
    def ok(self) -> bool:
        """Both closed forms inside the replications' 99 % intervals."""
        return all(
            abs(est - theory) <= hw
            for (est, hw), theory in (
                (self.mean_ms, self.mean_theory_ms),
                (self.p99_ms, self.p99_theory_ms),
            )
        )

    def line(self) -> str:
        (m, mh), (p, ph) = self.mean_ms, self.p99_ms
        return (
            f"M/M/{self.replicas} at utilisation {self.utilisation:.2f}, {self.customers:,} "
            f"customers: mean {m:.3f} ± {mh:.3f} ms (Erlang C {self.mean_theory_ms:.3f}), "
            f"p99 {p:.2f} ± {ph:.2f} ms (closed form {self.p99_theory_ms:.2f}) — "
            + ("both inside the 99 % intervals" if self.ok else "OUTSIDE an interval")
        )


def check_mmc(
    replicas: int = 4,
    mean_ms: float = 4.0,
    utilisation: float = 0.8,
    seconds: float = 100.0,
    seeds: int = 6,
) -> ClosedFormCheck:
    """Independent replications of one Poisson-fed stage of ``replicas`` exponential servers
    through :func:`tandem_latencies`, against Erlang C (mean) and the response-time tail (p99),
    with 99 % Student-t intervals over the replications."""
    mu = 1000.0 / mean_ms
    lam = utilisation * replicas * mu
    warmup = min(10.0, seconds / 10)
    means, p99s = [], []
    customers = 0
    for seed in range(seeds):
        doc = {
            "run": {"seed": seed, "duration_seconds": seconds, "warmup_seconds": warmup},
            "source": [{"name": "in", "rate_hz": lam, "arrival": "poisson"}],
            "stage": [
                {
                    "name": "q",
                    "inputs": ["in"],
                    "replicas": replicas,
                    "service": {"dist": "exponential", "mean_ms": mean_ms},
                }
            ],
        }
        lat = tandem_latencies(parse_spec(doc))
        customers += len(lat)
        means.append(statistics.fmean(lat) * 1000.0)
        lat.sort()
        p99s.append(nearest_rank(lat, 0.99) * 1000.0)
    return ClosedFormCheck(
        replicas=replicas,
        utilisation=utilisation,
        customers=customers,
        mean_ms=t_interval(means, 0.99),
        mean_theory_ms=mmc_mean_response(lam, mu, replicas) * 1000.0,
        p99_ms=t_interval(p99s, 0.99),
        p99_theory_ms=mmc_response_p99(lam, mu, replicas) * 1000.0,
    )


def check_same_frames(
    detect_replicas: int, seed: int, duration: float, warmup: float
) -> tuple[float, float]:
    """End-to-end p99 (ms) of one replication: the SimPy model and ``simulate``, same seed."""
    spec = question_spec(detect_replicas, seed, duration, warmup)
    lat = sorted(tandem_latencies(spec))
    result = simulate(spec)
    return nearest_rank(lat, 0.99) * 1000.0, float(result["end_to_end"]["latency_ms"]["p99"])


# --- the videoflow side ------------------------------------------------------------------------


@dataclass
class VideoflowRun:
    """``videoflow-aio simulate --sweep`` as one subprocess: its cost and its answer."""

    command: list[str]
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0
    unavailable: str | None = None
    answer: int | None = None
    points: list[dict[str, Any]] = field(default_factory=list)
    document: dict[str, Any] | None = None


def videoflow_executable() -> str:
    """The ``videoflow-aio`` script of this interpreter's environment."""
    exe = Path(sys.executable).parent / "videoflow-aio"
    return str(exe) if exe.exists() else "videoflow-aio"


def videoflow_command(spec_path: Path, s: Settings, exe: str | None = None) -> list[str]:
    """The one command a videoflow-aio user runs for the question."""
    cmd = [
        exe or videoflow_executable(),
        "simulate",
        str(spec_path),
        "--sweep",
        f"stage.{SWEPT_STAGE}.replicas={_points_arg(s.points)}",
        "--slo",
        SLO_TEXT,
        "--precision",
        f"{s.precision:g}",
        "--json",
        "-",
        "--quiet",
        # one process, like the SimPy user: its CPU is then all in RUSAGE_CHILDREN (local
        # worker processes are forkserver children, never reaped by the command, so their
        # CPU would go uncounted) and wall against wall compares the same work
        "--workers",
        "1",
    ]
    if s.confidence != 0.95:
        cmd += ["--confidence", f"{s.confidence:g}"]
    if s.duration is not None:
        cmd += ["--duration", f"{s.duration:g}"]
    if s.warmup is not None:
        cmd += ["--warmup", f"{s.warmup:g}"]
    return cmd


def _points_arg(points: Sequence[int]) -> str:
    lo, hi = min(points), max(points)
    if list(points) == list(range(lo, hi + 1)):
        return f"{lo}..{hi}"
    return ",".join(str(p) for p in points)


def run_videoflow(cmd: list[str]) -> VideoflowRun:
    """Run ``cmd``, timing its wall and the CPU of its process tree; parse the answer. A
    command that fails (e.g. a tree without ``--sweep``) leaves ``unavailable`` set to the
    first line of its stderr."""
    out = VideoflowRun(command=cmd)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall0 = time.perf_counter()  # wall-clock: the benchmark's measurement
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as exc:
        out.unavailable = f"cannot run {cmd[0]}: {exc.strerror}"
        return out
    out.wall_seconds = time.perf_counter() - wall0  # wall-clock: idem
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out.cpu_seconds = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        out.unavailable = first_error_line(proc.stderr) or f"exit status {proc.returncode}"
        return out
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        doc = None
    sweep = doc.get("sweep") if isinstance(doc, dict) else None
    if not isinstance(sweep, dict):
        out.unavailable = "its output is not JSON with a 'sweep' object"
        return out
    out.document = doc
    answer = sweep.get("answer")
    out.answer = None if answer is None else int(answer["value"])
    out.points = list(sweep.get("points", []))
    return out


def first_error_line(stderr: str) -> str | None:
    """The first line of ``stderr`` that reports an error (argparse prints its usage line
    before it), else its first non-blank line."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for ln in lines:
        if "error" in ln.lower():
            return ln
    return lines[0] if lines else None


def _vf_point_line(p: dict[str, Any]) -> str:
    res = p.get("result") or {}
    e2e = res.get("end_to_end") or {}
    p99 = (e2e.get("latency_ms") or {}).get("p99")
    ci = (e2e.get("latency_ms_ci") or {}).get("p99")
    reps = (res.get("run") or {}).get("replications")
    met = (p.get("slo") or {}).get("met")
    verdict = {True: "met", False: "not met", None: "uncertain"}.get(met, str(met))
    if p99 is None:
        figure = "not simulated"
    elif ci:
        figure = f"{p99:9.1f} [{ci[0]:.1f}, {ci[1]:.1f}]"
    else:
        figure = f"{p99:9.1f}"
    return f"  {p.get('value')!s:>4}  p99 {figure}  replications {reps}  {verdict}"


# --- the run -----------------------------------------------------------------------------------


def parse_points(text: str) -> list[int]:
    """``A..B`` or ``v1,v2,...`` as a sorted list of integers."""
    if ".." in text:
        a, b = text.split("..", 1)
        lo, hi = int(a), int(b)
        if hi < lo:
            raise argparse.ArgumentTypeError(f"empty range {text!r}")
        return list(range(lo, hi + 1))
    return sorted({int(v) for v in text.split(",") if v.strip()})


def print_checks(quick: bool) -> bool:
    """Print the SimPy model's checks; whether the closed forms hold."""
    print("SimPy model checks")
    mmc = check_mmc(seconds=10.0 if quick else 50.0, seeds=6 if quick else 20)
    print(f"  {mmc.line()}")
    duration, warmup = (5.0, 1.0) if quick else (20.0, 5.0)
    hand, sim = check_same_frames(10, 1, duration, warmup)
    print(
        f"  the question at N = 10, seed 1, {duration:g} virtual s: end-to-end p99 SimPy "
        f"{hand:.3f} ms, videoflow-aio simulate {sim:.3f} ms "
        f"(difference {abs(hand - sim) / hand:.3%}; the simulator's histogram: 0.049 %)"
    )
    return mmc.ok


def run_simpy(s: Settings, spec_note: str) -> tuple[list[Point], float, float]:
    """The SimPy user's sweep, printed point by point; ``(points, wall s, CPU s)``."""
    print(
        f"\nSimPy by hand: {spec_note}; replications (seed {s.seed}, {s.seed + 1}, …) until "
        f"the {s.confidence:.0%} half-width of end-to-end p99 is within {s.precision:.0%} of "
        f"it (at least {s.min_replications}, at most {s.max_replications})"
    )
    print(
        "     N   load     p99 ms   ± half-width  replications  (their p99s)    CPU s  wall s"
        "  verdict"
    )
    points = []
    cpu0 = time.process_time()
    wall0 = time.perf_counter()  # wall-clock: the benchmark's measurement
    for value in s.points:
        p = simpy_point(value, s)
        points.append(p)
        print(
            f"  {p.value:4d}  {p.utilisation:5.2f}  {p.estimate_ms:9.1f}  ± {p.half_width_ms:9.1f}"
            f"  {len(p.p99s_ms):12d}  {f'({min(p.p99s_ms):.0f}–{max(p.p99s_ms):.0f})':>12}"
            f"  {p.cpu_seconds:6.1f}  {p.wall_seconds:6.1f}  {p.verdict()}",
            flush=True,
        )
    wall = time.perf_counter() - wall0  # wall-clock: idem
    cpu = time.process_time() - cpu0
    answer = simpy_answer(points)
    told = "none of the points" if answer is None else f"{SWEPT_STAGE} replicas = {answer}"
    print(f"  SimPy answer: {told}; time to answer: wall {wall:.1f} s, CPU {cpu:.1f} s")
    return points, wall, cpu


def run_videoflow_side(s: Settings) -> VideoflowRun:
    """The videoflow-aio command on a temporary copy of the spec, printed."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "detector-replicas.toml"
        path.write_text(SPEC_TOML, encoding="utf-8")
        cmd = videoflow_command(path, s)
        shown = " ".join("'" + c + "'" if "<" in c or ">" in c else c for c in cmd[1:]).replace(
            str(path), "detector-replicas.toml"
        )
        print(f"\nvideoflow-aio: videoflow-aio {shown}", flush=True)
        vf = run_videoflow(cmd)
    if vf.unavailable is not None:
        print(f"  videoflow side unavailable on this tree: {vf.unavailable}")
        return vf
    for p in vf.points:
        print(_vf_point_line(p))
    warnings = (vf.document or {}).get("warnings") or []
    for w in warnings:
        print(f"  warning: {w}")
    told = "none of the points" if vf.answer is None else f"{SWEPT_STAGE} replicas = {vf.answer}"
    print(
        f"  videoflow-aio answer: {told}; time to answer: wall {vf.wall_seconds:.1f} s, "
        f"CPU {vf.cpu_seconds:.1f} s (the command and its worker processes)"
    )
    return vf


def example_note() -> str | None:
    """A line when ``examples/detector-replicas.toml`` exists and says something else."""
    if not EXAMPLE.exists():
        return None
    try:
        same = tomllib.loads(EXAMPLE.read_text(encoding="utf-8")) == tomllib.loads(SPEC_TOML)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        return f"note: cannot read {EXAMPLE.name}: {exc}"
    return None if same else f"note: {EXAMPLE.name} differs from this benchmark's spec"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a smoke run of a few seconds")
    p.add_argument("--points", type=parse_points, help="swept detector replicas (default 9..14)")
    p.add_argument(
        "--precision", type=float, help="relative half-width target (0.05; --quick: 0.1)"
    )
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--min-replications", type=int, default=None)
    p.add_argument("--max-replications", type=int, default=None, help="the SimPy user's cap")
    p.add_argument(
        "--duration", type=float, metavar="S", help="virtual s per replication (spec: 60)"
    )
    p.add_argument("--warmup", type=float, metavar="S", help="warm-up s (spec: 10)")
    p.add_argument("--simpy-only", action="store_true", help="skip the videoflow-aio command")
    args = p.parse_args(argv)
    quick = args.quick
    if args.precision is None:
        args.precision = 0.1 if quick else 0.05
    if not (0 < args.precision < 1 and 0 < args.confidence < 1):
        p.error("--precision and --confidence must be in (0, 1)")
    s = Settings(
        points=args.points or ([10, 11] if quick else list(range(9, 15))),
        precision=args.precision,
        confidence=args.confidence,
        min_replications=args.min_replications or (3 if quick else 5),
        max_replications=args.max_replications or (4 if quick else 20),
        duration=args.duration if args.duration is not None else (10.0 if quick else None),
        warmup=args.warmup if args.warmup is not None else (2.0 if quick else None),
    )
    if s.max_replications < max(2, s.min_replications):
        p.error("--max-replications must be at least --min-replications (and 2)")
    base = question_spec(10, s.seed, s.duration, s.warmup).run
    spec_note = f"{base.duration_seconds:g} s runs, {base.warmup_seconds:g} s warm-up"
    print(
        "The question: 30 cameras × 25 fps; decode 4 × exp 3 ms → detect N × lognormal 12 ms "
        "(p99 30 ms) → track 2 × exp 1.5 ms → sink 1 × 0.5 ms; the smallest N with end-to-end "
        f"p99 ≤ {SLO_MS:g} ms"
    )
    note = example_note()
    if note:
        print(note)
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}\n")
    ok = print_checks(quick)
    points, simpy_wall, simpy_cpu = run_simpy(s, spec_note)
    simpy_told = simpy_answer(points)
    if args.simpy_only:
        return 0 if ok else 1
    vf = run_videoflow_side(s)
    if vf.unavailable is None:
        agree = "yes" if vf.answer == simpy_told else "NO"
        print(
            f"\nratio videoflow-aio ÷ SimPy, time to answer: wall "
            f"{vf.wall_seconds / simpy_wall:.2f}×, CPU {vf.cpu_seconds / simpy_cpu:.2f}× "
            f"(SimPy {simpy_wall:.1f} s wall / {simpy_cpu:.1f} s CPU in one process; "
            f"videoflow-aio {vf.wall_seconds:.1f} s / {vf.cpu_seconds:.1f} s); "
            f"answers agree: {agree} (SimPy {simpy_told}, videoflow-aio {vf.answer})"
        )
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
