"""The MIG planner (gpu/layout.py), audited against the oracle (gpu/geometry.py).

Exhaustive on every family of the shipped tables: every plan_card answer over all count
vectors (caps + 1, compute + 1), and every plan_node answer for small request multisets on one
and two cards with a few existing layouts. Returned layouts must pass check_layout; exact
refusals must be confirmed by the oracle (category and infeasibility); conservative refusals
must say so, and on the shipped tables there must be none where the oracle finds a way.
Mutation tests show the audit catches a planner that skips a check or lies about the reason.
"""

from __future__ import annotations

import ast
import dataclasses
import itertools
import random
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _mig_audit import ALL_BALANCED, audit_card, audit_node, node_feasible
from videoflow_aio.gpu import layout as mig
from videoflow_aio.gpu.geometry import Family, families, family_for, smallest_profile
from videoflow_aio.gpu.layout import (
    CONSERVATIVE,
    MigRefusal,
    NodeMigPlan,
    plan_card,
    plan_node,
    profile_for_memory,
)

H100 = "NVIDIA-H100-80GB-HBM3"


#: the cache itself, held here: tests monkeypatch ``mig._verdict_cached``, and an autouse
#: fixture's monkeypatch (tests/conftest.py) is undone only after this module's fixtures
_VERDICT_CACHE = mig._verdict_cached


@pytest.fixture
def fresh_cache() -> Iterator[None]:
    _VERDICT_CACHE.cache_clear()
    yield
    _VERDICT_CACHE.cache_clear()


def product(fam: Family) -> str:
    return f"NVIDIA-{fam.key}"


def count_vectors(fam: Family) -> Iterator[dict[str, int]]:
    """Every layout with counts up to cap + 1 and compute up to capacity + 1."""
    profiles = list(fam.profiles.values())
    limit = fam.compute_slices + 1

    def go(i: int, compute: int, layout: dict[str, int]) -> Iterator[dict[str, int]]:
        if i == len(profiles):
            yield dict(layout)
            return
        p = profiles[i]
        for c in range(p.max_instances + 2):
            if compute + c * p.compute_slices > limit:
                break
            if c:
                layout[p.name] = c
            yield from go(i + 1, compute + c * p.compute_slices, layout)
        layout.pop(p.name, None)

    yield from go(0, 0, {})


def expand(layout: dict[str, int]) -> list[str]:
    return [n for n, c in layout.items() for _ in range(c)]


# ------------------------------------------------------------------------------------------
# API shape


def test_structs_are_frozen_and_encode() -> None:
    plan = plan_node(H100, 1, ["1g.10gb"])
    assert isinstance(plan, NodeMigPlan)
    assert plan == NodeMigPlan(({"1g.10gb": 1},), (0,))
    with pytest.raises(AttributeError):
        plan.assignment = ()  # type: ignore[misc]
    refusal = MigRefusal("x")
    assert msgspec.json.decode(msgspec.json.encode(refusal), type=MigRefusal) == refusal
    assert msgspec.json.decode(msgspec.json.encode(plan), type=NodeMigPlan) == plan


def test_empty_and_padding() -> None:
    assert plan_node(H100, 0, []) == NodeMigPlan((), ())
    assert plan_node(H100, 2, [], [{"1g.10gb": 1, "2g.20gb": 0}]) == NodeMigPlan(
        ({"1g.10gb": 1}, {}), ()
    )
    assert plan_card(H100, []) == {}
    assert plan_card(H100, [], {"7g.80gb": 1}) == {"7g.80gb": 1}


def test_existing_is_not_mutated() -> None:
    existing = [{"3g.40gb": 1}, {}]
    plan = plan_node(H100, 2, ["3g.40gb", "4g.40gb"], existing)
    assert isinstance(plan, NodeMigPlan)
    assert existing == [{"3g.40gb": 1}, {}]
    assert plan.layouts == ({"3g.40gb": 2}, {"4g.40gb": 1}) or plan.layouts == (
        {"3g.40gb": 1, "4g.40gb": 1},
        {"3g.40gb": 1},
    )


