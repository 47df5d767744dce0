"""A fresh downstream project shows each trap of the old plugin fixed (issue 13), and the
package works as installed (issue 11's "a new user" run).

One venv per session, built once: this repo's package (installed from the worktree as a
built wheel, not editable — as a user installs it), pytest, anyio, trio and pytest-asyncio
from the package index. Each project below is a temp dir with its own pytest config, run by
that venv's pytest in a subprocess; the assertions are on each test's outcome. The
installed command (``videoflow-aio``, the README's first command) runs from that venv too,
which catches packaging mistakes: package data, entry points, undeclared dependencies.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _paths import ROOT
from _plugin_helpers import Run, environ_for, run_pytest, write

# one venv for the session: every test of this module on one xdist worker (--dist loadgroup)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("downstream-venv")]

PACKAGES = ("pytest>=8.4", "anyio>=4.6", "trio>=0.27", "pytest-asyncio>=0.24")


@pytest.fixture(scope="session")
def downstream_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("downstream") / "venv"
    # without pip of its own: ensurepip took over the 120 s timeout on a loaded machine; this
    # interpreter's pip installs into it (``--python``)
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    python = venv / "bin" / "python"
    into = ["--python", str(python), "install", "-q"]
    pip = subprocess.run(
        [sys.executable, "-m", "pip", *into, str(ROOT), *PACKAGES],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert pip.returncode == 0, f"pip install failed:\n{pip.stdout}\n{pip.stderr}"
    return python


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    write(tmp_path, files)
    return tmp_path


_PLAIN = {
    "pytest.ini": "[pytest]\n",
    "test_plain.py": """
        import asyncio
        import time

        import anyio
        import pytest

        @pytest.mark.anyio
        async def test_anyio_on_real_time(request):
            assert "vclock" not in request.fixturenames
            t0 = time.monotonic()
            await anyio.sleep(0.05)
            assert time.monotonic() - t0 >= 0.05

        @pytest.mark.asyncio
        async def test_pytest_asyncio_on_real_time():
            t0 = time.monotonic()
            await asyncio.sleep(0.05)
            assert time.monotonic() - t0 >= 0.05
    """,
}


def test_installing_the_package_changes_no_test_that_did_not_ask(
    downstream_python: Path, tmp_path: Path
) -> None:
    project = _project(tmp_path, _PLAIN)
    with_plugin = run_pytest(downstream_python, project)
    without = run_pytest(downstream_python, project, "-p", "no:videoflow_aio")
    assert with_plugin.outcomes == without.outcomes, with_plugin.output
    assert with_plugin.outcomes
    assert all(o.result == "passed" for o in with_plugin.outcomes.values()), with_plugin.output


_LEASE = """
    import anyio
    import pytest
    import sniffio
    from videoflow_aio.vtime import VirtualTimeDeadlock, current_clock

    pytestmark = pytest.mark.vtime

    async def test_a_one_hour_lease(vclock, anyio_backend_name):
        assert sniffio.current_async_library() == anyio_backend_name
        assert current_clock() is vclock
        await anyio.sleep(3600)
        assert vclock.monotonic() == 4600.0

    @pytest.mark.parametrize("anyio_backend", ["trio"])
    async def test_picking_trio_the_anyio_way(vclock):
        assert sniffio.current_async_library() == "trio"
        await anyio.sleep(10)
        assert vclock.monotonic() == 1010.0

    async def test_this_deadlocks():
        with pytest.raises(VirtualTimeDeadlock):
            await anyio.Event().wait()
"""

_ASYNCIO_STRICT = """
    import asyncio
    import time

    import pytest

    @pytest.mark.asyncio
    async def test_pytest_asyncio_keeps_its_tests():
        t0 = time.monotonic()
        await asyncio.sleep(0.05)
        assert time.monotonic() - t0 >= 0.05
