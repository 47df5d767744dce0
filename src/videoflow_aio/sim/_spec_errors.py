"""msgspec's validation errors as :class:`SpecError`: the TOML key's path and a one-line
reason in the spec's words (``stage[3].service.per_item_ms: must be >= 0``).

The reason is read from the type at the failing path (walked with :mod:`msgspec.inspect`
alongside the document), so it names the choices of a ``Literal``, the keys a table takes
and, for a tagged table (``dist = "…"``, ``kind = "…"``), the variant a key does not apply to.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec
from msgspec import inspect as mi

from ._spec_types import SpecError

T = TypeVar("T")

_AT = " - at `$"
_KEY_AT = " - at `key` in `$"
_SEGMENT = re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")
_BOUND = re.compile(r"Expected `(\w+)` (of length )?(>=|>|<=|<) (\S+)$")
_MISSING = "Object missing required field `"
_UNKNOWN = "Object contains unknown field `"


def fail(path: str, message: str, value: Any = None) -> SpecError:
    """The SpecError ``path: message`` with ``field`` ``path``."""
    return SpecError(f"{path}: {message}", field=path, value=_shown(value))


def convert(value: Any, typ: type[T], path: str) -> T:
    """``value`` decoded as ``typ`` (every ``Meta`` constraint and unknown key checked); a
    :class:`SpecError` naming the offending key under ``path`` otherwise."""
    try:
        return msgspec.convert(value, typ)
    except msgspec.ValidationError as exc:
        raise _translate(str(exc), value, typ, path) from None


def join(path: str, seg: str | int) -> str:
    """``path`` extended by a key (``a.b``) or an index (``a[0]``)."""
    if isinstance(seg, int):
        return f"{path}[{seg}]"
    seg = seg or '""'  # an empty key is named, not dropped
    return f"{path}.{seg}" if path else seg


def _translate(text: str, value: Any, typ: type[Any], path: str) -> SpecError:
    key_error = _KEY_AT in text  # a table key that is not a string (a document from Python)
    reason, _, at = text.partition(_KEY_AT if key_error else _AT)
    segs: list[str | int] = [
        int(i) if i.isdigit() else (k or i) for k, i in _SEGMENT.findall(at.rstrip("`"))
    ]
    info, raw, path = _walk(mi.type_info(typ), value, segs, path)
    if key_error and isinstance(raw, Mapping):
        key = next((k for k in raw if not isinstance(k, str)), None)
        return fail(join(path, str(key)), "a key must be a string", key)
    for head in (_MISSING, _UNKNOWN):
        if reason.startswith(head):
            key = reason[len(head) :].rstrip("`")
            if head == _MISSING:
                return fail(join(path, key), "is required")
            return fail(join(path, key), _unknown(_pick(info, raw)), key)
    return fail(path, _reason(reason, info), raw)


def _walk(info: mi.Type, raw: Any, segs: list[str | int], path: str) -> tuple[mi.Type, Any, str]:
    """The type and value at ``segs`` below ``info``/``raw``, and their path; it stops at a
    fixed-length array (a ``[seconds, rate_hz]`` pair is reported whole) or a table's key."""
    for seg in segs:
        info = _pick(info, raw)
        if isinstance(info, mi.StructType) and isinstance(seg, str):
            field = next((f for f in info.fields if f.encode_name == seg), None)
            if field is None:  # the tag key (``dist``, ``kind``) of an unknown variant
                tag = raw.get(seg) if isinstance(raw, Mapping) else None
                return mi.LiteralType((info.tag,)), tag, join(path, seg)
            info, raw = field.type, raw.get(seg) if isinstance(raw, Mapping) else None
        elif isinstance(info, mi.UnionType) and isinstance(seg, str):
            tags = [t.tag for t in info.types if isinstance(t, mi.StructType) and t.tag]
            return mi.LiteralType(tuple(tags)), raw.get(seg), join(path, seg)
        elif isinstance(info, mi.ListType | mi.VarTupleType) and isinstance(seg, int):
            info, raw = info.item_type, raw[seg] if isinstance(raw, list | tuple) else None
        elif isinstance(info, mi.DictType) and isinstance(raw, Mapping):  # msgspec: ``[...]``
            key = next((k for k, v in raw.items() if not _fits(info.value_type, v)), None)
            if key is None:
                break
            info, raw, seg = info.value_type, raw[key], str(key)
        else:
            break
        path = join(path, seg)
    return info, raw, path