def test_assignment_is_in_request_order() -> None:
    plan = plan_node(H100, 2, ["1g.10gb", "7g.80gb", "1g.10gb"])
    assert isinstance(plan, NodeMigPlan)
    big = plan.assignment[1]
    assert plan.layouts[big] == {"7g.80gb": 1}
    assert plan.assignment[0] == plan.assignment[2] == 1 - big


def test_requests_on_a_node_with_no_cards() -> None:
    refusal = plan_node(H100, 0, ["1g.10gb"])
    assert refusal == MigRefusal("the node has no GPUs for 1 MIG requests")
    bugs, _ = audit_node(H100, 0, ["1g.10gb"], [], refusal)
    assert bugs == []


@pytest.mark.parametrize(
    ("requests", "existing", "prefix"),
    [
        ("1g.10gb", [], "requests and existing must be sequences"),
        (["1g.10gb"], {"1g.10gb": 1}, "requests and existing must be sequences"),
        (["1g.10gb"], [None], "existing card 0: not a layout"),
    ],
)
def test_malformed_arguments_are_refused(requests: object, existing: object, prefix: str) -> None:
    result = plan_node(H100, 1, requests, existing)  # type: ignore[arg-type]
    assert isinstance(result, MigRefusal) and result.reason.startswith(prefix), result
    bugs, _ = audit_node(H100, 1, requests, existing, result)  # type: ignore[arg-type]
    assert bugs == []
    card = plan_card(H100, "1g.10gb")
    assert isinstance(card, MigRefusal) and "not one string" in card.reason


@pytest.mark.parametrize(
    ("args", "prefix"),
    [
        (("NVIDIA-H20", 1, ["1g.12gb"]), "no family for product"),
        ((H100, -1, []), "gpu_count must be"),
        ((H100, True, []), "gpu_count must be"),
        ((H100, 1, ["1g.5gb"]), "unknown profile '1g.5gb'"),
        ((H100, 1, [], [{"1g.10gb": -2}]), "existing card 0: negative count"),
        ((H100, 1, [], [{"1g.10gb": "2"}]), "existing card 0: count for profile"),
        ((H100, 1, [], [{"x": 1}]), "existing card 0: unknown profile"),
        ((H100, 1, [], [{}, {}]), "existing describes 2 cards"),
        ((H100, 2, [], [{}, {"1g.10gb+me": 2}]), "existing card 1 is not a valid layout: instance"),
    ],
)
def test_bad_input_refusals(args: tuple[object, ...], prefix: str) -> None:
    result = plan_node(*args)  # type: ignore[arg-type]
    assert isinstance(result, MigRefusal)
    assert result.reason.startswith(prefix), result.reason


@settings(max_examples=300, deadline=None)
@given(
    key=st.sampled_from([f.key for f in families()] + ["H20", "B300-SXM6-AC", "T4"]),
    prefix=st.sampled_from(["", "NVIDIA-", "NVIDIA ", "nvidia-", "G", "GH"]),
    suffix=st.sampled_from(["", "-NVL", "-MIG-1g.10gb", "-MIG-A30", "-SHARED", " Server Edition"]),
)
def test_planner_and_oracle_resolve_the_same_family(key: str, prefix: str, suffix: str) -> None:
    product_name = prefix + key + suffix
    card = mig._card_for(product_name)
    fam = family_for(product_name)
    assert (card.key if card else None) == (fam.key if fam else None), product_name


