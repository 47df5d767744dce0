"""Tool-generated mutation testing with cosmic-ray, on a seeded random sample per area.

``run.py`` measures hand-written semantic mutants; this runs the mutants that cosmic-ray's
operators generate (every comparison, boolean, arithmetic and constant swap, a removed
decorator, a loop that never iterates, …) so that the measurement does not depend on which
bugs someone thought of. A full run is hours, so each area runs a *random sample* of its
mutants (seeded: the same sources and seed give the same sample; mutants inside function
signatures' annotations are left out, since nothing evaluates those), at two levels:

(a) **conformance**: ``videoflow-aio conformance -p memory -b asyncio --contract <c>`` (not
    for ``vtime``, which has no contract);
(b) for the survivors of (a): the area's server-free unit tests (``run.py``'s
    ``UNIT_TESTS``, ``pytest -x``), then ``videoflow-aio explore --seeds 3``.

A failing or timed-out test command kills the mutant (cosmic-ray's own rule; the time limit
is several times the unmutated run's). cosmic-ray mutates files in place and restores them:
it runs here on an export of ``--rev`` in a temporary folder (first on ``PYTHONPATH``), never
on the worktree. Needs the ``mutation`` extra (``pip install -e '.[mutation]'``).

    .venv/bin/python benchmarks/mutation/cosmic.py --area messaging --sample 40
    .venv/bin/python benchmarks/mutation/cosmic.py --area allocation --json out.json --verbose
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import os
import random
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
PKG = "src/videoflow_aio/"
# the modules cosmic-ray mutates, per area (relative to the exported tree; globs expanded)
MODULES: dict[str, tuple[str, ...]] = {
    "messaging": (PKG + "memory/messaging",),
    "payload": (PKG + "memory/payload",),
    "runtime_store": (PKG + "memory/runtime_store.py",),
    "allocation": (
        PKG + "memory/_allocation*.py",
        PKG + "memory/allocation.py",
        PKG + "gpu/packing.py",
        PKG + "gpu/geometry.py",
        PKG + "gpu/layout.py",
    ),
    "vtime": (PKG + "vtime/_loop.py", PKG + "vtime/_clock.py"),
}
CONTRACT = {
    "messaging": "messaging",
    "payload": "payload",
    "runtime_store": "runtime_store",
    "allocation": "allocation",
}
MARKS = "not server and not cluster and not slow"


def _run_py() -> Any:
    """``run.py`` beside this file (its unit-test lists and its subprocess runner)."""
    here = str(Path(__file__).resolve().parent)
    if here not in sys.path:
        sys.path.insert(0, here)
    return importlib.import_module("run")


def _unit_tests(area: str) -> dict[str, tuple[str, ...]]:
    tests: dict[str, tuple[str, ...]] = _run_py().UNIT_TESTS
    return tests


@dataclass
class Mutant:
    """One sampled cosmic-ray mutant and what each level made of it."""

    module: str
    operator: str
    occurrence: int
    line: int
    diff: str
    conformance: str  # killed | survived | incompetent | n/a (vtime)
    whole: str  # killed (by any level) | survived | incompetent
    killed_by: str | None


def _env(tree: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree / "src"), env.get("PYTHONPATH", "")]).rstrip(
        os.pathsep
    )
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["COLUMNS"] = "200"
    return env


def _export(rev: str, dest: Path) -> str:
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", rev], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", rev],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def _commands(area: str, tree: Path, explore_seeds: int) -> dict[str, str]:
    """The test command of each level (cosmic-ray splits it with shlex, no shell)."""
    py = sys.executable
    cmds: dict[str, str] = {}
    if area in CONTRACT:
        cmds["conformance"] = (
            f"{py} -m videoflow_aio conformance -p memory -b asyncio "
            f"--contract {CONTRACT[area]} --show fail"
        )
    paths: list[str] = []
    for pattern in _unit_tests(area)[area]:
        glob = pattern if "*" in pattern else f"{pattern}/test_*.py"
        paths += sorted(str(p.relative_to(tree)) for p in tree.glob(glob))
    paths.sort(key=lambda p: not p.endswith("_edges.py"))  # short, aimed tests first
    unit = f"{py} -m pytest -x -q -p no:randomly -p no:cacheprovider -m '{MARKS}' {' '.join(paths)}"
    script = tree / f"level-b-{area}.sh"
    script.write_text(
        f"set -e\n{unit}\n"
        + (f"{py} -m videoflow_aio explore --seeds {explore_seeds}\n" if explore_seeds else "")
    )
    cmds["unit"] = f"sh {script}"
    return cmds


def _timed(cmd: str, tree: Path, limit: float) -> float:
    """Run the unmutated ``cmd`` once (``run.py``'s runner: its own process group, stopped
    after ``limit`` seconds); its wall time, the basis of the mutants' time limit."""
    run = _run_py()
    run.ROOT = tree  # the runner's working directory: the exported tree
    start = time.perf_counter()  # wall-clock: sets a wall-clock limit
    code, out = run._run(shlex.split(cmd), tree / "src", limit)
    if code is None:
        raise SystemExit(f"the unmutated tree took over {limit:.0f} s for `{cmd}`")
    if code != 0:
        raise SystemExit(f"the unmutated tree fails `{cmd}`:\n{out[-3000:]}")
    return time.perf_counter() - start


