"""Bad input where a user first meets a provider: its constructor (issue 11, "one validation
mechanism").

The property campaign (``test_boundary_properties.py``) feeds wrong values to every public
method of every provider; a provider's constructor is the same kind of boundary — a
``max_payload_bytes=nan`` or a ``dedup_window_seconds="120"`` made the memory model accept
any payload size or fail later with a bare ``TypeError``. Each constructor parameter with a
hint gets hypothesis-drawn wrong values (``_boundary_inputs.bad``, written independently of
the mechanism): a :class:`ValidationError` naming that parameter, and valid values still
construct.
"""

from __future__ import annotations

import inspect
import re
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _alloc_helpers import whole_node
from _boundary_inputs import bad
from videoflow_aio.adapters.etcd import EtcdRuntimeStore
from videoflow_aio.adapters.nats import CoreNatsMessagingBackend, JetStreamMessagingBackend
from videoflow_aio.adapters.redis import RedisPayloadStore, RedisRuntimeStore
from videoflow_aio.contracts.errors import ValidationError
from videoflow_aio.memory.allocation import MemoryAllocationBackend
from videoflow_aio.memory.messaging import MemoryMessagingBackend
from videoflow_aio.memory.payload import MemoryPayloadStore
from videoflow_aio.memory.runtime_store import FileRuntimeStore

_STORE_ROOT = "/nonexistent/qa-boundary-store"  # the constructor creates nothing

#: provider class -> the arguments it needs (valid), besides the one under test
PROVIDERS: dict[type[Any], Callable[[], dict[str, Any]]] = {
    MemoryMessagingBackend: dict,
    MemoryPayloadStore: dict,
    MemoryAllocationBackend: lambda: {"nodes": [whole_node("n1")]},
    FileRuntimeStore: lambda: {"root": _STORE_ROOT},
    JetStreamMessagingBackend: dict,
    CoreNatsMessagingBackend: dict,
    RedisPayloadStore: dict,
    RedisRuntimeStore: dict,
    EtcdRuntimeStore: dict,
}


def _duck_typed(hint: Any) -> bool:
    """A static Protocol (a clock is anything with the right methods): nothing to refuse."""
    return any(
        getattr(tp, "_is_protocol", False) and not getattr(tp, "_is_runtime_protocol", False)
        for tp in (hint, *typing.get_args(hint))
    )


def _parameters() -> list[tuple[type[Any], str, Any]]:
    out = []
    for cls in PROVIDERS:
        hints = typing.get_type_hints(cls.__init__, include_extras=True)
        for name in list(inspect.signature(cls.__init__).parameters)[1:]:
            hint = hints.get(name)
            if hint is not None and not _duck_typed(hint) and bad(hint) is not None:
                out.append((cls, name, hint))
    return out


PARAMETERS = _parameters()

_NOT_A_STR_OR_PATH = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.binary(max_size=3), st.just([1])
)
#: unions with str, where ``bad`` (made for unions of Structs) would also draw valid strs
_SPECIAL: dict[tuple[type[Any], str], st.SearchStrategy[Any]] = {
    (FileRuntimeStore, "root"): st.one_of(_NOT_A_STR_OR_PATH, st.just("")),
    (JetStreamMessagingBackend, "url"): _NOT_A_STR_OR_PATH,
    (CoreNatsMessagingBackend, "url"): _NOT_A_STR_OR_PATH,
}


@pytest.mark.parametrize(
    ("cls", "name", "hint"), PARAMETERS, ids=[f"{c.__name__}.{n}" for c, n, _ in PARAMETERS]
)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_constructor_refuses_a_wrong_value_naming_the_parameter(
    cls: type[Any], name: str, hint: Any, data: st.DataObject
) -> None:
    special = _SPECIAL.get((cls, name))
    if special is None and str in typing.get_args(hint):
        # a secret (str | Secret | None): any str is a valid one
        special = _NOT_A_STR_OR_PATH.filter(lambda v: v is not None)
    strategy = special if special is not None else bad(hint)
    assert strategy is not None
    value = data.draw(strategy, label=name)
    with pytest.raises(ValidationError) as info:
        cls(**{**PROVIDERS[cls](), name: value})
    assert re.split(r"[.\[ ]", info.value.field)[0] == name, info.value


@pytest.mark.parametrize("cls", list(PROVIDERS), ids=lambda c: c.__name__)
def test_every_provider_still_constructs_with_valid_arguments(cls: type[Any]) -> None:
    cls(**PROVIDERS[cls]())


def test_a_path_is_still_a_file_store_root(tmp_path: Path) -> None:
    assert FileRuntimeStore(tmp_path / "store").root == str(tmp_path / "store")
