"""No module imports another package's private (``_``-prefixed) module.

A private module belongs to the package it sits in: ``videoflow_aio.X._y`` may be imported by
the modules of ``videoflow_aio.X`` and its subpackages, and by nobody else — whatever another
package needs from it is re-exported under a public name (``videoflow_aio.X``). Modules private
to the whole library sit at the top (``videoflow_aio._seeded``) and anyone inside may use them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import videoflow_aio

SRC = Path(videoflow_aio.__file__).parent
ROOT = SRC.parent


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.is_dir() or path.with_suffix(".py").is_file()


def _private_owner(dotted: str) -> tuple[str, str] | None:
    """``(owner package, private module)`` when ``dotted`` reaches into a private module."""
    parts = dotted.split(".")
    for i, part in enumerate(parts):
        if not _is_module(".".join(parts[: i + 1])):
            return None
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i]), ".".join(parts[: i + 1])
    return None


def crossings(path: Path, source: str | None = None) -> list[tuple[str, int, str]]:
    """``(importer, line, private module)`` for each import in ``path`` (a module under
    ``src/``; ``source`` stands in for its text) that reaches into a private module of
    another package."""
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    package = parts[:-1]
    if parts[-1] == "__init__":
        parts = package
    importer = ".".join(parts)
    text = path.read_text(encoding="utf-8") if source is None else source
    found: list[tuple[str, int, str]] = []
    for node in ast.walk(ast.parse(text)):
        targets: list[str] = []
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                name = ".".join([*base, *([node.module] if node.module else [])])
            else:
                name = node.module or ""
            targets = [name] + [f"{name}.{alias.name}" for alias in node.names]
        else:
            targets = [alias.name for alias in node.names]
        for target in targets:
            if not target.startswith("videoflow_aio."):
                continue
            hit = _private_owner(target)
            if hit is None:
                continue
            owner, module = hit
            if importer != owner and not importer.startswith(owner + "."):
                found.append((importer, node.lineno, module))
                break
    return found


def test_no_private_module_is_imported_across_package_lines() -> None:
    found = [c for path in sorted(SRC.rglob("*.py")) for c in crossings(path)]
    bad = [f"{i}:{line} imports {m}" for i, line, m in found]
    assert not bad, "private modules imported across package lines:\n" + "\n".join(bad)


def test_the_checker_sees_relative_and_absolute_imports() -> None:
    # a module of ``videoflow_aio.sim`` that reaches into other packages' private modules
    source = (
        "from ..pipeline._stats import LatencyHistogram\n"
        "import videoflow_aio.vtime._guard\n"
        "from ..conformance import _runner\n"
        "from ._spec import parse_spec\n"  # its own package: fine
        "from .. import _seeded\n"  # the library's own private module: fine
        "from ..conformance.cases import msg_basics\n"  # public: fine
    )
    got = [(line, m) for _, line, m in crossings(SRC / "sim" / "probe.py", source)]
    assert got == [
        (1, "videoflow_aio.pipeline._stats"),
        (2, "videoflow_aio.vtime._guard"),
        (3, "videoflow_aio.conformance._runner"),
    ]
