"""Issue 26 item 10: ``explore`` and the CLI give one line and a typed exit status — 2 for a
command line or file that cannot be used, 130 after Ctrl-C with a valid partial report —
never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import videoflow_aio.explore._command as command
import videoflow_aio.explore._explorer as explorer
import videoflow_aio.sim._cli as sim_cli
from videoflow_aio.cli import main

PLANTED = "tests/_planted.py"
REPLAY = ["explore", "--replay", "TOY-LEASE", "--seed", "0", "-b", "trio", "--load", PLANTED]
SPEC = """
[run]
duration_seconds = 10
[[source]]
name = "cams"
rate_hz = 5
[[stage]]
name = "decode"
inputs = ["cams"]
service = { dist = "constant", value_ms = 1 }
"""


def exit_two(argv: list[str], capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("videoflow-aio: error:") and err.count("\n") == 1, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err
    return err


@pytest.mark.parametrize(
    ("module", "needle"),
    [
        ("no_such_module_anywhere", "ModuleNotFoundError"),
        ("tests/no_such_file.py", "no such file"),
    ],
)
def test_explore_load_of_a_missing_module_or_file(
    capsys: pytest.CaptureFixture[str], module: str, needle: str
) -> None:
    # before: a ModuleNotFoundError / FileNotFoundError traceback
    exit_two(["explore", "--load", module, "--list"], capsys, module, needle)


def test_explore_load_of_a_module_that_raises(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "raises_on_import.py"
    bad.write_text("raise RuntimeError('boom at import\\nsecond line')\n")
    exit_two(["explore", "--load", str(bad), "--list"], capsys, "RuntimeError: boom at import")
    bad.write_text("def broken(:\n")
    exit_two(["explore", "--load", str(bad), "--list"], capsys, "SyntaxError")


@pytest.mark.parametrize(
    "log", ["/no/such/dir/replay.jsonl", "{tmp}", "-"], ids=["missing-dir", "a-dir", "stdout"]
)
def test_replay_log_to_a_path_that_cannot_be_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], log: str
) -> None:
    # before: FileNotFoundError / IsADirectoryError after the replay ran
    exit_two([*REPLAY, "--log", log.format(tmp=tmp_path)], capsys, "--log")


def test_replay_log_to_a_full_disk(capsys: pytest.CaptureFixture[str]) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    exit_two([*REPLAY, "--log", "/dev/full"], capsys, "--log /dev/full: cannot write")


@pytest.mark.parametrize("flag", [["--log", "x.jsonl"], ["--traceback"]])
def test_replay_only_flags_without_replay_are_refused(
    capsys: pytest.CaptureFixture[str], flag: list[str]
) -> None:
    # before: silently ignored
    exit_two(["explore", "--select", "TOY-*", "--load", PLANTED, *flag], capsys, "--replay")


@pytest.mark.parametrize(
    "argv",
    [
        ["explore", "--backend", "", "--list"],
        ["explore", "-b", ",", "--list"],
        ["conformance", "--backend", "", "--list"],
        ["conformance", "--provider", "", "--list"],
        ["conformance", "-p", " , ", "--select", "MSG-001"],
    ],
)
def test_an_empty_backend_or_provider_is_refused(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    # before: silently ran the defaults
    exit_two(argv, capsys, "names nothing")


def test_ctrl_c_in_explore_exits_130_with_the_runs_that_ended(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = explorer.run_target  # type: ignore[attr-defined]
    calls = [0]

    def interrupting(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(explorer, "run_target", interrupting)
    argv = ["explore", "--load", PLANTED, "--select", "TOY-*", "--seeds", "50", "-b", "trio"]
    assert main(argv) == 130
    captured = capsys.readouterr()
    assert "interrupted" in captured.err and "Traceback" not in captured.err
    assert "interrupted by Ctrl-C" in captured.out  # the summary of the 2 runs that ended


def test_ctrl_c_in_replay_exits_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupting(*args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(command, "run_target", interrupting)
    assert main(REPLAY) == 130
    assert "interrupted" in capsys.readouterr().err


def test_ctrl_c_in_simulate_exits_130_with_valid_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # before: a KeyboardInterrupt traceback and no report
    def interrupting(spec: Any, *, progress: Any = None) -> Any:
        progress(4.0, 10.0)
        raise KeyboardInterrupt

    monkeypatch.setattr(sim_cli, "simulate", interrupting)
    (tmp_path / "spec.toml").write_text(SPEC)
    out = tmp_path / "out.json"
    for quiet in ([], ["--quiet"]):
        status = main(["simulate", str(tmp_path / "spec.toml"), "--json", str(out), *quiet])
        assert status == 130
        report = json.loads(out.read_text())
        assert report["interrupted"] is True and report["virtual_seconds"] == 4.0
        err = capsys.readouterr().err
        assert "interrupted at virtual 4.0 of 10.0 s" in err and "Traceback" not in err
