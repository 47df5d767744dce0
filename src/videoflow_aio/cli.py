"""``videoflow-aio``: run the conformance suite, list cases and providers, run benchmarks.

    videoflow-aio conformance [--provider memory,file,...|all] [--backend asyncio,trio]
                              [--select PATTERN] [--json PATH|-] [--list]
                              [--nats-url URL] [--redis-url URL] [--etcd-url URL]
                              [--option PROVIDER.KEY=VALUE] [--allow-skipped] [--secure]
    videoflow-aio explore [--select PATTERN] [--seeds N] [--backend asyncio,trio]
                          [--jitter S] [--faults P] [--load MODULE] [--list]
    videoflow-aio explore --replay ID --seed N --backend B [--jitter S] [--faults P]
                          [--log PATH]
    videoflow-aio simulate SPEC.toml [--json PATH|-] [--plot PATH] [--seed N] [--duration S]
                           [--set KEY=VALUE] [--replications N] [--precision P]
                           [--sweep KEY=A..B] [--slo OBJECTIVE] [--workers N] [--dask ADDR]
    videoflow-aio bench [NAME [ARGS...]]
    videoflow-aio --version

Credentials are never taken from the command line (``ps`` shows it): ``--secure`` runs the
secured variant of each real provider (``redis-secure``, …), which reads TLS settings and
credentials from ``VIDEOFLOW_<ENGINE>_SECURE_*`` environment variables or the files they name
(``providers._secure``); a URL with user info or a secret ``--option`` is refused.

Exit status: 0 when nothing failed, 1 when a case failed, none matched, or every selected run
was skipped (unless ``--allow-skipped``), 2 on bad usage.
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import math
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import msgspec
from rich.console import Console

from .conformance import (
    BACKENDS,
    REQUIRE_SERVERS_ENV,
    Case,
    CaseResult,
    Provider,
    env_options,
    get_provider,
    plan,
    provider_names,
    select_cases,
)
from .conformance import run as run_cases
from .conformance.providers import BUILTIN
from .conformance.report import (
    cases_table,
    make_console,
    progress,
    providers_table,
    report_json,
    results_table,
    summary_table,
    verdict,
)

# --<name>-url URL passes url=URL to that provider (the built-ins that say so; any provider
# takes --option NAME.url=URL or VIDEOFLOW_<NAME>_URL)
URL_FLAGS = tuple(b.name for b in BUILTIN if b.url_flag)
SECURE = "-secure"  # --secure: the provider "<name>-secure" instead of "<name>"
# option names that carry a secret: refused on the command line
SECRET_OPTIONS = frozenset({"password", "token", "secret", "key_password", "nkey_seed", "creds"})


class UsageError(Exception):
    """A command line that cannot be run; exit status 2."""


def _split(values: Sequence[str] | None) -> list[str]:
    out: list[str] = []
    for v in values or ():
        out.extend(p.strip() for p in v.split(",") if p.strip())
    return list(dict.fromkeys(out))  # keep order, drop repeats


def _value(text: str) -> Any:
    """Option values are JSON when they parse (numbers, true/false), strings otherwise."""
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return text


def _refuse_secrets(name: str, key: str, value: Any) -> None:
    """A secret on the command line is a UsageError (the message never repeats it)."""
    engine = name.removesuffix(SECURE).upper()
    where = f"VIDEOFLOW_{engine}_SECURE_PASSWORD or …_PASSWORD_FILE (see --secure)"
    if key.lower() in SECRET_OPTIONS or key.lower().endswith(("password", "token")):
        raise UsageError(
            f"option {name}.{key}: secrets are not taken from the command line; {where}"
        )
    if isinstance(value, str) and "://" in value:
        parts = urlsplit(value)
        if parts.username or parts.password:
            raise UsageError(
                f"option {name}.{key}: a URL with user info is not taken from the command line "
                f"(ps shows it); give the URL without it and set {where}"
            )


def provider_options(args: argparse.Namespace, chosen: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``{provider: {option: value}}`` from the environment, ``--<name>-url`` and ``--option``."""
    options: dict[str, dict[str, Any]] = {name: env_options(name) for name in chosen}
    for name, key, value in _given_options(args, options):
        _refuse_secrets(name, key, value)
        if name not in options:
            raise UsageError(f"option {name}.{key} given, but provider {name} is not selected")
        options[name][key] = value
    return options


