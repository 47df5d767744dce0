"""classify_gfd_labels on the documented label sets, and NodeFixture.classification() agreeing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _alloc_helpers import A100, H100, mixed_labels, whole_labels
from videoflow_aio.gpu.labels import (
    CLASSIFICATIONS,
    INVALID,
    MIG_MIXED,
    MIG_SINGLE,
    RECONFIGURING,
    UNKNOWN,
    WHOLE_GPU,
    classify_gfd_labels,
)
from videoflow_aio.memory.allocation import NodeFixture

SINGLE = {  # 5b
    "nvidia.com/gpu.count": "7",
    "nvidia.com/gpu.present": "true",
    "nvidia.com/gpu.product": f"{H100}-MIG-1g.10gb",
    "nvidia.com/gpu.slices.ci": "1",
    "nvidia.com/gpu.slices.gi": "1",
    "nvidia.com/mig.capable": "true",
    "nvidia.com/mig.config": "all-1g.10gb",
    "nvidia.com/mig.config.state": "success",
    "nvidia.com/mig.strategy": "single",
}
PENDING = {  # 5d
    "nvidia.com/gpu.product": H100,
    "nvidia.com/gpu.replicas": "1",
    "nvidia.com/gpu.sharing-strategy": "none",
    "nvidia.com/mig.capable": "true",
    "nvidia.com/mig.config": "all-1g.10gb",
    "nvidia.com/mig.config.state": "pending",
    "nvidia.com/mig.strategy": "single",
}
INVALID_SINGLE = {  # 5e
    "nvidia.com/gpu.product": f"{A100}-MIG-INVALID",
    "nvidia.com/gpu.count": "0",
    "nvidia.com/gpu.replicas": "0",
    "nvidia.com/gpu.memory": "0",
    "nvidia.com/gpu.sharing-strategy": "",
    "nvidia.com/mig.strategy": "single",
}
PLAIN_GFD = {  # no operator, strategy none (old GFD README)
    "nvidia.com/gpu.product": "A100-SXM4-40GB",
    "nvidia.com/gpu.memory": "39538",
    "nvidia.com/gpu.count": "1",
    "nvidia.com/gpu.family": "ampere",
}

CASES: list[tuple[str, dict[str, str], str]] = [
    ("5a whole, MIG disabled", whole_labels(), WHOLE_GPU),
    ("plain GFD, no MIG labels", PLAIN_GFD, WHOLE_GPU),
    ("5b single", SINGLE, MIG_SINGLE),
    ("5c mixed", mixed_labels(), MIG_MIXED),
    ("5c mixed, +me profile", mixed_labels(geometry={"1g.10gb+me": 1}), MIG_MIXED),
    ("5d pending", PENDING, RECONFIGURING),
    ("rebooting", {**PENDING, "nvidia.com/mig.config.state": "rebooting"}, RECONFIGURING),
    (
        "paused deploy label",
        {**whole_labels(), "nvidia.com/gpu.deploy.device-plugin": "paused-for-mig-change"},
        RECONFIGURING,
    ),
    (
        "config asked, geometry not visible yet",
        {**whole_labels(), "nvidia.com/mig.config": "all-1g.10gb"},
        RECONFIGURING,
    ),
    ("5e invalid", INVALID_SINGLE, INVALID),
    ("failed", {**mixed_labels(), "nvidia.com/mig.config.state": "failed"}, INVALID),
    ("single with zero devices", {**SINGLE, "nvidia.com/gpu.count": "0"}, INVALID),
    ("no labels", {}, UNKNOWN),
    ("not a GPU node", {"kubernetes.io/os": "linux"}, UNKNOWN),
    ("unreadable count", {**whole_labels(), "nvidia.com/gpu.count": "many"}, UNKNOWN),
    ("unknown state", {**whole_labels(), "nvidia.com/mig.config.state": "weird"}, UNKNOWN),
    ("unknown strategy", {**whole_labels(), "nvidia.com/mig.strategy": "odd"}, UNKNOWN),
    ("MIG product without single", {**SINGLE, "nvidia.com/mig.strategy": "mixed"}, UNKNOWN),
    ("mixed labels under single", {**mixed_labels(), "nvidia.com/mig.strategy": "single"}, UNKNOWN),
    ("bad mixed count", {**mixed_labels(), "nvidia.com/mig-1g.10gb.count": "-1"}, UNKNOWN),
]


@pytest.mark.parametrize(("labels", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_classify(labels: dict[str, str], expected: str) -> None:
    assert classify_gfd_labels(labels) == expected
    assert expected in CLASSIFICATIONS


@pytest.mark.parametrize("labels", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_fixture_agrees_with_classifier(labels: dict[str, str]) -> None:
    node = NodeFixture("n", H100, 1, 80.0, labels=labels)
    assert node.classification() == classify_gfd_labels(labels)


def test_fixture_adopts_labelled_pointer_state_and_geometry() -> None:
    node = NodeFixture("n", H100, 1, 80.0, labels=mixed_labels(geometry={"1g.10gb+me": 1}))
    assert node.mig_config == "all-balanced"
    assert node.mig_state == "success"
    assert node.mig_layout == {"1g.10gb+me": 1}
    single = NodeFixture("s", H100, 1, 80.0, labels=SINGLE)
    assert single.mig_layout == {"1g.10gb": 7}


def test_fixture_adds_geometry_the_model_applied() -> None:
    node = NodeFixture("n", H100, 2, 80.0, labels=whole_labels(count=2))
    assert node.classification() == WHOLE_GPU
    node.mig_config, node.mig_state, node.mig_state_generation = "vf-x", "pending", 3
    assert node.classification() == RECONFIGURING
    node.mig_state = "success"
    node.mig_layout = {"3g.40gb": 2}
    node.applied_by_model = True
    assert node.classification() == MIG_MIXED
    shown = node.effective_labels()
    assert shown["nvidia.com/mig-3g.40gb.count"] == "2"
    assert classify_gfd_labels(shown) == node.classification()
    node.mig_layout = {}
    node.mig_config = "all-disabled"
    assert node.classification() == WHOLE_GPU
    node.mig_state = "failed"
    assert node.classification() == INVALID


_KEYS_VALUES = {
    "nvidia.com/gpu.present": ["true", "false"],
    "nvidia.com/gpu.product": [
        H100,
        f"{H100}-MIG-1g.10gb",
        f"{A100}-MIG-INVALID",
        "A100-SXM4-40GB",
    ],
    "nvidia.com/gpu.count": ["0", "1", "7", "x"],
    "nvidia.com/mig.strategy": ["single", "mixed", "none"],
    "nvidia.com/mig.config": ["all-disabled", "all-balanced", "all-1g.10gb", ""],
    "nvidia.com/mig.config.state": ["success", "pending", "rebooting", "failed", "odd"],
    "nvidia.com/gpu.deploy.device-plugin": ["true", "paused-for-mig-change", "false"],
    "nvidia.com/mig-1g.10gb.count": ["0", "2", "-1"],
    "nvidia.com/mig-3g.40gb.count": ["1"],
}


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(sorted(_KEYS_VALUES)), st.integers(0, 4), max_size=len(_KEYS_VALUES)
    )
)
def test_fixture_and_classifier_agree_on_any_label_set(picks: dict[str, int]) -> None:
    labels = {k: _KEYS_VALUES[k][i % len(_KEYS_VALUES[k])] for k, i in picks.items()}
    node = NodeFixture("n", H100, 1, 80.0, labels=labels)
    assert node.classification() == classify_gfd_labels(labels)
    assert classify_gfd_labels(labels) in CLASSIFICATIONS
