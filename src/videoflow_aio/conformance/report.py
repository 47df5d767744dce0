"""Rendering conformance results: JSON report, rich tables, progress.

Everything here writes through a :class:`rich.console.Console`; on a stream that is not a
terminal rich emits no escape codes, and :func:`make_console` gives such streams a wide fixed
width so tables stay readable in CI logs and pipes.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import IO, Protocol

import msgspec
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from ._case import Case
from ._provider import Provider
from ._runner import CaseResult, Report, summarize

STYLE = {"pass": "green", "fail": "bold red", "skip": "yellow"}
PLAIN_WIDTH = 160  # columns for tables written to a file or pipe (no terminal to ask)


def make_console(file: IO[str]) -> Console:
    """A console on ``file``: colours only on a terminal, a wide fixed width elsewhere."""
    probe = Console(file=file)
    if probe.is_terminal or os.environ.get("COLUMNS"):
        return probe
    return Console(file=file, width=PLAIN_WIDTH, highlight=False)


def report_json(results: Sequence[CaseResult]) -> bytes:
    """The JSON report: ``{"cases": [...], "summary": {"pass": n, "fail": n, "skip": n}}``."""
    return msgspec.json.format(msgspec.json.encode(summarize(results)), indent=2) + b"\n"


def load_report(data: bytes | str) -> Report:
    """Parse a JSON report written by :func:`report_json`."""
    return msgspec.json.decode(data, type=Report)


def _seconds(s: float) -> str:
    return f"{s:.3f}" if s < 100 else f"{s:.0f}"


def results_table(results: Sequence[CaseResult], show: str = "all") -> Table:
    """One row per case run: ID, title, provider, backend, outcome, reason, virtual s, wall s.

    ``show`` is ``all``, ``problems`` (fail and skip) or ``fail``.
    """
    keep = {"all": ("pass", "fail", "skip"), "problems": ("fail", "skip"), "fail": ("fail",)}[show]
    table = Table(title="conformance results", title_justify="left", expand=False)
    table.add_column("ID", no_wrap=True)
    table.add_column("title", overflow="fold", ratio=3)
    table.add_column("provider", no_wrap=True)
    table.add_column("backend", no_wrap=True)
    table.add_column("outcome", no_wrap=True)
    table.add_column("reason", overflow="fold", ratio=4)
    table.add_column("virtual s", justify="right", no_wrap=True)
    table.add_column("wall s", justify="right", no_wrap=True)
    for r in results:
        if r.outcome not in keep:
            continue
        table.add_row(  # Text, not str: a reason like "[/x]" is data, never markup
            Text(r.id),
            Text(r.title),
            Text(r.provider),
            Text(r.backend),
            Text(r.outcome, style=STYLE[r.outcome]),
            Text(r.reason),
            _seconds(r.virtual_seconds),
            _seconds(r.wall_seconds),
        )
    return table


def summary_table(results: Sequence[CaseResult], contract_of: Mapping[str, str]) -> Table:
    """Pass / fail / skip counts per contract and provider, and a total row."""
    counts: dict[tuple[str, str], dict[str, int]] = defaultdict(
        lambda: {"pass": 0, "fail": 0, "skip": 0}
    )
    wall: dict[tuple[str, str], float] = defaultdict(float)
    for r in results:
        key = (contract_of.get(r.id, "?"), r.provider)
        counts[key][r.outcome] += 1
        wall[key] += r.wall_seconds
    table = Table(title="summary", title_justify="left")
    for name in ("contract", "provider"):
        table.add_column(name, no_wrap=True)
    for name in ("pass", "fail", "skip", "wall s"):
        table.add_column(name, justify="right", no_wrap=True)
    for key in sorted(counts):
        c = counts[key]
        table.add_row(
            *(Text(k) for k in key),
            Text(str(c["pass"]), style=STYLE["pass"] if c["pass"] else ""),
            Text(str(c["fail"]), style=STYLE["fail"] if c["fail"] else ""),
            Text(str(c["skip"]), style=STYLE["skip"] if c["skip"] else ""),
            _seconds(wall[key]),
        )
    s = summarize(results).summary
    table.add_section()
    table.add_row(
        "total", "", str(s.passed), str(s.failed), str(s.skipped), _seconds(sum(wall.values()))
    )
    return table


def verdict(results: Sequence[CaseResult]) -> Text:
    """The closing line: ``N passed, N failed, N skipped``, coloured by the worst outcome."""
    s = summarize(results).summary
    style = STYLE["fail"] if s.failed else STYLE["pass"]
    return Text(f"{s.passed} passed, {s.failed} failed, {s.skipped} skipped", style=style)


def cases_table(chosen: Sequence[Case]) -> Table:
    """The registered cases: ID, contract, title, needs, controls."""
    table = Table(title=f"{len(chosen)} conformance cases", title_justify="left")
    table.add_column("ID", no_wrap=True)
    table.add_column("contract", no_wrap=True)
    table.add_column("title", overflow="fold")
    table.add_column("needs", overflow="fold")
    table.add_column("controls", overflow="fold")
    for c in chosen:
        cells = (
            c.id,
            c.contract,
            c.title,
            ", ".join(sorted(c.needs)),
            ", ".join(sorted(c.controls)),
        )
        table.add_row(*(Text(cell) for cell in cells))
    return table


def providers_table(providers: Sequence[Provider]) -> Table:
    """Providers: name, contracts, clock, and whether they can run here."""
    table = Table(title="providers", title_justify="left")
    table.add_column("provider", no_wrap=True)
    table.add_column("contracts", overflow="fold")
    table.add_column("clock", no_wrap=True)
    table.add_column("available", overflow="fold")
    for p in providers:
        why = p.unavailable()
        table.add_row(
            Text(p.name),
            ", ".join(sorted(p.contracts())),
            "real (scaled)" if p.real_time else "virtual",
            Text("yes", style=STYLE["pass"]) if why is None else Text(f"no: {why}", style="yellow"),
        )
    return table


class ProgressSink(Protocol):
    """What :func:`progress` yields: call it with each result as it arrives."""

    def __call__(self, result: CaseResult) -> None: ...


@contextmanager
def progress(console: Console, total: int) -> Iterator[ProgressSink]:
    """A callback to feed each result to: a live bar on a terminal, one plain line otherwise."""
    if console.is_terminal:
        bar = Progress(
            TextColumn("[bold]conformance"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[last]}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        failed = [0]
        with bar:
            task = bar.add_task("conformance", total=total, last="")

            def advance(result: CaseResult) -> None:
                failed[0] += result.outcome == "fail"
                last = escape(f"{result.id} {result.provider}/{result.backend} {result.outcome}")
                if failed[0]:
                    last += f"  [red]{failed[0]} failed[/red]"
                bar.update(task, advance=1, last=last)

            yield advance
        return

    done = [0]
    width = len(str(total))

    def line(result: CaseResult) -> None:
        done[0] += 1
        console.print(
            f"[{done[0]:>{width}}/{total}] {result.outcome:<4} {result.id} "
            f"{result.provider}/{result.backend} {result.wall_seconds:.3f}s",
            highlight=False,
            markup=False,
        )

    yield line


__all__ = [
    "ProgressSink",
    "cases_table",
    "load_report",
    "make_console",
    "progress",
    "providers_table",
    "report_json",
    "results_table",
    "summary_table",
    "verdict",
]
