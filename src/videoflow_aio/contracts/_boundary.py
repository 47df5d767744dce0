"""One validation at every contract boundary, derived from the contracts' own type hints.

Every contract ABC derives from :class:`Boundary`. When a provider class is defined, each
contract method it implements is replaced by a wrapper that checks the arguments against the
*contract's* hints before the implementation runs, and the provider's constructor and each
method of its own marked :func:`checked_control` (a model control) against their own hints;
no other method is touched. A wrong type or value raises
:class:`~videoflow_aio.contracts.errors.ValidationError` naming the parameter (dotted into
Structs and indexed into containers: ``envelope.channel.node``, ``owned[2]``) and the value;
nothing of the implementation has run, so state is unchanged. The memory models, the file
store and every adapter therefore refuse the same inputs with the same errors.

Input Structs a caller builds (``Envelope``, ``ChannelSpec``, ``Retry``, ``RetentionContract``,
…) are marked :func:`~._specs.checked` and call :func:`~._specs.check_fields` in
``__post_init__``: a bad one fails where it is built, and a boundary then re-checks only what
can change in place (a ``headers`` dict). Structs a provider hands out and a caller hands back
(``DeliveryToken``, ``ImmutablePayloadRef``, ``FeasiblePlan``, ``InventorySnapshot``, …) have
every field checked at every crossing, since a caller can also build them by hand.

What each hint accepts is :mod:`videoflow_aio.contracts._specs`.

No code is generated. Each wrapper is a plain closure: for the hot methods (publish, receive,
settle, renew, get, cas) one written out by hand in :mod:`._hot_paths` whose single inline
expression accepts well-formed arguments; for every other coroutine method of one to four
parameters, a closure of that arity calling each parameter's fast test
(:meth:`~._specs.Spec.test`); for any other signature, and for calls with keywords, one that
binds the call and runs the precise check. Anything a fast test does not accept goes to the
precise checker, which either finds nothing wrong (an ``int`` for a ``float``, a non-ASCII
``str``) and the call proceeds, or raises the error naming the first bad field. What a
rejected call costs does not matter; what an accepted one costs is measured in
``benchmarks/boundary_bench.py``.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any, ClassVar

from ._specs import ANY, Spec, Test, spec_for

_WRAPPED = "__vf_boundary__"
_CONTROL = "__vf_control__"

Slow = Callable[..., None]
"""The precise check of every parameter, in order: raises the first one's error."""
Wrap = Callable[[Callable[..., Any], Slow], Callable[..., Any]]
"""A hand-written checked wrapper for one contract method: ``wrap(impl, slow)``."""

_HAND_WRITTEN: dict[Callable[..., Any], Wrap] = {}


def hand_written(contract_method: Callable[..., Any]) -> Callable[[Wrap], Wrap]:
    """Register ``wrap`` as the checked wrapper of ``contract_method`` (a hot path).

    ``wrap(impl, slow)`` returns an ``async def`` with the contract's parameter names whose
    inline test accepts only arguments the precise check accepts (anything else goes to
    ``slow``, which raises the error or finds nothing wrong) and which then returns
    ``await impl(self, …)``. It is used for every implementation whose parameters are the
    contract's (same names, no defaults); tests/contracts/test_boundary_hand_written.py holds
    each one to the contract's hints."""

    def register(wrap: Wrap) -> Wrap:
        _HAND_WRITTEN[contract_method] = wrap
        return wrap

    return register


class _Missing:
    """A parameter the caller did not pass positionally."""


_MISSING: Any = _Missing()


def _slow(checked: list[tuple[str, Spec]]) -> Slow:
    def slow(*values: Any) -> None:
        for (name, spec), value in zip(checked, values, strict=True):
            spec.check(value, name)

    return slow


def _never(*values: Any) -> bool:
    return False


