"""Issue 27's new spec keys refuse bad input with a one-line SpecError naming the key (exit
2 from the command), never a traceback: fixed examples per key, then hypothesis examples
of hostile values in each."""

from __future__ import annotations

import contextlib
import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from videoflow_aio.cli import main
from videoflow_aio.sim import SpecError, parse_spec
from videoflow_aio.sim._overrides import to_doc


def base() -> dict[str, Any]:
    return {
        "run": {"duration_seconds": 10.0},
        "source": [{"name": "cam", "rate_hz": 10}],
        "stage": [
            {"name": "a", "inputs": ["cam"], "service": {"dist": "constant", "value_ms": 1}},
            {"name": "b", "inputs": ["cam"], "service": {"dist": "constant", "value_ms": 1}},
            {
                "name": "fuse",
                "inputs": ["a", "b"],
                "join": "all",
                "join_timeout_ms": 100,
                "service": {"dist": "constant", "value_ms": 1},
            },
            {
                "name": "infer",
                "inputs": ["fuse"],
                "batch": {"max_items": 8, "max_wait_ms": 5},
                "service": {"dist": "exponential", "mean_ms": 10, "per_item_ms": 1},
            },
        ],
        "failure": [{"stage": "infer", "mtbf_seconds": 100, "mttr_seconds": 5}],
    }


def _set(doc: dict[str, Any], where: str, value: Any) -> None:
    parts = where.split(".")
    table: Any = doc
    for p in parts[:-1]:
        table = table[int(p)] if p.isdigit() else table.setdefault(p, {})
    table[parts[-1]] = value


