"""``conformance_suite()``: the conformance cases as a pytest test class (no pytest import here).

The class it returns is collected by ``videoflow_aio.conformance.pytest_plugin`` as one test
per (case, provider, backend), named ``MSG-001[memory-asyncio]``. Without the plugin the class
holds a single test that fails and says how to load it, so a forgotten plugin is never a
silently empty suite.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._provider import Provider
from ._runner import BACKENDS, check_backends

PLUGIN = "videoflow_aio.conformance.pytest_plugin"


@dataclass(frozen=True)
class SuiteSpec:
    """What a suite runs: providers (names or instances; None: every registered provider),
    async backends, a contract and a ``select`` pattern, and options per provider name."""

    providers: tuple[str | Provider, ...] | None = None
    backends: tuple[str, ...] = BACKENDS
    contract: str | None = None
    select: str | None = None
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def conformance_suite(
    providers: Sequence[str | Provider] | None = None,
    *,
    backends: Sequence[str] = BACKENDS,
    contract: str | None = None,
    select: str | None = None,
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> type:
    """A test class running the selected cases on ``providers`` × ``backends``.

    Assign it to a ``Test*`` name in a test module that loads the plugin::

        pytest_plugins = ["videoflow_aio.conformance.pytest_plugin"]
        TestMyStore = conformance_suite(["mystore"], select="RTS-*")

    ``options`` gives constructor options per provider name (``{"nats": {"url": ...}}``);
    ``VIDEOFLOW_<NAME>_URL`` in the environment does the same for ``url``.
    """
    check_backends(backends)
    spec = SuiteSpec(
        tuple(providers) if providers is not None else None,
        tuple(backends),
        contract,
        select,
        dict(options or {}),
    )

    class ConformanceSuite:
        __videoflow_suite__ = spec

        def test_plugin_is_loaded(self) -> None:
            raise AssertionError(
                "conformance_suite() needs its pytest plugin: add "
                f"pytest_plugins = [{PLUGIN!r}] to the test module (or run pytest -p {PLUGIN})"
            )

    return ConformanceSuite
