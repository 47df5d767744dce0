"""Mutation testing of the reference models, ``gpu`` and ``vtime`` with hand-written mutants.

How much of the specification do the conformance cases pin down, and how much only the unit
tests? Each mutant of ``mutants.py`` (a plausible bug, one small patch) is applied to a
*copy* of ``src/videoflow_aio`` in a temporary folder that goes first on ``PYTHONPATH`` — the
worktree is never touched, so a crash cannot leave it dirty. Then, in order:

1. **conformance**: ``videoflow-aio conformance --provider memory`` (asyncio and trio);
2. **explore**: ``videoflow-aio explore`` over a few seeds, with jitter and faults;
3. **unit**: the server-free unit tests of the mutant's area (``pytest -x``); a failure is
   confirmed by rerunning the failing test alone, so a test that flaked under load does not
   count as a kill.

A mutant is *killed* by a level when that level fails (a timeout — an infinite loop — counts
as a kill). The conformance level always runs (its own kill rate); the others run only while
the mutant survives. Mutants run one at a time (the machine is shared).

    .venv/bin/python benchmarks/mutation/run.py                 # every mutant, the table
    .venv/bin/python benchmarks/mutation/run.py --area payload  # one area
    .venv/bin/python benchmarks/mutation/run.py --only msg-renew-no-timer --verbose
    .venv/bin/python benchmarks/mutation/run.py --check         # every patch applies

Before the mutants, the unmutated copy runs every level once: a red baseline stops the run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutants import AREAS, MUTANTS, Mutant

REPO = Path(__file__).resolve().parents[2]
ROOT = REPO  # the tree the levels run in: a snapshot of --rev (see main)
PACKAGE = ROOT / "src" / "videoflow_aio"
PY = sys.executable
MARKS = "not server and not cluster and not slow"
UNIT_TESTS: dict[str, tuple[str, ...]] = {
    "messaging": ("tests/memory/test_messaging*.py",),
    "payload": ("tests/memory/test_payload*.py",),
    "runtime_store": ("tests/memory/test_runtime_store*.py",),
    "allocation": ("tests/memory/test_allocation*.py", "tests/gpu"),
    "vtime": ("tests/vtime",),
}
LEVELS = ("conformance", "explore", "unit")
TIMEOUT = {"conformance": 180.0, "explore": 240.0, "unit": 600.0}
_FAILED = re.compile(r"^(?:FAILED|ERROR) (\S+?)(?: - .*)?$", re.MULTILINE)


@dataclass
class Outcome:
    mutant: str
    area: str
    killed_by: str | None = None  # the first level that killed it
    conformance_killed: bool = False
    detail: str = ""
    seconds: dict[str, float] = field(default_factory=dict)


def _unit_paths(area: str) -> list[str]:
    """The area's test files, its ``*_edges.py`` files first (short and aimed at mutants: with
    ``-x`` a kill comes sooner; the verdict does not depend on the order). A folder is
    expanded to its files, since pytest collects a file named beside its folder in folder
    order."""
    paths: list[str] = []
    for pattern in UNIT_TESTS[area]:
        glob = pattern if "*" in pattern else f"{pattern}/test_*.py"
        paths += sorted(str(p.relative_to(ROOT)) for p in ROOT.glob(glob))
    return sorted(paths, key=lambda p: not p.endswith("_edges.py"))


def _command(level: str, area: str, seeds: int) -> list[str]:
    if level == "conformance":
        return [PY, "-m", "videoflow_aio", "conformance", "--provider", "memory"]
    if level == "explore":
        return [
            PY, "-m", "videoflow_aio", "explore", "--seeds", str(seeds),
            "--jitter", "0.001", "--faults", "0.01",
        ]  # fmt: skip
    return [PY, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m", MARKS]


def _run(cmd: Sequence[str], overlay: Path, timeout: float) -> tuple[int | None, str]:
    """Run ``cmd`` with ``overlay`` first on the import path; (exit status or None on a
    timeout, output tail)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(overlay), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["COLUMNS"] = "200"
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the level's own process group, nothing else
        out, _ = proc.communicate()
        return None, out[-4000:]
    return proc.returncode, out[-4000:]


