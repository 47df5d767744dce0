"""Random operation sequences give the same results on the file store as on the reference
model, including versions, and again on a file store reopened on the same directory."""

from __future__ import annotations

import re
import tempfile
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from videoflow_aio.contracts.errors import ValidationError
from videoflow_aio.memory.runtime_store import FileRuntimeStore, MemoryRuntimeStore

KEYS = st.sampled_from(["a", "a/b", "a/c", "b", "a%2fb", "é"])
VALUES = st.binary(max_size=12)
# an expected version: None, or the index of a version seen so far (possibly of another key)
VERSION = st.one_of(st.none(), st.integers(min_value=0, max_value=30))
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("get"), KEYS),
        st.tuples(st.just("cas"), KEYS, VERSION, VALUES),
        st.tuples(st.just("cas_current"), KEYS, VALUES),
        st.tuples(st.just("delete"), KEYS, VERSION),
        st.tuples(st.just("scan"), st.sampled_from(["", "a", "a/", "b", "z"])),
        st.tuples(st.just("append"), st.sampled_from(["l1", "l/2"]), VALUES),
        st.tuples(st.just("log"), st.sampled_from(["l1", "l/2"])),
        st.tuples(
            st.just("reopen"),
        ),
    ),
    max_size=40,
)


async def play(store_factory: Any, ops: list[tuple[Any, ...]]) -> list[object]:
    store = store_factory(None)
    seen: list[str] = []
    out: list[object] = []
    for op in ops:
        name = op[0]
        try:
            if name == "get":
                result: object = await store.get(op[1])
                if result[1] is not None:  # type: ignore[index]
                    seen.append(result[1])  # type: ignore[index]
            elif name in ("cas", "delete"):
                version = None if op[2] is None or not seen else seen[op[2] % len(seen)]
                if name == "cas":
                    result = await store.cas(op[1], version, op[3])
                else:
                    result = await store.delete(op[1], version)
            elif name == "cas_current":
                _, version = await store.get(op[1])
                result = await store.cas(op[1], version, op[2])
            elif name == "scan":
                result = await store.scan(op[1])
            elif name == "append":
                result = await store.append(op[1], op[2])
            elif name == "log":
                result = await store.log_entries(op[1])
            else:
                store = store_factory(store)
                result = "reopened"
        except ValidationError as exc:
            result = ("ValidationError", exc.fields["field"])
        out.append(result)
    out.append(await store.scan(""))
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_file_store_matches_the_model(ops: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as root:
        model = MemoryRuntimeStore()

        def memory(previous: Any) -> Any:
            return model  # a model "restart" keeps its state: what a durable store must do

        def file(previous: Any) -> Any:
            return FileRuntimeStore(root)

        expected = anyio.run(play, memory, ops)
        got = anyio.run(play, file, ops)
    assert canonical(got) == canonical(expected)


_VERSION = re.compile(r"^[0-9]+-[0-9a-f]{8}$")


def canonical(out: object, names: dict[str, str] | None = None) -> object:
    """``out`` with each version renamed by order of first appearance: versions are opaque
    (the model counts per key, the file store per store), so two runs agree when one renaming
    maps every version of one onto the other's."""
    names = {} if names is None else names
    if isinstance(out, str) and _VERSION.match(out):
        return names.setdefault(out, f"v{len(names)}")
    if isinstance(out, list | tuple):
        return type(out)(canonical(x, names) for x in out)
    return out
