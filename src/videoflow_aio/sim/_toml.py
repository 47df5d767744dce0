"""A TOML writer for simulation specs: the shapes a spec has (top-level tables, arrays of
tables, and inside them scalars, arrays and inline tables), in a stable key order, so
that ``tomllib.loads(dumps(doc)) == doc``."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from ..contracts.errors import ValidationError


def dumps(doc: Mapping[str, Any]) -> str:
    """``doc`` as TOML text: each mapping value a ``[table]``, each sequence of mappings an
    array of ``[[tables]]``; ValidationError for a value TOML cannot hold (None, a nested
    structure at the top level that is neither)."""
    lines: list[str] = []
    for key, value in doc.items():
        if isinstance(value, Mapping):
            lines += ["", f"[{_key(key)}]", *_body(value, key)]
        elif _is_tables(value):
            for i, table in enumerate(value):
                lines += ["", f"[[{_key(key)}]]", *_body(table, f"{key}[{i}]")]
        else:
            raise ValidationError(
                f"{key}: a spec's top level holds tables and arrays of tables only",
                field=key,
                value=type(value).__name__,
            )
    return "\n".join(lines).lstrip("\n") + "\n"


def _is_tables(value: object) -> bool:
    return (
        isinstance(value, Sequence)
        and not isinstance(value, str | bytes)
        and all(isinstance(t, Mapping) for t in value)
    )


def _body(table: Mapping[str, Any], path: str) -> list[str]:
    return [f"{_key(k)} = {_value(v, f'{path}.{k}')}" for k, v in table.items()]


def _key(key: str) -> str:
    if key and all(c.isascii() and (c.isalnum() or c in "_-") for c in key):
        return key
    return json.dumps(key)


def _value(v: object, path: str) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # JSON's escapes are TOML basic-string escapes
    if isinstance(v, Mapping):
        return (
            "{ " + ", ".join(f"{_key(k)} = {_value(x, f'{path}.{k}')}" for k, x in v.items()) + " }"
        )
    if isinstance(v, Sequence) and not isinstance(v, bytes):
        return "[" + ", ".join(_value(x, f"{path}[{i}]") for i, x in enumerate(v)) + "]"
    raise ValidationError(
        f"{path}: {type(v).__name__} cannot be written as TOML", field=path, value=None
    )


__all__ = ["dumps"]
