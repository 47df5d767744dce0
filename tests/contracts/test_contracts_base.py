"""Known/Unknown serialise as a tagged union; errors carry fields."""

from __future__ import annotations

import msgspec
import pytest

from videoflow_aio.contracts import (
    ConflictError,
    IncompatibleProfile,
    Known,
    NotFound,
    Unknown,
    ValidationError,
    VideoflowError,
)


def test_known_unknown_round_trip_as_tagged_union() -> None:
    for value in (Known(3), Unknown("timeout")):
        data = msgspec.json.encode(value)
        assert msgspec.json.decode(data, type=Known[int] | Unknown) == value
    assert b'"type":"Unknown"' in msgspec.json.encode(Unknown("x")).replace(b" ", b"")


def test_unknown_is_never_zero() -> None:
    observed: Known[int] | Unknown = Unknown("pods unavailable")
    assert not isinstance(observed, Known)
    with pytest.raises(AttributeError):
        observed.value  # type: ignore[attr-defined]  # noqa: B018


def test_structs_are_frozen() -> None:
    with pytest.raises(AttributeError):
        Known(1).value = 2  # type: ignore[misc]


def test_errors_carry_fields() -> None:
    err = IncompatibleProfile(
        "retention differs", resource="ch", field="retention", expected="limits", actual="interest"
    )
    assert isinstance(err, VideoflowError)
    assert (err.field, err.expected, err.actual) == ("retention", "limits", "interest")
    assert err.fields["resource"] == "ch"
    assert isinstance(ValidationError("bad", field="key", value=""), ValueError)
    assert isinstance(NotFound("no such channel", kind="channel", name="c"), LookupError)
    conflict = ConflictError("lost", resource="node/a", expected="3", actual="4")
    assert conflict.actual == "4"
