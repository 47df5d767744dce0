"""The NATS adapter's one exception mapping (``adapters.nats._api``), without a server."""

from __future__ import annotations

import nats.errors
import pytest

from videoflow_aio.adapters.nats import _api
from videoflow_aio.adapters.nats._api import (
    ApiError,
    CallFailed,
    NoAnswer,
    NoResponders,
    NotSent,
    call_failed,
    map_exceptions,
    refused,
    unavailable,
)
from videoflow_aio.contracts.errors import BackendUnavailable, IncompatibleProfile


@pytest.mark.parametrize(
    ("raised", "kind"),
    [
        (nats.errors.NoRespondersError(), NoResponders),
        (nats.errors.TimeoutError(), NoAnswer),
        (TimeoutError(), NoAnswer),  # a flush timeout is a bare one
        (nats.errors.ConnectionClosedError(), NotSent),
        (nats.errors.OutboundBufferLimitError(), NotSent),
        (nats.errors.ConnectionDrainingError(), NotSent),
        (nats.errors.StaleConnectionError(), NoAnswer),
    ],
)
def test_every_nats_error_is_one_call_failure(raised: BaseException, kind: type) -> None:
    got = call_failed(raised, "subj", 1.0)
    assert type(got) is kind and isinstance(got, CallFailed)


def test_map_exceptions_uses_the_first_matching_entry_and_chains() -> None:
    mapping: _api.ExceptionMapping = {
        ApiError: lambda e: refused("channel r", "r", e),
        CallFailed: lambda e: BackendUnavailable(f"down: {e}", backend="nats"),
    }
    with pytest.raises(IncompatibleProfile) as info, map_exceptions(mapping):
        raise ApiError(400, 10058, "in use")
    assert isinstance(info.value.__cause__, ApiError)
    with pytest.raises(BackendUnavailable) as down, map_exceptions(mapping):
        raise NoAnswer("no reply")
    assert "no reply" in str(down.value)
    with pytest.raises(KeyError), map_exceptions(mapping):  # anything else passes through
        raise KeyError("x")


def test_unavailable_and_refused_name_what_failed() -> None:
    with (
        pytest.raises(BackendUnavailable, match=r"cannot read f\.r\.n"),
        unavailable("cannot read f.r.n"),
    ):
        raise NotSent("closed")
    err = refused("channel f.r.n", "f.r.n", ApiError(500, _api.INVALID_CONFIG, "bad window"))
    assert isinstance(err, IncompatibleProfile) and "bad window" in str(err)
