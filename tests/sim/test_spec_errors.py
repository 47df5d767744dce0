"""msgspec's validation errors as SpecError (issue 24): the key's path in the spec's
style and a one-line reason read from the type at that path — a bound, the choices of a
``Literal``, the keys of a table, the variant a key does not apply to."""

from __future__ import annotations

import copy
import math
from typing import Annotated, Any, Literal

import msgspec
import pytest

from videoflow_aio.sim import SpecError, parse_spec
from videoflow_aio.sim._spec_errors import convert


class Inner(msgspec.Struct, forbid_unknown_fields=True, tag_field="dist", tag="a"):
    x: Annotated[float, msgspec.Meta(ge=0.0, le=10.0)] = 0.0


class Outer(msgspec.Struct, forbid_unknown_fields=True):
    items: tuple[Inner, ...] = ()
    n: Annotated[int, msgspec.Meta(ge=1, le=5)] = 1
    mode: Literal["on", "off"] = "on"
    pair: tuple[float, float] = (0.0, 0.0)
    counts: dict[str, Annotated[int, msgspec.Meta(ge=0)]] = {}
    finite: Annotated[
        float, msgspec.Meta(ge=-1.7976931348623157e308, le=1.7976931348623157e308)
    ] = 0.0


CASES = [
    ({"n": 0}, "top.n: must be >= 1"),
    ({"n": 6}, "top.n: must be <= 5"),
    ({"n": True}, "top.n: must be an integer in [1, 5]"),
    ({"n": 10**400}, "top.n: must be <= 5"),
    ({"mode": "dim"}, "top.mode: must be one of off, on"),
    ({"nope": 1}, "top.nope: unknown key; expected one of items, n, mode, pair, counts, finite"),
    ({"items": [{"dist": "a", "x": math.nan}]}, "top.items[0].x: must be >= 0"),
    ({"items": [{"dist": "a", "y": 1}]}, "top.items[0].y: does not apply for dist = 'a';"
     " expected one of dist, x"),
    ({"items": [{"dist": "b"}]}, "top.items[0].dist: must be one of a"),
    ({"pair": [1, "x"]}, "top.pair: must be [a finite number, a finite number]"),
    ({"counts": {"a": 1, "b.c": -1}}, "top.counts.b.c: must be >= 0"),
    ({"finite": math.inf}, "top.finite: must be a finite number"),
    ({"finite": -math.inf}, "top.finite: must be a finite number"),
    ("x", "top: must be a table"),
    ({"": 1}, 'top."": unknown key'),
    ({"items": [{"dist": "a", 7: 1}]}, "top.items[0].7: a key must be a string"),
]  # fmt: skip


@pytest.mark.parametrize(("value", "message"), CASES, ids=[c[1][:40] for c in CASES])
def test_a_msgspec_error_becomes_a_spec_error_naming_the_key(value: Any, message: str) -> None:
    with pytest.raises(SpecError) as info:
        convert(value, Outer, "top")
    assert str(info.value).startswith(message)
    assert info.value.field == message.split(": ", 1)[0]
    assert "\n" not in str(info.value) and "`" not in str(info.value)


def spec() -> dict[str, Any]:
    return {
        "run": {"duration_seconds": 10.0},
        "source": [{"name": "cam", "rate_hz": 10}],
        "stage": [{"name": "a", "inputs": ["cam"], "service": {"dist": "constant", "value_ms": 1}}],
        "node": [{"name": "n0", "mig": {"1g.10gb": 1}}],
        "fault": [{"kind": "kill_stage", "at_seconds": 1, "stage": "a"}],
    }


SPEC_CASES = [
    ("stage.0.service.p99_ms", 3, "stage[0].service.p99_ms: does not apply for dist = 'constant'"),
    ("fault.0.duration_seconds", 3,
     "fault[0].duration_seconds: does not apply for kind = 'kill_stage'"),
    ("fault.0.kind", "explode", "fault[0].kind: must be one of crash_replica, kill_stage"),
    ("node.0.mig", {"1g.10gb": -1}, "node[0].mig.1g.10gb: must be >= 0"),
    ("source.0.rate_hz", math.inf, "source[0].rate_hz: must be a finite number"),
    ("source.0.rate_hz", -30, "source[0].rate_hz: must be > 0"),
    ("stage.0.max_deliver", 0, "stage[0].max_deliver: must be >= 1 (or -1)"),
]  # fmt: skip


@pytest.mark.parametrize(("where", "value", "message"), SPEC_CASES, ids=[c[0] for c in SPEC_CASES])
def test_a_bad_spec_leaves_the_document_unchanged(where: str, value: Any, message: str) -> None:
    doc = spec()
    parts = where.split(".")
    table: Any = doc
    for p in parts[:-1]:
        table = table[int(p)] if p.isdigit() else table[p]
    table[parts[-1]] = value
    before = copy.deepcopy(doc)
    with pytest.raises(SpecError) as info:
        parse_spec(doc)
    assert str(info.value).startswith(message)
    assert doc == before


def test_a_spec_without_a_run_table_names_its_required_key() -> None:
    doc = spec()
    del doc["run"]
    with pytest.raises(SpecError) as info:
        parse_spec(doc)
    assert str(info.value) == "run.duration_seconds: is required"
    assert "run" not in doc
