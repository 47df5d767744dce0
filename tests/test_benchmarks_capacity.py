"""benchmarks/capacity_bench.py: its statistics, the SimPy model's closed-form check, and
one ``--quick`` run (a few seconds) with the videoflow-aio command replaced by a stand-in,
so the run does not depend on how long the real sweep takes on this tree."""

from __future__ import annotations

import importlib.util
import json
import math
import stat
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from _paths import ROOT

BENCH = ROOT / "benchmarks" / "capacity_bench.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("capacity_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["capacity_bench"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("df", "t95", "t99"),
    [(1, 12.706, 63.657), (2, 4.303, 9.925), (4, 2.776, 4.604), (9, 2.262, 3.250),
     (19, 2.093, 2.861), (30, 2.042, 2.750)],
)  # fmt: skip
def test_student_t_quantiles(bench: ModuleType, df: int, t95: float, t99: float) -> None:
    assert bench.t_quantile(0.95, df) == pytest.approx(t95, abs=1e-3)
    assert bench.t_quantile(0.99, df) == pytest.approx(t99, abs=1e-3)


def test_mmc_p99_closed_form(bench: ModuleType) -> None:
    # one server: the response time is exponential with rate mu - lam
    assert bench.mmc_response_p99(80.0, 100.0, 1) == pytest.approx(math.log(100) / 20.0)
    # many lightly loaded servers: almost nobody waits, the service time's own p99
    assert bench.mmc_response_p99(1.0, 100.0, 20) == pytest.approx(math.log(100) / 100.0)


def test_the_hand_model_refuses_what_it_does_not_model(bench: ModuleType) -> None:
    from videoflow_aio.sim import parse_spec

    doc = bench.tomllib.loads(bench.SPEC_TOML)
    doc["source"].append({"name": "more", "rate_hz": 1.0})
    doc["stage"][0]["inputs"] = ["cams", "more"]
    with pytest.raises(ValueError, match="one source"):
        bench.tandem_latencies(parse_spec(doc))
    doc = bench.tomllib.loads(bench.SPEC_TOML)
    doc["stage"][1]["batch"] = 4
    with pytest.raises(ValueError, match="'detect' is not a link"):
        bench.tandem_latencies(parse_spec(doc))


def test_a_capped_point_is_not_an_answer(bench: ModuleType) -> None:
    """N = 9 (utilisation 1) with 60-s runs: its capped interval lies under the target, but
    the precision was not reached, so the next point is the answer."""
    unstable = _point(bench, 9, 143.9, 21.7, converged=False)
    assert unstable.met is None
    assert unstable.verdict().startswith("unsettled")
    settled = _point(bench, 10, 40.1, 1.4, converged=True)
    assert settled.met is True
    above = _point(bench, 8, 1000.0, 300.0, converged=False)
    assert above.met is False
    assert bench.simpy_answer([above, unstable, settled]) == 10


def test_videoflow_side_unavailable(bench: ModuleType, tmp_path: Path) -> None:
    fake = _script(
        tmp_path / "old-videoflow-aio",
        "sys.stderr.write('usage: videoflow-aio [-h] COMMAND ...\\n'\n"
        "                 'videoflow-aio: error: unrecognized arguments: --sweep\\n')\n"
        "sys.exit(2)\n",
    )
    run = bench.run_videoflow([str(fake), "simulate", "x.toml"])
    assert run.unavailable == "videoflow-aio: error: unrecognized arguments: --sweep"
    assert run.answer is None
    # a single run's document (no sweep) is not an answer either
    single = _script(tmp_path / "single", 'sys.stdout.write(\'{"run": {}, "sweep": null}\')\n')
    run = bench.run_videoflow([str(single), "simulate", "x.toml"])
    assert run.unavailable == "its output is not JSON with a 'sweep' object"


def test_quick_run(
    bench: ModuleType,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The SimPy half of ``--quick`` answers 10, the closed forms hold, and the videoflow
    half's command, spec and answer go where they should."""
    seen = tmp_path / "seen.json"
    document: dict[str, Any] = {
        "sweep": {
            "key": "stage.detect.replicas",
            "points": [
                {
                    "value": 10,
                    "result": {
                        "run": {"replications": 3},
                        "end_to_end": {
                            "latency_ms": {"p99": 40.0},
                            "latency_ms_ci": {"p99": [39.0, 41.0]},
                        },
                    },
                    "slo": {"met": True, "checks": []},
                }
            ],
            "answer": {"value": 10},
        }
    }
    fake = _script(
        tmp_path / "videoflow-aio",
        "import json, pathlib\n"
        f"spec = pathlib.Path(sys.argv[2]).read_text()\n"
        f"pathlib.Path({str(seen)!r}).write_text(json.dumps([sys.argv[1:], spec]))\n"
        f"sys.stdout.write({json.dumps(document)!r})\n",
    )
    monkeypatch.setattr(bench, "videoflow_executable", lambda: str(fake))
    assert bench.main(["--quick"]) == 0
    out = capsys.readouterr().out
    # the SimPy model's M/M/c queue against Erlang C and the response time's p99
    assert "both inside the 99 % intervals" in out
    assert "SimPy answer: detect replicas = 10;" in out
    assert "videoflow-aio answer: detect replicas = 10;" in out
    assert "answers agree: yes" in out
    argv, spec = json.loads(seen.read_text())
    assert argv[2:] == [
        "--sweep", "stage.detect.replicas=10..11", "--slo", "end_to_end.p99<=200ms",
        "--precision", "0.1", "--json", "-", "--quiet", "--workers", "1",
        "--duration", "10", "--warmup", "2",
    ]  # fmt: skip
    assert spec == bench.SPEC_TOML
    # the same frames as the simulator: one replication's p99 within the histogram's error
    line = next(ln for ln in out.splitlines() if "the question at N = 10" in ln)
    diff = float(line.split("(difference ")[1].split("%")[0])
    assert diff <= 0.1


def _point(bench: ModuleType, value: int, p99: float, hw: float, *, converged: bool) -> Any:
    return bench.Point(value, 0.0, [p99], estimate_ms=p99, half_width_ms=hw, converged=converged)


def _script(path: Path, body: str) -> Path:
    path.write_text(f"#!{sys.executable}\nimport sys\n{body}", encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path
