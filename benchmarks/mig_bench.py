"""MIG oracle and planner throughput, each figure next to its anchor.

    .venv/bin/python benchmarks/mig_bench.py [--seconds 1.0]

Anchors: ``check_layout`` >= 20,000 layouts/s (issue 6); ``plan_node`` has no anchor of its
own, the allocation benchmark's 50 ms per plan over 1,000 nodes is the budget it lives in.
``check_layout_rate()`` and ``plan_node_rate()`` can be imported by other benchmarks
(``sys.path`` must include this directory).
"""

from __future__ import annotations

import argparse
import itertools
import random
import time
from collections.abc import Callable, Sequence

from videoflow_aio.gpu.geometry import Family, check_layout, families
from videoflow_aio.gpu.layout import SEARCH_BUDGET, MigRefusal, plan_card, plan_node

CHECK_LAYOUT_ANCHOR = 20_000.0  # layouts/s, issue 6


def _valid_layouts(fam: Family) -> list[dict[str, int]]:
    """Every layout of ``fam`` within caps and compute (valid or over memory): realistic input."""
    names = list(fam.profiles)
    out = []
    for counts in itertools.product(*(range(fam.profiles[n].max_instances + 1) for n in names)):
        compute = sum(
            c * fam.profiles[n].compute_slices for n, c in zip(names, counts, strict=True)
        )
        if 0 < compute <= fam.compute_slices and sum(counts) <= 8:
            out.append({n: c for n, c in zip(names, counts, strict=True) if c})
    return out


def realistic_layouts(seed: int = 6) -> list[tuple[str, dict[str, int]]]:
    """(product, layout) pairs over every family, shuffled: mostly valid, some over memory."""
    pairs: list[tuple[str, dict[str, int]]] = []
    for fam in families():
        pairs += [(f"NVIDIA-{fam.key}", layout) for layout in _valid_layouts(fam)]
    random.Random(seed).shuffle(pairs)
    return pairs


def _rate(call: Callable[[int], object], items: int, seconds: float) -> float:
    done = 0
    start = time.perf_counter()  # wall-clock: a throughput benchmark measures wall time
    while True:
        for i in range(items):
            call(i)
        done += items
        elapsed = time.perf_counter() - start  # wall-clock: as above
        if elapsed >= seconds:
            return done / elapsed


def check_layout_rate(
    seconds: float = 1.0, pairs: Sequence[tuple[str, dict[str, int]]] = ()
) -> float:
    """check_layout calls per wall second over realistic layouts of every family."""
    pairs = pairs or realistic_layouts()
    return _rate(lambda i: check_layout(*pairs[i]), len(pairs), seconds)


def node_requests(
    seed: int = 6, nodes: int = 200
) -> list[tuple[str, int, list[str], list[dict[str, int]]]]:
    """Random 8-GPU nodes with some existing geometry and 1-12 requests each."""
    rng = random.Random(seed)
    out = []
    for _ in range(nodes):
        fam = rng.choice(families())
        plain = [
            n for n in fam.profiles if "+" not in n and "-" not in n and not n.startswith("7g")
        ]
        existing = [{rng.choice(plain): 1} if rng.random() < 0.4 else {} for _ in range(8)]
        requests = [rng.choice(plain) for _ in range(rng.randint(1, 12))]
        out.append((f"NVIDIA-{fam.key}", 8, requests, existing))
    return out


def plan_node_rate(seconds: float = 1.0) -> float:
    """plan_node calls per wall second on random 8-GPU nodes (planner caches warm)."""
    cases = node_requests()
    return _rate(lambda i: plan_node(*cases[i]), len(cases), seconds)


def hard_nodes(
    seed: int = 5, per_family: int = 300
) -> list[tuple[str, int, list[str], list[dict[str, int]]]]:
    """8-card nodes, half the cards holding one instance, 10-40 requests of any profile
    (variants included): many refusals, some that need the assignment search."""
    rng = random.Random(seed)
    out = []
    for fam in families():
        names = list(fam.profiles)
        for _ in range(per_family):
            existing = [{rng.choice(names): 1} if rng.random() < 0.5 else {} for _ in range(8)]
            requests = [rng.choice(names) for _ in range(rng.randint(10, 40))]
            out.append((f"NVIDIA-{fam.key}", 8, requests, existing))
    return out


def hard_node_figures() -> tuple[float, float, int, int]:
    """(mean us, max us, search-budget refusals, 'cannot pack' refusals) over hard_nodes()."""
    times = []
    budget = packs = 0
    for args in hard_nodes():
        start = time.perf_counter()  # wall-clock: per-call latency of the planner
        result = plan_node(*args)
        times.append(time.perf_counter() - start)  # wall-clock: as above
        if isinstance(result, MigRefusal) and result.reason.startswith("cannot pack"):
            packs += 1
            budget += "search budget" in result.reason
    return 1e6 * sum(times) / len(times), 1e6 * max(times), budget, packs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args()
    pairs = realistic_layouts()
    valid = sum(1 for p, layout in pairs if not check_layout(p, layout))
    rate = check_layout_rate(args.seconds, pairs)
    print(
        f"check_layout      {rate:>12,.0f} layouts/s   anchor {CHECK_LAYOUT_ANCHOR:>9,.0f}"
        f"   ratio {rate / CHECK_LAYOUT_ANCHOR:6.1f}x   ({len(pairs)} layouts, {valid} valid)"
    )
    cards = [(p, [n for n, c in layout.items() for _ in range(c)]) for p, layout in pairs]
    card_rate = _rate(lambda i: plan_card(*cards[i]), len(cards), args.seconds)
    print(f"plan_card         {card_rate:>12,.0f} calls/s     (same layouts as requests)")
    node_rate = plan_node_rate(args.seconds)
    per_node_us = 1e6 / node_rate
    print(
        f"plan_node         {node_rate:>12,.0f} calls/s     {per_node_us:.1f} us per 8-GPU node "
        f"with 1-12 requests (1,000 such calls: {per_node_us:.0f} ms)"
    )
    mean_us, max_us, budget, packs = hard_node_figures()
    print(
        f"plan_node (hard) {mean_us:>9.1f} us mean, {max_us / 1000:.1f} ms max over "
        f"{len(hard_nodes())} 8-card nodes; {packs} 'cannot pack' refusals, {budget} of them "
        f"after the {SEARCH_BUDGET}-step search budget (conservative)"
    )


if __name__ == "__main__":
    main()
