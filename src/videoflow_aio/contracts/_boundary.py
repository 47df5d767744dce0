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

Each wrapper is compiled once per method: a single boolean expression accepts well-formed
arguments without a function call per check; anything it does not accept goes to the precise
checker, which either finds nothing wrong (an ``int`` for a ``float``, a non-ASCII ``str``) and
the call proceeds, or raises the error naming the first bad field. What a rejected call costs
does not matter; what an accepted one costs is measured in ``benchmarks/messaging_bench.py``.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any, ClassVar

from ._specs import ANY, Names, Spec, spec_for

_WRAPPED = "__vf_boundary__"


def _make_wrapper(impl: Callable[..., Any], hints: dict[str, Any], is_async: bool) -> Any:
    """A function with ``impl``'s signature that checks its arguments, then calls ``impl``."""
    params = list(inspect.signature(impl).parameters.values())[1:]  # after self
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return None  # *args: nothing sensible to check against
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return _keywords_wrapper(impl, params, hints, is_async)
    names = Names()
    sig_parts, call_parts = _signature_parts(params, names)
    checked = _checked_params(params, hints)
    if not checked:
        return None

    def slow(*values: Any) -> None:
        for (name, spec), value in zip(checked, values, strict=True):
            spec.check(value, name)

    names.ns["_vf_impl"] = impl
    names.ns["_vf_slow"] = slow
    guard = _guard(checked, names)
    first = "async def" if is_async else "def"
    call = f"_vf_impl(_vf_self, {', '.join(call_parts)})"
    src = (
        f"{first} {impl.__name__}(_vf_self, {', '.join(sig_parts)}):\n"
        f"{guard}"
        f"    return {'await ' if is_async else ''}{call}\n"
    )
    exec(src, names.ns)
    wrapper = names.ns[impl.__name__]
    for attr in ("__module__", "__qualname__", "__doc__"):
        setattr(wrapper, attr, getattr(impl, attr, None))
    wrapper.__annotations__ = dict(getattr(impl, "__annotations__", {}))  # get_type_hints
    wrapper.__wrapped__ = impl
    setattr(wrapper, _WRAPPED, True)
    return wrapper


def _keywords_wrapper(
    impl: Callable[..., Any], params: list[inspect.Parameter], hints: dict[str, Any], is_async: bool
) -> Any:
    """For ``**options: Unpack[SomeTypedDict]`` (a constructor taking a connection's
    keywords): a plain wrapper checking the named parameters and each keyword given against
    the TypedDict's hints. Not compiled: such signatures are constructors, not hot paths.
    None for a bare ``**kwargs``."""
    var_kw = next(p for p in params if p.kind is p.VAR_KEYWORD)
    hint = hints.get(var_kw.name)
    if typing.get_origin(hint) is not typing.Unpack:
        return None  # a bare **kwargs: nothing sensible to check against
    options = typing.get_args(hint)[0]
    try:
        option_hints = typing.get_type_hints(options, include_extras=True)
    except Exception:  # a hint that does not resolve
        return None
    named = dict(_checked_params([p for p in params if p is not var_kw], hints))
    keywords = {k: spec_for(h) for k, h in option_hints.items()}
    signature = inspect.signature(impl)

    def check(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        try:
            bound = signature.bind(None, *args, **kwargs)  # None: self
        except TypeError:
            return  # a wrong call: the implementation raises Python's own TypeError
        for name, value in bound.arguments.items():
            if name == var_kw.name:
                for key, given in value.items():
                    spec = keywords.get(key)
                    if spec is not None:
                        spec.check(given, key)
            elif name in named:
                named[name].check(value, name)

    if is_async:

        async def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            check(args, kwargs)
            return await impl(self, *args, **kwargs)

    else:

        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[misc]
            check(args, kwargs)
            return impl(self, *args, **kwargs)

    for attr in ("__module__", "__qualname__", "__doc__", "__name__"):
        setattr(wrapper, attr, getattr(impl, attr, None))
    wrapper.__annotations__ = dict(getattr(impl, "__annotations__", {}))
    wrapper.__wrapped__ = impl  # type: ignore[attr-defined]
    setattr(wrapper, _WRAPPED, True)
    return wrapper


def _checked_params(
    params: list[inspect.Parameter], hints: dict[str, Any]
) -> list[tuple[str, Spec]]:
    """``(name, spec)`` of each parameter whose hint checks anything."""
    specs = [(p.name, spec_for(hints[p.name]) if p.name in hints else ANY) for p in params]
    return [(n, s) for n, s in specs if s is not ANY]


def _signature_parts(params: list[inspect.Parameter], names: Names) -> tuple[list[str], list[str]]:
    """The wrapper's parameter list (defaults by reference, ``/`` and ``*`` where ``impl``
    has them) and the arguments of its call to ``impl``."""
    sig_parts: list[str] = []
    call_parts: list[str] = []
    seen_kwonly = False
    for p in params:
        text = p.name
        if p.default is not p.empty:
            text += f"={names.ref(p.default)}"
        if p.kind is p.KEYWORD_ONLY:
            if not seen_kwonly:
                sig_parts.append("*")
                seen_kwonly = True
            call_parts.append(f"{p.name}={p.name}")
        else:
            call_parts.append(p.name)
        sig_parts.append(text)
    if any(p.kind is p.POSITIONAL_ONLY for p in params):
        last = max(i for i, p in enumerate(params) if p.kind is p.POSITIONAL_ONLY)
        sig_parts.insert(last + 1, "/")
    return sig_parts, call_parts


def _guard(checked: list[tuple[str, Spec]], names: Names) -> str:
    """The wrapper's check: the specs' inline fast tests, falling back to the full checks
    (which raise the typed error) when one fails or a spec has none."""
    fast_parts = [spec.fast(name, names) for name, spec in checked]
    slow_call = f"_vf_slow({', '.join(n for n, _ in checked)})"
    if any(f is None for f in fast_parts):
        return f"    {slow_call}\n"
    return (
        "    try:\n"
        f"        _vf_ok = {' and '.join(typing.cast(list[str], fast_parts))}\n"
        "    except Exception:\n"
        "        _vf_ok = False\n"
        "    if not _vf_ok:\n"
        f"        {slow_call}\n"
    )


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


__all__ = ["Boundary", "unchecked"]
