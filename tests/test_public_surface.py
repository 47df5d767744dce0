"""The public surface is policed: every public module says what it exports (``__all__``),
every exported name is documented, and every public object has one public home.

A public module is one whose dotted path has no ``_``-prefixed part. An object's home is the
public module that exports it; a package may re-export what its own public submodules export
(``contracts`` → ``contracts.messaging``), which is the same home seen from higher up. The
source document's import paths (:data:`SEED_PATHS`) keep working as pure re-exports.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import itertools
import pkgutil
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import videoflow_aio

SRC = Path(videoflow_aio.__file__).parent

SEED_PATHS = {
    "videoflow_aio.memory": None,
    "videoflow_aio.memory.messaging": None,
    "videoflow_aio.memory.allocation": None,
    "videoflow_aio.memory.mig_geometry": "videoflow_aio.gpu",
    "videoflow_aio.memory.clock": "videoflow_aio.vtime",
}
"""The source document's import paths: modules that re-export, under the names the document
uses, objects whose home is elsewhere. The two legacy modules (a value given) are pure
re-exports of that package: they define nothing of their own."""


def public_modules() -> Iterator[str]:
    yield videoflow_aio.__name__
    for info in pkgutil.walk_packages(videoflow_aio.__path__, "videoflow_aio."):
        parts = info.name.split(".")
        if not any(p.startswith("_") for p in parts):
            yield info.name


MODULES = sorted(public_modules())


def _attribute_docs() -> set[str]:
    """Names given a docstring where they are assigned (``NAME = …`` then a string), anywhere
    in the library: how constants and aliases are documented."""
    found: set[str] = set()
    for path in SRC.rglob("*.py"):
        body = ast.parse(path.read_text(encoding="utf-8")).body
        for node, after in itertools.pairwise(body):
            if not (
                isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AnnAssign):
                targets = [node.target]
            found.update(t.id for t in targets if isinstance(t, ast.Name))
    return found


def _documented(obj: object, name: str, attribute_docs: set[str]) -> bool:
    if name in attribute_docs:  # a constant or an alias, documented where it is assigned
        return True
    if inspect.isclass(obj):
        doc = obj.__dict__.get("__doc__")
    elif callable(obj) or inspect.ismodule(obj):  # functions, and wrapped ones (caches, fixtures)
        doc = getattr(obj, "__doc__", None) or getattr(
            getattr(obj, "__wrapped__", None), "__doc__", None
        )
        if doc == type(obj).__doc__:
            doc = None
    else:
        return False
    return bool(doc and doc.strip())


@pytest.mark.parametrize("name", MODULES)
def test_every_public_module_has_all(name: str) -> None:
    module = importlib.import_module(name)
    assert isinstance(getattr(module, "__all__", None), list), f"{name} has no __all__"
    exported: list[str] = module.__all__
    assert len(set(exported)) == len(exported), f"{name}.__all__ repeats a name"
    missing = [n for n in exported if not hasattr(module, n)]
    assert not missing, f"{name}.__all__ names what it does not have: {missing}"
    assert module.__doc__ and module.__doc__.strip(), f"{name} has no docstring"


def test_every_exported_name_is_documented() -> None:
    docs = _attribute_docs()
    bare = [
        f"{m}.{n}"
        for m in MODULES
        for n in importlib.import_module(m).__all__
        if not _documented(getattr(importlib.import_module(m), n), n, docs)
    ]
    assert not bare, "exported without a docstring:\n" + "\n".join(bare)


def _homes() -> dict[int, tuple[object, list[str]]]:
    homes: dict[int, tuple[object, list[str]]] = {}
    for m in MODULES:
        if m in SEED_PATHS:
            continue
        module = importlib.import_module(m)
        for n in module.__all__:
            obj = getattr(module, n)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                homes.setdefault(id(obj), (obj, []))[1].append(m)
    return homes


def test_every_public_object_has_one_home() -> None:
    twice: list[str] = []
    for obj, where in _homes().values():
        deepest = max(where, key=len)
        if not all(deepest == m or deepest.startswith(m + ".") for m in where):
            twice.append(f"{getattr(obj, '__qualname__', obj)}: {sorted(where)}")
    assert not twice, "exported from two unrelated places:\n" + "\n".join(twice)


def test_the_checks_see_a_second_home_and_an_undocumented_name() -> None:
    def helper() -> None:
        pass

    assert not _documented(helper, "helper", set())
    assert _documented(helper, "CONST", set()) is False
    assert _documented(42, "CONST", {"CONST"})
    where = ["videoflow_aio.gpu", "videoflow_aio.memory"]
    deepest = max(where, key=len)
    assert not all(deepest == m or deepest.startswith(m + ".") for m in where)


@pytest.mark.parametrize("name", sorted(n for n, home in SEED_PATHS.items() if home))
def test_the_legacy_modules_are_pure_re_exports(name: str) -> None:
    module = importlib.import_module(name)
    home: ModuleType = importlib.import_module(str(SEED_PATHS[name]))
    assert module.__all__, f"{name} exports nothing"
    for n in module.__all__:
        assert getattr(module, n) is getattr(home, n), f"{name}.{n} is not {home.__name__}.{n}"
    own = [
        n
        for n, v in vars(module).items()
        if not n.startswith("_")
        and n != "annotations"
        and getattr(v, "__module__", None) == module.__name__
    ]
    assert not own, f"{name} defines {own}: a legacy path only re-exports"


def test_the_seed_import_paths_still_work() -> None:
    import videoflow_aio.contracts as contracts
    import videoflow_aio.gpu as gpu
    import videoflow_aio.vtime as vtime
    from videoflow_aio.memory import FakeClock, check_layout, make_channel, pack_whole_devices
    from videoflow_aio.memory.clock import FakeClock as Clock
    from videoflow_aio.memory.mig_geometry import Family, Profile, families, family_for

    assert FakeClock is Clock is vtime.FakeClock
    assert (Family, Profile, families, family_for) == (
        gpu.Family,
        gpu.Profile,
        gpu.families,
        gpu.family_for,
    )
    assert check_layout is gpu.check_layout and pack_whole_devices is gpu.pack_whole_devices
    assert make_channel is contracts.make_channel


def test_case_functions_and_cli_plumbing_are_not_exported() -> None:
    exported = {m: list(importlib.import_module(m).__all__) for m in MODULES}
    cases = [m for m in exported if m.startswith("videoflow_aio.conformance.cases")]
    assert cases and all(exported[m] == [] for m in cases)
    assert exported["videoflow_aio.cli"] == ["main"]
