"""One validation at every contract boundary, derived from the contracts' own type hints.

Every contract ABC derives from :class:`Boundary`. When a provider class is defined, each
contract method it implements is replaced by a wrapper that checks the arguments against the
*contract's* hints before the implementation runs, and the provider's constructor and each
public method of its own (a model control) against their own hints. A wrong type or value raises
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

Each wrapper is built once per method, from plain closures (no code is generated): a quick
test per checked parameter accepts well-formed arguments; anything it does not accept goes to
the precise checker, which either finds nothing wrong (an ``int`` for a ``float``, a non-ASCII
``str``) and the call proceeds, or raises the error naming the first bad field. What a rejected
call costs does not matter; what an accepted one costs is measured in
``benchmarks/boundary_bench.py``.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from ._specs import ANY, Pred, Spec, spec_for

_WRAPPED = "__vf_boundary__"
_MISSING = object()  # an argument the call did not give (the implementation will say so)


def _make_check(
    sig: inspect.Signature, params: list[inspect.Parameter], checked: list[tuple[str, Spec]]
) -> Callable[[tuple[Any, ...], dict[str, Any]], None]:
    """``check(args, kwargs)``: the arguments of a call (after ``self``) against ``checked``.

    A call that passes every parameter by position is read off ``args`` directly; any other is
    bound to the signature first (defaults included, as the implementation will see them).
    """
    where = {p.name: i for i, p in enumerate(params)}
    count = len(params)
    slots = [(where[name], spec, spec.fast(), name) for name, spec in checked]

    by_name = [(None if p.kind is p.POSITIONAL_ONLY else p.name, p.default) for p in params]

    def values_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Sequence[Any]:
        if not kwargs and len(args) == count:
            return args
        # the rest by name, else their defaults; a missing or surplus argument is left for the
        # implementation's own TypeError (``_MISSING`` values are not checked)
        values = list(args[:count])
        for name, default in by_name[len(values) :]:
            if name is not None and name in kwargs:
                values.append(kwargs[name])
            else:
                values.append(_MISSING if default is inspect.Parameter.empty else default)
        return values

    def slow(values: Sequence[Any]) -> None:
        for i, spec, _, name in slots:
            if values[i] is not _MISSING:
                spec.check(values[i], name)

    if any(quick is None for _, _, quick, _ in slots):

        def check_slow(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            slow(values_of(args, kwargs))

        return check_slow
    quick = [(i, typing.cast(Pred, test)) for i, _, test, _ in slots]
    if len(quick) == 1:
        ((i0, t0),) = quick

        def check_one(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            values = values_of(args, kwargs)
            try:
                ok = t0(values[i0])
            except Exception:
                ok = False
            if not ok:
                slow(values)

        return check_one
    if len(quick) == 2:
        (i0, t0), (i1, t1) = quick

        def check_two(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            values = values_of(args, kwargs)
            try:
                ok = t0(values[i0]) and t1(values[i1])
            except Exception:
                ok = False
            if not ok:
                slow(values)

        return check_two

    def check_many(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        values = values_of(args, kwargs)
        ok = True
        try:
            for i, test in quick:
                if not test(values[i]):
                    ok = False
                    break
        except Exception:
            ok = False
        if not ok:
            slow(values)

    return check_many


def _make_wrapper(impl: Callable[..., Any], hints: dict[str, Any], is_async: bool) -> Any:
    """A function with ``impl``'s signature that checks its arguments, then calls ``impl``."""
    sig = inspect.signature(impl)
    params = list(sig.parameters.values())[1:]  # after self
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params):
        return None  # *args / **kwargs: nothing sensible to check against
    checked = _checked_params(params, hints)
    if not checked:
        return None
    check = _make_check(sig, params, checked)
    if is_async:

        async def checked_async(self: Any, *args: Any, **kwargs: Any) -> Any:
            check(args, kwargs)
            return await impl(self, *args, **kwargs)

        wrapper: Any = checked_async
    else:

        def checked_sync(self: Any, *args: Any, **kwargs: Any) -> Any:
            check(args, kwargs)
            return impl(self, *args, **kwargs)

        wrapper = checked_sync
    functools.update_wrapper(wrapper, impl)  # name, doc, annotations, __wrapped__ (signature)
    setattr(wrapper, _WRAPPED, True)
    return wrapper


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


def _wrap(cls: type, name: str, impl: Any, hints: dict[str, Any] | None) -> None:
    if hints is None:
        return
    is_async = inspect.iscoroutinefunction(impl)
    if not is_async and (inspect.isasyncgenfunction(impl) or inspect.isgeneratorfunction(impl)):
        return
    wrapper = _make_wrapper(impl, hints, is_async)
    if wrapper is not None:
        setattr(cls, name, wrapper)


class Boundary:
    """Base of every contract ABC: a subclass's methods are checked at the boundary.

    For a provider class (any subclass of a contract), every contract method it implements is
    wrapped with the check compiled from the contract's hints, and its constructor and every
    public method of its own (model controls) with the check compiled from their own hints.
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
        _wrap(cls, name, impl, _contract_hints(contract_fn, impl))
    init = vars(cls).get("__init__")
    if inspect.isfunction(init) and not getattr(init, _WRAPPED, False):
        _wrap(cls, "__init__", init, _hints_of(init))  # the provider's constructor: its own hints
    above = set(contract.__mro__)
    for klass in cls.__mro__:
        if klass in above:
            continue
        for name, obj in list(vars(klass).items()):
            if (
                name.startswith("_")
                or name in methods
                or not inspect.isfunction(obj)
                or getattr(obj, _WRAPPED, False)
                or inspect.getattr_static(cls, name) is not obj
            ):
                continue
            _wrap(cls, name, obj, _hints_of(obj))


__all__ = ["Boundary"]