def _url_options(
    args: argparse.Namespace, selected: Mapping[str, object]
) -> list[tuple[str, str, Any]]:
    given: list[tuple[str, str, Any]] = []
    for name in URL_FLAGS:
        url = getattr(args, f"{name}_url", None)
        if url:
            secure = f"{name}{SECURE}"
            target = secure if secure in selected and name not in selected else name
            given.append((target, "url", url))
    return given


def _given_options(
    args: argparse.Namespace, selected: Mapping[str, object]
) -> list[tuple[str, str, Any]]:
    """``(provider, key, value)`` from ``--<name>-url`` (the secured variant's when only it
    is selected) and ``--option PROVIDER.KEY=VALUE``, in that order."""
    given = _url_options(args, selected)
    for item in args.option or ():
        target, sep, value = item.partition("=")
        name, dot, key = target.partition(".")
        if not (sep and dot and name and key):
            raise UsageError(f"--option {item!r}: expected PROVIDER.KEY=VALUE")
        given.append((name, key, _value(value)))
    return given


def _given(flag: str, values: Sequence[str] | None) -> list[str]:
    """``_split(values)``; a UsageError when the flag was given but names nothing
    (``--backend ''`` must not silently mean the default)."""
    chosen = _split(values)
    if values is not None and not chosen:
        raise UsageError(f"{flag} {' '.join(map(repr, values))}: names nothing")
    return chosen


def _build_providers(args: argparse.Namespace) -> list[Provider]:
    known = provider_names()
    chosen = _given("--provider", args.provider) or ["memory"]
    if "all" in chosen:
        chosen = list(dict.fromkeys([n for n in chosen if n != "all"] + known))
    if getattr(args, "secure", False):  # each provider that has a secured variant becomes it
        chosen = list(
            dict.fromkeys(f"{n}{SECURE}" if f"{n}{SECURE}" in known else n for n in chosen)
        )
    unknown = [n for n in chosen if n not in known]
    if unknown:
        raise UsageError(f"unknown provider(s) {', '.join(unknown)}; known: {', '.join(known)}")
    options = provider_options(args, chosen)
    try:
        return [get_provider(name, **options[name]) for name in chosen]
    except ValueError as exc:
        raise UsageError(str(exc)) from exc


def _backends(args: argparse.Namespace) -> list[str]:
    chosen = _given("--backend", args.backend) or list(BACKENDS)
    bad = [b for b in chosen if b not in BACKENDS]
    if bad:
        raise UsageError(f"unknown backend(s) {', '.join(bad)}; expected {', '.join(BACKENDS)}")
    return chosen


def _check_json_target(target: str | None, flag: str = "--json") -> None:
    """Refuse an output path (``--json``, ``--log``) that cannot be written, before anything
    runs."""
    if target is None or target == "-":
        return
    if not target:
        raise UsageError(f"{flag} '': give a file name")
    path = Path(target)
    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise UsageError(f"{flag} {target}: is a directory")
    if path.exists():
        if not os.access(path, os.W_OK):
            raise UsageError(f"{flag} {target}: not writable")
    elif not parent.is_dir():
        raise UsageError(f"{flag} {target}: no directory {parent}")
    elif not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {target}: cannot create a file in {parent}")


def _check_timeout(seconds: float) -> None:
    if not (math.isfinite(seconds) and seconds > 0):
        raise UsageError(f"--timeout {seconds:g}: must be a positive number of seconds")


