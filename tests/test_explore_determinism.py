"""Same seed, same run: every conformance case on the memory models and every property,
run twice under the same seed (with jitter and injected faults), gives identical logs,
outcomes and virtual times, on asyncio and on trio."""

from __future__ import annotations

import pytest

from videoflow_aio import explore

TARGETS = explore.select_targets()


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize(("seed", "jitter", "faults"), [(3, 0.0, 0.0), (17, 0.001, 0.05)])
def test_every_memory_case_and_property_replays_byte_for_byte(
    backend: str, seed: int, jitter: float, faults: float
) -> None:
    differ = []
    logged = 0
    for target in TARGETS:
        first = explore.run_target(target, backend, seed, jitter=jitter, fault_rate=faults)
        again = explore.run_target(target, backend, seed, jitter=jitter, fault_rate=faults)
        if first.fingerprint() != again.fingerprint():
            differ.append(target.id)
        logged += len(first.log) > 0
    assert not differ, f"not reproducible under seed {seed} on {backend}: {differ}"
    assert logged > len(TARGETS) // 2  # most runs leave a log to compare
