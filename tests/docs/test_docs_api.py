"""The API reference covers the public surface: every name of every public ``__all__`` is
rendered on some page of ``docs/reference`` (the strict MkDocs build then checks that each
has a docstring and that every cross-reference resolves). A package's directive with
``show_submodules: true`` renders its public submodules too, each by its ``__all__``."""

from __future__ import annotations

import importlib
import pkgutil
import re
from types import ModuleType

import videoflow_aio
from _paths import ROOT

REFERENCE = ROOT / "docs" / "reference"
_DIRECTIVE = re.compile(r"^::: (\S+)\n((?:    .*\n)*)", re.MULTILINE)


def public_modules() -> list[ModuleType]:
    found = [videoflow_aio]
    for info in pkgutil.walk_packages(videoflow_aio.__path__, "videoflow_aio."):
        if not any(part.startswith("_") for part in info.name.split(".")[1:]):
            found.append(importlib.import_module(info.name))
    return found


def defined_in(module: ModuleType) -> list[str]:
    """Public names a module without ``__all__`` defines (what mkdocstrings renders)."""
    return [
        name
        for name, obj in vars(module).items()
        if not name.startswith("_") and getattr(obj, "__module__", None) == module.__name__
    ]


def _with_submodules(path: str, options: str) -> list[str]:
    """``path``, and its public submodules when the directive shows them."""
    if not re.search(r"show_submodules: true", options):
        return [path]
    package = importlib.import_module(path)
    return [path] + [
        info.name
        for info in pkgutil.walk_packages(package.__path__, f"{path}.")
        if not any(part.startswith("_") for part in info.name.split("."))
    ]


def rendered() -> dict[str, list[str]]:
    """Module path -> the names its ``:::`` directives render."""
    out: dict[str, list[str]] = {}
    for page in sorted(REFERENCE.glob("*.md")):
        for directive, options in _DIRECTIVE.findall(page.read_text()):
            for path in _with_submodules(directive, options):
                _render(out, path, options if path == directive else "")
    return out


def _render(out: dict[str, list[str]], path: str, options: str) -> None:
    """Add to ``out`` the names one directive (``options`` its indented lines) renders."""
    module = importlib.import_module(path)
    members = re.search(r"members: (.*)", options)
    if members is None:
        names = list(getattr(module, "__all__", None) or defined_in(module))
    elif members.group(1).strip() == "false":
        names = []
    else:
        names = [n.strip() for n in members.group(1).strip("[] ").split(",")]
    out.setdefault(path, []).extend(names)


def test_every_public_name_is_rendered_in_the_reference() -> None:
    shown = {id(getattr(importlib.import_module(m), n)) for m, ns in rendered().items() for n in ns}
    missing = [
        f"{module.__name__}.{name}"
        for module in public_modules()
        for name in getattr(module, "__all__", [])
        if id(getattr(module, name)) not in shown
    ]
    assert missing == [], "add these to a page of docs/reference"


def test_each_rendered_name_exists() -> None:
    for path, names in rendered().items():
        module = importlib.import_module(path)
        for name in names:
            assert hasattr(module, name), f"{path}.{name}"