def test_planner_is_independent_of_the_oracle() -> None:
    tree = ast.parse(Path(mig.__file__).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            assert "geometry" not in (node.module or "")
            assert node.level == 0
        elif isinstance(node, ast.Import):
            assert all("geometry" not in a.name for a in node.names)


# ------------------------------------------------------------------------------------------
# exhaustive audits


@pytest.mark.parametrize("fam", families(), ids=lambda f: f.key)
def test_plan_card_exhaustive(fam: Family) -> None:
    accepted = refused = 0
    for layout in count_vectors(fam):
        result = plan_card(product(fam), expand(layout))
        bugs, conservative = audit_card(product(fam), expand(layout), None, result)
        assert bugs == [], (layout, result)
        assert not conservative, f"greedy placement gave up on a valid layout {layout}"
        if isinstance(result, MigRefusal):
            refused += 1
        else:
            accepted += 1
    assert accepted > 10 and refused > 10


@pytest.mark.parametrize("fam", families(), ids=lambda f: f.key)
def test_plan_card_with_existing_split(fam: Family) -> None:
    """The same layouts split between existing and new instances."""
    for layout in itertools.islice(count_vectors(fam), 0, None, 7):
        names = expand(layout)
        half = len(names) // 2
        existing: dict[str, int] = {}
        for n in names[:half]:
            existing[n] = existing.get(n, 0) + 1
        result = plan_card(product(fam), names[half:], existing)
        bugs, conservative = audit_card(product(fam), names[half:], existing, result)
        assert bugs == [] and not conservative, (existing, names[half:], result)


def _request_sets(fam: Family, size: int) -> Iterator[tuple[str, ...]]:
    plain = sorted(n for n in fam.profiles if "+" not in n and "-" not in n)
    variants = sorted(n for n in fam.profiles if n not in plain)
    pool = plain + variants[:1]
    for k in range(size + 1):
        yield from itertools.combinations_with_replacement(pool, k)


@pytest.mark.parametrize("fam", families(), ids=lambda f: f.key)
def test_plan_node_exhaustive(fam: Family) -> None:
    balanced = ALL_BALANCED[fam.key]
    big = max(fam.profiles.values(), key=lambda p: p.compute_slices).name
    configs: list[tuple[int, list[dict[str, int]], int]] = [
        (1, [], 4),
        (2, [], 3),
        (2, [balanced], 3),
        (2, [{big: 1}, {}], 3),
        (3, [balanced, {}, balanced], 2),
    ]
    plans = refusals = 0
    for gpus, existing, size in configs:
        for requests in _request_sets(fam, size):
            result = plan_node(product(fam), gpus, list(requests), existing)
            bugs, conservative = audit_node(product(fam), gpus, list(requests), existing, result)
            assert bugs == [], (gpus, existing, requests, result)
            assert not conservative, ("planner gave up on a feasible node", requests, result)
            if isinstance(result, MigRefusal):
                refusals += 1
            else:
                plans += 1
    assert plans > 20 and refusals > 5


@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_plan_node_property(data: st.DataObject) -> None:
    fam = data.draw(st.sampled_from(families()))
    names = sorted(fam.profiles)
    gpus = data.draw(st.integers(0, 3))
    existing = data.draw(
        st.lists(
            st.dictionaries(st.sampled_from(names), st.integers(0, 2), max_size=2),
            max_size=gpus,
        )
    )
    requests = data.draw(st.lists(st.sampled_from(names), max_size=5))
    result = plan_node(product(fam), gpus, requests, existing)
    bugs, _ = audit_node(product(fam), gpus, requests, existing, result)
    assert bugs == []


@pytest.mark.usefixtures("fresh_cache")
def test_conservative_refusals_say_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """When the heuristic gives up (here: a greedy placement that always fails) the reason
    carries the marker, and the audit counts it as conservative rather than as a bug."""
    monkeypatch.setattr(mig, "_greedy_place", lambda card, layout: not layout)
    result = plan_card(H100, ["1g.10gb"])
    assert isinstance(result, MigRefusal)
    assert CONSERVATIVE in result.reason
    bugs, conservative = audit_card(H100, ["1g.10gb"], None, result)
    assert bugs == [] and conservative
    node = plan_node(H100, 2, ["1g.10gb"])
    assert isinstance(node, MigRefusal) and CONSERVATIVE in node.reason
    bugs, conservative = audit_node(H100, 2, ["1g.10gb"], [], node)
    assert bugs == [] and conservative


# ------------------------------------------------------------------------------------------
# the audit catches planner bugs (mutation tests)


@pytest.mark.usefixtures("fresh_cache")
def test_audit_catches_a_planner_with_a_wrong_card(monkeypatch: pytest.MonkeyPatch) -> None:
    """A planner whose card model has twice the memory slices and no placement check."""
    real = mig._card_for(H100)
    assert real is not None
    wrong = dataclasses.replace(real, memory=2 * real.memory)
    monkeypatch.setattr(mig, "_card_for", lambda product: wrong)
    monkeypatch.setattr(mig, "_greedy_place", lambda card, layout: True)
    requests = ["1g.20gb"] * 4 + ["1g.10gb"] * 3  # 7 compute, 11 memory slices
    result = plan_card(H100, requests)
    assert isinstance(result, dict)
    bugs, _ = audit_card(H100, requests, None, result)
    assert bugs and "oracle rejects planner layout" in bugs[0]
    node = plan_node(H100, 2, requests)  # best fit puts everything on card 0
    bugs, _ = audit_node(H100, 2, requests, [], node)
    assert any("oracle rejects planner layout" in b for b in bugs), (node, bugs)


@pytest.mark.usefixtures("fresh_cache")
def test_audit_catches_a_false_exact_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mig, "_verdict_cached", lambda card, items: "compute slices exhausted")
    result = plan_card(H100, ["1g.10gb"])
    bugs, _ = audit_card(H100, ["1g.10gb"], None, result)
    assert bugs and "but the oracle accepts" in bugs[0]
    node = plan_node(H100, 1, ["1g.10gb"])
    bugs, _ = audit_node(H100, 1, ["1g.10gb"], [], node)
    assert bugs and "oracle finds an assignment" in bugs[0]


