"""The public-surface figures issue #24 quotes, measured on ``src/videoflow_aio``.

    .venv/bin/python benchmarks/public_surface.py [--src DIR]

A public module is one whose dotted path has no ``_``-prefixed part. Its public names are its
``__all__`` when it has one, else every top-level name it defines (``def``, ``class``, an
assignment) without a leading ``_`` — what ``from m import *`` and the reference would show.
Prints the public modules, those without ``__all__`` (and how many names each shows), and the
public names in all. Static reading only: nothing is imported.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _public(name: str) -> bool:
    return not any(p.startswith("_") for p in name.split(".")[1:])


def _all(tree: ast.Module) -> list[str] | None:
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else []
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        value = getattr(node, "value", None)
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and isinstance(
            value, ast.List | ast.Tuple
        ):
            return [str(e.value) for e in value.elts if isinstance(e, ast.Constant)]
    return None


def _defined(tree: ast.Module) -> list[str]:
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.append(node.target.id)
    return [n for n in dict.fromkeys(names) if not n.startswith("_")]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--src", type=Path, default=ROOT / "src" / "videoflow_aio")
    src = parser.parse_args().src.resolve()
    modules = {_module_name(f, src): ast.parse(f.read_text()) for f in sorted(src.rglob("*.py"))}
    public = {m: t for m, t in modules.items() if _public(m)}
    exported = {m: _all(t) for m, t in public.items()}
    without = sorted(m for m, names in exported.items() if names is None)
    names = {m: n if n is not None else _defined(public[m]) for m, n in exported.items()}
    declared = sum(len(n) for n in exported.values() if n is not None)
    print(f"public modules                  {len(public)}")
    print(f"public modules without __all__  {len(without)}")
    for m in without:
        print(f"    {m} ({len(names[m])} names)")
    print(f"public names                    {sum(len(n) for n in names.values())}")
    print(f"  declared in __all__           {declared}")
    print(f"  defined where __all__ is none {sum(len(names[m]) for m in without)}")


if __name__ == "__main__":
    main()
