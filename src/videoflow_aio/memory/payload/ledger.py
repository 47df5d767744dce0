"""``StaticLedger``: an obligation ledger built from a mapping."""

from __future__ import annotations

from collections.abc import Mapping

from ...contracts.errors import ValidationError
from ...contracts.payload import ObligationLedger, validate_id


class StaticLedger(ObligationLedger):
    """A ledger built from a mapping, for tests and simple runtimes."""

    def __init__(self, required: Mapping[str, tuple[str, ...]]) -> None:
        if not isinstance(required, Mapping):
            raise ValidationError("required must be a mapping", field="required", value=required)
        checked: dict[str, tuple[str, ...]] = {}
        for key, ids in required.items():
            validate_id(key, "required key")
            if not isinstance(ids, tuple) or not all(isinstance(i, str) and i for i in ids):
                raise ValidationError(
                    "required values must be tuples of non-empty strings",
                    field=f"required[{key!r}]",
                    value=ids,
                )
            checked[key] = ids
        self._required = checked

    def required_obligations(self) -> Mapping[str, tuple[str, ...]]:
        """ref key -> obligation ids still required."""
        return self._required


__all__ = ["StaticLedger"]
