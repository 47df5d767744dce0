"""The MIG geometry oracle: tables, family matching, every problem check_layout reports,
placement search against a naive brute force, smallest_profile and its tie-breaking."""

from __future__ import annotations

import ast
import dataclasses
import itertools
import json
import math
from collections.abc import Iterator, Mapping
from importlib import resources
from pathlib import Path
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from videoflow_aio import gpu
from videoflow_aio.gpu import geometry as mg
from videoflow_aio.gpu.geometry import (
    Family,
    Profile,
    check_layout,
    families,
    family_for,
    smallest_profile,
)

H100 = "NVIDIA-H100-80GB-HBM3"
PLACEMENT = "cannot place at legal, non-overlapping start positions"


def naive_placeable(fam: Family, layout: Mapping[str, int]) -> bool:
    """Reference: try every start for every instance (no pruning, no symmetry breaking)."""
    instances = [fam.profiles[n] for n, c in layout.items() for _ in range(c)]
    for starts in itertools.product(*(p.starts for p in instances)):
        cells: set[int] = set()
        ok = True
        for p, s in zip(instances, starts, strict=True):
            span = set(range(s, s + p.memory_slices))
            if span & cells or s + p.memory_slices > fam.memory_slices:
                ok = False
                break
            cells |= span
        if ok:
            return True
    return False


def all_count_vectors(fam: Family, extra: int = 0) -> Iterator[dict[str, int]]:
    """Every layout with counts within each cap (+extra) and compute within capacity (+extra)."""
    names = list(fam.profiles)
    ranges = [range(fam.profiles[n].max_instances + 1 + extra) for n in names]
    for counts in itertools.product(*ranges):
        compute = sum(
            c * fam.profiles[n].compute_slices for n, c in zip(names, counts, strict=True)
        )
        if compute <= fam.compute_slices + extra:
            yield {n: c for n, c in zip(names, counts, strict=True) if c}


# ------------------------------------------------------------------------------------------
# tables


def test_tables_load_with_expected_families() -> None:
    keys = [f.key for f in families()]
    assert len(keys) == 16
    assert {"A100-SXM4-40GB", "A30", "H100-80GB-HBM3", "GB200", "B200", "H200"} <= set(keys)
    assert "H20" not in keys  # excluded: unverified, and a substring of H200


def test_shipped_json_is_inside_the_package() -> None:
    data = json.loads(
        resources.files("videoflow_aio.gpu").joinpath("mig_profiles.json").read_text()
    )
    assert [f["key"] for f in data["families"]] == [f.key for f in families()]


def test_null_memory_stays_unknown() -> None:
    b200 = family_for("NVIDIA-B200")
    assert b200 is not None
    assert b200.profiles["3g.90gb"].memory_gib is None
    assert b200.profiles["7g.180gb"].memory_gib is None
    assert b200.profiles["1g.23gb"].memory_gib == 20.5


