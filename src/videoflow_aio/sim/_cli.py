"""``videoflow-aio simulate SPEC.toml [--json PATH] [--plot PATH] ...``.

Exit status: 0 after a run (even one whose pipeline did not drain, or a sweep without an
answer: those are findings, shown in the table and the JSON); 2, with a one-line message on
stderr, for a bad spec, a bad ``--set``/``--sweep``/``--slo`` or other option, ``--dask``
without the ``dask`` extra or with a scheduler that cannot be reached, a setup
the spec asks for that cannot be made (e.g. GPU slices that do not fit), ``--plot`` without
matplotlib, or an output path that cannot be written (checked before the run, so an hour of
virtual time is not lost to a typo in a directory name); 130 after Ctrl-C, with ``--json``
holding ``{"interrupted": true, ...}`` (how far the run got), never a traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn

from ._answer import answer_line, slo_lines, sweep_table, warning_lines
from ._capacity import Plan, evaluate, parse_sweep, sweep
from ._executor import make_executor
from ._overrides import apply_overrides, parse_set
from ._replicate import summarise
from ._report import faults_table, results_table, to_json
from ._run import simulate
from ._screen import warnings_for
from ._slo import Slo, parse_slo, with_slo_targets
from ._spec import load_spec
from ._spec_types import SimError, SimSpec, SpecError

DEFAULT_REPLICATIONS = 4
"""Replications per point with ``--sweep``, ``--slo`` or ``--precision`` (else 1)."""
DEFAULT_PRECISION = 0.05
"""``--precision`` for ``--sweep``/``--slo`` given without ``--precision`` or
``--replications`` (with ``--replications`` alone, that many replications and no more)."""


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
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a spec key by dotted path (stage.detect.replicas=10); repeatable",
    )
    p.add_argument("--replications", type=int, metavar="N", help="independent replications")
    p.add_argument(
        "--confidence", type=float, default=0.95, metavar="C", help="interval level (0.95)"
    )
    p.add_argument(
        "--precision",
        type=float,
        metavar="P",
        help="add replications until every SLO figure's half-width <= P x its estimate"
        " (default 0.05 with --sweep/--slo unless --replications is given)",
    )
    p.add_argument(
        "--max-virtual-seconds",
        type=float,
        metavar="S",
        help="with --precision: the load seconds a point may spend (default 40 runs' worth)",
    )
    p.add_argument("--sweep", metavar="KEY=A..B", help="sweep a key: A..B, A..B:STEP or v1,v2,v3")
    p.add_argument(
        "--slo",
        action="append",
        default=[],
        metavar="OBJECTIVE",
        help="e.g. 'end_to_end.p99<=200ms', 'throughput_hz>=750', 'dropped<=0'; repeatable",
    )
    p.add_argument("--workers", type=int, metavar="N", help="local processes (default: CPUs)")
    p.add_argument("--dask", metavar="ADDRESS", help="run on a Dask cluster: tcp://host:8786")


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    pairs = (
        ("seed", args.seed),
        ("duration_seconds", args.duration),
        ("warmup_seconds", args.warmup),
        ("backend", args.backend),
    )
    return {k: v for k, v in pairs if v is not None}


def _request(args: argparse.Namespace) -> Request:
    """The spec with every override applied and the capacity options checked (SpecError)."""
    spec = load_spec(args.spec, _overrides(args))
    spec = apply_overrides(spec, [parse_set(s) for s in args.set])
    slos = [parse_slo(s, [st.name for st in spec.stages]) for s in args.slo]
    spec = with_slo_targets(spec, slos)
    if not 0.0 < args.confidence < 1.0:
        raise SpecError("--confidence must be between 0 and 1", field="--confidence")
    if args.precision is not None and not 0.0 < args.precision < 1.0:
        raise SpecError("--precision must be between 0 and 1", field="--precision")
    if args.replications is not None and args.replications < 1:
        raise SpecError("--replications must be >= 1", field="--replications")
    if args.max_virtual_seconds is not None and not args.max_virtual_seconds > 0:
        raise SpecError("--max-virtual-seconds must be > 0", field="--max-virtual-seconds")
    if args.workers is not None and args.workers < 1:
        raise SpecError("--workers must be >= 1", field="--workers")
    capacity = bool(args.sweep or slos or args.precision is not None)
    default = DEFAULT_REPLICATIONS if capacity else 1
    precision = args.precision
    if precision is None and args.replications is None and (args.sweep or slos):
        precision = DEFAULT_PRECISION  # a question asked without saying how sure: 5 %
    plan = Plan(
        replications=args.replications or default,
        confidence=args.confidence,
        precision=precision,
        max_virtual_seconds=args.max_virtual_seconds,
    )
    sweep_of = None
    if args.sweep:
        key, values = parse_sweep(args.sweep)
        for v in values:  # every point's spec is valid before anything runs
            try:
                apply_overrides(spec, [(key, v)])
            except SpecError as exc:
                message = exc.message.replace("--set ", "--sweep ", 1)
                raise SpecError(message, field=exc.field, value=exc.value) from None
        sweep_of = (key, values)
    return Request(spec, slos, plan, sweep_of)


class Request:
    """What the command was asked to do."""

    def __init__(
        self,
        spec: SimSpec,
        slos: list[Slo],
        plan: Plan,
        sweep_of: tuple[str, list[Any]] | None,
    ) -> None:
        self.spec, self.slos, self.plan, self.sweep_of = spec, slos, plan, sweep_of

    @property
    def single(self) -> bool:
        """One plain run: today's path (virtual-time progress bar, in this process)."""
        return (
            self.sweep_of is None
            and not self.slos
            and self.plan.replications == 1
            and (self.plan.precision is None)
        )


