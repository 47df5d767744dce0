"""pytest plugin: collect :func:`conformance_suite` classes as one test per case run.

Load it with ``pytest_plugins = ["videoflow_aio.conformance.pytest_plugin"]`` in the test
module (or ``pytest -p videoflow_aio.conformance.pytest_plugin``). Each (case, provider,
backend) becomes a test item named ``MSG-001[memory-asyncio]``: it fails with the case's
reason (and the traceback when there is one), skips with the skip reason, and records
``virtual_seconds`` / ``wall_seconds`` as user properties (they appear in JUnit XML).

Providers are built once per session (``get_provider(name, **options)``), set up when their
first case runs (collecting starts no server: ``--collect-only`` and ``-m "not server"`` never
start one) and closed when the session ends. A provider that is unavailable here (server
binary missing) skips — unless ``VIDEOFLOW_REQUIRE_SERVERS=1``, as in CI, where it fails.
Each item has its case ID, contract, provider and backend as keywords (``-k "RTS and file"``);
the items of real-time providers (real servers) carry the ``server`` marker.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ._case import Case, select_cases
from ._provider import Provider, env_options, get_provider, provider_names
from ._runner import close_provider, execute, inapplicable, plan
from ._server_provider import ServerProvider
from ._suite import SuiteSpec

_PROVIDERS = pytest.StashKey[dict[tuple[str, str], Provider]]()
_NOT_APPLICABLE = pytest.StashKey[dict[tuple[str, str], int]]()
SERVER_MARKER = "server"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{SERVER_MARKER}: needs a real server (conformance runs of real providers)"
    )


class CaseFailed(Exception):
    """A conformance case failed on a provider; the message is the case's reason."""

    def __init__(self, reason: str, trace: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.trace = trace


def _session_provider(
    config: pytest.Config, name: str, options: dict[str, Any], instance: Provider | None = None
) -> Provider:
    """The session's provider ``name`` with ``options`` (or ``instance``), closed at the end."""
    cache = config.stash.get(_PROVIDERS, None)
    if cache is None:
        cache = config.stash[_PROVIDERS] = {}

        def close_all() -> None:
            for provider in cache.values():
                close_provider(provider)

        config.add_cleanup(close_all)
    key = (name, f"instance {id(instance)}" if instance else repr(sorted(options.items())))
    if key not in cache:
        cache[key] = instance if instance is not None else get_provider(name, **options)
    return cache[key]


class ConformanceItem(pytest.Item):
    """One case on one provider and async backend."""

    def __init__(self, *, case: Case, provider: Provider, backend: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.provider = provider
        self.backend = backend
        for word in (case.id, case.contract, provider.name, backend):
            self.keywords[word] = True
        if provider.real_time:
            self.add_marker(SERVER_MARKER)

    def runtest(self) -> None:
        run = execute(self.case, self.provider, self.backend)
        result = run.result
        self.user_properties.append(("virtual_seconds", result.virtual_seconds))
        self.user_properties.append(("wall_seconds", result.wall_seconds))
        if result.outcome == "skip":
            pytest.skip(result.reason)
        if result.outcome == "fail":
            raise CaseFailed(result.reason, run.traceback)

    def repr_failure(
        self,
        excinfo: pytest.ExceptionInfo[BaseException],
        style: Any = None,
    ) -> str:
        exc = excinfo.value
        if isinstance(exc, CaseFailed):
            head = f"{self.case.id} {self.case.title!r} failed on {self.provider.name}/"
            head += f"{self.backend}: {exc.reason}"
            text = f"{head}\n\n{exc.trace}" if exc.trace else head
            logs = self.provider.log_tail() if isinstance(self.provider, ServerProvider) else ""
            return f"{text}\n\nserver logs (the last lines):\n{logs}" if logs else text
        return str(super().repr_failure(excinfo, style=style))

    def reportinfo(self) -> tuple[Path | str, int | None, str]:
        try:
            source = inspect.getsourcefile(self.case.func)
            _, line = inspect.getsourcelines(self.case.func)
        except (OSError, TypeError):
            return self.path, None, self.name
        return Path(source or self.path), line - 1, f"{self.name}: {self.case.title}"


class SuiteCollector(pytest.Collector):
    """The items of one :func:`conformance_suite` class."""

    def __init__(self, *, spec: SuiteSpec, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec = spec

    def _providers(self) -> list[Provider]:
        spec = self.spec
        chosen = spec.providers if spec.providers is not None else tuple(provider_names())
        out: list[Provider] = []
        for p in chosen:
            if isinstance(p, Provider):
                out.append(_session_provider(self.config, p.name, {}, instance=p))
                continue
            options = {**env_options(p), **spec.options.get(p, {})}
            out.append(_session_provider(self.config, p, options))
        return out

    def collect(self) -> Iterator[pytest.Item]:
        """One item per applicable run. A run that cannot apply (a backend the provider's client
        cannot run on, a profile or control it lacks) is not a test of that provider: it is
        counted in the terminal summary instead of being collected as a skip, so that every
        skip left in a report means something was missing here. An unavailable provider's runs
        are still collected (they skip, or fail when servers are required)."""
        spec = self.spec
        chosen = select_cases(contract=spec.contract, select=spec.select)
        counts = self.config.stash.setdefault(_NOT_APPLICABLE, {})
        missing: dict[int, str | None] = {}
        for c, p, b in plan(chosen, self._providers(), spec.backends):
            if id(p) not in missing:
                missing[id(p)] = _unavailable(p)
            if b not in p.backends or (missing[id(p)] is None and _not_applicable(c, p, b)):
                key = (p.name, b)
                counts[key] = counts.get(key, 0) + 1
                continue
            yield ConformanceItem.from_parent(
                self, name=f"{c.id}[{p.name}-{b}]", case=c, provider=p, backend=b
            )


def _unavailable(p: Provider) -> str | None:
    try:
        return p.unavailable()
    except Exception as exc:  # collected: the run reports the broken provider
        return f"{type(exc).__name__}: {exc}"


def _not_applicable(c: Case, p: Provider, b: str) -> bool:
    """Whether the run cannot apply, from what the provider says before it is set up (nothing
    is started while collecting). A provider that raises is collected: the run reports it."""
    try:
        return inapplicable(c, p, b) is not None
    except Exception:
        return False


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    counts = config.stash.get(_NOT_APPLICABLE, {})
    if not counts:
        return
    terminalreporter.write_sep("-", "conformance runs not applicable (not collected)")
    for (name, backend), n in sorted(counts.items()):
        terminalreporter.write_line(
            f"{name}/{backend}: {n} (see: videoflow-aio conformance -p {name} -b {backend})"
        )


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(
    collector: pytest.Module | pytest.Class, name: str, obj: object
) -> SuiteCollector | None:
    spec = getattr(obj, "__videoflow_suite__", None)
    if isinstance(spec, SuiteSpec):
        return SuiteCollector.from_parent(collector, name=name, spec=spec)
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A skipped case is reported at the case's source line, not inside this plugin."""
    report = yield
    if (
        isinstance(item, ConformanceItem)
        and report.skipped
        and isinstance(report.longrepr, tuple)
        and len(report.longrepr) == 3
    ):
        path, line, _ = item.reportinfo()
        report.longrepr = (str(path), (line or 0) + 1, report.longrepr[2])
    return report


# the pytest hooks above are found by pytest by name; these are what a conftest may use
__all__ = ["CaseFailed", "ConformanceItem", "SuiteCollector"]