def test_family_and_profile_are_frozen() -> None:
    fam = families()[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        fam.key = "x"  # type: ignore[misc]
    prof = next(iter(fam.profiles.values()))
    with pytest.raises(dataclasses.FrozenInstanceError):
        prof.max_instances = 99  # type: ignore[misc]
    assert isinstance(fam.profiles, MappingProxyType)
    with pytest.raises(TypeError):
        fam.profiles["x"] = prof  # type: ignore[index]
    assert hash(fam) == hash(fam)


@pytest.mark.parametrize("fam", families(), ids=lambda f: f.key)
def test_data_property_noncolliding_placements_fit_compute(fam: Family) -> None:
    """README: with these placements the compute sum never exceeds compute_slices for any
    non-overlapping set. Checked over every set of (profile, start) pairs that do not overlap."""
    slots = [(p, s) for p in fam.profiles.values() for s in p.starts]

    def extend(i: int, used: int, compute: int) -> None:
        assert compute <= fam.compute_slices
        for j in range(i, len(slots)):
            p, s = slots[j]
            m = ((1 << p.memory_slices) - 1) << s
            if not used & m:
                extend(j + 1, used | m, compute + p.compute_slices)

    extend(0, 0, 0)


@pytest.mark.parametrize("fam", families(), ids=lambda f: f.key)
def test_data_property_counts_imply_placement(fam: Family) -> None:
    """On the shipped tables every layout within caps, compute and memory can be placed
    (so the placement problem shows up only together with a count problem)."""
    checked = 0
    for layout in all_count_vectors(fam):
        memory = sum(fam.profiles[n].memory_slices * c for n, c in layout.items())
        if memory <= fam.memory_slices:
            assert check_layout(f"NVIDIA-{fam.key}", layout) == [], layout
            checked += 1
    assert checked > 10


# ------------------------------------------------------------------------------------------
# family_for


@pytest.mark.parametrize(
    ("product", "key"),
    [
        ("NVIDIA-GB200", "GB200"),
        ("NVIDIA-B200", "B200"),
        ("NVIDIA-GH200-480GB", "GH200-480GB"),
        ("NVIDIA-GH200-144G-HBM3e", "GH200-144G-HBM3e"),
        ("NVIDIA-H200", "H200"),
        ("NVIDIA-H200-NVL", "H200"),
        ("NVIDIA-H20", None),
        ("NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", "H100-80GB-HBM3"),
        ("NVIDIA-A100-SXM4-40GB-MIG-INVALID", "A100-SXM4-40GB"),
        ("A100-SXM4-40GB", "A100-SXM4-40GB"),
        ("NVIDIA A100 80GB PCIe", "A100-80GB-PCIe"),
        ("nvidia-h100-nvl", "H100-NVL"),
        ("NVIDIA-H100-80GB-HBM3-SHARED", "H100-80GB-HBM3"),
        ("NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition", "RTX-PRO-6000-Blackwell"),
        ("NVIDIA-A30", "A30"),
        ("NVIDIA-Tesla-T4", None),
        ("", None),
    ],
)
def test_family_for(product: str, key: str | None) -> None:
    fam = family_for(product)
    assert (fam.key if fam else None) == key


def test_family_for_drops_the_mig_suffix_before_matching() -> None:
    # the profile text after -MIG- never selects a family
    assert family_for("SOMETHING-MIG-A30") is None


@pytest.mark.parametrize("fam", families(), ids=lambda f: f.key)
def test_every_key_resolves_to_itself(fam: Family) -> None:
    assert family_for(f"NVIDIA-{fam.key}") is fam
    assert family_for(f"NVIDIA-{fam.key}-MIG-1g.5gb") is fam


# ------------------------------------------------------------------------------------------
# check_layout: each problem on its own


def test_unknown_product_is_the_only_problem() -> None:
    assert check_layout("NVIDIA-Tesla-T4", {"1g.5gb": -3}) == [
        "unknown product 'NVIDIA-Tesla-T4': no MIG family key matches"
    ]


def test_unknown_profile() -> None:
    assert check_layout(H100, {"1g.5gb": 1}) == [
        "unknown profile '1g.5gb' for family H100-80GB-HBM3"
    ]
    # names are per family: 1g.10gb is a 2-slice 1g on A100 40GB, a 1-slice 1g on H100
    assert check_layout("NVIDIA-A100-SXM4-40GB", {"1g.10gb": 5}) != []
    assert check_layout(H100, {"1g.10gb": 5}) == []


def test_negative_and_non_integer_counts() -> None:
    assert check_layout(H100, {"1g.10gb": -1}) == ["negative count -1 for profile '1g.10gb'"]
    probs = check_layout(H100, {"1g.10gb": 1.0, "2g.20gb": True})  # type: ignore[dict-item]
    assert probs == [
        "count for profile '1g.10gb' is not an integer: 1.0",
        "count for profile '2g.20gb' is not an integer: True",
    ]


def test_instance_cap_alone() -> None:
    assert check_layout(H100, {"1g.10gb+me": 2}) == [
        "instance cap exceeded: 2 x 1g.10gb+me on one card, at most 1"
    ]
    assert check_layout(H100, {"1g.10gb+me": 1, "1g.10gb": 6}) == []


def test_compute_over_capacity_alone() -> None:
    # 4 + 2 + 2 = 8 compute slices of 7, while memory 4 + 2 + 2 = 8 of 8 is within capacity
    # (placement fails as well: after 4g@0 and 2g@4, a 2g may not start at 6)
    probs = check_layout(H100, {"4g.40gb": 1, "2g.20gb": 2})
    assert probs[0] == "compute over capacity: 8 compute slices requested, H100-80GB-HBM3 has 7"
    assert not any(p.startswith("memory") for p in probs)


def test_memory_over_capacity_reports_placement_too() -> None:
    probs = check_layout(H100, {"1g.20gb": 4, "1g.10gb": 3})
    assert probs == [
        "memory over capacity: 11 memory slices requested, H100-80GB-HBM3 has 8",
        f"{PLACEMENT}: 4 x 1g.20gb, 3 x 1g.10gb on H100-80GB-HBM3",
    ]


def test_zero_counts_and_empty_layout_are_fine() -> None:
    assert check_layout(H100, {}) == []
    assert check_layout(H100, {"7g.80gb": 0, "1g.10gb": 0}) == []


def test_placement_needs_search_not_first_fit() -> None:
    # 3g@0 leaves only 2g@4 (2g may not start at 6); 3g@4 + 2g@0 + 2g@2 works
    assert check_layout(H100, {"3g.40gb": 1, "2g.20gb": 2}) == []
    assert check_layout(H100, {"1g.20gb": 3, "1g.10gb": 2}) == []  # 1g.10gb may not start at 7


# a synthetic card where counts fit but placement does not (the shipped tables have none)
SYNTH = Family(
    key="SYNTH-CARD",
    compute_slices=4,
    memory_slices=4,
    memory_gib=40.0,
    profiles=MappingProxyType(
        {
            "mid": Profile("mid", 1, 2, 20.0, 1, (1,)),
            "pair": Profile("pair", 1, 2, 20.0, 2, (0, 2)),
            "one": Profile("one", 1, 1, 10.0, 4, (0, 1, 2, 3)),
            "tail": Profile("tail", 1, 1, 10.0, 4, (1, 2, 3)),
        }
    ),
)


@pytest.fixture
def synthetic_tables(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    shipped = mg.families()
    monkeypatch.setattr(mg, "families", lambda: (*shipped, SYNTH))
    family_for.cache_clear()
    yield
    family_for.cache_clear()


@pytest.mark.usefixtures("synthetic_tables")
def test_counts_fit_but_placement_fails_on_synthetic_card() -> None:
    assert family_for("SYNTH-CARD") is SYNTH
    assert check_layout("SYNTH-CARD", {"mid": 1, "pair": 1}) == [
        f"{PLACEMENT}: 1 x mid, 1 x pair on SYNTH-CARD"
    ]
    assert check_layout("SYNTH-CARD", {"mid": 1, "one": 2}) == []
    assert check_layout("SYNTH-CARD", {"mid": 1, "one": 1, "tail": 1}) == []
    assert check_layout("SYNTH-CARD", {"mid": 1, "tail": 2}) != []  # tail cannot use slice 0


@pytest.mark.usefixtures("synthetic_tables")
def test_placement_matches_naive_bruteforce_on_synthetic_card() -> None:
    for layout in all_count_vectors(SYNTH, extra=1):
        probs = check_layout("SYNTH-CARD", layout)
        placed = not any(p.startswith(PLACEMENT) for p in probs)
        assert placed == naive_placeable(SYNTH, layout), layout


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_placement_matches_naive_bruteforce(data: st.DataObject) -> None:
    fam = data.draw(st.sampled_from(families()))
    layout = data.draw(
        st.dictionaries(st.sampled_from(sorted(fam.profiles)), st.integers(0, 3), max_size=4)
    )
    if sum(layout.values()) > 8:
        return
    probs = check_layout(f"NVIDIA-{fam.key}", layout)
    placed = not any(p.startswith(PLACEMENT) for p in probs)
    assert placed == naive_placeable(fam, layout)


def test_check_layout_does_not_mutate_its_input() -> None:
    layout = {"1g.10gb": 2, "2g.20gb": 1}
    check_layout(H100, layout)
    assert layout == {"1g.10gb": 2, "2g.20gb": 1}


# ------------------------------------------------------------------------------------------
# smallest_profile


def test_smallest_profile_rules() -> None:
    def name(product: str, gib: float) -> str | None:
        p = smallest_profile(product, gib)
        return p.name if p else None

    assert name(H100, 0) == "1g.10gb"  # plain before +me at equal memory and slices
    assert name(H100, 9.76) == "1g.20gb"  # 1g.10gb has 9.75 GiB: names are not capacities
    assert name(H100, 19.62) == "1g.20gb"  # fewer compute slices than 2g.20gb
    assert name(H100, 20) == "3g.40gb"  # fewer compute slices than 4g.40gb
    assert name(H100, 79.25) == "7g.80gb"
    assert name(H100, 79.26) is None
    assert name("NVIDIA-B200", 44.25) == "1g.45gb"
    assert name("NVIDIA-B200", 44.26) is None  # 3g/4g/7g memory unknown: never chosen
    assert name("NVIDIA-GB200", 100) is None
    assert name("NVIDIA-RTX-PRO-6000-Blackwell", 1) == "1g.24gb"  # not +gfx/-me/+me.all
    assert name("NVIDIA-H20", 1) is None


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_smallest_profile_rejects_bad_requests(bad: float) -> None:
    with pytest.raises(ValueError, match="memory_gib"):
        smallest_profile(H100, bad)


@settings(max_examples=200, deadline=None)
@given(fam=st.sampled_from(families()), gib=st.floats(0, 200))
def test_smallest_profile_is_minimal(fam: Family, gib: float) -> None:
    chosen = smallest_profile(f"NVIDIA-{fam.key}", gib)
    fitting = [p for p in fam.profiles.values() if p.memory_gib is not None and p.memory_gib >= gib]
    if chosen is None:
        assert fitting == []
    else:
        assert chosen.memory_gib is not None and chosen.memory_gib >= gib
        assert all(p.memory_gib is not None and chosen.memory_gib <= p.memory_gib for p in fitting)


# ------------------------------------------------------------------------------------------
# independence


def test_oracle_imports_nothing_from_the_planner() -> None:
    """The oracle shares no code with the planner it audits: no import of ``gpu.layout`` or
    ``gpu.placement``, indeed nothing from this package at all (only the data file)."""
    tree = ast.parse(Path(mg.__file__).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, "relative import into the package"
            assert "videoflow" not in (node.module or ""), node.module
        elif isinstance(node, ast.Import):
            assert all("videoflow" not in a.name for a in node.names)


def test_seed_names_are_the_gpu_package_objects() -> None:
    from videoflow_aio.memory import mig_geometry as seed

    for name in ("Family", "Profile", "check_layout", "families", "family_for", "smallest_profile"):
        assert getattr(seed, name) is getattr(mg, name) is getattr(gpu, name), name
    assert sorted(seed.__all__) == sorted(mg.__all__)


@settings(max_examples=200, deadline=None)
@given(
    product=st.one_of(
        st.sampled_from([f"NVIDIA-{f.key}" for f in families()]), st.text(max_size=30)
    ),
    layout=st.dictionaries(
        st.one_of(
            st.text(max_size=12), st.sampled_from(["1g.10gb", "3g.40gb", "7g.80gb", "1g.5gb"])
        ),
        st.one_of(st.integers(-(10**12), 10**12), st.floats(allow_nan=True), st.booleans()),
        max_size=6,
    ),
)
def test_check_layout_never_raises(product: str, layout: dict[str, int]) -> None:
    problems = check_layout(product, layout)
    assert isinstance(problems, list) and all(isinstance(p, str) for p in problems)
    fam = family_for(product)
    valid = fam is not None and all(
        isinstance(c, int) and not isinstance(c, bool) and c >= 0 and n in fam.profiles
        for n, c in layout.items()
    )
    if not valid:
        assert problems != []