"""


def _assert_lease_tests_passed(run: Run, ids: tuple[str, ...]) -> None:
    expected = [f"test_lease.py::test_a_one_hour_lease{i}" for i in ids]
    expected += [f"test_lease.py::test_this_deadlocks{i}" for i in ids]
    expected.append("test_lease.py::test_picking_trio_the_anyio_way[trio]")
    for test_id in expected:
        assert run.result(test_id) == "passed", f"{test_id}: {run.message(test_id)}"


def test_the_marker_with_pytest_asyncio_in_strict_mode(
    downstream_python: Path, tmp_path: Path
) -> None:
    project = _project(
        tmp_path,
        {
            "pytest.ini": "[pytest]\nasyncio_default_fixture_loop_scope = function\n",
            "conftest.py": """
                import pytest

                @pytest.fixture(params=["asyncio", "trio"])
                def anyio_backend(request):  # "both backends": the project's own choice
                    return request.param
            """,
            "test_lease.py": _LEASE,
            "test_asyncio_strict.py": _ASYNCIO_STRICT,
        },
    )
    wall0 = time.perf_counter()  # wall-clock: an hour of virtual leases takes no time
    run = run_pytest(downstream_python, project)
    assert time.perf_counter() - wall0 < 60  # wall-clock: generous, shared machine
    _assert_lease_tests_passed(run, ("[asyncio]", "[trio]"))
    assert run.result("test_asyncio_strict.py::test_pytest_asyncio_keeps_its_tests") == "passed"
    assert len(run.outcomes) == 6, run.output


_INI_PROJECT = {
    "pyproject.toml": "[tool.pytest.ini_options]\nvtime = true\n"
    'asyncio_default_fixture_loop_scope = "function"\n',
    "conftest.py": """
        import pytest

        @pytest.fixture
        def anyio_backend():
            return "trio"  # one backend, picked the anyio way
    """,
    "test_lease.py": _LEASE.replace(
        "pytestmark = pytest.mark.vtime", "pytestmark = pytest.mark.anyio"
    ),
}


def test_the_ini_option_turns_it_on_for_a_whole_project(
    downstream_python: Path, tmp_path: Path
) -> None:
    run = run_pytest(downstream_python, _project(tmp_path, _INI_PROJECT))
    _assert_lease_tests_passed(run, ("",))  # one backend: no parameter in the test ids
    assert len(run.outcomes) == 3, run.output


_AUTO_PROJECT = {
    "pytest.ini": "[pytest]\nasyncio_mode = auto\nasyncio_default_fixture_loop_scope = function\n",
    "test_lease.py": _LEASE,
    "test_asyncio_auto.py": _ASYNCIO_STRICT.replace("@pytest.mark.asyncio\n    ", ""),
}


def test_pytest_asyncio_auto_mode_conflict_fails_clearly_and_never_hangs(
    downstream_python: Path, tmp_path: Path
) -> None:
    project = _project(tmp_path, _AUTO_PROJECT)
    wall0 = time.perf_counter()  # wall-clock: a one-hour lease on real time would hang
    run = run_pytest(downstream_python, project, timeout=120)
    assert time.perf_counter() - wall0 < 60  # wall-clock: as above
    lease_ids = [test_id for test_id in run.outcomes if test_id.startswith("test_lease.py")]
    assert lease_ids, run.output
    for test_id in lease_ids:
        assert run.result(test_id) == "error", f"{test_id}: {run.message(test_id)}"
        message = run.message(test_id)
        assert "asyncio_mode = auto" in message and "strict" in message, message
    assert run.result("test_asyncio_auto.py::test_pytest_asyncio_keeps_its_tests") == "passed"


_STRICT_WITH_INI = {
    "pyproject.toml": "[tool.pytest.ini_options]\nvtime = true\n"
    'asyncio_default_fixture_loop_scope = "function"\n',
    "conftest.py": _INI_PROJECT["conftest.py"],
    "test_lease.py": _INI_PROJECT["test_lease.py"],
    "test_asyncio_strict.py": _ASYNCIO_STRICT,
}


def test_the_ini_option_beside_pytest_asyncio_in_strict_mode(
    downstream_python: Path, tmp_path: Path
) -> None:
    """The documented way to use both plugins: ``vtime = true`` puts the anyio tests on
    virtual time and leaves pytest-asyncio's own tests to pytest-asyncio (they errored as a
    conflict: the ini option claimed every test)."""
    run = run_pytest(downstream_python, _project(tmp_path, _STRICT_WITH_INI))
    _assert_lease_tests_passed(run, ("",))
    assert run.result("test_asyncio_strict.py::test_pytest_asyncio_keeps_its_tests") == "passed"
    assert len(run.outcomes) == 4, run.output


def _command(python: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python.parent / "videoflow-aio"), *args],
        cwd=cwd,
        env=environ_for(python),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_installed_command_runs_the_conformance_suite(
    downstream_python: Path, tmp_path: Path
) -> None:
    """The README's first command, from the installed wheel: every case on the models (MIG
    cases need the package's data files), the file store, a JSON report; a provider whose
    extra is not installed is named with the extra to install, and exits non-zero."""
    version = _command(downstream_python, "--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("videoflow-aio "), version
    report = tmp_path / "report.json"
    run = _command(
        downstream_python,
        "conformance",
        "--provider",
        "memory,file",
        "--json",
        str(report),
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    summary = json.loads(report.read_text())["summary"]
    assert summary["fail"] == 0 and summary["pass"] > 250, summary
    missing = _command(
        downstream_python,
        "conformance",
        "--provider",
        "nats",
        "--select",
        "MSG-001",
        "--json",
        "-",
        cwd=tmp_path,
    )
    assert missing.returncode == 1, missing.stdout + missing.stderr  # nothing ran
    reasons = {case["reason"] for case in json.loads(missing.stdout)["cases"]}
    assert reasons and all("pip install 'videoflow-aio[nats]'" in r for r in reasons), reasons


def test_the_installed_package_carries_its_data(downstream_python: Path, tmp_path: Path) -> None:
    code = (
        "import importlib.resources as r\n"
        "from videoflow_aio.gpu import check_layout\n"
        "assert r.files('videoflow_aio.gpu').joinpath('mig_profiles.json').is_file()\n"
        "print(check_layout('NVIDIA A100-SXM4-40GB', {'1g.5gb': 7}))\n"
        "import videoflow_aio, pathlib\n"
        "print(pathlib.Path(videoflow_aio.__file__).parent)\n"
    )
    proc = subprocess.run(
        [str(downstream_python), "-c", code],
        cwd=tmp_path,
        env=environ_for(downstream_python),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "[]", proc.stdout
    assert "site-packages" in lines[1], proc.stdout  # the wheel, not this checkout