def cmd_conformance(args: argparse.Namespace) -> int:
    _given("--backend", args.backend)
    _given("--provider", args.provider)
    _check_json_target(args.json)
    _check_timeout(args.timeout)
    json_to_stdout = args.json == "-"
    out = make_console(sys.stderr if json_to_stdout else sys.stdout)
    err = make_console(sys.stderr)
    chosen = select_cases(contract=args.contract, select=args.select)
    if args.list:
        if not args.provider:  # list every registered provider
            args.provider = [",".join(provider_names())]
        out.print(cases_table(chosen))
        out.print(providers_table(_build_providers(args)))
        return 0
    providers = _build_providers(args)
    backends = _backends(args)
    todo = plan(chosen, providers, backends)
    if not todo:
        what = f"--select {args.select!r}" if args.select else "the selection"
        err.print(f"no conformance case matches {what} on these providers", markup=False)
        return 1
    results, interrupted = _run_with_progress(args, chosen, providers, backends, len(todo), err)
    order = {(c.id, p.name, b): i for i, (c, p, b) in enumerate(todo)}  # arrival → case order
    results.sort(key=lambda r: order.get((r.id, r.provider, r.backend), len(order)))
    _print_report(out, results, chosen, args.show)
    all_skipped = bool(results) and all(r.outcome == "skip" for r in results)
    if all_skipped and not interrupted:
        if args.allow_skipped:
            out.print("every selected run was skipped (allowed by --allow-skipped)", markup=False)
        else:
            out.print(
                "nothing ran: every selected run was skipped (see the reasons above); "
                "exit status 1 (--allow-skipped accepts this)",
                style="bold red",
                markup=False,
            )
    if args.json and not _write_json_report(args.json, results, out, err):
        return 2
    if interrupted:
        err.print("interrupted", style="bold red")
        return 130
    failed = any(r.outcome == "fail" for r in results)
    return 1 if failed or (all_skipped and not args.allow_skipped) else 0


def _run_with_progress(
    args: argparse.Namespace,
    chosen: list[Case],
    providers: list[Provider],
    backends: list[str],
    total: int,
    err: Console,
) -> tuple[list[CaseResult], bool]:
    """Run the plan with a progress bar; ``(results so far, interrupted by Ctrl-C)``."""
    results: list[CaseResult] = []
    with progress(err, total) as advance:

        def on_result(result: CaseResult) -> None:
            results.append(result)
            advance(result)

        try:
            run_cases(
                chosen,
                providers,
                backends,
                on_result,
                require_available=True if args.require_servers else None,
                wall_limit=args.timeout,
                parallel=not args.serial,
            )
        except KeyboardInterrupt:
            return results, True
    return results, False


def _print_report(out: Console, results: list[CaseResult], chosen: list[Case], show: str) -> None:
    table = results_table(results, show=show)
    if table.row_count:
        out.print(table)
    elif results:
        out.print(f"no case run to show with --show {show}", markup=False)
    out.print(summary_table(results, {c.id: c.contract for c in chosen}))
    out.print(verdict(results))


def _write_json_report(target: str, results: list[CaseResult], out: Console, err: Console) -> bool:
    """Write the JSON report to ``target`` (``-``: stdout); False when the disk refused it."""
    data = report_json(results)
    if target == "-":
        sys.stdout.write(data.decode())
        sys.stdout.flush()
        return True
    try:
        Path(target).write_bytes(data)
    except OSError as exc:  # checked up front; the disk may still refuse it now
        err.print(f"videoflow-aio: error: cannot write --json {target}: {exc}")
        return False
    out.print(f"JSON report written to {target}", markup=False, highlight=False)
    return True


# -- explore --------------------------------------------------------------------------------
def cmd_explore(args: argparse.Namespace) -> int:
    from .contracts.errors import ValidationError
    from .explore.cli import run_explore, run_replay

    args.backends = _backends(args)
    if not args.replay:
        for flag, given in (("--log", args.log), ("--traceback", args.traceback)):
            if given:
                raise UsageError(f"{flag} applies to --replay ID --seed N only")
    if args.log == "-":
        raise UsageError("--log -: give a file name (the log is not written to stdout)")
    _check_json_target(args.log, "--log")
    if args.seeds < 1 or args.first_seed < 0:
        raise UsageError("--seeds must be >= 1 and --first-seed >= 0")
    if not (math.isfinite(args.jitter) and args.jitter >= 0):
        raise UsageError(f"--jitter {args.jitter:g}: must be a finite number of seconds >= 0")
    if not 0 <= args.faults <= 1:
        raise UsageError(f"--faults {args.faults:g}: must be a probability in [0, 1]")
    if args.stop_after < 1:
        raise UsageError("--stop-after must be >= 1")
    out, err = make_console(sys.stdout), make_console(sys.stderr)
    try:
        if args.replay:
            return run_replay(args, out, err)
        return run_explore(args, out, err)
    except ValidationError as exc:
        raise UsageError(str(exc)) from exc


