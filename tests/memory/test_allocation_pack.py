"""pack_whole_devices: the exhaustive per-host packing oracle."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from videoflow_aio.contracts.errors import ValidationError
from videoflow_aio.memory.allocation import pack_whole_devices


def test_seed_examples() -> None:
    three_of_two = [("a", 2), ("b", 2), ("c", 2)]
    got = pack_whole_devices(three_of_two, {"h1": 2, "h2": 2, "h3": 2})
    assert got is not None and sorted(got.values()) == ["h1", "h2", "h3"]
    # aggregate 6 free >= 6 needed, yet no per-host assignment
    assert pack_whole_devices(three_of_two, {"h1": 3, "h2": 3}) is None


def test_eligible_narrows_hosts() -> None:
    free = {"h1": 4, "h2": 4}
    got = pack_whole_devices([("a", 4), ("b", 4)], free, {"a": {"h2"}})
    assert got == {"a": "h2", "b": "h1"}
    assert pack_whole_devices([("a", 4), ("b", 4)], free, {"a": {"h2"}, "b": {"h2"}}) is None
    assert pack_whole_devices([("a", 1)], free, {"a": set()}) is None


def test_empty_requests_fit() -> None:
    assert pack_whole_devices([], {}) == {}


@pytest.mark.parametrize(
    ("requests", "free", "eligible"),
    [
        ([("a", -1)], {"h": 1}, None),
        ([("a", 0)], {"h": 1}, None),
        ([("a", 1), ("a", 1)], {"h": 2}, None),
        ([("a", 1)], {"h": -1}, None),
        ([("a", 1)], {"h": 1}, {"ghost": {"h"}}),
    ],
)
def test_bad_input_is_a_validation_error(
    requests: list[tuple[str, int]], free: dict[str, int], eligible: dict[str, set[str]] | None
) -> None:
    with pytest.raises(ValidationError):
        pack_whole_devices(requests, free, eligible)


def _brute(requests: list[tuple[str, int]], free: dict[str, int]) -> bool:
    hosts = sorted(free)
    for choice in itertools.product(hosts, repeat=len(requests)):
        left = dict(free)
        for (_, n), h in zip(requests, choice, strict=True):
            left[h] -= n
        if all(v >= 0 for v in left.values()):
            return True
    return False


@settings(max_examples=150, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 4), max_size=5),
    frees=st.lists(st.integers(0, 5), min_size=1, max_size=4),
)
def test_agrees_with_brute_force(sizes: list[int], frees: list[int]) -> None:
    requests = [(f"w{i}", n) for i, n in enumerate(sizes)]
    free = {f"h{i}": n for i, n in enumerate(frees)}
    got = pack_whole_devices(requests, free)
    assert (got is not None) == _brute(requests, free)
    if got is not None:
        used = dict.fromkeys(free, 0)
        for workload, n in requests:
            used[got[workload]] += n
        assert all(used[h] <= free[h] for h in free)
