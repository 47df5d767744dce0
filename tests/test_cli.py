"""``videoflow-aio``: exit codes, tables, JSON report, provider options, bench listing."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest

from _conformance_fakes import FakeProvider, fake_case
from videoflow_aio.adapters import missing_extra
from videoflow_aio.cli import main
from videoflow_aio.conformance import REGISTRY, Harness, get_provider, provider_names
from videoflow_aio.conformance._provider import PROVIDERS

ESC = "\x1b["


async def _passes(h: Harness) -> None:
    """a fake case that passes"""
    await h.sleep(5)
    h.check(True)


async def _fails(h: Harness) -> None:
    """a fake case that fails [/] (brackets are data, not markup)"""
    h.equal("left", "right", "side [bold]")


async def _needs_archive(h: Harness) -> None:
    """a fake case that needs the archive profile"""
    h.check(True)


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> dict[str, FakeProvider]:
    """Fake cases MSG-991..993 in the registry and providers 'fake' and 'nats' (a fake)."""
    monkeypatch.setitem(REGISTRY, "MSG-991", fake_case(_passes, "MSG-991"))
    monkeypatch.setitem(REGISTRY, "MSG-992", fake_case(_fails, "MSG-992"))
    monkeypatch.setitem(
        REGISTRY, "MSG-993", fake_case(_needs_archive, "MSG-993", needs=("archive",))
    )
    made: dict[str, FakeProvider] = {}

    def factory(name: str) -> object:
        def build(**options: object) -> FakeProvider:
            made[name] = FakeProvider(name, capabilities=(), **options)  # type: ignore[arg-type]
            return made[name]

        return build

    provider_names()  # the built-in providers register first; the fake 'nats' then replaces one
    monkeypatch.setitem(PROVIDERS, "fake", factory("fake"))
    monkeypatch.setitem(PROVIDERS, "nats", factory("nats"))
    monkeypatch.delenv("VIDEOFLOW_NATS_URL", raising=False)
    monkeypatch.delenv("VIDEOFLOW_REQUIRE_SERVERS", raising=False)
    return made


def test_all_pass_exits_0_with_table_and_summary(
    fakes: dict[str, FakeProvider], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["conformance", "--provider", "fake", "--select", "MSG-991,MSG-993"]) == 0
    out, err = capsys.readouterr()
    assert ESC not in out and ESC not in err  # not a terminal: no escape codes
    for text in ("MSG-991", "a fake case that passes", "asyncio", "trio", "5.000"):
        assert text in out
    assert "provider fake lacks capability archive" in out
    assert "messaging" in out  # the summary per contract and provider
    assert "2 passed, 0 failed, 2 skipped" in out
    assert "[4/4] skip MSG-993 fake/trio" in err  # plain progress lines off a terminal


def test_a_failure_exits_1(
    fakes: dict[str, FakeProvider], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["conformance", "-p", "fake", "-k", "MSG-99*", "-b", "trio"]) == 1
    out = capsys.readouterr().out
    assert "side [bold]: expected 'right', got 'left'" in out
    assert "[/] (brackets are data" in out
    assert "1 passed, 1 failed, 1 skipped" in out


def test_show_fail_lists_only_failures(
    fakes: dict[str, FakeProvider], capsys: pytest.CaptureFixture[str]
) -> None:
    main(["conformance", "-p", "fake", "-k", "MSG-99*", "-b", "asyncio", "--show", "fail"])
    out = capsys.readouterr().out
    assert "MSG-992" in out
    assert "a fake case that passes" not in out


def test_json_to_stdout_is_pure_json(
    fakes: dict[str, FakeProvider], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["conformance", "-p", "fake", "-k", "MSG-99*", "--json", "-"]) == 1
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert data["summary"] == {"pass": 2, "fail": 2, "skip": 2}
    assert [(c["id"], c["backend"]) for c in data["cases"]][:2] == [
        ("MSG-991", "asyncio"),
        ("MSG-991", "trio"),
    ]
    assert "conformance results" in err  # the table went to stderr


def test_json_to_a_file(
    fakes: dict[str, FakeProvider], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "report.json"
    assert main(["conformance", "-p", "fake", "-k", "MSG-991", "--json", str(target)]) == 0
    data = json.loads(target.read_text())
    assert set(data) == {"cases", "summary"}
    assert set(data["cases"][0]) == {
        "id",
        "title",
        "provider",
        "backend",
        "outcome",
        "reason",
        "virtual_seconds",
        "wall_seconds",
    }
    assert f"JSON report written to {target}" in capsys.readouterr().out


def test_providers_repeat_or_comma_separate_and_urls_reach_them(
    fakes: dict[str, FakeProvider], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["conformance", "-p", "fake,nats", "-p", "fake", "-k", "MSG-991", "-b", "asyncio"]
    assert main([*argv, "--nats-url", "nats://127.0.0.1:4333", "-o", "fake.url=mem://x"]) == 0
    assert fakes["nats"].url == "nats://127.0.0.1:4333"
    assert fakes["fake"].url == "mem://x"
    assert (fakes["nats"].setups, fakes["nats"].closes) == (1, 1)
    out = capsys.readouterr().out
    assert "2 passed" in out


def test_url_from_the_environment(
    fakes: dict[str, FakeProvider], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VIDEOFLOW_NATS_URL", "nats://10.0.0.1:4222")
    assert main(["conformance", "-p", "nats", "-k", "MSG-991", "-b", "trio"]) == 0
    assert fakes["nats"].url == "nats://10.0.0.1:4222"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-p", "nope"], "unknown provider(s) nope"),
        (["-p", "fake", "-b", "curio"], "unknown backend(s) curio"),
        (["-p", "fake", "--nats-url", "nats://x"], "provider nats is not selected"),
        (["-p", "fake", "-o", "fake.colour"], "expected PROVIDER.KEY=VALUE"),
        (["-p", "fake", "-o", "fake.colour=blue"], "does not take option(s) colour"),
        (["-p", "nats", "--nats-url", "nats://u:pw@x:4222"], "a URL with user info"),
        (["-p", "nats", "--nats-url", "nats://tok@x:4222"], "a URL with user info"),
        (["-p", "fake", "-o", "fake.password=pw"], "secrets are not taken"),
    ],
)
def test_usage_errors_exit_2(
    fakes: dict[str, FakeProvider],
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    assert main(["conformance", *argv]) == 2
    assert message in capsys.readouterr().err


def test_nothing_selected_exits_1(
    fakes: dict[str, FakeProvider], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["conformance", "-p", "fake", "--select", "NOPE-*"]) == 1
    assert "no conformance case matches --select 'NOPE-*'" in capsys.readouterr().err


def test_require_servers_turns_unavailable_into_failure(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(REGISTRY, "MSG-991", fake_case(_passes, "MSG-991"))
    monkeypatch.setitem(
        PROVIDERS, "gone", lambda: FakeProvider("gone", unavailable="gone-server not found")
    )
    monkeypatch.delenv("VIDEOFLOW_REQUIRE_SERVERS", raising=False)
    argv = ["conformance", "-p", "gone", "-k", "MSG-991", "-b", "asyncio", "--allow-skipped"]
    assert main(argv) == 0
    assert "gone-server not found" in capsys.readouterr().out
    assert main([*argv, "--require-servers"]) == 1
    monkeypatch.setenv("VIDEOFLOW_REQUIRE_SERVERS", "1")
    assert main(argv) == 1


def test_list_shows_cases_and_providers(
    fakes: dict[str, FakeProvider], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["conformance", "--list", "-p", "fake", "-k", "MSG-99*"]) == 0
    out = capsys.readouterr().out
    assert "3 conformance cases" in out
    assert "a fake case that needs the archive profile" in out
    assert "archive" in out
    assert "fake" in out and "virtual" in out


def test_bench_lists_and_runs_scripts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "demo_bench.py").write_text(
        '"""Demo: prints a figure next to its anchor."""\nimport sys\nsys.exit(len(sys.argv) - 1)\n'
    )
    (tmp_path / "_helper.py").write_text("")
    assert main(["bench", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "demo_bench" in out and "Demo: prints a figure next to its anchor." in out
    assert "_helper" not in out
    assert main(["bench", "--dir", str(tmp_path), "demo", "a", "b"]) == 2  # its exit status
    assert main(["bench", "--dir", str(tmp_path), "missing"]) == 2
    assert "no benchmark 'missing'" in capsys.readouterr().err


def test_python_dash_m_smoke() -> None:
    """The real thing in a subprocess: RTS cases on the memory provider, JSON on stdout."""
    proc = subprocess.run(
        [sys.executable, "-m", "videoflow_aio", "conformance", "--select", "RTS-*", "--json", "-"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    data = json.loads(proc.stdout)
    assert proc.returncode == (1 if data["summary"]["fail"] else 0), proc.stderr
    assert data["cases"], "no RTS case ran"
    assert all(c["id"].startswith("RTS-") and c["provider"] == "memory" for c in data["cases"])
    assert {c["backend"] for c in data["cases"]} == {"asyncio", "trio"}
    assert ESC not in proc.stderr


def test_provider_all_means_every_registered_provider(
    fakes: dict[str, FakeProvider], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(PROVIDERS):
        if name not in ("fake", "nats"):
            monkeypatch.delitem(PROVIDERS, name)
    monkeypatch.setattr("videoflow_aio.cli.provider_names", lambda: ["fake", "nats"])
    assert main(["conformance", "-p", "all", "-k", "MSG-991", "-b", "trio"]) == 0
    assert set(fakes) == {"fake", "nats"}


# -- issue #11: usage checked up front, nothing-ran is not success, extras, --version --------


def test_version_comes_from_the_package_metadata(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert (
        capsys.readouterr().out.strip()
        == f"videoflow-aio {importlib.metadata.version('videoflow-aio')}"
    )


@pytest.mark.parametrize("where", ["missing-dir/report.json", "a-directory", "a-file/report.json"])
def test_an_unwritable_json_path_is_a_usage_error_before_any_case_runs(
    fakes: dict[str, FakeProvider],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    where: str,
) -> None:
    (tmp_path / "a-directory").mkdir()
    (tmp_path / "a-file").write_text("")
    argv = ["conformance", "-p", "fake", "-k", "MSG-991", "--json", str(tmp_path / where)]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert "--json" in err and "Traceback" not in err
    assert "MSG-991" not in out and "fake" not in fakes  # no provider built, no case run


def test_a_json_write_that_fails_at_the_end_is_an_error_not_a_traceback(
    fakes: dict[str, FakeProvider],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def full_disk(self: Path, data: bytes) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", full_disk)
    argv = ["conformance", "-p", "fake", "-k", "MSG-991", "--json", str(tmp_path / "r.json")]
    assert main(argv) == 2
    assert "cannot write --json" in capsys.readouterr().err


@pytest.mark.parametrize("seconds", ["-1", "0", "nan", "inf"])
def test_a_timeout_that_is_not_a_positive_number_is_a_usage_error(
    fakes: dict[str, FakeProvider], capsys: pytest.CaptureFixture[str], seconds: str
) -> None:
    assert main(["conformance", "-p", "fake", "-k", "MSG-991", "--timeout", seconds]) == 2
    assert "--timeout" in capsys.readouterr().err
    assert "fake" not in fakes


def test_a_run_where_everything_was_skipped_is_not_success(
    fakes: dict[str, FakeProvider], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["conformance", "-p", "fake", "-k", "MSG-993"]  # needs archive: skipped everywhere
    assert main(argv) == 1
    out = capsys.readouterr().out
    assert "0 passed, 0 failed, 2 skipped" in out
    assert "nothing ran: every selected run was skipped" in out
    assert main([*argv, "--allow-skipped"]) == 0
    assert "allowed by --allow-skipped" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "module"), [("nats", "nats"), ("redis", "redis"), ("etcd", "aetcd")]
)
def test_a_missing_extra_is_named_with_the_command_that_installs_it(
    extra: str, module: str
) -> None:
    code = f"import sys; sys.modules[{module!r}] = None\nimport videoflow_aio.adapters.{extra}\n"
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 1
    assert f"pip install 'videoflow-aio[{extra}]'" in proc.stderr
    assert f"ModuleNotFoundError: videoflow_aio.adapters.{extra} needs" in proc.stderr
    assert missing_extra(extra) is None  # installed in this environment


def test_a_provider_whose_extra_is_missing_says_which_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "aetcd", None)
    why = get_provider("etcd").unavailable()
    assert why is not None and "pip install 'videoflow-aio[etcd]'" in why
