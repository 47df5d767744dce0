"""``videoflow-aio simulate SPEC.toml [--json PATH] [--plot PATH] ...``.

Exit status: 0 after a run (even one whose pipeline did not drain: that is a finding, shown
in the table and the JSON); 2, with a one-line message on stderr, for a bad spec, a setup
the spec asks for that cannot be made (e.g. GPU slices that do not fit), ``--plot`` without
matplotlib, or an output path that cannot be written (checked before the run, so an hour of
virtual time is not lost to a typo in a directory name); 130 after Ctrl-C, with ``--json``
holding ``{"interrupted": true, ...}`` (how far the run got), never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn

from ._report import faults_table, results_table, to_json
from ._run import simulate
from ._spec import SimError, SpecError, load_spec


def add_parser(sub: Any) -> None:
    """Add the ``simulate`` subcommand to an argparse subparsers object."""
    p = sub.add_parser(
        "simulate",
        help="simulate a pipeline on virtual time: latency, throughput, redeliveries",
        description="Run a TOML pipeline spec on the memory models on virtual time and report "
        "per-stage and end-to-end latency percentiles, throughput, redeliveries, drops and "
        "utilisation. See docs/simulate.md.",
    )
    p.add_argument("spec", metavar="SPEC.toml", help="the simulation spec")
    p.add_argument("--json", metavar="PATH|-", help="write the result as JSON ('-': stdout)")
    p.add_argument("--plot", metavar="PATH", help="write the plots (needs the plot extra)")
    p.add_argument("--seed", type=int, help="override run.seed")
    p.add_argument("--duration", type=float, metavar="S", help="override run.duration_seconds")
    p.add_argument("--warmup", type=float, metavar="S", help="override run.warmup_seconds")
    p.add_argument("--backend", choices=("asyncio", "trio"), help="override run.backend")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    pairs = (
        ("seed", args.seed),
        ("duration_seconds", args.duration),
        ("warmup_seconds", args.warmup),
        ("backend", args.backend),
    )
    return {k: v for k, v in pairs if v is not None}


def cmd_simulate(args: argparse.Namespace, out: Console, err: Console) -> int:
    """Run the subcommand; the exit status."""
    if args.plot:
        from ._plot import PlotUnavailable, _pyplot

        try:
            _pyplot()
        except PlotUnavailable as exc:
            _error(err, f"videoflow-aio: error: {exc}")
            return 2
    try:
        spec = load_spec(args.spec, _overrides(args))
    except SpecError as exc:
        _error(err, f"videoflow-aio: error: bad spec {args.spec}: {exc.message}")
        return 2
    for flag, target in (("--json", args.json), ("--plot", args.plot)):
        problem = _unwritable(target) if target and target != "-" else None
        if problem is None and flag == "--plot" and target:
            from ._plot import unsupported_format

            problem = unsupported_format(target)
        if problem is not None:
            _error(err, f"videoflow-aio: error: {flag} {target}: {problem}")
            return 2
    json_to_stdout = args.json == "-"
    show = err if json_to_stdout else out
    duration = spec.run.duration_seconds
    wall0 = time.perf_counter()  # wall-clock: the progress bar shows elapsed real time
    reached = [0.0]

    def note(virtual: float, total: float) -> None:
        reached[0] = virtual

    try:
        if args.quiet:
            result = simulate(spec, progress=note)
        else:
            columns = (
                TextColumn("simulating"),
                BarColumn(),
                TaskProgressColumn(),
                TextColumn("{task.fields[detail]}"),
            )
            with Progress(*columns, console=err, transient=True) as bar:
                task = bar.add_task("sim", total=duration, detail="")

                def on_progress(virtual: float, total: float) -> None:
                    reached[0] = virtual
                    wall = time.perf_counter() - wall0  # wall-clock: as above
                    bar.update(
                        task,
                        completed=virtual,
                        detail=f"virtual {virtual:,.0f}/{total:,.0f} s · wall {wall:,.1f} s",
                    )

                result = simulate(spec, progress=on_progress)
    except SimError as exc:
        _error(err, f"videoflow-aio: error: {exc.message}")
        return 2
    except KeyboardInterrupt:
        return _interrupted(args, spec.run.duration_seconds, reached[0], err)
    show.print(results_table(result))
    ft = faults_table(result)
    if ft is not None:
        show.print(ft)
    run = result["run"]
    show.print(
        f"{run['events']:,} messages in {run['virtual_seconds']:,.1f} virtual s, "
        f"{run['wall_seconds']:,.1f} wall s"
        + ("" if run["drained"] else " — the pipeline did not drain within run.drain_seconds"),
        markup=False,
        highlight=False,
    )
    if args.json:
        data = to_json(result)
        if json_to_stdout:
            sys.stdout.write(data.decode())
            sys.stdout.flush()
        else:
            try:
                Path(args.json).write_bytes(data)
            except OSError as exc:
                _error(err, f"videoflow-aio: error: --json {args.json}: {exc}")
                return 2
            show.print(f"JSON written to {args.json}", markup=False, highlight=False)
    if args.plot:
        from ._plot import plot

        try:
            plot(result, args.plot)
        except (OSError, ValueError) as exc:  # ValueError: a suffix matplotlib cannot write
            _error(err, f"videoflow-aio: error: --plot {args.plot}: {exc}")
            return 2
        show.print(f"plot written to {args.plot}", markup=False, highlight=False)
    return 0


def _interrupted(args: argparse.Namespace, duration: float, reached: float, err: Console) -> int:
    """Ctrl-C during the run: say how far it got (and write that as the ``--json`` report,
    so a script reading it finds valid JSON); exit status 130."""
    _error(err, f"interrupted at virtual {reached:,.1f} of {duration:,.1f} s: no results")
    if args.json:
        report = {
            "interrupted": True,
            "spec": str(args.spec),
            "virtual_seconds": reached,
            "duration_seconds": duration,
        }
        data = msgspec.json.encode(report) + b"\n"
        if args.json == "-":
            sys.stdout.write(data.decode())
            sys.stdout.flush()
        else:
            try:
                Path(args.json).write_bytes(data)
            except OSError as exc:
                _error(err, f"videoflow-aio: error: --json {args.json}: {exc}")
    return 130


def _error(err: Console, message: str) -> None:
    """One line on stderr, however long (a console wraps at its width otherwise)."""
    err.print(message.replace("\n", " "), markup=False, highlight=False, soft_wrap=True)


def _unwritable(target: str) -> str | None:
    """Why an output file cannot be written there (checked before a long run), or None."""
    path = Path(target)
    if path.is_dir():
        return "is a directory"
    parent = path.parent
    if not parent.is_dir():
        return f"no directory {str(parent)!r}"
    if not os.access(parent, os.W_OK):
        return f"directory {str(parent)!r} is not writable"
    return None


__all__ = ["add_parser", "cmd_simulate"]
