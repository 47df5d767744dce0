"""``adapters._errors``: the one exception-mapping mechanism every adapter uses."""

from __future__ import annotations

import asyncio

import pytest

from videoflow_aio.adapters._errors import CallFailed, NotSent, ReplyLost, map_exceptions
from videoflow_aio.contracts.errors import BackendUnavailable, OutcomeUnknown


class Engine(Exception):
    pass


class Refused(Engine):
    pass


TABLE = map_exceptions(
    {
        Refused: lambda exc: BackendUnavailable(f"refused: {exc}", backend="x", applied=False),
        (Engine, OSError): lambda exc: None if "pass" in str(exc) else ReplyLost(str(exc)),
        ReplyLost: lambda exc: OutcomeUnknown(str(exc), operation="w"),
        KeyError: NotSent,
    }
)


def test_the_first_matching_entry_wins_and_the_cause_is_chained() -> None:
    err = Refused("no")
    with pytest.raises(BackendUnavailable) as info, TABLE:
        raise err
    assert info.value.__cause__ is err and info.value.applied is False
    with pytest.raises(ReplyLost), TABLE:
        raise OSError("reset")


def test_a_class_value_is_built_from_the_text_and_none_lets_the_original_through() -> None:
    with pytest.raises(NotSent, match="'k'") as info, TABLE:
        raise KeyError("k")
    assert info.value.security is None and isinstance(info.value, CallFailed)
    with pytest.raises(Engine, match="pass"), TABLE:
        raise Engine("pass through")


def test_unmatched_and_cancellation_pass_untouched() -> None:
    with pytest.raises(ValueError), TABLE:
        raise ValueError("other")
    with pytest.raises(asyncio.CancelledError), TABLE:
        raise asyncio.CancelledError()
    with TABLE:
        pass


@pytest.mark.anyio
async def test_async_with_maps_the_same() -> None:
    with pytest.raises(OutcomeUnknown):
        async with TABLE:
            raise ReplyLost("lost")
