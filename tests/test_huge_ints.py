"""An int beyond the float range (``10**400``) is hostile input like ``inf``: every check of a
caller's number refuses it with a typed error, never ``OverflowError`` from ``float()`` or
``math.isfinite``. Hypothesis found the first one in the simulator's TOML checks in CI."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from videoflow_aio.contracts import RetentionContract, ValidationError
from videoflow_aio.contracts.payload import validate_contract, validate_deadline
from videoflow_aio.faults import FaultInjector
from videoflow_aio.gpu.geometry import smallest_profile
from videoflow_aio.gpu.layout import MigRefusal, profile_for_memory
from videoflow_aio.memory import NodeFixture
from videoflow_aio.pipeline import ExceptionPolicy
from videoflow_aio.sim import SpecError, parse_spec
from videoflow_aio.vtime import VirtualClock

HUGE = [10**400, -(10**400)]


def _spec(v: int) -> dict[str, Any]:
    service = {"dist": "exponential", "mean_ms": 10, "per_item_ms": v}
    return {
        "run": {"duration_seconds": 1},
        "source": [{"name": "cam", "rate_hz": 10}],
        "stage": [{"name": "a", "inputs": ["cam"], "service": service}],
    }


CALLS: dict[str, tuple[Callable[[int], Any], type[Exception]]] = {
    "sim spec number": (
        lambda v: parse_spec(_spec(v), base=Path("/nonexistent")),
        SpecError,
    ),
    "retention contract": (
        lambda v: validate_contract(RetentionContract(ttl_seconds=v)),
        ValidationError,
    ),
    "deadline": (lambda v: validate_deadline(v, 0.0), ValidationError),
    "retry delay": (lambda v: ExceptionPolicy(retry_delay_seconds=v), ValidationError),
    "fault pause": (lambda v: FaultInjector(0.1, seed=1, max_pause=v), ValidationError),
    "clock jitter": (lambda v: VirtualClock(seed=1, jitter=v), ValidationError),
    "mig geometry": (lambda v: smallest_profile("NVIDIA-H100-80GB-HBM3", v), ValueError),
    "node memory": (
        lambda v: NodeFixture("n", "NVIDIA-H100-80GB-HBM3", gpu_count=1, memory_gib=v),
        ValidationError,
    ),
}


@pytest.mark.parametrize("value", HUGE, ids=["+1e400", "-1e400"])
@pytest.mark.parametrize("where", sorted(CALLS))
def test_an_int_beyond_the_float_range_is_a_typed_error(where: str, value: int) -> None:
    call, error = CALLS[where]
    with pytest.raises(error):
        call(value)


@pytest.mark.parametrize("value", HUGE, ids=["+1e400", "-1e400"])
def test_the_mig_layout_refuses_it_with_a_reason(value: int) -> None:
    refusal = profile_for_memory("NVIDIA-H100-80GB-HBM3", value)
    assert isinstance(refusal, MigRefusal) and "memory_gib" in refusal.reason
