"""What a contract type hint accepts, as a fast test and a precise check built once from plain
closures (no generated code): the rules the boundary (:mod:`videoflow_aio.contracts._boundary`)
and the input Structs' ``__post_init__`` share.

Rules:

* ``str``: a ``str`` that is valid Unicode (no lone surrogates: it must encode as UTF-8);
  ``bytes``: a ``bytes`` (never ``bytearray``/``memoryview``/``str``);
  ``int``: an ``int``, never a ``bool``; ``float``: an ``int`` or ``float``, never a ``bool``,
  and **finite** (every float crossing a contract is a time, a duration or a size);
  ``bool``: ``True``/``False``; ``Literal[...]``: one of the values.
* ``Sequence[T]``: any sequence of ``T`` except ``str``/``bytes``; ``tuple[T, ...]``,
  ``list[T]``, ``dict[K, V]``: exactly that container; ``Mapping[K, V]``: any mapping;
  a ``TypedDict``: a mapping with only its keys, each of its type.
* a Struct: an instance whose every field passes its own hint; any other class:
  ``isinstance``; ``X | Y``: either. ``Any``, ``object``, type variables and callables: anything.
* ``Annotated[T, msgspec.Meta(...)]`` adds ``ge``/``gt``/``le``/``lt`` (numbers) and
  ``min_length``/``max_length``/``pattern`` (strings, bytes, containers) — msgspec enforces the
  same when it decodes; ``Annotated[str, OneOf(values)]`` a choice that stays a ``str`` for
  type checkers. The aliases below (:data:`NonEmptyStr`, :data:`Token`, …) name the common ones.
"""

from __future__ import annotations

import collections.abc
import operator
import re
import types
import typing
from collections.abc import Callable, Iterable
from typing import Annotated, Any, ClassVar, TypeVar

import msgspec

from .._finite import is_finite_number
from .errors import ValidationError

_MAX_FLOAT = 1.7976931348623157e308

# -- what a hint accepts ---------------------------------------------------------------------


def _describe(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _fail(path: str, message: str, value: Any) -> ValidationError:
    return ValidationError(f"{path} {message}, got {_describe(value)}", field=path, value=value)


Test = Callable[[Any], bool]
"""A fast test of one value: True only for a value the precise check accepts; False (or an
exception) sends the value to the precise check, which accepts it or names what is wrong."""


def _true(value: Any) -> bool:
    return True


def _is_ascii_str(value: Any) -> bool:
    return type(value) is str and value.isascii()


def _is_non_empty_ascii_str(value: Any) -> bool:
    return type(value) is str and value.isascii() and value != ""


_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "ge": operator.ge,
    "gt": operator.gt,
    "le": operator.le,
    "lt": operator.lt,
}


class Spec:
    """What one hint accepts: a fast test (None: none) and a precise check."""

    def test(self) -> Test | None:
        """The fast test, built once from plain closures (no generated code)."""
        return None

    def exact_type(self) -> type | None:
        """The one type whose every instance this spec accepts, when that is all it asks."""
        return None

    def check(self, value: Any, path: str) -> None:
        raise NotImplementedError

    def claims(self, value: Any) -> bool:
        """Whether ``value`` is of this spec's outer kind (for naming the error in a union)."""
        return True

    def mutable(self) -> bool:
        """Whether a value that passed once can fail later (a container changed in place)."""
        return False

    def ok(self, value: Any) -> bool:
        try:
            self.check(value, "")
        except ValidationError:
            return False
        return True


class _AnySpec(Spec):
    def test(self) -> Test:
        return _true

    def check(self, value: Any, path: str) -> None:
        return None


ANY = _AnySpec()


def _is_none(value: Any) -> bool:
    return value is None


class _NoneSpec(Spec):
    def test(self) -> Test:
        return _is_none

    def exact_type(self) -> type:
        return type(None)

    def check(self, value: Any, path: str) -> None:
        if value is not None:
            raise _fail(path, "must be None", value)

    def claims(self, value: Any) -> bool:
        return value is None


def _is_bool(value: Any) -> bool:
    return value is True or value is False


class _BoolSpec(Spec):
    def test(self) -> Test:
        return _is_bool

    def check(self, value: Any, path: str) -> None:
        if value is not True and value is not False:
            raise _fail(path, "must be a bool", value)

    def claims(self, value: Any) -> bool:
        return isinstance(value, bool)


