"""The plugin's fixture: ``vclock``, the clock a virtual-time test runs on."""

from __future__ import annotations

import pytest

from videoflow_aio.vtime import VirtualClock

from ._optin import PREFIX, choice, item_clock


@pytest.fixture
def vclock(request: pytest.FixtureRequest) -> VirtualClock:
    """The test's own fresh :class:`VirtualClock` (autojump unless the marker says
    otherwise); requesting it opts the test in to virtual time. The test's event loop —
    asyncio or trio, whichever anyio picked — runs on this clock."""
    item = request.node
    assert isinstance(item, pytest.Item)
    if not choice(item).enabled:
        pytest.fail(
            f"{PREFIX}this test requests vclock but is marked pytest.mark.vtime(False)",
            pytrace=False,
        )
    return item_clock(item)