def _check_outputs(args: argparse.Namespace, err: Console) -> bool:
    for flag, target in (("--json", args.json), ("--plot", args.plot)):
        problem = _unwritable(target) if target and target != "-" else None
        if problem is None and flag == "--plot" and target:
            from ._plot import unsupported_format

            problem = unsupported_format(target)
        if problem is not None:
            _error(err, f"videoflow-aio: error: {flag} {target}: {problem}")
            return False
    return True


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
        req = _request(args)
    except SimError as exc:
        _error(err, f"videoflow-aio: error: {exc.message}")
        return 2
    except SpecError as exc:
        _error(err, f"videoflow-aio: error: bad spec {args.spec}: {exc.message}")
        return 2
    if not _check_outputs(args, err):
        return 2
    json_to_stdout = args.json == "-"
    show = err if json_to_stdout else out
    reached: list[float] = []  # the single run's virtual progress, for a Ctrl-C report
    try:
        if req.single:
            doc = _single(req, args, err, reached)
            document: dict[str, Any] = doc
            figure: Any = doc
        else:
            document, figure = _capacity(req, args, err, show)
    except KeyboardInterrupt:
        duration = req.spec.run.duration_seconds
        return _interrupted(args, duration, reached[-1] if req.single and reached else None, err)
    except SimError as exc:
        _error(err, f"videoflow-aio: error: {exc.message}")
        return 2
    except SpecError as exc:  # --dask: distributed missing or the scheduler unreachable
        _error(err, f"videoflow-aio: error: {exc.message}")
        return 2
    if req.single:
        _print_single(show, document)
    return _write(args, show, err, document, figure, req)


def _single(
    req: Request, args: argparse.Namespace, err: Console, reached: list[float]
) -> dict[str, Any]:
    """One run in this process, with the virtual-time progress bar; ``reached`` gets the
    virtual seconds done so far (what a Ctrl-C report says)."""
    spec = req.spec
    duration = spec.run.duration_seconds
    wall0 = time.perf_counter()  # wall-clock: the progress bar shows elapsed real time

    def note(virtual: float, total: float) -> None:
        reached[:] = [virtual]

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
                reached[:] = [virtual]
                wall = time.perf_counter() - wall0  # wall-clock: as above
                bar.update(
                    task,
                    completed=virtual,
                    detail=f"virtual {virtual:,.0f}/{total:,.0f} s · wall {wall:,.1f} s",
                )

            result = simulate(spec, progress=on_progress)
    doc, _ = summarise([result], req.plan.confidence)
    doc["warnings"] = warnings_for(spec)
    return doc


def _print_single(show: Console, doc: dict[str, Any]) -> None:
    for line in warning_lines(doc.get("warnings", [])):
        show.print(line, style="bold red", markup=False, highlight=False)
    show.print(results_table(doc))
    ft = faults_table(doc)
    if ft is not None:
        show.print(ft)
    run = doc["run"]
    show.print(
        f"{run['events']:,} messages in {run['virtual_seconds']:,.1f} virtual s, "
        f"{run['wall_seconds']:,.1f} wall s"
        + ("" if run["drained"] else " — the pipeline did not drain within run.drain_seconds"),
        markup=False,
        highlight=False,
    )


