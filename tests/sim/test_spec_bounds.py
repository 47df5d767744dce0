"""The spec's upper bounds (``sim/_limits.py``): memory a spec can make the simulator take,
values that overflow, nesting that exhausts the stack, and files that are not sample files.
Each is a SpecError naming the key — never a traceback, and never the content of a file."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from videoflow_aio.cli import main
from videoflow_aio.sim import SpecError, load_spec, parse_spec
from videoflow_aio.sim import _limits as limits


def base() -> dict[str, Any]:
    return {
        "run": {"seed": 1, "duration_seconds": 5.0},
        "source": [{"name": "cams", "rate_hz": 10}],
        "stage": [
            {"name": "decode", "inputs": ["cams"], "service": {"dist": "constant", "value_ms": 1}}
        ],
    }


def refused(doc: Any, field: str, base_dir: Path | None = None) -> SpecError:
    with pytest.raises(SpecError) as err:
        parse_spec(doc, base_dir)
    assert err.value.field == field, err.value
    return err.value


def empirical(file: str) -> dict[str, Any]:
    doc = base()
    doc["stage"][0]["service"] = {"dist": "empirical", "file": file}
    return doc


def test_dev_zero_as_a_sample_file_is_refused_at_once() -> None:
    # before: read until memory ran out (12.5 GB when it was killed)
    cpu0 = time.process_time()  # refused without reading: CPU time, which load does not stretch
    err = refused(empirical("/dev/zero"), "stage[0].service.file")
    assert "not a regular file" in str(err)
    assert time.process_time() - cpu0 < 1.0


def test_a_sample_file_over_the_size_cap_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "MAX_SAMPLE_FILE_BYTES", 1000)
    (tmp_path / "big.txt").write_text("1.5\n" * 300)
    err = refused(empirical("big.txt"), "stage[0].service.file", tmp_path)
    assert "larger than 1,000 bytes" in str(err)


def test_a_sample_file_over_the_sample_cap_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "MAX_SAMPLES", 10)
    (tmp_path / "many.txt").write_text("1\n" * 11)
    err = refused(empirical("many.txt"), "stage[0].service.file", tmp_path)
    assert "more than 10 samples" in str(err)
    (tmp_path / "many.txt").write_text("1\n" * 10)
    parse_spec(empirical("many.txt"), tmp_path)


@pytest.mark.parametrize(
    "content",
    [
        "hunter2:x:0:0:zyxwv:/qqq:/bin/bash\n",
        "1.0\n2.0\nsecret-token-value\n",
        "\xff\xfe\x00junk\n",
    ],
)
def test_a_bad_line_is_named_by_file_and_number_never_quoted(tmp_path: Path, content: str) -> None:
    # before: "not a number: 'root:x:0:0:...'" — the first line of any file named as samples
    (tmp_path / "s.txt").write_bytes(content.encode("latin-1"))
    err = refused(empirical("s.txt"), "stage[0].service.file", tmp_path)
    line = content.count("\n", 0, content.index(content.splitlines()[-1])) + 1
    assert f"s.txt:{line}:" in str(err)
    for word in ("hunter2", "zyxwv", "secret", "junk", "bash"):
        assert word not in str(err)


@pytest.mark.parametrize(
    ("where", "key", "value"),
    [
        ("source", "bytes", 10**30),
        ("source", "bytes", 10**12),
        ("source", "streams", 10**309),
        ("stage", "output_bytes", 10**30),
        ("stage", "replicas", 10**30),
        ("stage", "replicas", limits.MAX_REPLICAS + 1),
        ("stage", "batch", 10**30),
        ("stage", "max_queue", 10**30),
        ("stage", "ack_wait_seconds", 1e30),
        ("run", "seed", 2**63),
    ],
)
def test_huge_values_are_spec_errors(where: str, key: str, value: Any) -> None:
    # before: OverflowError / MemoryError from the run, or no upper bound at all
    doc = base()
    table = doc[where] if where == "run" else doc[where][0]
    table[key] = value
    path = where if where == "run" else f"{where}[0]"
    err = refused(doc, f"{path}.{key}")
    assert "must be <=" in str(err)


def test_toml_nested_thousands_deep_is_a_spec_error(tmp_path: Path) -> None:
    # before: RecursionError out of tomllib
    spec = tmp_path / "deep.toml"
    spec.write_text("x = " + "[" * 3000 + "]" * 3000 + "\n")
    with pytest.raises(SpecError) as err:
        load_spec(spec)
    assert err.value.field == "toml"


def test_a_document_nested_past_the_depth_bound_is_refused() -> None:
    doc: dict[str, Any] = base()
    deep: dict[str, Any] = {}
    doc["gpu"] = deep
    for _ in range(limits.MAX_TOML_DEPTH):
        deep["x"] = {}
        deep = deep["x"]
    refused(doc, "toml")


@pytest.mark.parametrize("name", ["cam\x00s", "cam\x1bs", "cams\x7f", "x" * 201])
def test_a_node_name_with_a_control_character_or_too_long_is_refused(name: str) -> None:
    doc = base()
    doc["source"][0]["name"] = name
    doc["stage"][0]["inputs"] = [name]
    refused(doc, "source[0].name")


def test_twenty_thousand_faults_are_refused_at_once() -> None:
    # before: accepted, and the run crawled for over 90 s
    doc = base()
    doc["fault"] = [{"at_seconds": 1.0, "kind": "kill_stage", "stage": "decode"}] * 20_000
    cpu0 = time.process_time()  # CPU time, which load does not stretch
    err = refused(doc, "fault")
    assert f"at most {limits.MAX_FAULTS:,}" in str(err)
    assert time.process_time() - cpu0 < 1.0


def test_a_spec_that_is_not_a_table_is_a_spec_error() -> None:
    refused(None, "spec")
    refused([1, 2], "spec")


def test_a_spec_file_that_is_dev_zero_is_refused() -> None:
    with pytest.raises(SpecError) as err:
        load_spec("/dev/zero")
    assert "not a regular file" in str(err.value)


def test_the_cli_exits_2_with_one_line_and_no_content(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "s.txt").write_text("hunter2:x:0:0:zyxwv:/qqq:/bin/bash\n")
    (tmp_path / "spec.toml").write_text(
        "[run]\nduration_seconds = 5\n[[source]]\nname = 'cams'\nrate_hz = 10\n"
        "[[stage]]\nname = 'decode'\ninputs = ['cams']\n"
        "service = { dist = 'empirical', file = 's.txt' }\n"
    )
    assert main(["simulate", str(tmp_path / "spec.toml"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "s.txt:1: not a number" in err
    assert "hunter2" not in err and "zyxwv" not in err