def _make_wrapper(impl: Callable[..., Any], hints: dict[str, Any], wrap: Wrap | None) -> Any:
    """A function calling ``impl`` after checking its arguments; None when nothing needs it."""
    signature = inspect.signature(impl)
    params = list(signature.parameters.values())[1:]  # after self
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None  # *args: nothing sensible to check against
    named = dict(_checked_params(params, hints))
    keywords = _keyword_specs(params, hints)
    if keywords is None and any(p.kind is p.VAR_KEYWORD for p in params):
        return None  # a bare **kwargs (passed on to a base): nothing sensible to check against
    if not named and not keywords:
        return None
    is_async = inspect.iscoroutinefunction(impl)
    general = _general(impl, signature, named, keywords, is_async)
    if keywords is not None or not is_async or len(params) > len(_ARITY):
        return _dress(general, impl)
    checked = [(p.name, named.get(p.name, ANY)) for p in params]
    slow = _slow(checked)
    if wrap is not None:  # the implementation takes exactly the contract's parameters
        return _dress(wrap(impl, slow), impl)
    tests = [spec.test() for _, spec in checked]
    if any(t is None for t in tests):  # one has no fast test: always the precise check
        tests = [_never] * len(tests)
    return _dress(
        _ARITY[len(params) - 1](impl, typing.cast(list[Test], tests), slow, general), impl
    )


def _dress(wrapper: Any, impl: Callable[..., Any]) -> Any:
    for attr in ("__module__", "__qualname__", "__doc__", "__name__"):
        setattr(wrapper, attr, getattr(impl, attr, None))
    wrapper.__annotations__ = dict(getattr(impl, "__annotations__", {}))  # get_type_hints
    wrapper.__wrapped__ = impl
    setattr(wrapper, _WRAPPED, True)
    return wrapper


def _keyword_specs(
    params: list[inspect.Parameter], hints: dict[str, Any]
) -> dict[str, Spec] | None:
    """For ``**options: Unpack[SomeTypedDict]`` (a constructor taking a connection's
    keywords): each keyword's spec. None without ``**`` or for a bare ``**kwargs``."""
    var_kw = next((p for p in params if p.kind is p.VAR_KEYWORD), None)
    if var_kw is None:
        return None
    hint = hints.get(var_kw.name)
    if typing.get_origin(hint) is not typing.Unpack:
        return None  # a bare **kwargs: nothing sensible to check against
    try:
        option_hints = typing.get_type_hints(typing.get_args(hint)[0], include_extras=True)
    except Exception:  # a hint that does not resolve
        return None
    return {k: spec_for(h) for k, h in option_hints.items()}