def _capacity(
    req: Request, args: argparse.Namespace, err: Console, show: Console
) -> tuple[dict[str, Any], Any]:
    """Replications or a sweep on the executor, with a progress bar over the runs."""
    executor = make_executor(args.workers, args.dask)
    wall0 = time.perf_counter()  # wall-clock: reported as wall_seconds and in the bar
    columns = (
        TextColumn("simulating"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} runs"),
        TextColumn("{task.fields[detail]}"),
    )
    try:
        with Progress(
            *columns, console=err, transient=True, disable=args.quiet or not err.is_terminal
        ) as bar:
            task = bar.add_task("sim", total=0, detail="")

            lock = threading.Lock()  # the points of a sweep may run at once

            def on_progress(done: int, planned: int, label: str) -> None:
                wall = time.perf_counter() - wall0  # wall-clock: as above
                with lock:
                    total = (bar.tasks[0].total or 0) + planned
                    detail = f"{label} · wall {wall:,.1f} s"
                    bar.update(task, advance=done, total=total, detail=detail)

            if req.sweep_of is not None:
                key, values = req.sweep_of
                result = sweep(
                    req.spec, key, values, req.slos, req.plan, executor, progress=on_progress
                )
            else:
                point = evaluate(req.spec, req.slos, req.plan, executor, progress=on_progress)
    finally:
        executor.close()
    wall = time.perf_counter() - wall0  # wall-clock: as above
    if req.sweep_of is not None:
        result = dataclasses.replace(result, wall_seconds=wall)
        show.print(answer_line(result), markup=False, highlight=False, soft_wrap=True)
        for p in result.points:
            for line in warning_lines(p.warnings, f"{result.key} = {p.value}: "):
                show.print(line, style="bold red", markup=False, highlight=False, soft_wrap=True)
        show.print(sweep_table(result))
        runs = sum(p.document["run"]["replications"] for p in result.points if p.document)
        show.print(f"{runs} runs in {wall:,.1f} wall s", markup=False, highlight=False)
        return result.to_json(), result
    assert point.document is not None
    doc = point.document
    _print_single(show, doc)
    for line in slo_lines(point):
        show.print(line, markup=False, highlight=False, soft_wrap=True)
    prec = doc["run"]["precision"]
    if prec["target"] is not None:
        show.print(_precision_line(prec), markup=False, highlight=False, soft_wrap=True)
    return doc, point


def _precision_line(prec: dict[str, Any]) -> str:
    worst = prec["worst_relative_half_width"]
    reached = f"{worst:.1%}" if worst is not None and worst != float("inf") else "no interval"
    why = {
        "precision": "reached",
        "budget": (
            f"NOT reached: the --max-virtual-seconds budget ({prec['max_virtual_seconds']:g} s)"
            " is spent"
        ),
        "decided": "not needed: an SLO is not met with the stated confidence",
    }[prec["stopped"]]
    return f"precision {prec['target']:.1%} {why} (widest half-width {reached} of its estimate)"


def _write(
    args: argparse.Namespace,
    show: Console,
    err: Console,
    document: dict[str, Any],
    figure: Any,
    req: Request,
) -> int:
    if args.json:
        if not _write_json(args.json, to_json(document), err):
            return 2
        if args.json != "-":
            show.print(f"JSON written to {args.json}", markup=False, highlight=False)
    if args.plot:
        from ._plot import plot

        try:
            plot(figure, args.plot, slos=req.slos)
        except (OSError, ValueError) as exc:  # ValueError: a suffix matplotlib cannot write
            _error(err, f"videoflow-aio: error: --plot {args.plot}: {exc}")
            return 2
        show.print(f"plot written to {args.plot}", markup=False, highlight=False)
    return 0


def _interrupted(
    args: argparse.Namespace, duration: float, reached: float | None, err: Console
) -> int:
    """Ctrl-C during the run: say how far it got (and write that as the ``--json`` report,
    so a script reading it finds valid JSON); exit status 130. ``reached`` is None for
    replications and sweeps, whose runs go on in other processes."""
    if reached is None:
        _error(err, "interrupted during the replications: no results")
    else:
        _error(err, f"interrupted at virtual {reached:,.1f} of {duration:,.1f} s: no results")
    if args.json:
        report = {
            "interrupted": True,
            "spec": str(args.spec),
            "virtual_seconds": reached,
            "duration_seconds": duration,
        }
        _write_json(args.json, msgspec.json.encode(report) + b"\n", err)
    return 130


def _write_json(target: str, data: bytes, err: Console) -> bool:
    """``data`` to stdout (``-``) or the file ``target``; False, with the error said, when
    the file cannot be written."""
    if target == "-":
        sys.stdout.write(data.decode())
        sys.stdout.flush()
        return True
    try:
        Path(target).write_bytes(data)
    except OSError as exc:
        _error(err, f"videoflow-aio: error: --json {target}: {exc}")
        return False
    return True


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
