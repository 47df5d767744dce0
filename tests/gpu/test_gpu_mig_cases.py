"""The MIG cases MIG-001 … MIG-010: the geometry oracle and the planner it audits.

Pure functions of the shipped tables (``gpu/mig_profiles.json``): they open no backend, so
they are plain tests of :mod:`videoflow_aio.gpu`, not conformance cases run per provider. Their
IDs are stable and published: each test's name starts with it (``test_mig_003_…``, select with
``-k mig_003``) and ``MIG_CASES`` maps every ID to its test.
"""

from __future__ import annotations

from collections.abc import Callable

from _mig_audit import ALL_BALANCED, audit_card, audit_node
from videoflow_aio.gpu.geometry import check_layout, families, family_for, smallest_profile
from videoflow_aio.gpu.layout import CONSERVATIVE, MigRefusal, NodeMigPlan, plan_card, plan_node
from videoflow_aio.gpu.layout import profile_for_memory as planner_profile_for_memory


def _product(key: str) -> str:
    return f"NVIDIA-{key}"


def _one_slice_1g(key: str) -> str:
    return next(n for n, c in ALL_BALANCED[key].items() if n.startswith("1g") and c == 2)


def test_mig_001_all_balanced_accepted() -> None:
    """MIG-001: the mig-parted all-balanced layout of every family is accepted."""
    keys = [f.key for f in families()]
    assert sorted(set(keys) - set(ALL_BALANCED)) == [], "families without an all-balanced entry"
    for key in keys:
        layout = ALL_BALANCED[key]
        fam = family_for(_product(key))
        assert fam is not None and fam.key == key, f"family of {_product(key)}"
        assert check_layout(_product(key), layout) == [], f"problems of all-balanced on {key}"
        expected = 4 if fam.compute_slices == 7 else 3
        assert sum(layout.values()) == expected, f"all-balanced size on {key}"


def test_mig_002_unplaceable_rejected() -> None:
    """MIG-002: a layout that fits by compute-slice count but cannot be placed is rejected
    for placement."""
    seen = 0
    for fam in families():
        if fam.compute_slices != 7:
            continue  # on 4-slice parts compute and memory slices coincide per profile
        one = _one_slice_1g(fam.key)
        two = next(
            p.name
            for p in fam.profiles.values()
            if p.compute_slices == 1 and p.memory_slices == 2 and "+" not in p.name
        )
        layout = {two: 4, one: 3}  # 7 compute slices of 7, 11 memory slices of 8
        compute = sum(fam.profiles[n].compute_slices * c for n, c in layout.items())
        assert compute == fam.compute_slices, f"compute slices of {layout} on {fam.key}"
        problems = check_layout(_product(fam.key), layout)
        assert any(
            p.startswith("cannot place at legal, non-overlapping start positions") for p in problems
        ), f"{fam.key}: no placement problem in {problems}"
        assert any(p.startswith("memory over capacity") for p in problems), problems
        assert not any(p.startswith("compute over capacity") for p in problems), (
            f"{fam.key}: compute wrongly reported over capacity: {problems}"
        )
        seen += 1
    assert seen > 0, "no 7-slice family in the tables"


def test_mig_003_placement_searched() -> None:
    """MIG-003: placement is searched: 3g + 2 x 2g fits only with the 3g at its second start."""
    for fam in families():
        if fam.compute_slices != 7:
            continue
        three = next(n for n in ALL_BALANCED[fam.key] if n.startswith("3g"))
        two = next(n for n in ALL_BALANCED[fam.key] if n.startswith("2g"))
        assert fam.profiles[three].starts == (0, 4), f"{fam.key} {three} starts"
        assert fam.profiles[two].starts == (0, 2, 4), f"{fam.key} {two} starts"
        # first-fit at the lowest start (3g@0, 2g@4, 2g@?) fails; 3g@4, 2g@0, 2g@2 works
        assert check_layout(_product(fam.key), {three: 1, two: 2}) == [], f"{fam.key} 3g+2x2g"
        assert check_layout(_product(fam.key), {three: 1, two: 3}) != [], (
            f"{fam.key}: 3g + 3 x 2g accepted"
        )