# -- bench ----------------------------------------------------------------------------------
def _bench_dir(given: str | None) -> Path:
    if given:
        return Path(given)
    here = Path.cwd() / "benchmarks"
    if here.is_dir():
        return here
    return Path(__file__).resolve().parents[2] / "benchmarks"  # a source checkout


def _first_doc_line(path: Path) -> str:
    try:
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    except (OSError, SyntaxError, ValueError):
        return ""
    return doc.strip().splitlines()[0] if doc else ""


def _list_benchmarks(folder: Path, scripts: list[Path], console: Console) -> int:
    if not scripts:
        console.print(f"no benchmark scripts in {folder}", markup=False)
        return 1
    from rich.table import Table

    table = Table(title=f"benchmarks in {folder}", title_justify="left")
    table.add_column("name", no_wrap=True)
    table.add_column("what it measures", overflow="fold")
    for p in scripts:
        table.add_row(p.stem, _first_doc_line(p))
    console.print(table)
    console.print("run one: videoflow-aio bench NAME [ARGS...]", markup=False)
    return 0


def cmd_bench(args: argparse.Namespace, console: Console) -> int:
    folder = _bench_dir(args.dir)
    scripts = sorted(p for p in folder.glob("*.py") if not p.name.startswith("_"))
    if not args.name:
        return _list_benchmarks(folder, scripts, console)
    matches = [p for p in scripts if p.stem in (args.name, f"{args.name}_bench")]
    if not matches:
        names = ", ".join(p.stem for p in scripts) or "none"
        raise UsageError(f"no benchmark {args.name!r} in {folder}; have: {names}")
    return subprocess.call([sys.executable, str(matches[0]), *args.args])