def _general(
    impl: Callable[..., Any],
    signature: inspect.Signature,
    named: dict[str, Spec],
    keywords: dict[str, Spec] | None,
    is_async: bool,
) -> Any:
    """The wrapper for any signature (model controls, constructors, keyword calls): a
    positional call giving every parameter runs each one's fast test and, where it says no, the
    precise check; any other call is bound to ``impl``'s signature and precisely checked."""
    params = list(signature.parameters.values())[1:]
    var_kw = next((p.name for p in params if p.kind is p.VAR_KEYWORD), "")
    in_order = [(p.name, named.get(p.name, ANY)) for p in params]
    tests = [(name, spec, spec.test() or spec.ok) for name, spec in in_order if spec is not ANY]
    positional = [i for i, p in enumerate(params) if p.kind is not p.KEYWORD_ONLY]
    simple = positional == list(range(len(params)))  # no keyword-only parameter, no **

    def check(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if simple and not kwargs and len(args) == len(params):
            values = _checked_values(args, in_order)
            for (name, precise, test), value in zip(tests, values, strict=True):
                try:
                    ok = test(value)
                except Exception:
                    ok = False
                if not ok:
                    precise.check(value, name)
            return
        try:
            bound = signature.bind(None, *args, **kwargs)  # None: self
        except TypeError:
            return  # a wrong call: the implementation raises Python's own TypeError
        for name, value in bound.arguments.items():
            if name == var_kw:
                for key, given in value.items():
                    spec = None if keywords is None else keywords.get(key)
                    if spec is not None:
                        spec.check(given, key)
            else:
                spec = named.get(name)
                if spec is not None:
                    spec.check(value, name)

    if is_async:

        async def checked(self: Any, *args: Any, **kwargs: Any) -> Any:
            check(args, kwargs)
            return await impl(self, *args, **kwargs)

    else:

        def checked(self: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[misc]
            check(args, kwargs)
            return impl(self, *args, **kwargs)

    return checked


def _checked_values(args: tuple[Any, ...], in_order: list[tuple[str, Spec]]) -> list[Any]:
    return [value for value, (_, spec) in zip(args, in_order, strict=True) if spec is not ANY]


# -- the wrappers of coroutine methods taking 1 to 4 parameters ------------------------------
# A positional call runs each parameter's fast test and, only when one says no, the precise
# check; a call with keywords (or leaving out a parameter with a default) takes ``general``.


def _given(*values: Any) -> tuple[Any, ...]:
    return tuple(v for v in values if v is not _MISSING)


def _arity1(impl: Callable[..., Any], tests: list[Test], slow: Slow, general: Any) -> Any:
    (t0,) = tests

    async def checked(self: Any, a: Any = _MISSING, /, **kw: Any) -> Any:
        if kw or a is _MISSING:
            return await general(self, *_given(a), **kw)
        try:
            ok = t0(a)
        except Exception:
            ok = False
        if not ok:
            slow(a)
        return await impl(self, a)

    return checked


def _arity2(impl: Callable[..., Any], tests: list[Test], slow: Slow, general: Any) -> Any:
    t0, t1 = tests

    async def checked(self: Any, a: Any = _MISSING, b: Any = _MISSING, /, **kw: Any) -> Any:
        if kw or b is _MISSING:
            return await general(self, *_given(a, b), **kw)
        try:
            ok = t0(a) and t1(b)
        except Exception:
            ok = False
        if not ok:
            slow(a, b)
        return await impl(self, a, b)

    return checked


def _arity3(impl: Callable[..., Any], tests: list[Test], slow: Slow, general: Any) -> Any:
    t0, t1, t2 = tests

    async def checked(
        self: Any, a: Any = _MISSING, b: Any = _MISSING, c: Any = _MISSING, /, **kw: Any
    ) -> Any:
        if kw or c is _MISSING:
            return await general(self, *_given(a, b, c), **kw)
        try:
            ok = t0(a) and t1(b) and t2(c)
        except Exception:
            ok = False
        if not ok:
            slow(a, b, c)
        return await impl(self, a, b, c)

    return checked


def _arity4(impl: Callable[..., Any], tests: list[Test], slow: Slow, general: Any) -> Any:
    t0, t1, t2, t3 = tests

    async def checked(
        self: Any,
        a: Any = _MISSING,
        b: Any = _MISSING,
        c: Any = _MISSING,
        d: Any = _MISSING,
        /,
        **kw: Any,
    ) -> Any:
        if kw or d is _MISSING:
            return await general(self, *_given(a, b, c, d), **kw)
        try:
            ok = t0(a) and t1(b) and t2(c) and t3(d)
        except Exception:
            ok = False
        if not ok:
            slow(a, b, c, d)
        return await impl(self, a, b, c, d)

    return checked


_ARITY = (_arity1, _arity2, _arity3, _arity4)


def _checked_params(
    params: list[inspect.Parameter], hints: dict[str, Any]
) -> list[tuple[str, Spec]]:
    """``(name, spec)`` of each parameter whose hint checks anything."""
    specs = [(p.name, spec_for(hints[p.name]) if p.name in hints else ANY) for p in params]
    return [(n, s) for n, s in specs if s is not ANY]


def _hints_of(fn: Callable[..., Any]) -> dict[str, Any] | None:
    try:
        return typing.get_type_hints(fn, include_extras=True)
    except Exception:  # a hint that does not resolve (TYPE_CHECKING-only import, …)
        return None


def _contract_hints(contract_fn: Callable[..., Any], impl: Callable[..., Any]) -> dict[str, Any]:
    """The contract's hints, keyed by the implementation's parameter names (matched by name,
    else by position); an implementation's extra parameters keep their own hints."""
    hints = typing.get_type_hints(contract_fn, include_extras=True)
    contract_params = [p.name for p in list(inspect.signature(contract_fn).parameters.values())[1:]]
    own = _hints_of(impl) or {}
    out: dict[str, Any] = {}
    for i, p in enumerate(list(inspect.signature(impl).parameters.values())[1:]):
        if p.name in hints and p.name in contract_params:
            out[p.name] = hints[p.name]
        elif i < len(contract_params) and contract_params[i] in hints:
            out[p.name] = hints[contract_params[i]]
        elif p.name in own:
            out[p.name] = own[p.name]
    return out


def _same_parameters(contract_fn: Callable[..., Any], impl: Callable[..., Any]) -> bool:
    """Whether ``impl`` takes exactly the contract's parameters (names, kinds, no defaults)."""
    mine = list(inspect.signature(impl).parameters.values())[1:]
    theirs = list(inspect.signature(contract_fn).parameters.values())[1:]
    return [p.name for p in mine] == [p.name for p in theirs] and all(
        p.kind is p.POSITIONAL_OR_KEYWORD and p.default is p.empty for p in mine
    )


def _wrap(
    cls: type, name: str, impl: Any, hints: dict[str, Any] | None, wrap: Wrap | None = None
) -> None:
    if hints is None:
        return
    if inspect.isasyncgenfunction(impl) or inspect.isgeneratorfunction(impl):
        return
    wrapper = _make_wrapper(impl, hints, wrap)
    if wrapper is not None:
        setattr(cls, name, wrapper)


class Boundary:
    """Base of every contract ABC: a subclass's contract methods are checked at the boundary.

    For a provider class (any subclass of a contract), every contract method it implements is
    wrapped with the check built from the contract's hints, and its constructor and each
    method marked :func:`checked_control` with the check built from their own hints.
    Already-wrapped methods (inherited from a provider base) are left as they are.
    """

    _vf_contract: ClassVar[type[Boundary] | None] = None
    _vf_methods: ClassVar[dict[str, Callable[..., Any]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if Boundary in cls.__bases__:  # a contract itself
            cls._vf_contract = cls
            cls._vf_methods = {
                name: fn
                for name, fn in vars(cls).items()
                if not name.startswith("_") and inspect.isfunction(fn)
            }
            return
        _install(cls)


def _install(cls: type[Boundary]) -> None:
    contract = cls._vf_contract
    if contract is None:
        return
    methods = contract._vf_methods
    for name, contract_fn in methods.items():
        impl = inspect.getattr_static(cls, name)
        if impl is contract_fn or not inspect.isfunction(impl) or getattr(impl, _WRAPPED, False):
            continue
        hints = _contract_hints(contract_fn, impl)
        if _same_parameters(contract_fn, impl):
            _wrap(cls, name, impl, hints, _HAND_WRITTEN.get(contract_fn))
        else:
            _wrap(cls, name, impl, hints)
    init = vars(cls).get("__init__")
    if inspect.isfunction(init) and not getattr(init, _WRAPPED, False):
        _wrap(cls, "__init__", init, _hints_of(init))  # the provider's constructor: its own hints
    above = set(contract.__mro__)
    for klass in cls.__mro__:
        if klass in above:
            continue
        for name, obj in list(vars(klass).items()):
            if (
                not getattr(obj, _CONTROL, False)
                or name in methods
                or not inspect.isfunction(obj)
                or getattr(obj, _WRAPPED, False)
                or inspect.getattr_static(cls, name) is not obj
            ):
                continue
            _wrap(cls, name, obj, _hints_of(obj))


_F = typing.TypeVar("_F", bound=Callable[..., Any])


def checked_control(method: _F) -> _F:
    """Mark a provider's own public method (a model control, an admin helper taking a
    caller's values) to be checked at the boundary like a contract method, against its own
    hints, in every provider class that has it (the mark is read when the class is defined).

    A contract method needs no mark: every implementation of one is checked against the
    contract's hints, and a provider cannot opt out. Other methods are checked only when
    marked."""
    setattr(method, _CONTROL, True)
    return method


def unchecked(method: Any) -> Any:
    """The implementation behind ``method``, a bound boundary-checked method, without the
    check (``method`` itself when it is not one: a plain callable, a wrapper put on an
    instance, …); it behaves exactly as ``method`` does for arguments the check accepts.

    Only for calls from inside the library whose arguments cannot be wrong: values the
    provider itself handed out (a ``DeliveryToken`` from its ``receive``), Structs the library
    just built (checked in their ``__post_init__``), or arguments a checked call of the same
    method already accepted and that cannot have changed since. Bad input from outside must
    keep reaching the checked method.
    """
    func = getattr(method, "__func__", None)
    impl = getattr(func, "__wrapped__", None)
    owner = getattr(method, "__self__", None)
    if impl is None or owner is None or not getattr(func, _WRAPPED, False):
        return method
    return impl.__get__(owner, type(owner))


__all__ = ["Boundary", "checked_control", "hand_written", "unchecked"]
