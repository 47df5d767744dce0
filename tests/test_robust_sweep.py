"""Issue 26's sweep: random, mostly hostile input to the simulate spec, the pipeline's public
functions and the command line's options. Every refusal is one of the library's typed errors
(or ``SystemExit(2)`` from argparse); nothing else escapes, and memory stays bounded.

Each surface's ``max_examples`` is sized for CI (the whole module runs in well under 30 s);
``SWEEP_COUNTS`` records how many inputs each surface was given (printed with ``-s``)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import resource
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from videoflow_aio.cli import main
from videoflow_aio.contracts.errors import VideoflowError
from videoflow_aio.contracts.messaging import ChannelId, SubscriptionId
from videoflow_aio.memory.messaging import MemoryMessagingBackend
from videoflow_aio.pipeline import (
    ExceptionPolicy,
    LatencyHistogram,
    Node,
    RetryLater,
    StageWorker,
    plan_pipeline,
)
from videoflow_aio.sim import parse_spec

SWEEP_COUNTS: Counter[str] = Counter()
MEMORY_GROWTH_LIMIT_KB = 512 * 1024  # ru_maxrss is in KiB on Linux

NASTY_NUMBERS = st.sampled_from(
    [0, -1, 1, 2**31, 2**63, 10**30, 10**400, 1e30, -1e30, 1e308, math.inf, -math.inf, math.nan,
     0.5, 1e-300, True, False]
)  # fmt: skip
NASTY_STRINGS = st.sampled_from(
    ["", " ", "a.b", "nul\x00", "esc\x1b", "x" * 300, "cams", "decode", "*", ">", "é", "#"]
) | st.text(max_size=12)
SCALARS = NASTY_NUMBERS | NASTY_STRINGS | st.none() | st.integers() | st.floats()
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(NASTY_STRINGS, inner, max_size=4),
    max_leaves=6,
)


def base_spec() -> dict[str, Any]:
    return {
        "run": {"seed": 1, "duration_seconds": 5.0},
        "source": [{"name": "cams", "rate_hz": 10, "bytes": 100}],
        "stage": [
            {"name": "decode", "inputs": ["cams"], "service": {"dist": "constant", "value_ms": 1}},
            {
                "name": "infer",
                "inputs": ["decode"],
                "replicas": 2,
                "service": {"dist": "lognormal", "mean_ms": 2, "p99_ms": 9},
            },
        ],
        "fault": [{"at_seconds": 1.0, "kind": "crash_replica", "stage": "infer"}],
        "node": [],
        "gpu": {"authority": "device-plugin"},
        "payload": {"tier": "durable"},
    }


KEYS = st.sampled_from(
    [
        "seed", "duration_seconds", "warmup_seconds", "backend", "drain_seconds", "bin_seconds",
        "flow_id", "run_id", "name", "rate_hz", "streams", "arrival", "bytes", "inputs",
        "replicas", "batch", "service", "ack_wait_seconds", "max_deliver", "gpu", "output_bytes",
        "max_queue", "overflow", "retry_delay_seconds", "dist", "mean_ms", "p99_ms", "value_ms",
        "file", "samples_ms", "at_seconds", "kind", "stage", "channel", "replica", "count",
        "factor", "duration_seconds", "restart_after_seconds", "product", "gpus", "memory_gib",
        "mig", "tier", "max_bytes", "ttl_seconds", "obligation_seconds", "authority", "bogus",
    ]
)  # fmt: skip


@st.composite
def mutated_specs(draw: st.DrawFn) -> Any:
    """A valid spec with a few keys set to hostile values (or a whole section replaced)."""
    if draw(st.integers(0, 9)) == 0:
        return draw(VALUES)  # not even a table, sometimes
    doc = base_spec()
    tables: list[dict[str, Any]] = [doc["run"], doc["gpu"], doc["payload"], doc]
    tables += doc["source"] + doc["stage"] + doc["fault"]
    tables += [s["service"] for s in doc["stage"]]
    for _ in range(draw(st.integers(1, 4))):
        table = draw(st.sampled_from(tables))
        table[draw(KEYS)] = draw(VALUES)
    return doc


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(doc=mutated_specs())
def test_sweep_the_simulate_spec(doc: Any) -> None:
    SWEEP_COUNTS["simulate spec"] += 1
    with contextlib.suppress(VideoflowError):  # a typed refusal; anything else fails
        parse_spec(doc, base=Path("/nonexistent-base"))


CHANNEL = ChannelId("flow", "r1", "cams")
SUB = SubscriptionId(CHANNEL, "decode")


async def _handler(d: Any, data: bytes | None) -> None:
    return None


WORKER_OPTIONS = st.fixed_dictionaries(
    {},
    optional={
        "replicas": VALUES,
        "batch": VALUES,
        "name": VALUES,
        "output": VALUES | st.just(CHANNEL),
        "readers": VALUES,
        "eos": VALUES | st.just([SUB]),
        "policy": VALUES,
        "call_timeout": VALUES,
        "poll_seconds": VALUES,
        "byte_credit": VALUES,
        "observe": VALUES,
        "payload_ttl_seconds": VALUES,
        "obligation_seconds": VALUES,
        "handler_timeout_seconds": VALUES,
        "idle_limit_seconds": VALUES,
    },
)


OPTION_NAMES = (
    "replicas", "batch", "name", "output", "readers", "eos", "policy", "call_timeout",
    "poll_seconds", "byte_credit", "observe", "payload_ttl_seconds", "obligation_seconds",
    "handler_timeout_seconds", "idle_limit_seconds", "payload",
)  # fmt: skip
ONE_OPTION = st.builds(lambda key, value: {key: value}, st.sampled_from(OPTION_NAMES), VALUES)
"""Exactly one option set to a hostile value, the rest valid: each check reached alone."""


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    subscription=VALUES | st.just(SUB) | st.just([SUB]),
    handler=st.sampled_from([_handler, None, 5, "h", print]),
    options=WORKER_OPTIONS | ONE_OPTION,
    samples=st.lists(VALUES, max_size=5),
    scale=VALUES,
    qs=VALUES,
    flow=VALUES,
    stages=VALUES | st.lists(st.builds(Node, name=VALUES, inputs=VALUES), max_size=3),
    policy=st.tuples(VALUES, VALUES),
)
def test_sweep_the_pipeline_functions(
    subscription: Any,
    handler: Any,
    options: dict[str, Any],
    samples: list[Any],
    scale: Any,
    qs: Any,
    flow: Any,
    stages: Any,
    policy: tuple[Any, Any],
) -> None:
    SWEEP_COUNTS["pipeline functions"] += 1
    backend = MemoryMessagingBackend()
    calls: list[Callable[[], object]] = [
        lambda: StageWorker(backend, subscription, handler, **options),
        lambda: plan_pipeline(flow, "r1", stages),
        lambda: ExceptionPolicy(*policy),
        lambda: RetryLater("why", policy[1]),
    ]
    h = LatencyHistogram()
    calls += [functools.partial(h.add, value) for value in samples]
    calls += [lambda: h.summary(scale), lambda: h.percentiles(qs), lambda: h.merge(qs)]
    for call in calls:
        with contextlib.suppress(VideoflowError):  # a typed refusal; anything else fails
            call()


FLAG_VALUES = st.sampled_from(
    ["", " ", ",", "nan", "inf", "-1", "0", "1", "1e30", "99999999999999999999", "abc", "-",
     "/dev/full", "/nonexistent/x.json", "/", "MSG-001", "TOY-*", "asyncio", "trio,asyncio",
     "memory", "all", "x=y", "memory.url=nats://u:p@h", "\x00", "no_such_module_xyz"]
)  # fmt: skip
COMMANDS = {
    "conformance": ["--provider", "--backend", "--select", "--json", "--timeout", "--option",
                    "--show", "--contract"],
    "explore": ["--select", "--seeds", "--first-seed", "--backend", "--jitter", "--faults",
                "--stop-after", "--load", "--replay", "--seed", "--log"],
    "simulate": ["--json", "--seed", "--duration", "--warmup", "--backend"],
}  # fmt: skip


@st.composite
def argvs(draw: st.DrawFn, spec: str) -> list[str]:
    command = draw(st.sampled_from(sorted(COMMANDS)))
    argv = [command]
    if command == "simulate":
        argv.append(draw(st.sampled_from([spec, "/nonexistent.toml", "/dev/zero", "/"])))
    for _ in range(draw(st.integers(0, 4))):
        argv += [draw(st.sampled_from(COMMANDS[command])), draw(FLAG_VALUES)]
    if command == "conformance":
        argv += ["--select", "NO-SUCH-CASE-*"]  # checks every option, then matches nothing
    elif command == "explore" and "--replay" not in argv:
        argv.append("--list")  # keep it to parsing and checking: no run
    if command == "explore" and "--replay" in argv:
        argv += ["--seed", "0", "--backend", "trio"]  # a replay of an unknown ID: refused fast
    return argv


SPEC = """
[run]
duration_seconds = 2
[[source]]
name = "cams"
rate_hz = 2
[[stage]]
name = "decode"
inputs = ["cams"]
service = { dist = "constant", value_ms = 1 }
"""


def test_sweep_the_cli_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "spec.toml").write_text(SPEC)
    statuses: Counter[int] = Counter()

    @settings(max_examples=50, deadline=None, suppress_health_check=list(HealthCheck))
    @given(argv=argvs(str(tmp_path / "spec.toml")))
    def sweep(argv: list[str]) -> None:
        SWEEP_COUNTS["cli options"] += 1
        if "--replay" in argv and argv[argv.index("--replay") + 1] in ("MSG-001",):
            argv[argv.index("--replay") + 1] = "NOPE-1"  # a real replay is not a parse check
        try:
            status = main([*argv, "--quiet"] if argv[0] == "simulate" else argv)
        except SystemExit as exc:  # argparse: bad usage
            assert exc.code == 2, argv
            status = 2
        assert status in (0, 1, 2), (argv, status)
        statuses[status] += 1

    sweep()
    assert statuses[2] > 0


@pytest.fixture(scope="module", autouse=True)
def _bounded_memory_and_counts() -> Any:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    yield
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    print(f"\nsweep inputs per surface: {dict(SWEEP_COUNTS)}; max RSS grew {grown / 1024:.0f} MiB")
    assert grown < MEMORY_GROWTH_LIMIT_KB


def test_no_loop_is_left_running() -> None:
    with pytest.raises(RuntimeError):
        asyncio.get_running_loop()
