"""``pack_whole_devices``: the exhaustive per-host packing oracle for whole-device requests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet

from ..contracts.errors import ValidationError


def _check_requests(requests: Sequence[tuple[str, int]]) -> set[str]:
    seen: set[str] = set()
    for workload, count in requests:
        if workload in seen:
            raise ValidationError(
                f"duplicate workload {workload!r}", field="requests", value=workload
            )
        seen.add(workload)
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ValidationError(
                f"workload {workload!r} must need a positive integer of devices, got {count!r}",
                field="requests",
                value=count,
            )
    return seen


def _validate(
    requests: Sequence[tuple[str, int]],
    free: Mapping[str, int],
    eligible: Mapping[str, AbstractSet[str]] | None,
) -> None:
    seen = _check_requests(requests)
    for host, n in free.items():
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValidationError(
                f"host {host!r} free devices must be a non-negative integer, got {n!r}",
                field="free",
                value=n,
            )
    for workload in eligible or {}:
        if workload not in seen:
            raise ValidationError(
                f"eligible names unknown workload {workload!r}", field="eligible", value=workload
            )


def pack_whole_devices(
    requests: Sequence[tuple[str, int]],
    free: Mapping[str, int],
    eligible: Mapping[str, AbstractSet[str]] | None = None,
) -> dict[str, str] | None:
    """Exhaustive per-host packing for small inventories: each request needs ``count`` whole
    devices on one host. Returns workload → host, or None when no assignment exists.

    The independent oracle for "aggregate capacity hides per-node fragmentation" (three hosts
    with two free each can host three requests of two; two hosts with three free each cannot).
    ``eligible`` narrows the hosts a workload may take (its hard constraints); a workload
    absent from it may take any host. Searches every assignment (largest requests first,
    hosts that are interchangeable for the remaining requests tried once); exponential in the
    worst case — meant for small inventories and tests.
    """
    _validate(requests, free, eligible)
    hosts = sorted(free)
    order = sorted(requests, key=lambda r: (-r[1], r[0]))
    allowed: list[list[str]] = []
    for workload, _ in order:
        if eligible is not None and workload in eligible:
            allowed.append([h for h in hosts if h in eligible[workload]])
        else:
            allowed.append(hosts)
    # a host's "kind": which remaining workloads may use it; equal kinds and equal free are
    # interchangeable, so only the first of them is tried
    kinds = {h: tuple(h in set(a) for a in allowed) for h in hosts}
    remaining = dict(free)
    assignment: dict[str, str] = {}

    def place(i: int) -> bool:
        if i == len(order):
            return True
        workload, count = order[i]
        tried: set[tuple[int, tuple[bool, ...]]] = set()
        for host in allowed[i]:
            left = remaining[host]
            if left < count:
                continue
            key = (left, kinds[host][i:])
            if key in tried:
                continue
            tried.add(key)
            remaining[host] = left - count
            assignment[workload] = host
            if place(i + 1):
                return True
            remaining[host] = left
            del assignment[workload]
        return False

    return dict(assignment) if place(0) else None


__all__ = ["pack_whole_devices"]