def _config(tree: Path, area: str, level: str, command: str, timeout: float) -> Path:
    found = sorted(str(p.relative_to(tree)) for m in MODULES[area] for p in tree.glob(m))
    paths = ", ".join(json.dumps(m) for m in found)
    cfg = tree / f"cosmic-{area}-{level}.toml"
    cfg.write_text(
        "[cosmic-ray]\n"
        f"module-path = [{paths}]\n"
        f"timeout = {timeout:.0f}\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(command)}\n\n"
        '[cosmic-ray.distributor]\nname = "local"\n'
    )
    return cfg


def _cr(tree: Path, *args: str, verbose: bool) -> None:
    cr = str(Path(sys.executable).with_name("cosmic-ray"))
    subprocess.run(
        [cr, *args],
        cwd=tree,
        env=_env(tree),
        check=True,
        stdout=None if verbose else subprocess.DEVNULL,
        stderr=None if verbose else subprocess.DEVNULL,
    )


def _key(item: Any) -> tuple[str, str, int]:
    m = item.mutations[0]
    return (str(m.module_path), str(m.operator_name), int(m.occurrence))


_ANNOTATIONS: dict[Path, list[tuple[tuple[int, int], tuple[int, int]]]] = {}


def _annotation_spans(path: Path) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Where ``path``'s function signatures and local variables carry annotations: under
    ``from __future__ import annotations`` nothing evaluates them, so a mutant there is
    equivalent by construction (class-level annotations are kept: dataclasses and msgspec
    read them)."""
    if path not in _ANNOTATIONS:
        nodes: list[ast.expr] = []
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            a = fn.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
                if arg is not None and arg.annotation is not None:
                    nodes.append(arg.annotation)
            if fn.returns is not None:
                nodes.append(fn.returns)
            nodes += [n.annotation for n in ast.walk(fn) if isinstance(n, ast.AnnAssign)]
        _ANNOTATIONS[path] = [
            ((n.lineno, n.col_offset), (n.end_lineno or n.lineno, n.end_col_offset or 0))
            for n in nodes
        ]
    return _ANNOTATIONS[path]


def _in_annotation(tree: Path, item: Any) -> bool:
    m = item.mutations[0]
    start = (int(m.start_pos[0]), int(m.start_pos[1]))
    return any(a <= start < b for a, b in _annotation_spans(tree / str(m.module_path)))


def _session(
    tree: Path, cfg: Path, keep: set[tuple[str, str, int]] | None, sample: int, seed: int
) -> tuple[Path, list[tuple[str, str, int]]]:
    """Create a session from ``cfg`` and mark every mutant outside the chosen ones skipped:
    a seeded sample of ``sample`` (``keep`` None) or exactly ``keep``."""
    wdb = importlib.import_module("cosmic_ray.work_db")
    wi = importlib.import_module("cosmic_ray.work_item")
    session = cfg.with_suffix(".sqlite")
    _cr(tree, "init", str(cfg), str(session), "--force", verbose=False)
    with wdb.use_db(str(session)) as db:
        every = sorted(db.work_items, key=_key)
        items = [i for i in every if not _in_annotation(tree, i)]
        if keep is None:
            chosen = random.Random(seed).sample(items, min(sample, len(items)))
            print(
                f"{len(every)} mutants generated, {len(every) - len(items)} of them in a "
                f"signature's annotation (never evaluated), {len(chosen)} sampled",
                flush=True,
            )
        else:
            chosen = [i for i in items if _key(i) in keep]
        ids = {i.job_id for i in chosen}
        skipped = [i.job_id for i in every if i.job_id not in ids]
        db.set_multiple_results(skipped, wi.WorkResult(worker_outcome=wi.WorkerOutcome.SKIPPED))
    return session, sorted(_key(i) for i in chosen)


def _results(session: Path) -> dict[tuple[str, str, int], tuple[str, str, int]]:
    """(module, operator, occurrence) -> (outcome, diff, line) for the run mutants."""
    wdb = importlib.import_module("cosmic_ray.work_db")
    out: dict[tuple[str, str, int], tuple[str, str, int]] = {}
    with wdb.use_db(str(session), wdb.WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
            worker = str(result.worker_outcome.value)
            if worker == "skipped":
                continue
            outcome = "no-test" if worker == "no-test" else str(result.test_outcome.value)
            line = int(item.mutations[0].start_pos[0])
            out[_key(item)] = (outcome, result.diff or "", line)
    return out


def measure(
    area: str,
    rev: str,
    sample: int,
    seed: int,
    explore_seeds: int,
    verbose: bool,
    baseline_limit: float = 900.0,
) -> tuple[str, list[Mutant]]:
    with tempfile.TemporaryDirectory(prefix="vf-cosmic-") as tmp:
        tree = Path(tmp)
        commit = _export(rev, tree)
        print(f"{area}: commit {commit}, seed {seed}", flush=True)
        cmds = _commands(area, tree, explore_seeds)
        limits = {lvl: 30.0 + 4.0 * _timed(cmd, tree, baseline_limit) for lvl, cmd in cmds.items()}
        print(f"baseline green; time limits { ({k: round(v) for k, v in limits.items()}) }")
        first = "conformance" if "conformance" in cmds else "unit"
        cfg = _config(tree, area, first, cmds[first], limits[first])
        session, sampled = _session(tree, cfg, None, sample, seed)
        _cr(tree, "exec", str(cfg), str(session), verbose=verbose)
        a = _results(session)
        b: dict[tuple[str, str, int], tuple[str, str, int]] = {}
        if first == "conformance":
            alive = {k for k, (o, _, _) in a.items() if o == "survived"}
            if alive:
                cfg_b = _config(tree, area, "unit", cmds["unit"], limits["unit"])
                session_b, _ = _session(tree, cfg_b, alive, 0, seed)
                _cr(tree, "exec", str(cfg_b), str(session_b), verbose=verbose)
                b = _results(session_b)
        mutants: list[Mutant] = []
        for key in sampled:
            outcome_a, diff, line = a.get(key, ("missing", "", 0))
            conf = outcome_a if first == "conformance" else "n/a"
            whole, by = outcome_a, (first if outcome_a == "killed" else None)
            if key in b:
                whole, _, _ = b[key]
                by = "unit" if whole == "killed" else None
            mutants.append(
                Mutant(
                    module=key[0].removeprefix(PKG),
                    operator=key[1],
                    occurrence=key[2],
                    line=line,
                    diff=diff.replace(str(tree) + "/", ""),
                    conformance=conf,
                    whole=whole,
                    killed_by=by,
                )
            )
        return commit, mutants


def summary(area: str, mutants: Sequence[Mutant]) -> str:
    """One line: sampled, killed by conformance alone, by the whole suite, survived."""
    counted = [m for m in mutants if m.whole in ("killed", "survived")]
    n = len(counted)
    conf = sum(m.conformance == "killed" for m in counted)
    whole = sum(m.whole == "killed" for m in counted)
    other = len(mutants) - n
    rate = (lambda k: f"{k} ({k / n:.0%})") if n else (lambda k: str(k))
    conf_s = rate(conf) if any(m.conformance != "n/a" for m in counted) else "n/a"
    return (
        f"{area:<14} sampled {len(mutants):>3}  conformance {conf_s:<10} "
        f"whole suite {rate(whole):<10} survived {n - whole}"
        + (f"  (not counted: {other} incompetent/no-test)" if other else "")
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--area", choices=list(MODULES), action="append", required=True)
    parser.add_argument("--sample", type=int, default=40, help="mutants per area (default 40)")
    parser.add_argument("--seed", type=int, default=23, help="sampling seed (default 23)")
    parser.add_argument("--explore-seeds", type=int, default=3, help="0: no explore level")
    parser.add_argument("--rev", default="HEAD", help="the commit to measure (default HEAD)")
    parser.add_argument("--json", metavar="PATH", help="write every mutant's outcome as JSON")
    parser.add_argument("--verbose", action="store_true", help="show cosmic-ray's output")
    args = parser.parse_args(argv)
    if shutil.which("cosmic-ray", path=str(Path(sys.executable).parent)) is None:
        parser.error("cosmic-ray is missing: pip install -e '.[mutation]'")
    report: dict[str, Any] = {"rev": args.rev, "seed": args.seed, "areas": {}}
    lines: list[str] = []
    for area in args.area:
        commit, mutants = measure(
            area, args.rev, args.sample, args.seed, args.explore_seeds, args.verbose
        )
        report["commit"] = commit
        report["areas"][area] = [asdict(m) for m in mutants]
        for m in mutants:
            if m.whole != "killed":
                print(f"  {m.whole}: {m.module}:{m.line} {m.operator} #{m.occurrence}")
                print("    " + "\n    ".join(m.diff.splitlines()[2:]))
        lines.append(summary(area, mutants))
        print(lines[-1], flush=True)
    print("\n".join(lines))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
