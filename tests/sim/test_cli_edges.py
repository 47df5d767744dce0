"""``videoflow-aio simulate`` as a user runs it: in a subprocess, from another directory,
output piped, paths mistyped — and the same seed giving the same JSON across processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from _paths import ROOT
from videoflow_aio.cli import main

EXAMPLE = ROOT / "examples" / "camera-farm.toml"

SPEC = """\
[run]
seed = 11
duration_seconds = 12
warmup_seconds = 1

[[source]]
name = "cams"
streams = 3
rate_hz = 20
bytes = 512

[[stage]]
name = "decode"
inputs = ["cams"]
replicas = 2
service = { dist = "empirical", file = "samples/decode.txt" }
ack_wait_seconds = 2

[[stage]]
name = "infer"
inputs = ["decode"]
replicas = 2
service = { dist = "lognormal", mean_ms = 6.0, p99_ms = 20.0 }

[[stage]]
name = "idle"
inputs = ["decode"]
service = { dist = "constant", value_ms = 1.0 }

[[fault]]
at_seconds = 2
kind = "kill_stage"
stage = "idle"

[[fault]]
at_seconds = 4
kind = "pause_acceptance"
stage = "infer"
duration_seconds = 6

[[fault]]
at_seconds = 5
kind = "fail_payload_reads"
count = 3
"""

CRASH = """
[[fault]]
at_seconds = 3
kind = "crash_replica"
stage = "decode"
replica = 1
restart_after_seconds = 1
"""


def _write_spec(tmp_path: Path, extra: str = "") -> Path:
    folder = tmp_path / "specs"
    (folder / "samples").mkdir(parents=True)
    (folder / "samples" / "decode.txt").write_text("# ms\n4\n9\n14\n30\n")
    spec = folder / "farm.toml"
    spec.write_text(SPEC + extra)
    return spec


def _cli(cwd: Path, *args: str, hash_seed: str = "0") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    env.pop("COLUMNS", None)  # as in CI: the console's plain width, not a terminal's
    return subprocess.run(
        [sys.executable, "-m", "videoflow_aio", "simulate", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _no_nan(text: str) -> Any:
    def refuse(name: str) -> None:
        raise AssertionError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def _json_without_wall(path: Path) -> bytes:
    lines = path.read_bytes().splitlines(keepends=True)
    kept = [line for line in lines if b'"wall_seconds"' not in line]
    assert len(kept) == len(lines) - 1
    return b"".join(kept)


def test_same_seed_same_json_bytes_in_two_processes_on_asyncio(tmp_path: Path) -> None:
    """Two processes (different hash seeds, run from another directory, the spec and its
    empirical file given relative to that directory): the JSON files are byte-identical but
    for ``run.wall_seconds``; another seed differs."""
    spec = _write_spec(tmp_path, CRASH)
    rel = os.path.relpath(spec, tmp_path)
    outs = []
    for i, (seed, hash_seed) in enumerate([("11", "1"), ("11", "2"), ("12", "1")]):
        out = tmp_path / f"r{i}.json"
        done = _cli(tmp_path, rel, "-q", "--seed", seed, "--json", out.name, hash_seed=hash_seed)
        assert done.returncode == 0, done.stderr
        assert "Traceback" not in done.stderr
        outs.append(out)
    assert _json_without_wall(outs[0]) == _json_without_wall(outs[1])
    assert _json_without_wall(outs[0]) != _json_without_wall(outs[2])
    data = _no_nan(outs[0].read_text())
    assert data["stages"]["decode"]["redeliveries"] >= 1  # the crash and the failed reads
    assert data["faults"][1]["accepted_late"] > 0


def _without_replica_split(data: dict[str, Any]) -> dict[str, Any]:
    data["run"]["wall_seconds"] = data["run"]["backend"] = None
    for stage in data["stages"].values():
        stage["utilization"] = round(sum(stage["utilization"]), 9)
    data["end_to_end"]["utilization"] = round(data["end_to_end"]["utilization"], 9)
    return data


def _trio_runs(tmp_path: Path, spec: Path) -> list[dict[str, Any]]:
    runs = []
    for backend, hash_seed in [("asyncio", "1"), ("trio", "1"), ("trio", "2")]:
        out = tmp_path / f"{backend}{hash_seed}.json"
        done = _cli(tmp_path, str(spec), "-q", "--backend", backend, "--json", str(out))
        assert done.returncode == 0, done.stderr
        runs.append(_no_nan(out.read_text()))
    return runs


def test_on_trio_in_two_processes_only_the_replica_split_varies(tmp_path: Path) -> None:
    """What docs/simulate.md states for trio without crash_replica and pause_acceptance
    faults: every latency, count and series equals the asyncio run's; only the per-replica
    split of busy time varies."""
    spec = _write_spec(tmp_path)
    text = spec.read_text()
    cut = text.index('[[fault]]\nat_seconds = 4\nkind = "pause_acceptance"')
    spec.write_text(text[:cut] + text[cut:].split("\n\n", 1)[1])
    assert "pause_acceptance" not in spec.read_text()
    runs = [_without_replica_split(r) for r in _trio_runs(tmp_path, spec)]
    assert runs[1] == runs[0]
    assert runs[2] == runs[0]


_COUNTS = ("completed", "redeliveries", "dropped", "unresolved", "retried", "unfinished")


def _counts(data: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {n: {k: s[k] for k in _COUNTS} for n, s in data["stages"].items()}
    e2e = data["end_to_end"]
    out["end_to_end"] = {k: e2e[k] for k in ("frames", "completed", "dropped", "unresolved")}
    out["sources"] = data["sources"]
    return out


def test_on_trio_with_crash_and_pause_faults_the_counts_hold(tmp_path: Path) -> None:
    """With crash_replica and pause_acceptance faults, which message a crashed replica held
    and the order held publications are stored in can vary on trio, and with them some
    latencies; the counts do not."""
    runs = _trio_runs(tmp_path, _write_spec(tmp_path, CRASH))
    assert _counts(runs[1]) == _counts(runs[0])
    assert _counts(runs[2]) == _counts(runs[0])


def test_piped_output_is_plain_text_and_json_to_stdout_parses(tmp_path: Path) -> None:
    """Not a TTY (CI, a pipe): the table is plain text (no escape codes), the progress bar
    leaves nothing behind, and ``--json -`` writes only JSON to stdout."""
    spec = _write_spec(tmp_path)
    done = _cli(tmp_path, str(spec))
    assert done.returncode == 0, done.stderr
    assert "\x1b[" not in done.stdout and "\x1b[" not in done.stderr
    assert "end to end" in done.stdout and "messages in" in done.stdout
    assert "Traceback" not in done.stderr
    done = _cli(tmp_path, str(spec), "--json", "-")
    assert done.returncode == 0, done.stderr
    data = _no_nan(done.stdout)
    assert "end to end" in done.stderr  # the table goes to stderr then
    # a stage that completed nothing inside the window reports null, not NaN, not 0
    idle = data["stages"]["idle"]
    assert idle["completed"] < data["stages"]["decode"]["completed"]
    assert set(data["end_to_end"]["latency_ms"]) == {"mean", "p50", "p90", "p99", "p999", "max"}


def test_a_stage_that_saw_nothing_reports_null_latencies(tmp_path: Path) -> None:
    spec = _write_spec(tmp_path)
    text = spec.read_text().replace(
        'at_seconds = 2\nkind = "kill_stage"', 'at_seconds = 0\nkind = "kill_stage"'
    )
    spec.write_text(text)
    out = tmp_path / "r.json"
    assert main(["simulate", str(spec), "-q", "--json", str(out)]) == 0
    idle = _no_nan(out.read_text())["stages"]["idle"]
    assert idle["latency_ms"] == dict.fromkeys(("mean", "p50", "p90", "p99", "p999", "max"))
    assert idle["throughput_hz"] == 0.0


@pytest.mark.parametrize(
    ("flag", "target", "says"),
    [
        ("--json", "missing-dir/r.json", "no directory"),
        ("--plot", "missing-dir/r.png", "no directory"),
        ("--json", ".", "is a directory"),
        ("--plot", "r.notaformat", "unsupported format"),
    ],
)
def test_an_output_path_that_cannot_be_written_exits_2_before_running(
    tmp_path: Path, flag: str, target: str, says: str
) -> None:
    if flag == "--plot":
        pytest.importorskip("matplotlib")
    spec = _write_spec(tmp_path)
    done = _cli(tmp_path, str(spec), flag, target)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("videoflow-aio: error: ") and says in lines[0]
    assert done.stdout == ""  # refused before the run: no table


def test_a_write_that_fails_after_the_run_exits_2_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # the directory vanishes while the simulation runs
    monkeypatch.setattr("videoflow_aio.sim._cli._unwritable", lambda target: None)
    spec = _write_spec(tmp_path)
    code = main(["simulate", str(spec), "-q", "--json", str(tmp_path / "gone" / "r.json")])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("videoflow-aio: error: --json")


def test_a_gpu_that_does_not_fit_exits_2_with_one_line(tmp_path: Path) -> None:
    # the message is longer than any console width: it is not wrapped
    spec = tmp_path / ("long-" * 30 + "gpu.toml")
    spec.write_text(
        EXAMPLE.read_text().replace('mig = { "1g.10gb" = 7 }', 'mig = { "1g.10gb" = 1 }')
    )
    done = _cli(tmp_path, str(spec), "-q", "--duration", "5", "--warmup", "1")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "stage[1].gpu" in lines[0] and "do not fit" in lines[0]


def test_a_bad_spec_message_is_one_line_however_long(tmp_path: Path) -> None:
    spec = tmp_path / ("a-long-folder-name-" * 12) / "farm.toml"
    spec.parent.mkdir()
    spec.write_text(EXAMPLE.read_text().replace("rate_hz = 30", "rate_hz = -30"))
    done = _cli(tmp_path, str(spec), "-q")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith("source[0].rate_hz: must be > 0")
