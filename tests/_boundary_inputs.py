"""Wrong inputs for a contract parameter, generated from its type hint.

Written independently of ``contracts._boundary`` (it reads the hints with ``typing`` only): each
strategy yields values a provider must refuse for that hint — wrong types, non-finite or
out-of-range numbers, lone surrogates, ``str`` where a sequence is wanted, containers with one
bad element, and hand-made Structs whose fields were changed behind their back. ``base`` is a
valid value for the parameter (from the provider's own state), used to build near misses.
"""

from __future__ import annotations

import collections.abc
import copy
import functools
import math
import types
import typing
from typing import Any

import msgspec
from hypothesis import strategies as st

from videoflow_aio.contracts._specs import OneOf

_SURROGATE = st.text(max_size=3).map(lambda s: s + "\ud800")
_ANYTHING_BUT_STR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.binary(max_size=4),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
    st.builds(object),
    st.just(bytearray(b"x")),
)


def _unwrap(tp: Any) -> tuple[Any, dict[str, Any]]:
    meta: dict[str, Any] = {}
    while typing.get_origin(tp) is typing.Annotated:
        for m in tp.__metadata__:
            if isinstance(m, msgspec.Meta):
                for attr in ("ge", "gt", "min_length", "pattern"):
                    if getattr(m, attr) is not None:
                        meta[attr] = getattr(m, attr)
            elif isinstance(m, OneOf):
                meta["choices"] = m.values
        tp = typing.get_args(tp)[0]
    return tp, meta


def _options(tp: Any) -> list[Any] | None:
    origin = typing.get_origin(tp)
    if origin is typing.Union or origin is types.UnionType:
        return list(typing.get_args(tp))
    return None


def _below(meta: dict[str, Any], integral: bool) -> st.SearchStrategy[Any] | None:
    if "ge" in meta:
        bound = meta["ge"]
        return st.just(bound - 1) if integral else st.floats(max_value=bound, exclude_max=True)
    if "gt" in meta:
        bound = meta["gt"]
        return st.just(bound) if integral else st.floats(max_value=bound)
    return None