# -- entry point ----------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="videoflow-aio",
        description="asyncio- and trio-native backends for distributed video pipelines",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    conf = sub.add_parser(
        "conformance",
        help="run the conformance cases on providers × async backends",
        description="Run conformance cases on providers × async backends. Exit status 1 when a "
        "case fails.",
    )
    conf.add_argument(
        "--provider",
        "-p",
        action="append",
        metavar="NAME[,NAME]",
        help="provider(s) to run; repeat or comma-separate; 'all' for every registered one "
        "(default: memory)",
    )
    conf.add_argument(
        "--backend",
        "-b",
        action="append",
        metavar="asyncio,trio",
        help="async backend(s) (default: asyncio,trio)",
    )
    conf.add_argument(
        "--select",
        "-k",
        metavar="PATTERN",
        help="case IDs or titles, comma-separated globs (e.g. 'RTS-*,MSG-01*')",
    )
    conf.add_argument("--contract", choices=sorted(_contracts()), help="only this contract")
    conf.add_argument("--json", metavar="PATH|-", help="write the JSON report ('-': stdout)")
    conf.add_argument(
        "--list", action="store_true", help="list the selected cases and the providers"
    )
    conf.add_argument(
        "--show",
        choices=("all", "problems", "fail"),
        default="all",
        help="table rows to show (default: all)",
    )
    for name in URL_FLAGS:
        conf.add_argument(
            f"--{name}-url", metavar="URL", help=f"use the {name} server at URL (url= option)"
        )
    conf.add_argument(
        "--secure",
        action="store_true",
        help="run the secured variant of each real provider (TLS, least-privilege users; "
        "credentials from VIDEOFLOW_<ENGINE>_SECURE_* variables or files, never arguments)",
    )
    conf.add_argument(
        "--option",
        "-o",
        action="append",
        metavar="PROVIDER.KEY=VALUE",
        help="a keyword option for a provider's constructor (repeatable)",
    )
    conf.add_argument(
        "--require-servers",
        action="store_true",
        help=f"an unavailable provider fails instead of skipping (also: {REQUIRE_SERVERS_ENV}=1)",
    )
    conf.add_argument(
        "--timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="wall-clock limit per case, in seconds (default: 300)",
    )
    conf.add_argument(
        "--serial",
        action="store_true",
        help="run one provider at a time (default: providers side by side, each in order)",
    )
    conf.add_argument(
        "--allow-skipped",
        action="store_true",
        help="exit 0 even when every selected run was skipped (default: exit 1, nothing ran)",
    )

    exp = sub.add_parser(
        "explore",
        help="run cases and properties under many seeded schedules; replay a failure",
        description="Run conformance cases (on the memory models) and properties under many "
        "seeds, each a schedule: same-instant order, timing jitter, injected faults. A failure "
        "prints its seed and the command that replays it exactly. Exit status 1 when a run "
        "failed.",
    )
    exp.add_argument(
        "--select",
        "-k",
        metavar="PATTERN",
        help="case or program IDs or titles, comma-separated globs (e.g. 'MSG-0*,PROP-*'; "
        "default: all)",
    )
    exp.add_argument("--seeds", type=int, default=100, metavar="N", help="seeds to try (100)")
    exp.add_argument(
        "--first-seed", type=int, default=0, metavar="S", help="the first seed (default 0)"
    )
    exp.add_argument(
        "--backend", "-b", action="append", metavar="asyncio,trio", help="(default: both)"
    )
    exp.add_argument(
        "--jitter",
        type=float,
        default=0.0,
        metavar="S",
        help="timers fire up to S virtual seconds late, drawn from the seed (default 0)",
    )
    exp.add_argument(
        "--faults",
        type=float,
        default=0.0,
        metavar="P",
        help="each barrier reached crashes or pauses the task with probability P (default 0)",
    )
    exp.add_argument(
        "--stop-after",
        type=int,
        default=1,
        metavar="K",
        help="stop exploring a target on a backend after K failing seeds (default 1)",
    )
    exp.add_argument(
        "--load",
        action="append",
        metavar="MODULE",
        help="import a module (dotted name or .py file) that registers cases or programs",
    )
    exp.add_argument("--list", action="store_true", help="list the selected targets")
    exp.add_argument("--replay", metavar="ID", help="replay one run of ID (with --seed)")
    exp.add_argument("--seed", type=int, metavar="N", help="the seed to replay")
    exp.add_argument("--log", metavar="PATH", help="replay: write the observation log (JSON lines)")
    exp.add_argument("--traceback", action="store_true", help="replay: print the traceback")
    from .sim.cli import add_parser as add_simulate

    add_simulate(sub)

    bench = sub.add_parser("bench", help="list or run the benchmark scripts")
    bench.add_argument("name", nargs="?", help="benchmark to run (omit to list them)")
    bench.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the benchmark")
    bench.add_argument("--dir", help="the benchmarks folder (default: ./benchmarks)")
    return parser


def _version() -> str:
    """The installed distribution's version (the package's own when run from a checkout)."""
    try:
        return importlib.metadata.version("videoflow-aio")
    except importlib.metadata.PackageNotFoundError:
        from . import __version__

        return __version__


def _contracts() -> tuple[str, ...]:
    from .conformance import CONTRACTS

    return CONTRACTS


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "conformance":
            return cmd_conformance(args)
        if args.command == "explore":
            return cmd_explore(args)
        if args.command == "simulate":
            from .sim.cli import cmd_simulate

            return cmd_simulate(args, make_console(sys.stdout), make_console(sys.stderr))
        return cmd_bench(args, make_console(sys.stdout))
    except UsageError as exc:
        message = f"videoflow-aio: error: {exc}".replace("\n", " ")
        make_console(sys.stderr).print(message, markup=False, highlight=False, soft_wrap=True)
        return 2


# the rest is the command line's own plumbing (tests reach it; nothing else should)
__all__ = ["main"]