class _Bounds:
    """Numeric bounds from ``msgspec.Meta``."""

    def __init__(self, meta: dict[str, Any]) -> None:
        self.items = [(op, meta[op]) for op in ("ge", "gt", "le", "lt") if meta.get(op) is not None]

    _OPS: ClassVar[dict[str, str]] = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}

    def within(self, kind: Test) -> Test:
        """``kind`` (a type test) and every bound: one closure, specialised for the usual
        single lower bound."""
        if not self.items:
            return kind
        if len(self.items) == 1 and self.items[0][0] == "ge":
            low = self.items[0][1]

            def at_least(value: Any) -> bool:
                return kind(value) and value >= low

            return at_least
        compare = [(_COMPARE[op], bound) for op, bound in self.items]

        def bounded(value: Any) -> bool:
            return kind(value) and all(op(value, bound) for op, bound in compare)

        return bounded

    def check(self, value: Any, path: str) -> None:
        for op, bound in self.items:
            good = {
                "ge": value >= bound,
                "gt": value > bound,
                "le": value <= bound,
                "lt": value < bound,
            }[op]
            if not good:
                raise _fail(path, f"must be {self._OPS[op]} {bound}", value)


def _is_int(value: Any) -> bool:
    return type(value) is int


def _is_finite(value: Any) -> bool:
    # value - value is 0.0 for a finite float, nan for inf and nan
    if type(value) is float:
        return value - value == 0.0
    return type(value) is int and -_MAX_FLOAT <= value <= _MAX_FLOAT


class _IntSpec(Spec):
    def __init__(self, meta: dict[str, Any]) -> None:
        self.bounds = _Bounds(meta)

    def test(self) -> Test:
        if [op for op, _ in self.bounds.items] == ["ge"]:  # NonNegInt, PositiveInt: one call
            low = self.bounds.items[0][1]

            def int_at_least(value: Any) -> bool:
                return type(value) is int and value >= low

            return int_at_least
        return self.bounds.within(_is_int)

    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, int) or isinstance(value, bool):
            raise _fail(path, "must be an int", value)
        self.bounds.check(value, path)

    def claims(self, value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)


class _FloatSpec(Spec):
    def __init__(self, meta: dict[str, Any]) -> None:
        self.bounds = _Bounds(meta)

    def test(self) -> Test:
        return self.bounds.within(_is_finite)

    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise _fail(path, "must be a number", value)
        if not is_finite_number(value):
            raise _fail(path, "must be finite", value)
        self.bounds.check(value, path)

    def claims(self, value: Any) -> bool:
        return isinstance(value, int | float) and not isinstance(value, bool)


class _Lengths:
    def __init__(self, meta: dict[str, Any]) -> None:
        self.min = meta.get("min_length")
        self.max = meta.get("max_length")

    def within(self, kind: Test) -> Test:
        """``kind`` (a type test) and the length bounds, specialised for none and for
        non-empty."""
        low, high = self.min or 0, self.max
        if not low and high is None:
            return kind
        if low == 1 and high is None:

            def non_empty(value: Any) -> bool:
                return kind(value) and len(value) > 0

            return non_empty

        def sized(value: Any) -> bool:
            return kind(value) and len(value) >= low and (high is None or len(value) <= high)

        return sized

    def check(self, value: Any, path: str) -> None:
        if self.min is not None and len(value) < self.min:
            raise _fail(
                path, "must not be empty" if self.min == 1 else f"needs length >= {self.min}", value
            )
        if self.max is not None and len(value) > self.max:
            raise _fail(path, f"needs length <= {self.max}", value)