def bad(tp: Any, base: Any = None) -> st.SearchStrategy[Any] | None:
    """Values a parameter hinted ``tp`` must refuse; None when it accepts anything."""
    tp, meta = _unwrap(tp)
    options = _options(tp)
    if options is not None:
        accepts_none = type(None) in options
        rest = [o for o in options if o is not type(None)]
        if len(rest) == 1:
            inner = bad(rest[0], base)
        else:  # a union of Structs: other objects, and other Structs
            inner = st.one_of(_ANYTHING_BUT_STR, st.text(max_size=3))
        if inner is None:
            return None
        return inner.filter(lambda v: v is not None) if accepts_none else inner
    if tp is Any or tp is object or isinstance(tp, typing.TypeVar):
        return None
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is str or origin is typing.Literal:
        parts: list[st.SearchStrategy[Any]] = [_ANYTHING_BUT_STR, _SURROGATE]
        if meta.get("min_length") or meta.get("pattern"):
            parts.append(st.just(""))
        if meta.get("pattern"):
            parts.append(st.sampled_from(["a b", "a.b", "*", ">", "x\n", "\t"]))
        choices = meta.get("choices") or (args if origin is typing.Literal else None)
        if choices:
            parts.append(st.text(max_size=6).filter(lambda s: s not in choices))
        return st.one_of(parts)
    if tp is bytes:
        return st.one_of(
            st.none(),
            st.booleans(),
            st.integers(),
            st.floats(),
            st.text(max_size=3),
            st.just(bytearray(b"x")),
            st.just(memoryview(b"x")),
            st.lists(st.integers(0, 255), max_size=2),
        )
    if tp is bool:
        return st.one_of(st.none(), st.integers(), st.floats(), st.text(max_size=3))
    if tp is int:
        parts = [
            st.none(),
            st.booleans(),
            st.floats(allow_nan=True, allow_infinity=True),
            st.text(max_size=3),
            st.binary(max_size=2),
        ]
        below = _below(meta, integral=True)
        return st.one_of([*parts, below] if below is not None else parts)
    if tp is float:
        parts = [
            st.none(),
            st.booleans(),
            st.sampled_from([math.nan, math.inf, -math.inf, 10**400, -(10**400)]),
            st.text(max_size=3),
            st.binary(max_size=2),
            st.lists(st.floats(), max_size=1),
        ]
        below = _below(meta, integral=False)
        return st.one_of([*parts, below] if below is not None else parts)
    if origin in (collections.abc.Sequence, list, tuple):
        item = args[0] if args else Any
        wrong_container = st.one_of(
            st.text(max_size=3),
            st.binary(max_size=3),
            st.none(),
            st.integers(),
            st.dictionaries(st.text(max_size=1), st.integers(), max_size=1),
        )
        if origin is tuple:  # a Struct field: exactly a tuple
            wrong_container = st.one_of(wrong_container, st.just([]))
        item_bad = bad(item, None)
        if item_bad is None:
            return wrong_container
        make = tuple if origin is tuple else list
        return st.one_of(wrong_container, item_bad.map(lambda v: make([v])))
    if origin in (dict, collections.abc.Mapping) or typing.is_typeddict(tp):
        parts = [st.none(), st.text(max_size=3), st.lists(st.tuples(st.text(), st.text()))]
        if typing.is_typeddict(tp):
            hints = typing.get_type_hints(tp, include_extras=True)
            parts.append(st.just({"no-such-key": 1}))
            for key, hint in hints.items():
                inner = bad(hint)
                if inner is not None:
                    parts.append(inner.map(functools.partial(_entry, key)))
        elif args:
            key_bad, value_bad = bad(args[0]), bad(args[1])
            if key_bad is not None:
                parts.append(key_bad.filter(_hashable).map(lambda k: {k: "v"}))
            if value_bad is not None:
                parts.append(value_bad.map(lambda v: {"k": v}))
        return st.one_of(parts)
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        parts = [_ANYTHING_BUT_STR, st.text(max_size=3)]
        if base is not None and isinstance(base, tp):
            parts.append(_near_misses(tp, base))
        return st.one_of(parts)
    if isinstance(tp, type):
        return st.one_of(_ANYTHING_BUT_STR.filter(lambda v: not isinstance(v, tp)), st.text())
    return None


def _entry(key: str, value: Any) -> dict[str, Any]:
    return {key: value}


def _hashable(v: Any) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True


def _near_misses(tp: type, base: Any) -> st.SearchStrategy[Any]:
    """``base`` with one field wrong: set behind the Struct's back when it checks nothing at
    construction, else (a Struct valid from birth) a mutable container changed in place."""
    hints = typing.get_type_hints(tp, include_extras=True)
    checks_itself = "__post_init__" in vars(tp)
    parts: list[st.SearchStrategy[Any]] = []
    for name in tp.__struct_fields__:  # type: ignore[attr-defined]
        field_value = getattr(base, name)
        if checks_itself:
            if isinstance(field_value, dict):
                parts.append(
                    _bad_entry(hints[name]).map(functools.partial(_with_entry, base, name))
                )
            continue
        inner = bad(hints[name], field_value)
        if inner is not None:
            parts.append(inner.map(functools.partial(_with_field, base, name)))
    return st.one_of(parts) if parts else st.nothing()


def _bad_entry(hint: Any) -> st.SearchStrategy[tuple[Any, Any]]:
    tp, _ = _unwrap(hint)
    key_tp, value_tp = typing.get_args(tp) or (str, str)
    key_bad, value_bad = bad(key_tp), bad(value_tp)
    parts = []
    if key_bad is not None:
        parts.append(key_bad.filter(_hashable).map(lambda k: (k, "v")))
    if value_bad is not None:
        parts.append(value_bad.map(lambda v: ("k", v)))
    return st.one_of(parts)


def _with_field(base: Any, name: str, value: Any) -> Any:
    out = copy.copy(base)
    msgspec.structs.force_setattr(out, name, value)
    return out


def _with_entry(base: Any, name: str, kv: tuple[Any, Any]) -> Any:
    out = msgspec.structs.replace(base, **{name: dict(getattr(base, name))})
    getattr(out, name)[kv[0]] = kv[1]
    return out