@pytest.mark.usefixtures("fresh_cache")
def test_audit_catches_a_wrong_category(monkeypatch: pytest.MonkeyPatch) -> None:
    """A layout the oracle rejects for memory, refused by the planner as an instance cap."""
    original = mig._verdict_cached

    def wrong(card: mig._Card, items: tuple[tuple[str, int], ...]) -> str | None:
        why = original(card, items)
        return None if why is None else "instance cap: made up"

    monkeypatch.setattr(mig, "_verdict_cached", wrong)
    requests = ["1g.20gb"] * 4 + ["1g.10gb"] * 3
    result = plan_card(H100, requests)
    bugs, _ = audit_card(H100, requests, None, result)
    assert bugs and "not confirmed by oracle problems" in bugs[0]


def test_audit_catches_a_wrong_assignment() -> None:
    plan = NodeMigPlan(({"1g.10gb": 1}, {}), (1,))
    bugs, _ = audit_node(H100, 2, ["1g.10gb"], [], plan)
    assert any("existing plus assigned" in b for b in bugs)


def test_node_feasible_sees_what_ffd_needs() -> None:
    assert node_feasible(H100, 2, ["4g.40gb", "4g.40gb", "3g.40gb", "3g.40gb"], [])
    assert not node_feasible(H100, 2, ["4g.40gb"] * 3, [])
    assert not node_feasible(H100, 1, ["1g.10gb"], [{"7g.80gb": 1}])


# ------------------------------------------------------------------------------------------
# memory -> profile


@settings(max_examples=200, deadline=None)
@given(fam=st.sampled_from(families()), gib=st.floats(0, 300))
def test_profile_for_memory_agrees_with_oracle(fam: Family, gib: float) -> None:
    oracle = smallest_profile(product(fam), gib)
    planner = profile_for_memory(product(fam), gib)
    if oracle is None:
        assert isinstance(planner, MigRefusal)
        assert planner.reason.startswith(f"no profile of {fam.key} has at least")
    else:
        assert planner == oracle.name


def test_profile_for_memory_refusals() -> None:
    assert profile_for_memory("NVIDIA-H20", 1) == MigRefusal("no family for product 'NVIDIA-H20'")
    bad = profile_for_memory(H100, -1)
    assert isinstance(bad, MigRefusal) and bad.reason.startswith("memory_gib must be")
    unknown = profile_for_memory("NVIDIA-GB200", 60)
    assert isinstance(unknown, MigRefusal)
    assert unknown.reason.endswith("(memory unknown for 3g.93gb, 4g.93gb, 7g.186gb)")
    assert profile_for_memory(H100, 79.5) == MigRefusal(
        "no profile of H100-80GB-HBM3 has at least 79.5 GiB known memory"
    )