class _StrSpec(Spec):
    def __init__(self, meta: dict[str, Any], choices: tuple[str, ...] | None = None) -> None:
        self.lengths = _Lengths(meta)
        pattern = meta.get("pattern")
        self.pattern = None if pattern is None else re.compile(pattern)
        self.choices = None if choices is None else frozenset(choices)
        self._shown = choices
        self.description = meta.get("description")
        self.excludes: frozenset[str] | None = meta.get("excludes")

    def test(self) -> Test:
        plain = (
            self.choices is None
            and self.pattern is None
            and self.excludes is None
            and self.lengths.max is None
        )
        if plain and self.lengths.min == 1:  # NonEmptyStr: one call
            return _is_non_empty_ascii_str
        if plain and not self.lengths.min:
            return _is_ascii_str
        if self.choices is None and self.lengths.min == 1 and self.lengths.max is None:
            excluded = self.excludes
            if excluded is not None:  # Token: one call

                def token(value: Any) -> bool:
                    return (
                        type(value) is str
                        and value.isascii()
                        and value != ""
                        and excluded.isdisjoint(value)
                    )

                return token
        if self.choices is not None:  # the choices are valid strs: membership says it all
            choices = self.choices

            def chosen(value: Any) -> bool:
                return type(value) is str and value in choices

            kind: Test = chosen
        else:
            kind = self.lengths.within(_is_ascii_str)  # ASCII: valid Unicode, cheaply
        if self.excludes is not None:
            excludes = self.excludes

            def excluding(value: Any) -> bool:
                return kind(value) and excludes.isdisjoint(value)

            return excluding
        if self.pattern is not None:
            search = self.pattern.search

            def matching(value: Any) -> bool:
                return kind(value) and search(value) is not None

            return matching
        return kind

    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, str):
            raise _fail(path, "must be a str", value)
        if self.choices is not None and value not in self.choices:
            raise _fail(path, f"must be one of {self._shown}", value)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise _fail(path, "must be valid Unicode (no lone surrogates)", value) from None
        self.lengths.check(value, path)
        self._check_pattern(value, path)

    def _check_pattern(self, value: str, path: str) -> None:
        bad = self.pattern is not None and self.pattern.search(value) is None
        if bad or (self.excludes is not None and not self.excludes.isdisjoint(value)):
            shown = self.description or (self.pattern and self.pattern.pattern) or "allowed"
            raise _fail(path, f"must be {shown}", value)

    def claims(self, value: Any) -> bool:
        return isinstance(value, str)


def _is_bytes(value: Any) -> bool:
    return type(value) is bytes


class _BytesSpec(Spec):
    def __init__(self, meta: dict[str, Any]) -> None:
        self.lengths = _Lengths(meta)

    def test(self) -> Test:
        return self.lengths.within(_is_bytes)

    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, bytes):
            raise _fail(path, "must be bytes", value)
        self.lengths.check(value, path)

    def claims(self, value: Any) -> bool:
        return isinstance(value, bytes)


class _LiteralSpec(Spec):
    def __init__(self, values: tuple[Any, ...]) -> None:
        self.values = values

    def check(self, value: Any, path: str) -> None:
        # by type and value: True == 1, but Literal[1] does not accept True
        if not any(type(value) is type(v) and value == v for v in self.values):
            raise _fail(path, f"must be one of {self.values}", value)


class _UnionSpec(Spec):
    def __init__(self, options: list[Spec]) -> None:
        self.options = options

    def test(self) -> Test | None:
        # None first: the cheapest test, and the usual value of an optional field
        options = sorted(self.options, key=lambda o: not isinstance(o, _NoneSpec))
        exact = [o.exact_type() for o in options]
        if all(t is not None for t in exact):  # Structs trusted whole, None: one set lookup
            types_ = frozenset(exact)

            def one_of_types(value: Any) -> bool:
                return type(value) in types_

            return one_of_types
        tests = [o.test() for o in options]
        if any(t is None for t in tests):
            return None
        if len(tests) == 2 and isinstance(options[0], _NoneSpec):
            other = typing.cast(Test, tests[1])

            def optional(value: Any) -> bool:
                return value is None or other(value)

            return optional
        every = typing.cast(list[Test], tests)

        def either(value: Any) -> bool:
            return any(t(value) for t in every)

        return either

    def check(self, value: Any, path: str) -> None:
        claimants = [o for o in self.options if o.claims(value)]
        if len(claimants) == 1:
            claimants[0].check(value, path)
            return
        for option in claimants:
            if option.ok(value):
                return
        if claimants:
            claimants[0].check(value, path)
        raise _fail(path, f"must be {self.shown}", value)

    shown = "one of the accepted types"

    def claims(self, value: Any) -> bool:
        return any(o.claims(value) for o in self.options)

    def mutable(self) -> bool:
        return any(o.mutable() for o in self.options)


