"""The explorer finds an order-dependent bug FIFO never shows, and replays it exactly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import _planted
from videoflow_aio import explore, vtime
from videoflow_aio.cli import main
from videoflow_aio.observe import ObservationLog
from videoflow_aio.vtime import Backend

BACKENDS: tuple[Backend, ...] = ("asyncio", "trio")
ROOT = Path(__file__).resolve().parents[1]
PLANTED = "tests/_planted.py"
TOY = explore.find_target("TOY-LEASE")


def _first_failure(backend: Backend, seeds: range = range(300)) -> explore.Run:
    found = explore.explore([TOY], seeds, [backend])
    assert found.failures, f"no failing seed in {seeds} on {backend}"
    return found.failures[0]


def test_fifo_order_never_shows_the_planted_bug() -> None:
    for seed in range(300):  # the same programs, unseeded: asyncio runs them FIFO
        ctx = explore.Context(seed, explore.program_rng(seed), ObservationLog(), "asyncio")
        vtime.run(_planted.toy_lease, ctx)


@pytest.mark.parametrize("backend", BACKENDS)
def test_explore_finds_the_planted_bug_and_its_seed_replays_it_ten_times_of_ten(
    backend: Backend,
) -> None:
    failure = _first_failure(backend)
    assert "two leaders at once" in failure.reason
    for _ in range(10):
        again = explore.run_target(TOY, backend, failure.seed)
        assert again.outcome == "fail"
        assert again.fingerprint() == failure.fingerprint()


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_printed_replay_command_reproduces_the_log_in_a_fresh_process(
    backend: Backend, tmp_path: Path
) -> None:
    failure = _first_failure(backend)
    out = tmp_path / "out.jsonl"
    command = explore.replay_command(failure, log=str(out), load=[PLANTED])
    assert command.startswith(
        f"videoflow-aio explore --replay TOY-LEASE --seed {failure.seed} --backend {backend}"
    )
    args = command.split()[1:]
    env = {**os.environ, "PYTHONHASHSEED": "12345"}  # another process, other str hashes
    proc = subprocess.run(
        [sys.executable, "-m", "videoflow_aio", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "two leaders at once" in proc.stdout
    assert out.read_bytes() == failure.log.export_jsonl()


def test_the_cli_explores_prints_the_seed_and_the_replay(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = main(["explore", "--load", PLANTED, "--select", "TOY-*", "--seeds", "300"])
    out = capsys.readouterr().out
    assert status == 1
    for backend in BACKENDS:
        failure = _first_failure(backend)
        assert f"FAIL TOY-LEASE {backend} seed {failure.seed}: " in out
        assert explore.replay_command(failure, load=[PLANTED]) in out


def test_the_cli_replays_and_writes_the_log(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    failure = _first_failure("trio")
    log = tmp_path / "replay.jsonl"
    args = ["--replay", "TOY-LEASE", "--seed", str(failure.seed), "--backend", "trio"]
    status = main(["explore", *args, "--load", PLANTED, "--log", str(log)])
    out = capsys.readouterr().out
    assert status == 1
    assert f"TOY-LEASE trio seed {failure.seed}: fail: AssertionError: two leaders" in out
    assert ObservationLog.read(log).export_jsonl() == failure.log.export_jsonl()
    assert main(["explore", "--replay", "TOY-LEASE", "--seed", "0", "-b", "trio"]) == 0


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["--faults", "1.5"], "--faults 1.5"),
        (["--jitter", "-1"], "--jitter -1"),
        (["--jitter", "nan"], "--jitter nan"),
        (["--seeds", "0"], "--seeds must be >= 1"),
        (["--backend", "curio"], "unknown backend"),
        (["--replay", "NOPE-1", "--seed", "1", "-b", "trio"], "no conformance case or program"),
        (["--replay", "TOY-LEASE", "-b", "trio"], "needs --seed"),
        (["--replay", "TOY-LEASE", "--seed", "1"], "runs one backend"),
    ],
)
def test_usage_errors_exit_2(
    args: list[str], text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explore", "--load", PLANTED, *args]) == 2
    assert text in capsys.readouterr().err


def test_list_names_cases_and_programs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explore", "--list", "--select", "MSG-001,PROP-*"]) == 0
    out = capsys.readouterr().out
    for target in ("MSG-001", "PROP-MSG-NOTHING-LOST", "PROP-RTS-CAS-ONE-WINNER", "PROP-PAY-"):
        assert target in out
