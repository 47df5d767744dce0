"""Which tests run on virtual time, on which clock: the plugin's opt-in rules.

A test runs on virtual time when, in this order of precedence:

1. its closest ``vtime`` marker says so: ``@pytest.mark.vtime`` / ``vtime(True)`` opts in,
   ``vtime(False)`` opts out; keyword arguments (merged from module to class to function,
   the closest winning) configure the test's :class:`VirtualClock`;
2. the ``vtime`` ini option is true and it is an anyio test (one that uses
   ``anyio_backend``: a test run by another async plugin is left alone);
3. it requests the ``vclock`` fixture.

``--vtime-seeds N`` runs every such test under seeds ``0..N-1`` (one test item per seed,
``test_x[asyncio-seed3]``), unless its marker sets ``seed`` itself.

Which backends a test runs on stays anyio's choice (the ``anyio_backend`` fixture, its
parametrisation): the plugin only puts whatever backend anyio picked on the test's clock.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import pytest

from videoflow_aio.vtime import VirtualClock, backend_options, new_event_loop

MARKER = "vtime"
INI = "vtime"
CLOCK_OPTIONS = ("start", "wall_start", "autojump", "spin_threshold", "seed", "jitter")
#: the command-line option that runs every virtual-time test under N seeds
SEEDS_OPTION = "--vtime-seeds"
#: the parameter a test gets under ``--vtime-seeds`` (its ids read ``seed0``, ``seed1``, …)
SEED_PARAM = "_vtime_seed"
PREFIX = "videoflow_aio virtual time: "

#: the options each backend's virtual time sets itself (a clash is an error, not an override)
_TAKEN = {"asyncio": ("loop_factory", "use_uvloop"), "trio": ("clock",)}


@dataclasses.dataclass(frozen=True)
class Choice:
    """A test's opt-in: on or off, the clock options, why, and any usage error."""

    enabled: bool
    options: dict[str, Any]
    source: str  # "marker", "ini", "vclock" or "" (not opted in)
    error: str | None = None


_CHOICE = pytest.StashKey[Choice]()
_CLOCK = pytest.StashKey[VirtualClock]()
_BACKEND = pytest.StashKey[tuple[object, tuple[str, dict[str, Any]]]]()


def choice(item: pytest.Item) -> Choice:
    """The item's opt-in (computed once)."""
    found = item.stash.get(_CHOICE, None)
    if found is None:
        found = item.stash[_CHOICE] = _resolve(item)
    return found


def refuse(item: pytest.Item, error: str) -> None:
    """Make the item fail at setup with ``error`` (a usage error found at collection)."""
    item.stash[_CHOICE] = dataclasses.replace(choice(item), error=PREFIX + error)


def marker_enabled(mark: pytest.Mark) -> bool:
    """``vtime`` / ``vtime(True)`` → on, ``vtime(False)`` → off (anything else is on,
    and reported by :func:`choice`)."""
    return not (len(mark.args) == 1 and mark.args[0] is False)


def _resolve(item: pytest.Item) -> Choice:
    marks = list(item.iter_markers(MARKER))  # closest first
    if marks:
        closest = marks[0]
        options: dict[str, Any] = {}
        for mark in reversed(marks):
            options.update(mark.kwargs)
        error = None
        if len(closest.args) > 1 or (closest.args and not isinstance(closest.args[0], bool)):
            error = f"pytest.mark.vtime takes one optional True/False, not {closest.args!r}"
        unknown = sorted(set(options) - set(CLOCK_OPTIONS))
        if unknown:
            error = (
                f"pytest.mark.vtime got unknown option(s) {', '.join(unknown)}; "
                f"it accepts {', '.join(CLOCK_OPTIONS)}"
            )
        return Choice(marker_enabled(closest), options, "marker", PREFIX + error if error else None)
    if item.config.getini(INI) and "anyio_backend" in getattr(item, "fixturenames", ()):
        return Choice(True, {}, "ini")  # every anyio test; not another async plugin's tests
    if "vclock" in getattr(item, "fixturenames", ()):
        return Choice(True, {}, "vclock")
    return Choice(False, {}, "")


def item_clock(item: pytest.Item) -> VirtualClock:
    """The test's own fresh clock (made once, from the marker's options)."""
    clock = item.stash.get(_CLOCK, None)
    if clock is None:
        options = choice(item).options
        callspec = getattr(item, "callspec", None)
        if callspec is not None and SEED_PARAM in callspec.params:
            options = {**options, "seed": callspec.params[SEED_PARAM]}
        try:
            clock = VirtualClock(**options)
        except (TypeError, ValueError) as exc:
            pytest.fail(f"{PREFIX}pytest.mark.vtime({_kwargs(options)}): {exc}", pytrace=False)
        item.stash[_CLOCK] = clock
    return clock


def virtual_backend(item: pytest.Item, value: object) -> tuple[str, dict[str, Any]]:
    """anyio's ``anyio_backend`` value for this test, put on the test's clock.

    Whatever picked the backend (anyio's default, a conftest or module fixture, a direct
    or indirect ``parametrize("anyio_backend", ...)``), the backend keeps its options and
    gains the clock; options that would pick another loop or clock are an error.
    """
    cached = item.stash.get(_BACKEND, None)
    if cached is not None and cached[0] is value:
        return cached[1]
    if isinstance(value, str):
        name, options = value, dict[str, Any]()
    elif (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], dict)
    ):
        name, options = value
    else:
        pytest.fail(
            f"{PREFIX}anyio_backend must be a backend name or (name, options), not {value!r}",
            pytrace=False,
        )
    if name not in _TAKEN:
        pytest.fail(
            f"{PREFIX}virtual time runs on 'asyncio' or 'trio', but anyio_backend is "
            f"{name!r}; pick one of those, or mark the test pytest.mark.vtime(False)",
            pytrace=False,
        )
    clock = item_clock(item)
    if _on_clock(name, options, clock):  # already put on this test's clock (via vclock)
        item.stash[_BACKEND] = (value, (name, options))
        return name, options
    clash = [key for key in _TAKEN[name] if options.get(key)]
    if clash:
        pytest.fail(
            f"{PREFIX}anyio_backend's options set {', '.join(clash)}, which virtual time "
            "sets itself; drop them, or mark the test pytest.mark.vtime(False)",
            pytrace=False,
        )
    virtual = (name, {**options, **backend_options(name, clock)})
    item.stash[_BACKEND] = (value, virtual)
    return virtual


def seeds_for(metafunc: pytest.Metafunc) -> list[int]:
    """The seeds ``--vtime-seeds N`` runs this test under: ``0..N-1`` for an anyio test on
    virtual time whose marker does not set ``seed`` itself (an explicit ``seed=None`` keeps
    a test that needs FIFO order on it), else none."""
    count = metafunc.config.getoption(SEEDS_OPTION, None)
    if not count or "anyio_backend" not in metafunc.fixturenames:
        return []
    found = choice(metafunc.definition)
    if not found.enabled or "seed" in found.options:
        return []
    return list(range(count))


def _on_clock(name: str, options: dict[str, Any], clock: VirtualClock) -> bool:
    if name == "trio":
        return options.get("clock") is clock.trio_clock()
    factory = options.get("loop_factory")
    return (
        isinstance(factory, functools.partial)
        and factory.func is new_event_loop
        and factory.args == (clock,)
        and not factory.keywords
    )


def _kwargs(options: dict[str, Any]) -> str:
    return ", ".join(f"{key}={value!r}" for key, value in options.items())
