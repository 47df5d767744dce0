"""``unchecked``: the library's trusted path past the boundary, for arguments it built itself."""

from __future__ import annotations

from typing import Any

import pytest

from videoflow_aio.contracts import ValidationError, unchecked
from videoflow_aio.memory.messaging import MemoryMessagingBackend
from videoflow_aio.memory.payload import MemoryPayloadStore
from videoflow_aio.vtime import VirtualClock, run


def test_unchecked_is_the_providers_own_implementation_bound_to_the_same_instance() -> None:
    b = MemoryMessagingBackend(clock=VirtualClock())
    for name in ("publish", "receive", "settle", "renew"):
        checked = getattr(b, name)
        fast = unchecked(checked)
        assert fast.__self__ is b
        assert fast.__func__ is getattr(MemoryMessagingBackend, name).__wrapped__
        assert fast.__func__ is not checked.__func__


def test_bad_input_still_gets_the_typed_error_from_the_checked_method() -> None:
    b = MemoryMessagingBackend(clock=VirtualClock())

    async def main() -> None:
        with pytest.raises(ValidationError, match="envelope"):
            await b.publish(None, "soon")  # type: ignore[arg-type]
        with pytest.raises(Exception) as info:  # anything but the boundary's error
            await unchecked(b.publish)(None, "soon")
        assert not isinstance(info.value, ValidationError)

    run(main, clock=VirtualClock())


def test_anything_that_is_not_a_bound_checked_method_comes_back_as_it_is() -> None:
    async def plain(*_: Any) -> None:
        return None

    class Wrapper:
        def receive(self) -> None:
            return None

    w = Wrapper()
    store = MemoryPayloadStore(clock=VirtualClock())
    for obj in (plain, len, w.receive, MemoryMessagingBackend.publish, None):
        assert unchecked(obj) is obj
    assert unchecked(store.put).__func__ is vars(MemoryPayloadStore)["put"].__wrapped__
