"""``NodeFixture``: one GPU node as data, labelled in GPU Feature Discovery's vocabulary."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .._finite import is_finite_number
from ..contracts.errors import ValidationError
from ..gpu import labels as gfd
from ..gpu.labels import classify_gfd_labels, labelled_geometry

_MIG_SUFFIX = re.compile(r"-MIG-(.+)$", re.IGNORECASE)
_MIXED_KEY = re.compile(r"^nvidia\.com/mig-.+\.[a-z.]+$")


def _check_count(value: object, field_name: str, where: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValidationError(
            f"{where}: {field_name} must be a non-negative integer, got {value!r}",
            field=field_name,
            value=value,
        )


def _check_memory(value: object, where: str) -> None:
    if not is_finite_number(value) or value < 0:
        raise ValidationError(
            f"{where}: memory_gib must be a finite number >= 0", field="memory_gib", value=value
        )


@dataclass(eq=False)
class NodeFixture:
    """One GPU node. ``labels`` follow GPU Feature Discovery's vocabulary.

    ``mig_config`` is the node's ``nvidia.com/mig.config`` pointer (an entry of the shared
    mig-parted config), ``mig_state``/``mig_state_generation`` the manager's last answer and
    the generation of the pointer write it answers; ``mig_layout`` the MIG devices on the
    node (profile → count over all its GPUs); ``workloads`` workload id → devices held
    (ours or foreign); ``restore_record`` the pointer to restore when the last owner leaves.

    When the labels carry ``nvidia.com/mig.config`` / ``.state`` or show MIG geometry and the
    matching field is at its default, the field takes the labelled value. The backend keeps
    the fixture live: it is the cluster's state, mutated only through audited writes.
    """

    name: str
    product: str
    gpu_count: int
    memory_gib: float
    labels: dict[str, str] = field(default_factory=dict)
    owner: str | None = None
    owner_epoch: str | None = None
    resource_version: int = 1
    mig_config: str = "all-disabled"
    mig_state: str = "success"
    mig_state_generation: int = 0
    mig_layout: dict[str, int] = field(default_factory=dict)
    workloads: dict[str, int] = field(default_factory=dict)
    restore_record: str | None = None
    applied_by_model: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        self._validate()
        self.labels = dict(self.labels)
        self.mig_layout = {p: c for p, c in self.mig_layout.items() if c > 0}
        self.workloads = dict(self.workloads)
        if self.mig_config == "all-disabled" and self.labels.get(gfd.MIG_CONFIG):
            self.mig_config = self.labels[gfd.MIG_CONFIG]
        if self.mig_state == "success" and self.labels.get(gfd.MIG_STATE) in gfd.MIG_STATES:
            self.mig_state = self.labels[gfd.MIG_STATE]
        if not self.mig_layout:
            self.mig_layout = labelled_geometry(self.labels)

    def _validate(self) -> None:
        where = f"node {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise ValidationError(
                "node name must be a non-empty string", field="name", value=self.name
            )
        if not isinstance(self.product, str) or not self.product:
            raise ValidationError(
                f"{where}: product must be a non-empty string", field="product", value=self.product
            )
        _check_count(self.gpu_count, "gpu_count", where)
        _check_memory(self.memory_gib, where)
        _check_count(self.resource_version, "resource_version", where)
        _check_count(self.mig_state_generation, "mig_state_generation", where)
        if self.mig_state not in gfd.MIG_STATES:
            raise ValidationError(
                f"{where}: mig_state must be one of {gfd.MIG_STATES}",
                field="mig_state",
                value=self.mig_state,
            )
        for profile, count in self.mig_layout.items():
            _check_count(count, f"mig_layout[{profile}]", where)
        for workload, units in self.workloads.items():
            _check_count(units, f"workloads[{workload}]", where)

    # -- judging -----------------------------------------------------------------------------
    def effective_labels(self) -> dict[str, str]:
        """The labels a real node would now show: the fixture's, with the pointer and state
        the model wrote, and — once the model applied geometry itself — that geometry as GFD
        ``mixed`` slices (or whole GPUs when it applied none)."""
        out = dict(self.labels)
        if gfd.MIG_CONFIG in out or self.mig_config != "all-disabled":
            out[gfd.MIG_CONFIG] = self.mig_config
        if (
            out.get(gfd.MIG_STATE) in gfd.MIG_STATES
            or self.mig_state != "success"
            or self.mig_state_generation
        ):
            out[gfd.MIG_STATE] = self.mig_state
        if self.applied_by_model and self.mig_state == "success":
            self._show_applied_geometry(out)
        return out

    def _show_applied_geometry(self, out: dict[str, str]) -> None:
        """Relabel ``out`` as GFD shows the geometry the model applied: ``mixed`` slices, or
        whole GPUs when it applied none."""
        for key in [k for k in out if _MIXED_KEY.match(k)]:
            del out[key]
        out[gfd.PRODUCT] = _MIG_SUFFIX.sub("", out.get(gfd.PRODUCT, self.product))
        out[gfd.COUNT] = str(self.gpu_count)
        if self.mig_layout:
            out[gfd.STRATEGY] = "mixed"
            for profile, count in sorted(self.mig_layout.items()):
                out[f"nvidia.com/mig-{gfd.profile_label(profile)}.count"] = str(count)

    def classification(self) -> str:
        """The same per-node rule the cluster reader applies to GPU Feature Discovery labels
        (``gpu.classify_gfd_labels``), so a fixture and a real node with the same
        labels are judged identically — plus geometry this backend applied itself, which a
        real node would advertise as slices."""
        return classify_gfd_labels(self.effective_labels())

    @property
    def used_devices(self) -> int:
        return sum(self.workloads.values())

    @property
    def capacity(self) -> int:
        """Devices a workload can hold: MIG devices when the node has geometry, else GPUs."""
        return sum(self.mig_layout.values()) if self.mig_layout else self.gpu_count


__all__ = ["NodeFixture"]
