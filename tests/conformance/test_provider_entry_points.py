"""A package adds a conformance provider by declaring a ``videoflow_aio.providers`` entry point,
touching no file of videoflow_aio; a broken one is a typed error that names it.

Each test writes a package into a temporary directory: a module and a ``*.dist-info`` with an
``entry_points.txt`` (what ``pip install`` would leave), found on ``sys.path`` like an installed
one. The provider wraps the messaging reference model under another name, as a third-party
adapter's provider would wrap its backend.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from videoflow_aio.cli import main
from videoflow_aio.conformance import (
    REQUIRE_SERVERS_ENV,
    ProviderLoadError,
    _provider,
    _registry,
    get_provider,
    provider_names,
    register_provider,
    run,
    select_cases,
)
from videoflow_aio.conformance.providers import UnimportableProvider

pytest_plugins = ["pytester"]

DEMO = """
from videoflow_aio.conformance.providers.memory import MemoryProvider


class DemoProvider(MemoryProvider):
    '''The messaging reference model under the name of a new adapter.'''

    name = "{name}"

    def contracts(self):
        return frozenset({{"messaging"}})
"""


def install(root: Path, dist: str, entries: dict[str, str], modules: dict[str, str]) -> Path:
    """``dist`` 1.0 as pip would leave it in ``root``: its modules and a dist-info whose
    ``entry_points.txt`` declares ``entries`` (name -> ``module:attribute``)."""
    info = root / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    declared = "".join(f"{name} = {target}\n" for name, target in entries.items())
    (info / "entry_points.txt").write_text(f"[videoflow_aio.providers]\n{declared}")
    for module, source in modules.items():
        (root / f"{module}.py").write_text(textwrap.dedent(source))
    return root


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """An empty registry (reloaded from the table and the entry points on first use) and a
    directory on ``sys.path`` to install packages into; the modules imported are forgotten."""
    monkeypatch.setattr(_provider, "PROVIDERS", {})
    monkeypatch.setattr(_provider, "_LOADED", [])
    monkeypatch.setattr(_registry, "IMPORT_ERRORS", {})
    monkeypatch.syspath_prepend(str(tmp_path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if name.startswith("vf_test_"):
            del sys.modules[name]
    importlib.invalidate_caches()


def test_an_entry_point_provider_is_listed_and_runs_the_messaging_cases(fresh: Path) -> None:
    install(
        fresh,
        "vf-test-kafka",
        {"kafka-demo": "vf_test_kafka:DemoProvider"},
        {"vf_test_kafka": DEMO.format(name="kafka-demo")},
    )
    assert "kafka-demo" in provider_names()
    assert {"memory", "nats", "etcd-secure"} <= set(provider_names())  # the built-ins stay
    provider = get_provider("kafka-demo")
    assert type(provider).__module__ == "vf_test_kafka" and provider.name == "kafka-demo"
    cases = select_cases(contract="messaging")
    results = run(cases, [provider], ["asyncio"])
    assert len(results) == len(cases) > 50
    failed = [(r.id, r.reason) for r in results if r.outcome == "fail"]
    assert failed == []
    assert sum(r.outcome == "pass" for r in results) > 50


def test_the_cli_runs_an_entry_point_provider_installed_in_another_process(
    tmp_path: Path,
) -> None:
    root = install(
        tmp_path,
        "vf-test-kafka-cli",
        {"kafka-demo": "vf_test_kafka_cli:DemoProvider"},
        {"vf_test_kafka_cli": DEMO.format(name="kafka-demo")},
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), *sys.path])}
    cli = [sys.executable, "-m", "videoflow_aio", "conformance"]
    listing = subprocess.run(
        [*cli, "--list", "-p", "all"], env=env, capture_output=True, text=True, check=False
    )
    assert listing.returncode == 0, listing.stderr
    assert "kafka-demo" in listing.stdout and "nats-cluster" in listing.stdout
    done = subprocess.run(
        [*cli, "-p", "kafka-demo", "--contract", "messaging", "-b", "asyncio,trio"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = re.search(r"^(\d+) passed, 0 failed, (\d+) skipped$", done.stdout, re.MULTILINE)
    assert summary is not None, done.stdout[-3000:]
    assert int(summary[1]) > 100 and "│ messaging │ kafka-demo │" in done.stdout


BROKEN = {
    "vf_test_raises": "raise RuntimeError('the broker config is gone')\n",
    "vf_test_missing": "import vf_test_no_such_client  # the optional client library\n",
    "vf_test_noattr": "X = 1\n",
}


@pytest.fixture
def broken(fresh: Path) -> Path:
    return install(
        fresh,
        "vf-test-broken",
        {
            "raises": "vf_test_raises:Provider",
            "missing": "vf_test_missing:Provider",
            "noattr": "vf_test_noattr:Provider",
            "notcallable": "vf_test_noattr:X",
            "badtarget": "vf_test_noattr",
        },
        BROKEN,
    )


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("raises", "RuntimeError: the broker config is gone"),
        ("noattr", "vf_test_noattr has no Provider"),
        ("notcallable", "X is not a Provider or a factory"),
        ("badtarget", "expected a target 'module:attribute'"),
    ],
)
def test_a_broken_entry_point_is_a_typed_error_naming_it(
    broken: Path, name: str, problem: str
) -> None:
    assert name in provider_names()  # listing imports nothing, so nothing breaks here
    with pytest.raises(ProviderLoadError) as caught:
        get_provider(name)
    err = caught.value
    assert isinstance(err, ValueError)
    assert (err.name, err.problem) == (name, problem)
    assert err.origin == f"{_target(name)} (entry point {name} of vf-test-broken 1.0)"
    assert str(err) == f"provider {name!r} ({err.origin}) cannot be loaded: {problem}"
    assert type(get_provider("memory")).__name__ == "MemoryProvider"  # the others still load


def _target(name: str) -> str:
    return {
        "raises": "vf_test_raises:Provider",
        "noattr": "vf_test_noattr:Provider",
        "notcallable": "vf_test_noattr:X",
        "badtarget": "vf_test_noattr",
    }[name]


def test_an_entry_point_missing_its_dependency_is_unavailable_with_the_import_error(
    broken: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # outside CI an unavailable provider skips; CI's VIDEOFLOW_REQUIRE_SERVERS=1 makes it fail
    monkeypatch.delenv(REQUIRE_SERVERS_ENV, raising=False)
    provider = get_provider("missing")
    assert isinstance(provider, UnimportableProvider)
    assert provider.unavailable() == (
        "provider 'missing' (vf_test_missing:Provider (entry point missing of vf-test-broken "
        "1.0)) cannot be imported: ModuleNotFoundError: No module named 'vf_test_no_such_client'"
    )
    assert _registry.IMPORT_ERRORS["missing"].startswith("ModuleNotFoundError")
    [result] = run(select_cases(select="MSG-001"), [provider], ["asyncio"])
    assert result.outcome == "skip" and "vf_test_no_such_client" in result.reason


def test_the_cli_reports_a_broken_entry_point_without_a_traceback(
    broken: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["conformance", "-p", "raises", "-k", "MSG-001", "-b", "asyncio"]) == 2
    err = capsys.readouterr().err
    assert "provider 'raises' (vf_test_raises:Provider (entry point raises of vf-test-broken" in err
    assert "RuntimeError: the broker config is gone" in err and "Traceback" not in err


def test_a_factory_that_returns_no_provider_is_a_typed_error(fresh: Path) -> None:
    install(fresh, "vf-test-odd", {"odd": "vf_test_odd:make"}, {"vf_test_odd": "make = dict\n"})
    with pytest.raises(ProviderLoadError, match="its factory returned a dict, not a Provider"):
        get_provider("odd")


def test_an_entry_point_cannot_take_a_built_in_name(fresh: Path) -> None:
    install(
        fresh,
        "vf-test-shadow",
        {"nats": "vf_test_shadow:DemoProvider", "shadow-demo": "vf_test_shadow:DemoProvider"},
        {"vf_test_shadow": DEMO.format(name="shadow-demo")},
    )
    with pytest.warns(RuntimeWarning, match=r"provider 'nats' \(.*vf-test-shadow.*\) ignored"):
        names = provider_names()
    assert "shadow-demo" in names
    assert type(get_provider("nats")).__name__ == "NatsProvider"
    with pytest.raises(ValueError, match=r"'shadow-demo' is already registered \(vf_test_shadow"):
        register_provider("shadow-demo", UnimportableProvider)


def test_the_built_ins_load_lazily_from_the_table(fresh: Path) -> None:
    from videoflow_aio.conformance.providers import BUILTIN

    assert {b.name for b in BUILTIN} == set(provider_names())
    for b in BUILTIN:
        provider = get_provider(b.name)
        assert provider.name == b.name
        assert not isinstance(provider, UnimportableProvider), provider.unavailable()


def test_listing_the_providers_imports_none_of_them(fresh: Path) -> None:
    install(fresh, "vf-test-lazy", {"lazy": "vf_test_lazy:Provider"}, {})  # no such module
    names = provider_names()
    assert "lazy" in names and "nats" in names
    factories = [_provider.PROVIDERS[n] for n in names]
    assert all(isinstance(f, _registry.LazyFactory) and not f.loaded for f in factories)
    get_provider("nats")
    assert [f.name for f in factories if isinstance(f, _registry.LazyFactory) and f.loaded] == [
        "nats"
    ]


def test_a_built_in_missing_its_dependency_is_unavailable_as_before(
    fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = "videoflow_aio.conformance.providers.nats_cluster"
    monkeypatch.setitem(sys.modules, module, None)  # import fails with ModuleNotFoundError
    provider = get_provider("nats-cluster")
    assert isinstance(provider, UnimportableProvider) and provider.name == "nats-cluster"
    assert provider.unavailable() == (
        f"provider module 'nats-cluster' cannot be imported: ModuleNotFoundError: import of "
        f"{module} halted; None in sys.modules"
    )
    assert type(get_provider("nats")).__name__ == "NatsProvider"


def test_the_pytest_plugin_collects_an_entry_point_provider(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = install(
        pytester.path / "site",
        "vf-test-kafka-plugin",
        {"kafka-demo": "vf_test_kafka_plugin:DemoProvider"},
        {"vf_test_kafka_plugin": DEMO.format(name="kafka-demo")},
    )
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(root), *sys.path]))
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:hypothesispytest")  # a second less start-up
    pytester.makepyfile(
        test_kafka="""
        from videoflow_aio.conformance import conformance_suite

        pytest_plugins = ["videoflow_aio.conformance.pytest_plugin"]

        TestKafka = conformance_suite(["kafka-demo"], select="MSG-00*", backends=["asyncio"])
        """
    )
    result = pytester.runpytest_subprocess("-v", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=len(select_cases(select="MSG-00*")))
    result.stdout.fnmatch_lines(["*TestKafka::MSG-001?kafka-demo-asyncio? PASSED*"])