_NOT_SEQUENCES = (str, bytes, bytearray, memoryview)


def _elements(container: type, item: Spec) -> Test | None:
    """The fast test of a ``container`` (exact type) whose every element passes ``item``."""
    each = item.test()
    if each is None:
        return None

    def every(value: Any) -> bool:
        if type(value) is not container:
            return False
        elements = typing.cast(Iterable[Any], value)  # narrowed to object by the test above
        for element in elements:  # noqa: SIM110 - a loop: no generator frame per call
            if not each(element):
                return False
        return True

    return every


def _entries(key: Spec, item: Spec) -> Test | None:
    """The fast test of a ``dict`` whose every key and value pass ``key`` and ``item``."""
    key_ok, item_ok = key.test(), item.test()
    if key_ok is None or item_ok is None:
        return None

    def every(value: Any) -> bool:
        if type(value) is not dict:
            return False
        for k, v in value.items():  # noqa: SIM110 - a loop: no generator frame per call
            if not (key_ok(k) and item_ok(v)):
                return False
        return True

    return every


class _SeqSpec(Spec):
    """``Sequence[T]`` (any sequence but str/bytes), ``tuple[T, ...]`` or ``list[T]``."""

    def __init__(self, item: Spec, container: type | None, meta: dict[str, Any]) -> None:
        self.item = item
        self.container = container
        self.lengths = _Lengths(meta)

    def test(self) -> Test | None:
        if self.container is None:
            return None
        every = _elements(self.container, self.item)
        return None if every is None else self.lengths.within(every)

    def check(self, value: Any, path: str) -> None:
        if self.container is not None:
            if not isinstance(value, self.container):
                raise _fail(path, f"must be a {self.container.__name__}", value)
        elif not isinstance(value, collections.abc.Sequence) or isinstance(value, _NOT_SEQUENCES):
            raise _fail(path, "must be a sequence (not a str or bytes)", value)
        self.lengths.check(value, path)
        item = self.item
        if item is not ANY:
            for i, element in enumerate(value):
                item.check(element, f"{path}[{i}]")

    def claims(self, value: Any) -> bool:
        if self.container is not None:
            return isinstance(value, self.container)
        return isinstance(value, collections.abc.Sequence) and not isinstance(value, _NOT_SEQUENCES)

    def mutable(self) -> bool:
        return self.container is not tuple or self.item.mutable()


class _FixedTupleSpec(Spec):
    def __init__(self, items: list[Spec]) -> None:
        self.items = items

    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, tuple) or len(value) != len(self.items):
            raise _fail(path, f"must be a tuple of {len(self.items)}", value)
        for i, (spec, element) in enumerate(zip(self.items, value, strict=True)):
            spec.check(element, f"{path}[{i}]")

    def claims(self, value: Any) -> bool:
        return isinstance(value, tuple)

    def mutable(self) -> bool:
        return any(i.mutable() for i in self.items)


class _MapSpec(Spec):
    """``Mapping[K, V]`` (any mapping) or ``dict[K, V]``."""

    def __init__(self, key: Spec, item: Spec, exact_dict: bool, meta: dict[str, Any]) -> None:
        self.key = key
        self.item = item
        self.exact_dict = exact_dict
        self.lengths = _Lengths(meta)

    def test(self) -> Test | None:
        if not self.exact_dict:
            return None
        every = _entries(self.key, self.item)
        return None if every is None else self.lengths.within(every)

    def check(self, value: Any, path: str) -> None:
        if self.exact_dict:
            if not isinstance(value, dict):
                raise _fail(path, "must be a dict", value)
        elif not isinstance(value, collections.abc.Mapping):
            raise _fail(path, "must be a mapping", value)
        self.lengths.check(value, path)
        for k, v in value.items():
            self.key.check(k, f"{path} key")
            self.item.check(v, f"{path}[{k!r}]")

    def claims(self, value: Any) -> bool:
        return isinstance(value, dict if self.exact_dict else collections.abc.Mapping)

    def mutable(self) -> bool:
        return True