def test_mig_004_family_longest_key() -> None:
    """MIG-004: family_for matches the longest key (GB200 vs B200, GH200 vs H200, H20 vs
    H200)."""
    expect = {
        "NVIDIA-GB200": "GB200",
        "NVIDIA-B200": "B200",
        "NVIDIA-B200-MIG-1g.23gb": "B200",
        "NVIDIA-GH200-480GB": "GH200-480GB",
        "NVIDIA-GH200-144G-HBM3e": "GH200-144G-HBM3e",
        "NVIDIA-H200": "H200",
        "NVIDIA-H200-NVL": "H200",
        "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb": "H100-80GB-HBM3",
        "NVIDIA-H100-NVL": "H100-NVL",
        "A100-SXM4-40GB": "A100-SXM4-40GB",
        "A100-SXM4-40GB-MIG-1g.5gb": "A100-SXM4-40GB",
        "NVIDIA A100 80GB PCIe": "A100-80GB-PCIe",
        "NVIDIA-A30": "A30",
        "NVIDIA-RTX-PRO-6000-Blackwell-Max-Q-Workstation-Edition": "RTX-PRO-6000-Blackwell",
    }
    for product, key in expect.items():
        fam = family_for(product)
        assert (fam.key if fam else None) == key, f"family_for({product!r})"
    for product in ("NVIDIA-H20", "NVIDIA-B300-SXM6-AC", "NVIDIA-Tesla-T4", ""):
        assert family_for(product) is None, f"family_for({product!r})"
    assert check_layout("NVIDIA-H20", {"1g.12gb": 1}) == [
        "unknown product 'NVIDIA-H20': no MIG family key matches"
    ]


def test_mig_005_smallest_profile_rule() -> None:
    """MIG-005: smallest_profile: least memory that suffices, unknown memory never chosen."""
    h100 = "NVIDIA-H100-80GB-HBM3"

    def name(product: str, gib: float) -> str | None:
        p = smallest_profile(product, gib)
        return p.name if p else None

    assert name(h100, 0) == "1g.10gb", "0 GiB on H100 (plain profile before 1g.10gb+me)"
    assert name(h100, 9.75) == "1g.10gb", "9.75 GiB on H100"
    assert name(h100, 10) == "1g.20gb", "10 GiB on H100 (1g.10gb has 9.75 GiB)"
    assert name(h100, 19.62) == "1g.20gb", "19.62 GiB on H100 (1 compute slice before 2g.20gb)"
    assert name(h100, 20) == "3g.40gb", "20 GiB on H100 (3g before 4g)"
    assert name(h100, 80) is None, "80 GiB on H100 (7g.80gb has 79.25)"
    assert name("NVIDIA-B200", 44) == "1g.45gb", "44 GiB on B200"
    assert name("NVIDIA-B200", 45) is None, "45 GiB on B200: 3g/4g/7g memory unknown"
    assert name("NVIDIA-H20", 1) is None, "unknown product"
    for fam in families():
        for gib in (1.0, 10.0, 20.0, 40.0, 70.0, 100.0):
            p = smallest_profile(_product(fam.key), gib)
            if p is None:
                continue
            assert p.memory_gib is not None and p.memory_gib >= gib, f"{fam.key} {gib}: {p}"
            smaller = [
                q
                for q in fam.profiles.values()
                if q.memory_gib is not None and gib <= q.memory_gib < p.memory_gib
            ]
            assert smaller == [], f"profiles smaller than {p} that fit {gib} GiB on {fam.key}"