@pytest.mark.parametrize("fam", families(), ids=lambda f: f.key)
def test_plan_node_random_nodes_audited(fam: Family) -> None:
    """Random nodes of 1-3 cards, all profiles (variants with their caps of one included),
    up to 7 requests: no bug, and no conservative refusal of a node the oracle can fill."""
    rng = random.Random(f"mig-{fam.key}")
    names = sorted(fam.profiles)
    outcomes = {"plan": 0, "exact": 0}
    for _ in range(600):
        gpus = rng.randint(1, 3)
        existing = [{rng.choice(names): 1} if rng.random() < 0.3 else {} for _ in range(gpus)]
        requests = [rng.choice(names) for _ in range(rng.randint(1, 7))]
        result = plan_node(product(fam), gpus, requests, existing)
        bugs, conservative = audit_node(product(fam), gpus, requests, existing, result)
        assert bugs == [], (gpus, existing, requests, result)
        assert not conservative, (gpus, existing, requests, result)
        outcomes["plan" if isinstance(result, NodeMigPlan) else "exact"] += 1
    assert outcomes["plan"] > 50 and outcomes["exact"] > 50


def test_scarce_first_pass_rescues_first_fit() -> None:
    """Best fit puts both 3g on card 0, which leaves room for one +me (cap 1 per card) on
    card 1 only; the second first-fit pass (scarcest profiles first) spreads the +me."""
    requests = ["1g.10gb+me", "1g.10gb+me", "3g.40gb", "3g.40gb"]
    card = mig._card_for(H100)
    assert card is not None
    assert mig._first_fit(card, [{}, {}], requests, [2, 3, 0, 1]) == "1g.10gb+me"
    plan = plan_node(H100, 2, requests)
    assert isinstance(plan, NodeMigPlan), plan
    assert plan.layouts == ({"3g.40gb": 1, "1g.10gb+me": 1},) * 2
    bugs, _ = audit_node(H100, 2, requests, [], plan)
    assert bugs == []


SEARCHED = ["2g.20gb", "2g.20gb", "3g.40gb", "2g.20gb", "3g.40gb", "2g.20gb"]


def test_search_rescues_both_first_fit_passes() -> None:
    """Both first-fit passes put the two 3g together and strand a 2g; the search finds
    3g + 2 x 2g on each card (3g at start 4, the 2g at 0 and 2)."""
    card = mig._card_for(H100)
    assert card is not None
    order = sorted(range(6), key=lambda i: (-card.shapes[SEARCHED[i]].memory, SEARCHED[i], i))
    assert mig._first_fit(card, [{}, {}], SEARCHED, order) == "2g.20gb"
    plan = plan_node(H100, 2, SEARCHED)
    assert isinstance(plan, NodeMigPlan), plan
    assert plan.layouts == ({"3g.40gb": 1, "2g.20gb": 2},) * 2
    bugs, _ = audit_node(H100, 2, SEARCHED, [], plan)
    assert bugs == []


def test_search_budget_refusal_is_conservative(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mig, "SEARCH_BUDGET", 0)
    result = plan_node(H100, 2, SEARCHED)
    assert result == MigRefusal(
        "cannot pack 6 requests onto 2 x H100-80GB-HBM3 (search budget of 0 steps spent, "
        "may be conservative)"
    )
    bugs, conservative = audit_node(H100, 2, SEARCHED, [], result)
    assert bugs == [] and conservative


def test_exact_packing_refusal() -> None:
    """Totals fit (14 of 14 compute, 14 of 16 memory slices) and each request fits a card
    alone, but 4g has a cap of one per card, leaving 3 compute slices per card: one 2g each."""
    requests = ["2g.20gb", "4g.40gb", "2g.20gb", "4g.40gb", "2g.20gb"]
    result = plan_node(H100, 2, requests)
    assert result == MigRefusal(
        "cannot pack 5 requests onto 2 x H100-80GB-HBM3: no assignment fits (exhaustive search)"
    )
    bugs, conservative = audit_node(H100, 2, requests, [], result)
    assert bugs == [] and not conservative