class _TypedDictSpec(Spec):
    def __init__(self, name: str, fields: dict[str, Spec], required: frozenset[str]) -> None:
        self.name = name
        self.fields = fields
        self.required = required

    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, collections.abc.Mapping):
            raise _fail(path, "must be a mapping", value)
        for k in value:
            if k not in self.fields:
                raise ValidationError(
                    f"{path} has unknown key {_describe(k)}; known: {sorted(self.fields)}",
                    field=path,
                    value=k,
                )
        for k in self.required:
            if k not in value:
                raise ValidationError(f"{path} needs key {k!r}", field=path, value=value)
        for k, v in value.items():
            self.fields[k].check(v, f"{path}.{k}")

    def claims(self, value: Any) -> bool:
        return isinstance(value, collections.abc.Mapping)

    def mutable(self) -> bool:
        return True


class _ClassSpec(Spec):
    def __init__(self, cls: type) -> None:
        self.cls = cls

    def test(self) -> Test:
        cls = self.cls

        def instance(value: Any) -> bool:
            return isinstance(value, cls)

        return instance

    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, self.cls):
            raise _fail(path, f"must be a {self.cls.__name__}", value)

    def claims(self, value: Any) -> bool:
        return isinstance(value, self.cls)

    def mutable(self) -> bool:
        return True  # an arbitrary object: anything may change


class _StructSpec(Spec):
    """A Struct instance whose every field passes its hint (filled in after creation, so a
    Struct may refer to itself).

    A Struct marked :func:`checked` validated its fields when it was built; a boundary then
    re-checks only the fields that can change in place afterwards (its mutable containers).
    """

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.fields: list[tuple[str, Spec]] = []
        self.trusted = cls in _CHECKED and cls.__struct_config__.frozen  # type: ignore[attr-defined]

    def crossing_fields(self) -> list[tuple[str, Spec]]:
        """The fields a boundary checks: all of them, or only the mutable ones when trusted."""
        if not self.trusted:
            return self.fields
        return [(name, spec) for name, spec in self.fields if spec.mutable()]

    def exact_type(self) -> type | None:
        return None if self.crossing_fields() else self.cls

    def fields_test(self, fields: list[tuple[str, Spec]]) -> Test | None:
        """The fast test of an instance of exactly this class whose ``fields`` pass."""
        cls = self.cls
        tests = [(name, spec.test()) for name, spec in fields if spec is not ANY]
        if any(t is None for _, t in tests):
            return None
        checks = typing.cast(list[tuple[str, Test]], tests)
        if len(checks) == 1:
            ((name, only),) = checks

            def one_field(value: Any) -> bool:
                return type(value) is cls and only(getattr(value, name))

            return one_field

        def every_field(value: Any) -> bool:
            if type(value) is not cls:
                return False
            for name, check in checks:  # noqa: SIM110 - a loop: no generator frame per call
                if not check(getattr(value, name)):
                    return False
            return True

        return every_field

    def test(self) -> Test | None:
        return self.fields_test(self.crossing_fields())

    def check_fields(self, value: Any, path: str, fields: list[tuple[str, Spec]]) -> None:
        prefix = f"{path}." if path else ""
        for name, spec in fields:
            spec.check(getattr(value, name), prefix + name)

    def check(self, value: Any, path: str) -> None:
        if not isinstance(value, self.cls):
            raise _fail(path, f"must be a {self.cls.__name__}", value)
        self.check_fields(value, path, self.crossing_fields())

    def claims(self, value: Any) -> bool:
        return isinstance(value, self.cls)

    def mutable(self) -> bool:
        return bool(self.crossing_fields())


# -- hints to specs --------------------------------------------------------------------------


class Excludes:
    """``Annotated[str, Excludes(chars)]``: a str with none of ``chars`` (a fast equivalent of a
    ``pattern`` beside it, which msgspec and the error message use)."""

    def __init__(self, chars: str) -> None:
        self.chars = frozenset(chars)


class OneOf:
    """``Annotated[str, OneOf(values)]``: a str that is one of ``values`` (where the type stays
    ``str`` for callers, unlike ``Literal``)."""

    def __init__(self, values: tuple[str, ...]) -> None:
        self.values = values