def test_mig_006_every_problem() -> None:
    """MIG-006: check_layout reports every problem: unknown profile, negative count, caps,
    compute, memory."""
    problems = check_layout(
        "NVIDIA-H100-80GB-HBM3", {"9g.99gb": 1, "1g.20gb": -1, "7g.80gb": 2, "1g.10gb+me": 2}
    )
    for prefix in (
        "unknown profile '9g.99gb'",
        "negative count -1 for profile '1g.20gb'",
        "instance cap exceeded: 2 x 7g.80gb",
        "instance cap exceeded: 2 x 1g.10gb+me",
        "memory over capacity",
        "compute over capacity",
        "cannot place at legal, non-overlapping start positions",
    ):
        assert any(p.startswith(prefix) for p in problems), f"{prefix!r} missing from {problems}"
    assert check_layout("NVIDIA-H100-80GB-HBM3", {}) == [], "the empty layout"
    assert check_layout("NVIDIA-H100-80GB-HBM3", {"7g.80gb": 1, "1g.10gb": 0}) == [], "7g + 0"
    assert check_layout("NVIDIA-A30", {"1g.6gb": 4}) == [], "4 x 1g.6gb on A30"


def test_mig_007_planner_layouts_pass() -> None:
    """MIG-007: every layout the planner returns passes the oracle."""
    for fam in families():
        product = _product(fam.key)
        balanced = [n for n, c in ALL_BALANCED[fam.key].items() for _ in range(c)]
        card = plan_card(product, balanced)
        assert not isinstance(card, MigRefusal), f"{fam.key}: plan_card refused {card}"
        bugs, _ = audit_card(product, balanced, None, card)
        assert bugs == [], f"plan_card audit on {fam.key}"
        requests = balanced * 2 + [_one_slice_1g(fam.key)]
        node = plan_node(product, 4, requests, [ALL_BALANCED[fam.key]])
        assert isinstance(node, NodeMigPlan), f"{fam.key}: plan_node refused {node}"
        bugs, _ = audit_node(product, 4, requests, [ALL_BALANCED[fam.key]], node)
        assert bugs == [], f"plan_node audit on {fam.key}"


def test_mig_008_planner_refusals_true() -> None:
    """MIG-008: every planner refusal gives the true reason."""
    h100 = "NVIDIA-H100-80GB-HBM3"
    card_cases: list[tuple[str, list[str], dict[str, int] | None, str]] = [
        ("NVIDIA-H20", ["1g.12gb"], None, "no family for product"),
        (h100, ["1g.12gb"], None, "unknown profile"),
        (h100, ["1g.10gb"], {"1g.10gb": -1}, "existing: negative count"),
        (h100, ["7g.80gb", "7g.80gb"], None, "instance cap"),
        (h100, ["4g.40gb", "3g.40gb", "1g.10gb"], None, "compute slices exhausted"),
        (h100, ["1g.20gb"] * 4 + ["1g.10gb"] * 3, None, "memory slices exhausted"),
        (h100, ["3g.40gb"], {"3g.40gb": 1, "1g.20gb": 2}, "compute slices exhausted"),
    ]
    for product, profiles, existing, expected in card_cases:
        result = plan_card(product, profiles, existing)
        assert isinstance(result, MigRefusal), f"plan_card{(product, profiles, existing)}"
        assert result.reason.startswith(expected), (result.reason, expected)
        assert CONSERVATIVE not in result.reason, f"exact refusal marked conservative: {result}"
        bugs, _ = audit_card(product, profiles, existing, result)
        assert bugs == [], f"audit of {result.reason!r}"
    node_cases: list[tuple[int, list[str], list[dict[str, int]], str]] = [
        (2, ["7g.80gb"] * 3, [], "instance cap"),
        (2, ["7g.80gb"], [{"1g.10gb": 1}, {"1g.10gb": 1}], "no card can host 7g.80gb"),
        (
            2,
            ["4g.40gb", "4g.40gb", "3g.40gb", "3g.40gb", "1g.10gb"],
            [],
            "compute slices exhausted",
        ),
        (1, ["3g.40gb"] * 2 + ["1g.10gb"], [], "memory slices exhausted"),
        (1, [], [{"1g.10gb": 1}, {}], "existing describes 2 cards"),
        (2, ["1g.10gb"], [{"7g.80gb": 2}], "existing card 0 is not a valid layout"),
    ]
    for gpus, requests, existing_cards, expected in node_cases:
        node = plan_node(h100, gpus, requests, existing_cards)
        assert isinstance(node, MigRefusal), f"plan_node{(gpus, requests, existing_cards)}"
        assert node.reason.startswith(expected), (node.reason, expected)
        bugs, _ = audit_node(h100, gpus, requests, existing_cards, node)
        assert bugs == [], f"audit of {node.reason!r}"


