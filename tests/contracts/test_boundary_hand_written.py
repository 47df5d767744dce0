"""The hand-written checks of the hot paths (``contracts._hot_paths``) hold to the hints.

Each hand-written wrapper and Struct field test is an inline copy of what the contract's
hints ask for; a copy that accepts one value the precise check refuses would let bad input
through. For every parameter (and every field), hypothesis draws the wrong values of its hint
(``_boundary_inputs.bad``, written independently of the mechanism) and valid ones: whatever
the inline test lets through, the precise check must accept too, and the well-formed values
callers pass must not need the precise check at all.
"""

from __future__ import annotations

import inspect
import typing
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _boundary_inputs import bad
from videoflow_aio.contracts import (
    ChannelId,
    Completed,
    DeliveryToken,
    Envelope,
    ImmutablePayloadRef,
    MessagingBackend,
    PayloadStore,
    RetentionContract,
    RuntimeStore,
    SubscriptionId,
    ValidationError,
    make_envelope,
)
from videoflow_aio.contracts._boundary import _HAND_WRITTEN, _slow
from videoflow_aio.contracts._specs import _HAND_WRITTEN as _FIELD_TESTS
from videoflow_aio.contracts._specs import spec_for, struct_spec

_CID = ChannelId("f", "r", "n")
_SUB = SubscriptionId(_CID, "c")
_TOKEN = DeliveryToken(_SUB, 1, 1, "l", "o")
_REF = ImmutablePayloadRef("k", 3, "d" * 64, "g1", "memory")

#: contract method -> valid arguments (the well-formed values callers pass)
VALID: dict[Any, tuple[Any, ...]] = {
    MessagingBackend.publish: (make_envelope(_CID, "p", headers={"a": "b"}), 1.5),
    MessagingBackend.receive: (_SUB, 1, 1 << 20, 2),
    MessagingBackend.settle: (_TOKEN, Completed(), "s"),
    MessagingBackend.renew: (_TOKEN,),
    RuntimeStore.get: ("k",),
    RuntimeStore.cas: ("k", None, b"v"),
    PayloadStore.put: (b"data", "c1", RetentionContract(obligations=("o1",))),
    PayloadStore.acquire_obligation: (_REF, "o1", 5.0),
    PayloadStore.renew_obligation: (_REF, "o1", 5),
    PayloadStore.release_obligation: (_REF, "o1", "done"),
}
#: Struct -> a valid instance
INSTANCES: dict[type, Any] = {
    ChannelId: _CID,
    Envelope: make_envelope(
        _CID, "p", partition_key="3", headers={"a": "b"}, event_ts=1.5, source_offset=3
    ),
}
_SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _name(fn: Any) -> str:
    return str(fn.__qualname__)


def test_every_hand_written_check_is_covered_here() -> None:
    assert set(VALID) == set(_HAND_WRITTEN)
    assert set(INSTANCES) == set(_FIELD_TESTS)


def _params(method: Any) -> list[tuple[str, Any]]:
    hints = typing.get_type_hints(method, include_extras=True)
    return [(n, hints[n]) for n in list(inspect.signature(method).parameters)[1:]]


def _attempt(method: Any, args: tuple[Any, ...]) -> tuple[bool, bool]:
    """``(went to the precise check, the precise check accepts)`` for ``args``."""
    params = _params(method)
    precise = _slow([(n, spec_for(h)) for n, h in params])
    asked: list[bool] = []

    def slow(*values: Any) -> None:
        asked.append(True)
        precise(*values)

    async def impl(self: Any, *values: Any) -> None:
        return None

    wrapper = _HAND_WRITTEN[method](impl, slow)
    coro = wrapper(None, *args)
    try:
        coro.send(None)
    except StopIteration:
        pass
    except ValidationError:
        pass
    try:
        precise(*args)
    except ValidationError:
        return bool(asked), False
    return bool(asked), True


@pytest.mark.parametrize("method", list(VALID), ids=_name)
def test_valid_arguments_take_the_inline_path(method: Any) -> None:
    assert _attempt(method, VALID[method]) == (False, True)


@pytest.mark.parametrize("method", list(VALID), ids=_name)
@_SETTINGS
@given(data=st.data())
def test_the_inline_test_accepts_nothing_the_hints_refuse(method: Any, data: Any) -> None:
    params = _params(method)
    index = data.draw(st.integers(0, len(params) - 1), label="parameter")
    name, hint = params[index]
    base = VALID[method][index]
    wrong = bad(hint, base)
    value = data.draw(st.one_of(wrong, st.just(base)) if wrong is not None else st.just(base))
    args = list(VALID[method])
    args[index] = value
    asked, accepted = _attempt(method, tuple(args))
    assert asked or accepted, f"{_name(method)}({name}={value!r}) passed the inline test"


@pytest.mark.parametrize("cls", list(INSTANCES), ids=lambda c: c.__name__)
@_SETTINGS
@given(data=st.data())
def test_a_hand_written_field_test_accepts_nothing_the_hints_refuse(cls: type, data: Any) -> None:
    base = INSTANCES[cls]
    spec = struct_spec(cls)
    fast = _FIELD_TESTS[cls]
    assert fast(base)
    name, field_spec = data.draw(st.sampled_from(spec.fields), label="field")
    hint = typing.get_type_hints(cls, include_extras=True)[name]
    wrong = bad(hint, getattr(base, name))
    if wrong is None:
        return
    value = data.draw(wrong, label=name)
    obj = msgspec.structs.replace(base)
    msgspec.structs.force_setattr(obj, name, value)
    try:
        ok = fast(obj)
    except Exception:  # an exception sends the value to the precise check
        ok = False
    if ok:
        field_spec.check(value, name)  # raises when the inline test was wrong
