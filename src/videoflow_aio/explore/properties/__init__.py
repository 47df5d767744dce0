"""The explorer's built-in properties (``PROP-…``): seeded programs over the reference
models whose invariants must hold in every schedule, with or without injected faults.
Importing this package registers them."""

from __future__ import annotations

from . import cas, nothing_lost, obligations, ownership  # noqa: F401  (each registers its program)

__all__: list[str] = []