def test_mig_009_planner_memory_agrees() -> None:
    """MIG-009: the planner turns memory into the oracle's smallest profile."""
    for fam in families():
        product = _product(fam.key)
        for tenths in range(0, 2000, 7):
            gib = tenths / 10
            oracle = smallest_profile(product, gib)
            planner = planner_profile_for_memory(product, gib)
            if oracle is None:
                assert isinstance(planner, MigRefusal), f"{fam.key} {gib} GiB: planner {planner}"
            else:
                assert planner == oracle.name, f"profile for {gib} GiB on {fam.key}"
    refusal = planner_profile_for_memory("NVIDIA-B200", 50)
    assert isinstance(refusal, MigRefusal), refusal
    assert "memory unknown for 3g.90gb" in refusal.reason, refusal


def test_mig_010_planner_packs_what_fits() -> None:
    """MIG-010: the planner packs a node when some assignment fits, and proves it when none
    does."""
    for fam in families():
        if fam.compute_slices != 7:
            continue
        product = _product(fam.key)
        three = next(n for n in ALL_BALANCED[fam.key] if n.startswith("3g"))
        two = next(n for n in ALL_BALANCED[fam.key] if n.startswith("2g"))
        four = next(p.name for p in fam.profiles.values() if p.compute_slices == 4)
        # two 3g side by side strand a 2g; 3g + 2 x 2g per card is the only way
        fits = [two, two, three, two, three, two]
        plan = plan_node(product, 2, fits)
        assert isinstance(plan, NodeMigPlan), f"{fam.key}: refused {plan}"
        bugs, _ = audit_node(product, 2, fits, [], plan)
        assert bugs == [], f"audit of {fits} on 2 x {fam.key}"
        # 4g is capped at one per card: 3 compute slices remain per card, one 2g each
        tight = [two, four, two, four, two]
        refusal = plan_node(product, 2, tight)
        assert isinstance(refusal, MigRefusal), f"{fam.key}: expected a refusal, got {refusal}"
        assert CONSERVATIVE not in refusal.reason, f"{fam.key}: not exact: {refusal}"
        bugs, conservative = audit_node(product, 2, tight, [], refusal)
        assert (bugs, conservative) == ([], False), f"audit of {tight} on 2 x {fam.key}"


MIG_CASES: dict[str, Callable[[], None]] = {
    f"MIG-{name[9:12]}": test
    for name, test in dict(globals()).items()
    if name.startswith("test_mig_") and callable(test)
}
"""Stable ID → its test: the published IDs MIG-001 … MIG-010, each still checked here."""


def test_every_published_mig_id_is_here() -> None:
    assert sorted(MIG_CASES) == [f"MIG-{i:03d}" for i in range(1, 11)]
    for case_id, test in MIG_CASES.items():
        assert (test.__doc__ or "").startswith(f"{case_id}: "), case_id


def test_node_bound_refusals_state_the_node_totals() -> None:
    """A node-wide refusal's figures are the node's: needed, and what all its cards have
    (found by cosmic-ray: a wrong total in the reason went unnoticed)."""
    h100 = "NVIDIA-H100-80GB-HBM3"
    compute = plan_node(h100, 2, ["4g.40gb", "4g.40gb", "3g.40gb", "3g.40gb", "1g.10gb"])
    assert isinstance(compute, MigRefusal)
    assert "15 needed" in compute.reason and compute.reason.endswith("have 14"), compute
    memory = plan_node(h100, 2, ["3g.40gb"] * 4 + ["1g.10gb"])
    assert isinstance(memory, MigRefusal)
    assert "17 needed" in memory.reason and memory.reason.endswith("have 16"), memory