NonEmptyStr = Annotated[str, msgspec.Meta(min_length=1)]
"""A non-empty str (ids, keys, receipts)."""
Token = Annotated[
    str,
    msgspec.Meta(
        pattern=r"^[^ .*>\t\n]+\Z",
        description="a non-empty token without spaces, '.', '*' or '>'",
        min_length=1,
    ),
    Excludes(" .*>\t\n"),
]
"""A name that can be one element of a subject: non-empty, no spaces, '.', '*' or '>'."""
NonNegInt = Annotated[int, msgspec.Meta(ge=0)]
PositiveInt = Annotated[int, msgspec.Meta(ge=1)]
NonNegFloat = Annotated[float, msgspec.Meta(ge=0)]
PositiveFloat = Annotated[float, msgspec.Meta(gt=0)]

_CHECKED: set[type] = set()
_STRUCTS: dict[type, _StructSpec] = {}
_S = TypeVar("_S", bound=type)


def checked(cls: _S) -> _S:
    """Mark a frozen Struct whose ``__post_init__`` calls :func:`check_fields`: its instances
    are valid from birth (construction, ``msgspec`` decoding and ``structs.replace`` all run
    ``__post_init__``), so a boundary re-checks only what can change in place — its mutable
    containers (a ``headers`` dict). Changing a frozen field with
    ``msgspec.structs.force_setattr`` is outside the contract."""
    if "__post_init__" not in vars(cls):
        raise TypeError(f"{cls.__name__} needs a __post_init__ that calls check_fields")
    _CHECKED.add(cls)
    return cls


