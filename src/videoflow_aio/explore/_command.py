"""``videoflow-aio explore``: the explorer's command line (parsed in ``cli.py``).

videoflow-aio explore [--select PATTERN] [--seeds N] [--first-seed S] [--backend B,...]
                      [--jitter S] [--faults P] [--stop-after K] [--load MODULE] [--list]
videoflow-aio explore --replay ID --seed N [--backend B] [--jitter S] [--faults P]
                      [--load MODULE] [--log PATH] [--traceback]
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from ..contracts.errors import ValidationError
from ._explorer import Exploration, explore, find_target, load, select_targets
from ._program import Program
from ._run import Run, replay_command, run_target

PLAIN_EVERY = 0.1  # off a terminal: a progress line each tenth of the seeds


def _failure_lines(run: Run, loads: Sequence[str]) -> list[str]:
    faults = "".join(f"\n    injected: {f.kind} at {f.barrier} (t={f.at!r})" for f in run.injected)
    return [
        f"FAIL {run.target} {run.backend} seed {run.seed}: {run.reason}{faults}",
        f"  replay: {replay_command(run, load=loads)}",
    ]


@contextmanager
def _progress(console: Console, seeds: int) -> Iterator[tuple[Progress | None, TaskID]]:
    if not console.is_terminal:
        yield None, TaskID(0)
        return
    bar = Progress(
        TextColumn("[bold]explore"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("seeds {task.fields[status]}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    with bar:
        yield bar, bar.add_task("explore", total=seeds, status="")


def run_explore(args: argparse.Namespace, out: Console, err: Console) -> int:
    """The exploration: exit status 1 when a run failed (or nothing matched); 130 after
    Ctrl-C, once the summary of the runs that ended is printed."""
    for module in args.load or ():
        load(module)
    targets = select_targets(args.select)
    if args.list:
        table = Table(title="explorable targets", title_justify="left")
        table.add_column("ID", no_wrap=True)
        table.add_column("kind")
        table.add_column("title", overflow="fold")
        for t in targets:
            table.add_row(t.id, "program" if isinstance(t, Program) else "case", t.title)
        out.print(table)
        return 0
    if not targets:
        err.print(f"no case or program matches --select {args.select!r}", markup=False)
        return 1
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    loads = list(args.load or ())
    every = max(1, int(args.seeds * PLAIN_EVERY))
    state = {"seed": args.first_seed, "failed": 0, "runs": 0}
    with _progress(err, args.seeds) as (bar, task):

        def on_run(run: Run) -> None:
            state["runs"] += 1
            if run.seed != state["seed"]:
                done = run.seed - args.first_seed
                state["seed"] = run.seed
                if bar is not None:
                    bar.update(task, completed=done)
                elif done % every == 0:
                    err.print(
                        f"explore: {done}/{args.seeds} seeds, {state['runs']} runs, "
                        f"{state['failed']} failed",
                        markup=False,
                        highlight=False,
                    )
            if run.outcome == "fail":
                state["failed"] += 1
                for line in _failure_lines(run, loads):
                    err.print(escape(line), highlight=False, soft_wrap=True)
            if bar is not None:
                status = escape(f"{state['runs']} runs")
                if state["failed"]:
                    status += f"  [red]{state['failed']} failed[/red]"
                bar.update(task, status=status)

        found = Exploration()
        with suppress(KeyboardInterrupt):  # found keeps the runs that ended: exit 130
            explore(
                targets,
                seeds,
                args.backends,
                jitter=args.jitter,
                fault_rate=args.faults,
                stop_after=args.stop_after,
                on_run=on_run,
                into=found,
            )
    out.print(_summary(found, args))
    for run in found.failures:
        for line in _failure_lines(run, loads):
            out.print(escape(line), highlight=False, soft_wrap=True)
    if found.interrupted:
        err.print("interrupted", style="bold red")
        return 130
    return 1 if found.failures else 0


def _summary(found: Exploration, args: argparse.Namespace) -> Table:
    table = Table(title="exploration", title_justify="left")
    columns = ("seeds", "runs", "pass", "fail", "faulted", "skip", "injected", "wall s", "runs/s")
    for col in columns:
        table.add_column(col, justify="right")
    rate = found.runs / found.wall_seconds if found.wall_seconds else 0.0
    c = found.counts
    table.add_row(
        str(found.seeds), str(found.runs), str(c["pass"]), str(c["fail"]), str(c["faulted"]),
        str(c["skip"]), str(found.injected), f"{found.wall_seconds:.1f}", f"{rate:,.0f}",
    )  # fmt: skip
    table.caption = (
        f"backends {','.join(args.backends)}; jitter {args.jitter:g} s; faults {args.faults:g}"
        + ("; interrupted by Ctrl-C: the runs that ended" if found.interrupted else "")
    )
    return table


def run_replay(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Replay one run exactly; write its log. Exit status 1 when the run fails, 130 after
    Ctrl-C; a log that cannot be written is a ValidationError (exit status 2)."""
    for module in args.load or ():
        load(module)
    if len(args.backends) != 1:
        raise ValidationError("--replay runs one backend: give --backend", field="backend")
    if args.seed is None:
        raise ValidationError("--replay needs --seed N", field="seed")
    target = find_target(args.replay)
    try:
        run = run_target(
            target, args.backends[0], args.seed, jitter=args.jitter, fault_rate=args.faults
        )
    except KeyboardInterrupt:
        err.print("interrupted", style="bold red")
        return 130
    out.print(
        f"{run.target} {run.backend} seed {run.seed}: {run.outcome}"
        + (f": {run.reason}" if run.reason else ""),
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    out.print(
        f"  {len(run.log)} events, {run.virtual_seconds!r} virtual s, "
        f"{len(run.injected)} injected fault(s)",
        markup=False,
        highlight=False,
    )
    for f in run.injected:
        out.print(f"  injected: {f.kind} at {f.barrier} (t={f.at!r})", markup=False)
    if args.traceback and run.traceback:
        err.print(run.traceback, markup=False, highlight=False)
    if args.log:
        try:
            Path(args.log).write_bytes(run.log.export_jsonl())
        except OSError as exc:  # checked before the run; the disk may still refuse it now
            reason = exc.strerror or type(exc).__name__
            raise ValidationError(
                f"--log {args.log}: cannot write: {reason}", field="log", value=args.log
            ) from None
        out.print(f"  log written to {args.log}", markup=False, highlight=False)
    return 1 if run.outcome == "fail" else 0
