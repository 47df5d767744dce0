"""MkDocs hook: every name in a public ``__all__`` has a docstring, or the build warns.

Under ``mkdocs build --strict`` a warning fails the build, so a public name without a
docstring (a class, function, constant or type alias of any public module's ``__all__``)
cannot reach the reference. Loaded with griffe, the loader mkdocstrings uses, so attribute
docstrings (a string right after a constant) count, as they do in the rendered pages.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import griffe

log = logging.getLogger("mkdocs.hooks.api_docstrings")

PACKAGE = "videoflow_aio"
SRC = Path(__file__).resolve().parents[2] / "src"


def _public(module: griffe.Module) -> bool:
    return not any(part.startswith("_") for part in module.path.split(".")[1:])


def _modules(module: griffe.Module) -> list[griffe.Module]:
    found = [module]
    for member in module.modules.values():
        if not member.is_alias:
            found.extend(_modules(member))
    return found


def missing_docstrings() -> list[str]:
    """Dotted names of every public ``__all__`` entry without a docstring, sorted."""
    package = griffe.load(PACKAGE, search_paths=[str(SRC)], resolve_aliases=True)
    assert isinstance(package, griffe.Module)
    missing: set[str] = set()
    for module in _modules(package):
        if not _public(module) or module.exports is None:
            continue
        for name in module.exports:
            name = str(name)
            try:
                target = module[name]
                if target.is_alias:
                    target = target.final_target
            except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
                missing.add(f"{module.path}.{name} (cannot be resolved)")
                continue
            if target.docstring is None or not target.docstring.value.strip():
                missing.add(f"{module.path}.{name}")
    return sorted(missing)


def on_pre_build(config: Any, **kwargs: Any) -> None:
    for name in missing_docstrings():
        log.warning("public name without a docstring: %s", name)