BAD = [
    ("stage.3.batch", {"max_items": 0}, "stage[3].batch.max_items"),
    ("stage.3.batch", {"max_items": "8"}, "stage[3].batch.max_items"),
    ("stage.3.batch", {"max_items": 8, "max_wait_ms": -1}, "stage[3].batch.max_wait_ms"),
    ("stage.3.batch", {"max_items": 8, "wait": 1}, "stage[3].batch.wait"),
    ("stage.3.batch", {}, "stage[3].batch.max_items"),
    ("stage.3.batch", "big", "stage[3].batch"),
    ("stage.3.service.per_item_ms", -2, "stage[3].service.per_item_ms"),
    ("stage.3.service.per_item_ms", float("nan"), "stage[3].service.per_item_ms"),
    ("stage.2.join", "any", "stage[2].join"),
    ("stage.0.join", "all", "stage[0].join"),
    ("stage.2.join_timeout_ms", 0, "stage[2].join_timeout_ms"),
    ("stage.2.join_timeout_ms", "1s", "stage[2].join_timeout_ms"),
    ("stage.1.join_timeout_ms", 5, "stage[1].join_timeout_ms"),
    ("failure.0.mtbf_seconds", 0, "failure[0].mtbf_seconds"),
    ("failure.0.mttr_seconds", -1, "failure[0].mttr_seconds"),
    ("failure.0.mtbf_seconds", 1e-9, "failure[0].mtbf_seconds"),
    ("failure.0.kind", "explode", "failure[0].kind"),
    ("failure.0.dist", "weibull", "failure[0].dist"),
    ("failure.0.stage", "nope", "failure[0].stage"),
    ("failure.0.replica", 1, "failure[0].replica"),
    ("failure.0.factor", 2.0, "failure[0].factor"),
    ("source.0.rate_schedule", [[0, 10], [0, 20]], "source[0].rate_schedule[1]"),
    ("source.0.rate_schedule", [[1, 10]], "source[0].rate_schedule[0]"),
    ("source.0.rate_schedule", [[0, -1]], "source[0].rate_schedule[0]"),
    ("source.0.rate_schedule", [10], "source[0].rate_schedule[0]"),
    ("source.0.rate_schedule", [], "source[0].rate_schedule"),
    ("source.0.burst", {"rate_hz": 5, "mean_on_seconds": 0, "mean_off_seconds": 1},
     "source[0].burst.mean_on_seconds"),
    ("source.0.burst", {"rate_hz": 5, "mean_on_seconds": 1}, "source[0].burst.mean_off_seconds"),
    ("source.0.burst", {"rate_hz": 5, "mean_on_seconds": 1e-9, "mean_off_seconds": 1},
     "source[0].burst"),
    ("source.0.jitter_ms", -1, "source[0].jitter_ms"),
    ("source.0.trace", "x.txt", "source[0].trace"),
    ("source.0.arrival", "bursty", "source[0].arrival"),
    ("run.slo_ms", [100, -5], "run.slo_ms[1]"),
    ("run.slo_ms", "100", "run.slo_ms"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("where", "value", "field"), BAD, ids=[b[2] + "=" + repr(b[1])[:20] for b in BAD]
)
def test_a_bad_value_names_its_key(where: str, value: Any, field: str) -> None:
    doc = base()
    _set(doc, where, value)
    with pytest.raises(SpecError) as info:
        parse_spec(doc)
    assert info.value.field == field
    assert "\n" not in str(info.value)


def test_trace_sources_refuse_what_does_not_apply(tmp_path: Path) -> None:
    doc = base()
    doc["source"][0] = {"name": "cam", "arrival": "trace", "rate_hz": 5}
    with pytest.raises(SpecError, match=r"rate_hz"):
        parse_spec(doc)
    doc["source"][0] = {"name": "cam", "arrival": "trace"}
    with pytest.raises(SpecError) as info:
        parse_spec(doc)
    assert info.value.field == "source[0].trace"
    big = tmp_path / "big.txt"
    big.write_bytes(b"1\n" * 10)
    doc["source"][0] = {"name": "cam", "arrival": "trace", "trace": str(big), "streams": 2}
    with pytest.raises(SpecError) as info:
        parse_spec(doc)
    assert info.value.field == "source[0].streams"


def test_a_trace_larger_than_the_bound_is_refused_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from videoflow_aio.sim import _limits

    monkeypatch.setattr(_limits, "MAX_TRACE_FILE_BYTES", 100)
    big = tmp_path / "big.txt"
    big.write_text("1.0\n" * 100)
    doc = base()
    doc["source"][0] = {"name": "cam", "arrival": "trace", "trace": str(big)}
    with pytest.raises(SpecError, match="larger than 100 bytes"):
        parse_spec(doc)


def test_the_command_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [
        "[run]",
        "duration_seconds = 5",
        "[[source]]",
        'name = "cam"',
        "rate_hz = 5",
        "[[stage]]",
        'name = "s"',
        'inputs = ["cam"]',
        "batch = { max_items = -1 }",
        'service = { dist = "constant", value_ms = 1 }',
    ]
    spec = tmp_path / "s.toml"
    spec.write_text("\n".join(lines))
    assert main(["simulate", str(spec), "-q"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "stage[0].batch.max_items" in err[0]


def test_the_new_keys_round_trip() -> None:
    doc = base()
    doc["source"][0].update(
        jitter_ms=2, burst={"rate_hz": 5, "mean_on_seconds": 1, "mean_off_seconds": 2}
    )
    doc["source"].append({"name": "c2", "rate_schedule": [[0, 1], [5, 2]]})
    doc["source"].append({"name": "c3", "arrival": "trace", "trace_seconds": [2.0, 1.0]})
    doc["run"]["slo_ms"] = [100]
    spec = parse_spec(doc)
    assert parse_spec(to_doc(spec)) == spec


NASTY = st.sampled_from(
    [0, -1, 1, 2**63, 10**400, 1e308, float("inf"), float("nan"), True, "", "x", None, [], {},
     [[0]], [[0, 1], [0, 1]], {"max_items": 1e9}]
)  # fmt: skip
VALUES = st.recursive(
    NASTY | st.floats() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(
        ["max_items", "max_wait_ms", "rate_hz", "mean_on_seconds", "mean_off_seconds", "dist", "x"]
    ), inner, max_size=4),
    max_leaves=6,
)  # fmt: skip
PLACES = st.sampled_from(
    ["stage.3.batch", "stage.3.service.per_item_ms", "stage.3.per_item_ms", "stage.2.join",
     "stage.2.join_timeout_ms", "failure.0.mtbf_seconds", "failure.0.mttr_seconds",
     "failure.0.kind", "failure.0.dist", "failure.0.stage", "failure.0.factor", "failure.0",
     "source.0.rate_schedule", "source.0.burst", "source.0.jitter_ms", "source.0.arrival",
     "source.0.trace", "source.0.trace_seconds", "run.slo_ms", "failure"]
)  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(changes=st.lists(st.tuples(PLACES, VALUES), min_size=1, max_size=3))
def test_hostile_values_in_the_new_keys_are_spec_errors(changes: list[tuple[str, Any]]) -> None:
    doc = base()
    for where, value in changes:
        with contextlib.suppress(KeyError, IndexError, TypeError, AttributeError):
            _set(doc, where, copy.deepcopy(value))
    try:
        parse_spec(doc, base=Path("/nonexistent-base"))
    except SpecError as exc:
        assert "\n" not in str(exc) and exc.field
