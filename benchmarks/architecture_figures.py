"""The architecture figures issue #24 quotes, measured on ``src/videoflow_aio``.

    .venv/bin/python benchmarks/architecture_figures.py [--src DIR]

Prints: module count and median/largest module lines, modules over 1,000 lines, the largest
class, the share of functions over cyclomatic complexity 10 (ruff's mccabe rule C901), the
``dict[str, Any]`` and ``Any`` annotation lines in the NATS adapter, ``Any`` lines in the
conformance cases, public modules without ``__all__`` and imports of ``_private`` modules
across package lines. Static reading only: nothing is imported or run but ``ruff``.
"""

from __future__ import annotations

import argparse
import ast
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from public_surface import _all, _module_name, _public

ROOT = Path(__file__).resolve().parents[1]


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def _reaches_private(name: str, package: str, src: Path) -> bool:
    """True when the dotted ``name`` is a ``_private`` module of a package ``package`` is
    not inside."""
    parts = name.split(".")
    for i, part in enumerate(parts):
        where = src.parent.joinpath(*parts[: i + 1])
        if not (where.is_dir() or where.with_suffix(".py").is_file()):
            return False  # a name, not a module
        if part.startswith("_") and not part.startswith("__"):
            owner = ".".join(parts[:i])
            return bool(owner) and not (package == owner or package.startswith(owner + "."))
    return False


def _private_crossings(path: Path, src: Path) -> int:
    """Import statements reaching a ``_private`` module (not a name) of another package
    (``videoflow_aio.x._y`` from outside ``videoflow_aio.x``)."""
    here = _module_name(path, src)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    count = 0
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = package.split(".")
            base = base[: len(base) - (node.level - 1)]
            target = ".".join([*base, *([node.module] if node.module else [])])
        else:
            target = node.module or ""
        names = [target] + [f"{target}.{a.name}" for a in node.names]
        if any(_reaches_private(name, package, src) for name in names):
            count += 1  # one per import statement
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--src", type=Path, default=ROOT / "src" / "videoflow_aio")
    src = parser.parse_args().src.resolve()
    files = sorted(src.rglob("*.py"))
    sizes = {f: _lines(f) for f in files}
    classes: list[tuple[int, str]] = []
    functions = 0
    for f in files:
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ClassDef):
                end = node.end_lineno or node.lineno
                classes.append((end - node.lineno + 1, f"{f.relative_to(src)}:{node.name}"))
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                functions += 1
    ruff = shutil.which("ruff") or str(Path(sys.executable).with_name("ruff"))
    out = subprocess.run(
        [
            ruff,
            "check",
            "--select",
            "C901",
            "--config",
            "lint.mccabe.max-complexity=10",
            "--output-format",
            "json",
            "--exit-zero",
            "--no-cache",
            str(src),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    complex_ = len(json.loads(out))
    nats = sorted((src / "adapters" / "nats").rglob("*.py"))
    cases = sorted((src / "conformance" / "cases").rglob("*.py"))
    dict_any = sum(
        1 for f in nats for line in f.read_text().splitlines() if "dict[str, Any]" in line
    )
    nats_any = sum(1 for f in nats for line in f.read_text().splitlines() if "Any" in line)
    case_any = sum(1 for f in cases for line in f.read_text().splitlines() if "Any" in line)
    # public modules as benchmarks/public_surface.py counts them (its definitions)
    public = [f for f in files if _public(_module_name(f, src))]
    no_all = [f for f in public if _all(ast.parse(f.read_text())) is None]
    crossings = sum(_private_crossings(f, src) for f in files)
    largest = max(classes)
    print(f"modules                         {len(files)}")
    print(f"median module lines             {statistics.median(sizes.values()):.0f}")
    big = sorted((n, str(f.relative_to(src))) for f, n in sizes.items() if n > 1000)
    print(f"modules over 1,000 lines        {len(big)} {big}")
    print(f"largest class                   {largest[0]} lines ({largest[1]})")
    print(f"functions over complexity 10    {complex_} of {functions} = {complex_ / functions:.1%}")
    print(f"adapters/nats dict[str, Any]    {dict_any} lines; Any {nats_any} lines")
    print(f"conformance/cases Any           {case_any} lines")
    print(f"public modules without __all__  {len(no_all)} of {len(public)}")
    print(f"private-module imports across packages {crossings} statements")


if __name__ == "__main__":
    main()
