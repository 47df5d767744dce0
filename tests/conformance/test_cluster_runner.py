"""Providers side by side (``run(parallel=True)``, the CLI's default): each provider in its own
thread, its cases in order; results in case order; asyncio cases get plain asyncio loops in
every thread even after trio-asyncio was imported."""

from __future__ import annotations

import asyncio
import threading

import anyio
import pytest

from _conformance_fakes import FakeProvider, fake_case
from videoflow_aio.conformance import Harness, run


def test_providers_run_side_by_side_and_results_keep_case_order() -> None:
    """Provider a's case waits for provider b's: it can only pass when both run at once."""
    b_started = threading.Event()
    seen: list[str] = []

    async def first(h: Harness) -> None:
        if h.provider == "a":
            h.check(await anyio.to_thread.run_sync(b_started.wait, 30), "b ran meanwhile")
        else:
            b_started.set()
            h.check(True)

    async def second(h: Harness) -> None:
        h.check(True)

    cases = [fake_case(first, "MSG-901"), fake_case(second, "MSG-902")]
    providers = [FakeProvider("a", real_time=True), FakeProvider("b", real_time=True)]
    results = run(cases, providers, ["asyncio"], lambda r: seen.append(r.provider), parallel=True)
    assert [(r.id, r.provider, r.outcome) for r in results] == [
        ("MSG-901", "a", "pass"),
        ("MSG-901", "b", "pass"),
        ("MSG-902", "a", "pass"),
        ("MSG-902", "b", "pass"),
    ]
    assert sorted(seen) == ["a", "a", "b", "b"]
    assert all(p.setups == 1 and p.closes == 1 for p in providers)


def test_one_provider_or_serial_runs_in_this_thread() -> None:
    threads: set[str] = set()

    async def where(h: Harness) -> None:
        threads.add(threading.current_thread().name)
        h.check(True)

    run([fake_case(where)], [FakeProvider("a"), FakeProvider("b")], ["asyncio"])
    run([fake_case(where)], [FakeProvider("c")], ["asyncio"], parallel=True)
    assert threads == {threading.current_thread().name}


def test_asyncio_cases_in_worker_threads_get_plain_asyncio_loops() -> None:
    pytest.importorskip("trio_asyncio")
    import trio_asyncio  # type: ignore[import-untyped]  # noqa: F401 - new threads get its loops

    kinds: list[str] = []

    async def loop_kind(h: Harness) -> None:
        kinds.append(type(asyncio.get_running_loop()).__module__)
        h.check(True)

    run(
        [fake_case(loop_kind)],
        [FakeProvider("a", real_time=True), FakeProvider("b", real_time=True)],
        ["asyncio"],
        parallel=True,
    )
    assert kinds and not any("trio_asyncio" in k for k in kinds), kinds


def test_parallel_backends_overlap_but_an_exclusive_case_runs_alone() -> None:
    """A provider with parallel_backends runs its asyncio and trio cases at once, except a
    case using one of its exclusive_controls: that one never overlaps another."""
    running: list[str] = []
    overlaps: list[tuple[str, list[str]]] = []
    guard = threading.Lock()
    both = threading.Barrier(2, timeout=30)

    async def shared(h: Harness) -> None:
        await anyio.to_thread.run_sync(both.wait)  # both backends at once, or a timeout
        h.check(True)

    async def alone(h: Harness) -> None:
        name = f"alone-{threading.current_thread().name}"
        with guard:
            overlaps.append((name, list(running)))
            running.append(name)
        await anyio.sleep(0.2)
        with guard:
            running.remove(name)
        h.check(True)

    async def other(h: Harness) -> None:
        with guard:
            overlaps.append(("other", list(running)))
            running.append("other")
        await anyio.sleep(0.05)
        with guard:
            running.remove("other")
        h.check(True)

    p = FakeProvider("p", real_time=True)
    p.parallel_backends = True
    p.exclusive_controls = frozenset({"pause_acceptance"})
    cases = [
        fake_case(shared, "MSG-901"),
        fake_case(alone, "MSG-902", controls=("pause_acceptance",)),
        fake_case(other, "MSG-903"),
    ]
    results = run(cases, [p], parallel=True)
    assert [r.outcome for r in results] == ["pass"] * 6, results
    assert len(overlaps) == 4, overlaps
    for name, seen in overlaps:  # at every start: an exclusive case had the provider alone
        assert (
            seen == [] if name.startswith("alone") else not any(s.startswith("alone") for s in seen)
        ), overlaps