def _pick(info: mi.Type, raw: Any) -> mi.Type:
    """``info`` without its metadata, and of a union the member ``raw`` is meant as (the
    table variant its tag names)."""
    while isinstance(info, mi.Metadata):
        info = info.type
    if not isinstance(info, mi.UnionType):
        return info
    kinds = [_pick(t, None) for t in info.types if not isinstance(t, mi.NoneType)]
    if isinstance(raw, Mapping):
        tables = [t for t in kinds if isinstance(t, mi.StructType | mi.DictType)]
        tagged = [t for t in tables if isinstance(t, mi.StructType) and t.tag_field]
        for t in tagged:
            if raw.get(t.tag_field) == t.tag:
                return t
        if len(tables) == 1 or (tables and not tagged):
            return tables[0]
    elif isinstance(raw, list | tuple):
        arrays = [t for t in kinds if isinstance(t, mi.ListType | mi.VarTupleType | mi.TupleType)]
        if arrays:
            return arrays[0]
    return kinds[0] if len(kinds) == 1 else mi.UnionType(tuple(kinds))


def _fits(info: mi.Type, value: Any) -> bool:
    """Whether ``value`` is the integer ``info`` bounds (a table's values are counts)."""
    if not isinstance(info, mi.IntType):
        return True
    if isinstance(value, bool) or not isinstance(value, int):
        return False
    return (info.ge is None or value >= info.ge) and (info.le is None or value <= info.le)


def _unknown(table: mi.Type) -> str:
    if not isinstance(table, mi.StructType):
        return "unknown key"
    keys = [f.encode_name for f in table.fields]
    if table.tag_field:
        keys.insert(0, table.tag_field)
        kind = f"does not apply for {table.tag_field} = {table.tag!r}"
    else:
        kind = "unknown key"
    return f"{kind}; expected one of {', '.join(keys)}"


def _reason(reason: str, info: mi.Type) -> str:
    info = _pick(info, None)
    if isinstance(info, mi.LiteralType) or reason.startswith(("Invalid value", "Invalid enum")):
        return f"must be {_describe(info)}"
    if isinstance(info, mi.TupleType):
        return f"must be [{', '.join(_describe(t) for t in info.item_types)}]"
    bound = _BOUND.match(reason)
    if bound:
        kind, length, op, n = bound.groups()
        if not length and abs(float(n)) > 1e308:  # the float range's own bound: inf
            return "must be a finite number"
        if not length:
            return f"must be {op} {float(n):g}"
        if kind == "str":
            return "must be a non-empty string" if ">" in op else f"must be at most {n} characters"
        return "must be a non-empty array" if ">" in op else f"must be at most {int(n):,} items"
    if reason.startswith("Number out of range") and isinstance(info, mi.IntType | mi.FloatType):
        if info.le is not None and info.le <= 1e308:
            return f"must be <= {info.le:g}"
        return "must be a finite number"
    return f"must be {_describe(info)}"


def _describe(info: mi.Type) -> str:
    info = _pick(info, None)
    if isinstance(info, mi.IntType | mi.FloatType):
        kind = "an integer" if isinstance(info, mi.IntType) else "a finite number"
        low = info.ge if info.ge is not None else info.gt
        if low is None or info.le is None:
            return kind
        return f"{kind} in {'[' if info.ge is not None else '('}{low:g}, {info.le:g}]"
    if isinstance(info, mi.LiteralType):
        return f"one of {', '.join(map(str, info.values))}"
    if isinstance(info, mi.UnionType):
        return " or ".join(dict.fromkeys(_describe(t) for t in info.types))
    names = {
        mi.StrType: "a non-empty string",
        mi.StructType: "a table",
        mi.DictType: "a table",
        mi.ListType: "an array",
        mi.VarTupleType: "an array",
        mi.TupleType: "an array",
        mi.BoolType: "true or false",
    }
    return names.get(type(info), "of another type")


def _shown(value: Any) -> Any:
    """``value`` as an error carries it: an int too large to print is described."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**300:
        return "a huge number"
    return value


__all__ = ["convert", "fail", "join"]