def _meta_of(extras: tuple[Any, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for m in extras:
        if isinstance(m, msgspec.Meta):
            for attr in ("ge", "gt", "le", "lt", "min_length", "max_length", "pattern"):
                v = getattr(m, attr)
                if v is not None:
                    out[attr] = v
            if m.description is not None:
                out["description"] = m.description
        elif isinstance(m, OneOf):
            out["choices"] = m.values
        elif isinstance(m, Excludes):
            out["excludes"] = m.chars
    return out


def spec_for(tp: Any, meta: dict[str, Any] | None = None) -> Spec:
    """The spec of one resolved type hint."""
    meta = meta or {}
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        return spec_for(args[0], {**meta, **_meta_of(tp.__metadata__)})
    if tp is Any or tp is object or isinstance(tp, TypeVar | str | typing.ForwardRef):
        return ANY
    scalar = _SCALARS.get(tp) if isinstance(tp, type) or tp is None else None
    if scalar is not None:
        return scalar(meta)
    generic = _GENERICS.get(origin)
    if generic is not None:
        return generic(args, meta)
    return _class_spec(tp, origin)


def _literal(args: tuple[Any, ...], meta: dict[str, Any]) -> Spec:
    if all(type(a) is str for a in args):
        return _StrSpec(meta, choices=args)
    return _LiteralSpec(args)


def _union(args: tuple[Any, ...], meta: dict[str, Any]) -> Spec:
    options: list[Spec] = []
    for a in args:
        s = spec_for(a, meta if typing.get_origin(a) is not typing.Union else None)
        options.extend(s.options if isinstance(s, _UnionSpec) else [s])
    union = _UnionSpec(options)
    union.shown = " | ".join(getattr(a, "__name__", repr(a)) for a in args)
    return union


def _tuple(args: tuple[Any, ...], meta: dict[str, Any]) -> Spec:
    if len(args) == 2 and args[1] is Ellipsis:
        return _SeqSpec(spec_for(args[0]), tuple, meta)
    if not args:
        return _SeqSpec(ANY, tuple, meta)
    return _FixedTupleSpec([spec_for(a) for a in args])


def _mapping(exact: bool) -> Callable[[tuple[Any, ...], dict[str, Any]], Spec]:
    def make(args: tuple[Any, ...], meta: dict[str, Any]) -> Spec:
        key, item = (spec_for(args[0]), spec_for(args[1])) if args else (ANY, ANY)
        return _MapSpec(key, item, exact, meta)

    return make


def _sequence(kind: type | None) -> Callable[[tuple[Any, ...], dict[str, Any]], Spec]:
    def make(args: tuple[Any, ...], meta: dict[str, Any]) -> Spec:
        return _SeqSpec(spec_for(args[0]) if args else ANY, kind, meta)

    return make


def _typeddict_spec(tp: Any) -> Spec:
    hints = typing.get_type_hints(tp, include_extras=True)
    return _TypedDictSpec(
        tp.__name__,
        {k: spec_for(v) for k, v in hints.items()},
        frozenset(getattr(tp, "__required_keys__", ())),
    )


def _class_spec(tp: Any, origin: Any) -> Spec:
    """A TypedDict, a Struct, a (parametrised) class — or anything else, unchecked."""
    if typing.is_typeddict(tp):
        return _typeddict_spec(tp)
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return struct_spec(tp)
    if origin is not None and isinstance(origin, type) and origin.__module__ != "collections.abc":
        return _ClassSpec(origin)  # a parametrised generic class: its instances, unparametrised
    if isinstance(tp, type):
        if getattr(tp, "_is_protocol", False) and not getattr(tp, "_is_runtime_protocol", False):
            return ANY
        return _ClassSpec(tp)
    return ANY  # callables, abstract collections we do not police, …


#: hint -> its spec, for the scalar types (``meta`` carries ``Annotated`` constraints)
_SCALARS: dict[Any, Callable[[dict[str, Any]], Spec]] = {
    None: lambda meta: _NoneSpec(),
    type(None): lambda meta: _NoneSpec(),
    bool: lambda meta: _BoolSpec(),
    int: _IntSpec,
    float: _FloatSpec,
    str: lambda meta: _StrSpec(meta, meta.get("choices")),
    bytes: _BytesSpec,
}
#: ``typing.get_origin`` of a generic hint -> its spec, from the hint's arguments
_GENERICS: dict[Any, Callable[[tuple[Any, ...], dict[str, Any]], Spec]] = {
    typing.Literal: _literal,
    typing.Union: _union,
    types.UnionType: _union,
    collections.abc.Sequence: _sequence(None),
    list: _sequence(list),
    tuple: _tuple,
    dict: _mapping(True),
    collections.abc.Mapping: _mapping(False),
}


def struct_spec(cls: type) -> _StructSpec:
    """The (memoised) spec of a Struct class; its fields are resolved on first use."""
    spec = _STRUCTS.get(cls)
    if spec is not None:
        return spec
    spec = _STRUCTS[cls] = _StructSpec(cls)
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except NameError:  # a hint not yet importable: decided at the first check instead
        del _STRUCTS[cls]
        raise
    spec.fields = [(name, spec_for(hints[name])) for name in cls.__struct_fields__]  # type: ignore[attr-defined]
    return spec


# -- field checks ----------------------------------------------------------------------------

_FIELD_TESTS: dict[type, Test] = {}
_HAND_WRITTEN: dict[type, Test] = {}


def hand_written_fields(cls: type) -> Callable[[Test], Test]:
    """Register ``test`` as the fast test of :func:`check_fields` for Struct ``cls`` (one
    built on a hot path, such as an ``Envelope`` per message): one inline expression instead
    of a call per field. It must accept only instances whose every field passes its hint;
    anything else goes to the precise check, which names the bad field."""

    def register(test: Test) -> Test:
        _HAND_WRITTEN[cls] = test
        _FIELD_TESTS[cls] = test
        return test

    return register


def _no(obj: Any) -> bool:
    return False


def _fields_test(cls: type) -> Test:
    spec = struct_spec(cls)
    test = _HAND_WRITTEN.get(cls) or spec.fields_test(spec.fields) or _no
    _FIELD_TESTS[cls] = test
    return test


def check_fields(obj: Any) -> None:
    """Check every field of Struct ``obj`` against its hint (call it from ``__post_init__``);
    :class:`ValidationError` names the first bad field."""
    test = _FIELD_TESTS.get(type(obj))
    if test is None:
        try:
            test = _fields_test(type(obj))
        except NameError:  # built while its module is still importing: checked from then on
            return
    try:
        ok = test(obj)
    except Exception:  # the precise check says what is wrong
        ok = False
    if not ok:
        spec = struct_spec(type(obj))
        spec.check_fields(obj, "", spec.fields)


__all__ = [
    "Excludes",
    "NonEmptyStr",
    "NonNegFloat",
    "NonNegInt",
    "OneOf",
    "PositiveFloat",
    "PositiveInt",
    "Token",
    "check_fields",
    "checked",
    "hand_written_fields",
    "spec_for",
    "struct_spec",
]