def _snapshot(rev: str, dest: Path) -> None:
    """Export ``rev`` (sources, tests, configuration) into ``dest``: the measurement runs on
    that commit, whatever is being edited in the worktree meanwhile."""
    global ROOT, PACKAGE
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", rev], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    ROOT = dest
    PACKAGE = dest / "src" / "videoflow_aio"


def _copy_tree(dest: Path) -> Path:
    shutil.copytree(PACKAGE, dest / "videoflow_aio", ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def apply(mutant: Mutant, overlay: Path) -> None:
    """Patch the copy in ``overlay``; ValueError when the snippet is missing or ambiguous."""
    target = overlay / "videoflow_aio" / mutant.path
    text = target.read_text()
    found = text.count(mutant.original)
    if found != 1:
        raise ValueError(f"{mutant.id}: snippet found {found} times in {mutant.path}")
    target.write_text(text.replace(mutant.original, mutant.replacement))


def _check_overlay(overlay: Path) -> None:
    code, out = _run([PY, "-c", "import videoflow_aio; print(videoflow_aio.__file__)"], overlay, 60)
    if code != 0 or not out.strip().startswith(str(overlay)):
        raise SystemExit(f"the overlay is not what Python imports: {out.strip()}")


def _confirm_unit(out: str, overlay: Path) -> tuple[bool, str]:
    """A unit-level failure counts when its first failing test fails again alone."""
    m = _FAILED.search(out)
    if m is None:
        return True, "unit: " + out.strip().splitlines()[-1] if out.strip() else "unit"
    test = m.group(1)
    code, _ = _run([*_command("unit", "", 0), test], overlay, TIMEOUT["unit"])
    if code == 0:
        return False, f"unit: {test} failed once, passed alone (flaky, not counted)"
    return True, f"unit: {test}"


def measure(mutant: Mutant | None, area: str, seeds: int, verbose: bool) -> Outcome:
    """Run the levels on ``mutant`` (None: the unmutated baseline)."""
    name = mutant.id if mutant is not None else "baseline"
    outcome = Outcome(name, area)
    with tempfile.TemporaryDirectory(prefix="vf-mutant-") as tmp:
        overlay = _copy_tree(Path(tmp))
        if mutant is not None:
            apply(mutant, overlay)
        else:
            _check_overlay(overlay)
        for level in LEVELS:
            if outcome.killed_by is not None:
                break
            cmd = _command(level, area, seeds)
            if level == "unit":
                cmd += (
                    _unit_paths(area)
                    if mutant is not None
                    else sorted({p for a in AREAS for p in _unit_paths(a)})
                )
            start = time.perf_counter()  # wall-clock: the harness's own progress figures
            code, out = _run(cmd, overlay, TIMEOUT[level])
            outcome.seconds[level] = round(time.perf_counter() - start, 1)  # wall-clock:
            if verbose:
                print(f"--- {name} {level}: exit {code}\n{out[-1500:]}", flush=True)
            if code == 0:
                continue
            detail = f"{level}: timeout" if code is None else f"{level}: exit {code}"
            if level == "unit" and code is not None and mutant is not None:
                killed, detail = _confirm_unit(out, overlay)
                if not killed:
                    outcome.detail = detail
                    continue
            outcome.killed_by = level
            outcome.detail = detail
            if level == "conformance":
                outcome.conformance_killed = True
    return outcome


def table(outcomes: Sequence[Outcome]) -> str:
    """Per area: mutants, killed by the conformance cases alone, killed by the whole suite."""
    rows = [f"{'area':<14} {'mutants':>7} {'conformance':>13} {'whole suite':>13} {'survived':>8}"]
    total = [0, 0, 0]
    for area in AREAS:
        mine = [o for o in outcomes if o.area == area]
        if not mine:
            continue
        n = len(mine)
        conf = sum(o.conformance_killed for o in mine)
        whole = sum(o.killed_by is not None for o in mine)
        total = [total[0] + n, total[1] + conf, total[2] + whole]
        rows.append(
            f"{area:<14} {n:>7} {conf:>4} ({conf / n:4.0%}) {whole:>4} ({whole / n:4.0%}) "
            f"{n - whole:>8}"
        )
    n, conf, whole = total
    if n:
        rows.append(
            f"{'total':<14} {n:>7} {conf:>4} ({conf / n:4.0%}) {whole:>4} ({whole / n:4.0%}) "
            f"{n - whole:>8}"
        )
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--area", choices=AREAS, action="append", help="only these areas")
    parser.add_argument("--only", help="only these mutant ids (comma-separated)")
    parser.add_argument("--seeds", type=int, default=5, help="explore seeds (default 5)")
    parser.add_argument("--json", metavar="PATH", help="write every outcome as JSON")
    parser.add_argument("--check", action="store_true", help="only check that patches apply")
    parser.add_argument("--no-baseline", action="store_true", help="skip the baseline run")
    parser.add_argument("--verbose", action="store_true", help="print each level's output")
    parser.add_argument(
        "--rev", default="HEAD", help="the commit to measure (default HEAD; not the worktree)"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="vf-mutation-tree-") as tree:
        _snapshot(args.rev, Path(tree))
        commit = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", args.rev],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        print(f"measuring commit {commit}", flush=True)
        return _main(args, parser)


def _main(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    chosen = [m for m in MUTANTS if args.area is None or m.area in args.area]
    if args.only:
        wanted = {s.strip() for s in args.only.split(",")}
        unknown = wanted - {m.id for m in MUTANTS}
        if unknown:
            parser.error(f"unknown mutant ids: {sorted(unknown)}")
        chosen = [m for m in chosen if m.id in wanted]
    ids = [m.id for m in MUTANTS]
    if len(set(ids)) != len(ids) or any(m.area not in AREAS for m in MUTANTS):
        raise SystemExit("mutant ids must be unique and areas known")
    if args.check:
        for m in chosen:
            text = (PACKAGE / m.path).read_text()
            if text.count(m.original) != 1 or m.original == m.replacement:
                raise SystemExit(f"{m.id}: the snippet is missing, ambiguous or unchanged")
        print(f"{len(chosen)} mutants apply")
        return 0
    if not args.no_baseline:
        base = measure(None, "baseline", args.seeds, args.verbose)
        if base.killed_by is not None:
            print(f"the unmutated tree fails ({base.detail}): fix that first", file=sys.stderr)
            return 2
        print(f"baseline green at {args.rev} {base.seconds}", flush=True)
    outcomes: list[Outcome] = []
    for i, m in enumerate(chosen, 1):
        o = measure(m, m.area, args.seeds, args.verbose)
        outcomes.append(o)
        verdict = "survived" if o.killed_by is None else f"killed by {o.killed_by}"
        conf = "conformance kills" if o.conformance_killed else "conformance misses"
        print(f"[{i}/{len(chosen)}] {m.id:<36} {verdict:<20} {conf:<18} {o.detail}", flush=True)
    print()
    print(table(outcomes))
    survivors = [o.mutant for o in outcomes if o.killed_by is None]
    unit_only = [o.mutant for o in outcomes if o.killed_by in ("explore", "unit")]
    print(f"\nsurvived everything: {', '.join(survivors) or 'none'}")
    print(f"missed by the conformance cases, killed later: {', '.join(unit_only) or 'none'}")
    if args.json:
        Path(args.json).write_text(json.dumps([o.__dict__ for o in outcomes], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
