"""The boundary is explicit and generates no code (issue #24): contract methods are checked in
every provider, a provider's own methods only when marked ``checked_control``, and every
wrapper is a plain closure, called positionally or with keywords alike."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import videoflow_aio.contracts as contracts
from _boundary_inputs import bad
from videoflow_aio.contracts import (
    ChannelId,
    Completed,
    DeliveryToken,
    Retry,
    SubscriptionId,
    Terminal,
    ValidationError,
    checked_control,
)
from videoflow_aio.contracts import _specs as specs
from videoflow_aio.memory.runtime_store import MemoryRuntimeStore
from videoflow_aio.vtime import VirtualClock
from videoflow_aio.vtime import run as vrun


def test_the_boundary_generates_no_code() -> None:
    for module in ("_boundary.py", "_specs.py", "_hot_paths.py"):
        text = (Path(contracts.__file__).parent / module).read_text()
        for call in ("exec(", "eval(", " compile(", "(compile(", "FunctionType(", ".replace(co_"):
            assert call not in text, (module, call)


class _WithControls(MemoryRuntimeStore):
    @checked_control
    def marked(self, key: str) -> str:
        return key

    def unmarked(self, key: str) -> str:
        return key


def test_only_marked_methods_of_a_provider_are_checked() -> None:
    s = _WithControls()
    with pytest.raises(ValidationError) as info:
        s.marked(5)  # type: ignore[arg-type]
    assert info.value.field == "key"
    assert s.marked(key="k") == "k"
    unmarked: Any = s.unmarked
    assert unmarked(5) == 5  # not a boundary: not touched
    assert not hasattr(_WithControls.unmarked, "__vf_boundary__")


@pytest.mark.parametrize(
    ("args", "kwargs", "field"),
    [
        ((), {"key": 5, "expected_version": None, "value": b"v"}, "key"),
        (("k",), {"expected_version": 3, "value": b"v"}, "expected_version"),
        (("k", None), {"value": "v"}, "value"),
        (("",), {"expected_version": None, "value": b"v"}, "key"),
    ],
)
def test_a_call_with_keywords_is_checked_like_a_positional_one(
    args: tuple[Any, ...], kwargs: dict[str, Any], field: str
) -> None:
    async def main() -> None:
        s = MemoryRuntimeStore()
        with pytest.raises(ValidationError) as info:
            await s.cas(*args, **kwargs)
        assert info.value.field == field
        assert await s.scan("") == []
        assert await s.cas(key="k", expected_version=None, value=b"v")
        assert await s.delete("k", expected_version=(await s.get(key="k"))[1])

    vrun(main, clock=VirtualClock())


def test_a_composed_wrapper_takes_keywords_and_reports_wrong_calls_as_python_does() -> None:
    async def main() -> None:
        s = MemoryRuntimeStore()
        assert await s.append(log="l", record=b"r") == 1
        with pytest.raises(ValidationError) as info:
            await s.append("l", record="r")  # type: ignore[arg-type]
        assert info.value.field == "record"
        with pytest.raises(TypeError):
            await s.append("l")  # type: ignore[call-arg]
        assert await s.log_entries("l") == [b"r"]

    vrun(main, clock=VirtualClock())


_HINTS: list[Any] = [
    str,
    specs.NonEmptyStr,
    specs.Token,
    Annotated[str, specs.OneOf(("a", "b"))],
    bytes,
    specs.NonNegInt,
    specs.PositiveInt,
    float,
    specs.NonNegFloat,
    specs.PositiveFloat,
    bool,
    float | None,
    str | None,
    tuple[str, ...],
    list[specs.NonEmptyStr],
    dict[str, int],
    SubscriptionId,
    DeliveryToken,
    Completed | Retry | Terminal,
    Sequence[ChannelId],
]


@pytest.mark.parametrize("hint", _HINTS, ids=lambda h: re.sub(r" at 0x[0-9a-f]+", "", repr(h)))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_composed_fast_test_accepts_nothing_the_precise_check_refuses(
    hint: Any, data: Any
) -> None:
    spec = specs.spec_for(hint)
    fast = spec.test()
    strategy = bad(hint)
    if fast is None or strategy is None:
        return
    value = data.draw(strategy)
    try:
        ok = fast(value)
    except Exception:  # an exception sends the value to the precise check
        ok = False
    if ok:
        spec.check(value, "x")  # raises when the fast test was wrong
