"""The top-level parts of the library import each other without a cycle.

A part is what sits directly in ``videoflow_aio``: a subpackage (``conformance``, ``testing``,
…) or a module (``faults``, ``cli``, ``_seeded``). Part A depends on part B when any module of
A imports from B — at the top, in a function or under ``TYPE_CHECKING`` alike, since a lazy
import is a dependency all the same. The dependencies form no cycle, so each part can be read,
tested and changed knowing only those below it (``conformance`` uses ``testing`` to start its
servers; ``testing`` never reaches back into ``conformance``). The package itself
(``from videoflow_aio import …``) is the facade over every part, not a part.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import videoflow_aio

SRC = Path(videoflow_aio.__file__).parent
ROOT = SRC.parent
PACKAGE = "videoflow_aio"


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.is_dir() or path.with_suffix(".py").is_file()


def _targets(node: ast.Import | ast.ImportFrom, package: list[str]) -> list[str]:
    """The dotted modules an import statement reaches (in a module of ``package``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = package[: len(package) - node.level + 1]
        name = ".".join([*base, *([node.module] if node.module else [])])
    else:
        name = node.module or ""
    if name != PACKAGE:
        return [name]
    return [f"{name}.{a.name}" for a in node.names if _is_module(f"{name}.{a.name}")]


def dependencies(path: Path, source: str | None = None) -> list[tuple[str, int, str]]:
    """``(part, line, other part)`` for each import in ``path`` (a module under ``src/``;
    ``source`` stands in for its text) that reaches another part of the library."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if len(parts) < 2:
        return []  # the package's own __init__: the facade
    package = parts[:-1]
    here = parts[1]
    text = path.read_text(encoding="utf-8") if source is None else source
    found: list[tuple[str, int, str]] = []
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        for target in _targets(node, package):
            dotted = target.split(".")
            if dotted[0] == PACKAGE and len(dotted) > 1 and dotted[1] != here:
                found.append((here, node.lineno, dotted[1]))
    return found


def cycles(edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """The strongly connected groups of more than one part (each sorted), sorted: Tarjan's
    algorithm over the dependency graph."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group: list[str] = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(groups)


def _explain(group: list[str], where: Mapping[tuple[str, str], list[str]]) -> str:
    lines = [" <-> ".join(group)]
    for (a, b), sites in sorted(where.items()):
        if a in group and b in group:
            lines.append(f"  {a} -> {b}: {', '.join(sites[:3])}")
    return "\n".join(lines)


def test_the_top_level_parts_import_each_other_without_a_cycle() -> None:
    where: dict[tuple[str, str], list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for a, line, b in dependencies(path):
            where.setdefault((a, b), []).append(f"{module}:{line}")
    found = cycles(where)
    assert not found, "import cycles between parts of the library:\n" + "\n".join(
        _explain(g, where) for g in found
    )


def test_the_checker_sees_every_kind_of_import_and_a_long_cycle() -> None:
    # a module of ``videoflow_aio.testing``
    source = (
        "from ..conformance.providers import nats\n"  # relative, from a subpackage
        "import videoflow_aio.sim._spec\n"  # absolute
        "from .. import faults, __version__\n"  # a top-level module; a name of the facade
        "from . import servers\n"  # its own part: not a dependency
        "def lazy():\n"
        "    from videoflow_aio.explore import strategies\n"  # in a function
    )
    got = [(line, b) for _, line, b in dependencies(SRC / "testing" / "probe.py", source)]
    assert got == [(1, "conformance"), (2, "sim"), (3, "faults"), (6, "explore")]
    assert cycles([("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("e", "e")]) == [["a", "b", "c"]]
    assert cycles([("a", "b"), ("b", "c"), ("a", "c")]) == []
