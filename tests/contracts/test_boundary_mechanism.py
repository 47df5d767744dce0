"""The one validation at every contract boundary: how it is derived and what it refuses.

Each test names a finding of the robustness sweep (issue #11) that the boundary fixes; the
property campaign over every provider is in ``test_boundary_properties.py``.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, TypedDict

import msgspec
import pytest

from _alloc_helpers import whole_node
from _msg_helpers import deadline, setup
from videoflow_aio.contracts import (
    AcceleratorAllocationBackend,
    Completed,
    DeliveryToken,
    Envelope,
    Known,
    MessagingBackend,
    PayloadStore,
    Retry,
    RuntimeStore,
    SubscriptionId,
    Terminal,
    ValidationError,
    make_envelope,
)
from videoflow_aio.contracts._specs import NonEmptyStr, OneOf, Token, spec_for
from videoflow_aio.contracts.messaging import ChannelId
from videoflow_aio.memory.allocation import MemoryAllocationBackend
from videoflow_aio.memory.runtime_store import FileRuntimeStore, MemoryRuntimeStore
from videoflow_aio.observe import ObservationLog
from videoflow_aio.vtime import Backend

CONTRACTS = (MessagingBackend, PayloadStore, RuntimeStore, AcceleratorAllocationBackend)


def _providers() -> list[type[Any]]:
    """Every provider class importable here (the adapters need their extras, all installed)."""
    from videoflow_aio.adapters.etcd import EtcdRuntimeStore
    from videoflow_aio.adapters.nats import CoreNatsMessagingBackend, JetStreamMessagingBackend
    from videoflow_aio.adapters.redis import RedisPayloadStore, RedisRuntimeStore
    from videoflow_aio.memory.messaging import MemoryMessagingBackend
    from videoflow_aio.memory.payload import MemoryPayloadStore

    return [
        MemoryMessagingBackend,
        JetStreamMessagingBackend,
        CoreNatsMessagingBackend,
        MemoryPayloadStore,
        RedisPayloadStore,
        MemoryRuntimeStore,
        FileRuntimeStore,
        RedisRuntimeStore,
        EtcdRuntimeStore,
        MemoryAllocationBackend,
    ]


def _checks_arguments(fn: Any) -> bool:
    while fn is not None:
        if getattr(fn, "__vf_boundary__", False):
            return True
        fn = getattr(fn, "__wrapped__", None)
    return False


@pytest.mark.parametrize("cls", _providers(), ids=lambda c: c.__name__)
def test_every_provider_checks_every_contract_method_that_takes_arguments(cls: type[Any]) -> None:
    contract = next(c for c in CONTRACTS if issubclass(cls, c))
    for name, fn in contract._vf_methods.items():
        if fn.__code__.co_argcount > 1:  # more than self
            assert _checks_arguments(getattr(cls, name)), f"{cls.__name__}.{name}"


@pytest.mark.parametrize("cls", _providers(), ids=lambda c: c.__name__)
def test_a_checked_async_method_is_still_a_coroutine_function(cls: type[Any]) -> None:
    """The trio bridge (and any caller) tells async methods by inspect.iscoroutinefunction."""
    contract = next(c for c in CONTRACTS if issubclass(cls, c))
    for name, fn in contract._vf_methods.items():
        if inspect.iscoroutinefunction(fn):
            assert inspect.iscoroutinefunction(getattr(cls, name)), f"{cls.__name__}.{name}"


def test_a_subclass_override_is_checked_too() -> None:
    class Lenient(MemoryRuntimeStore):
        async def cas(self, key: str, expected_version: str | None, value: bytes) -> bool:
            return await super().cas(key or "empty", expected_version, bytes(value))

    async def main() -> None:
        s = Lenient()
        with pytest.raises(ValidationError) as info:
            await s.cas("k", None, "text")  # type: ignore[arg-type]
        assert info.value.field == "value"
        assert await s.scan("") == []

    _run(main)


def _run(fn: Any, backend: Backend = "asyncio") -> Any:
    from videoflow_aio.vtime import VirtualClock
    from videoflow_aio.vtime import run as vrun

    return vrun(fn, backend=backend, clock=VirtualClock())


# -- the findings ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_publish_with_a_nan_deadline_on_a_paused_channel_holds_nothing() -> None:
    log = ObservationLog()
    b, ch, _ = await setup(log=log)
    b.pause_acceptance(ch.channel)
    with pytest.raises(ValidationError) as info:
        await b.publish(make_envelope(ch.channel, "p1"), math.nan)
    assert info.value.field == "deadline"
    assert b.resume_acceptance(ch.channel) == []  # nothing was held, nothing stored late
    assert b.stored(ch.channel) == []
    assert log.events("held") == []


@pytest.mark.parametrize("delay", [math.inf, math.nan, -1.0, True, "1"])
def test_retry_delay_must_be_finite_and_non_negative(delay: Any) -> None:
    with pytest.raises(ValidationError) as info:
        Retry(delay_seconds=delay)
    assert info.value.field == "delay_seconds"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"body": "text"}, "body"),
        ({"publication_id": 7}, "publication_id"),
        ({"publication_id": ""}, "publication_id"),
        ({"event_ts": math.nan}, "event_ts"),
        ({"event_ts": math.inf}, "event_ts"),
        ({"headers": {"a": 1}}, "headers['a']"),
        ({"headers": {1: "a"}}, "headers key"),
        ({"kind": "bogus"}, "kind"),
        ({"partition_key": "a.b"}, "partition_key"),
        ({"source_offset": True}, "source_offset"),
        ({"publication_id": "\ud800"}, "publication_id"),
    ],
)
def test_an_envelope_with_nonsense_fields_is_refused_where_it_is_built(
    fields: dict[str, Any], field: str
) -> None:
    base: dict[str, Any] = {"channel": ChannelId("f", "r", "n"), "publication_id": "p"}
    with pytest.raises(ValidationError) as info:
        Envelope(**{**base, **fields})
    assert info.value.field == field


@pytest.mark.anyio
async def test_headers_changed_in_place_after_construction_are_refused_at_publish() -> None:
    b, ch, _ = await setup()
    env = make_envelope(ch.channel, "p1", headers={"trace": "t"})
    env.headers["n"] = 5  # type: ignore[assignment]  # a frozen Struct's dict is still a dict
    with pytest.raises(ValidationError) as info:
        await b.publish(env, deadline())
    assert info.value.field == "envelope.headers['n']"
    assert b.stored(ch.channel) == []


@pytest.mark.anyio
@pytest.mark.parametrize("settlement_id", [7, math.nan, b"s", None, ""])
async def test_settle_refuses_a_settlement_id_that_is_not_a_non_empty_str(
    settlement_id: Any,
) -> None:
    b, ch, sub = await setup()
    await b.publish(make_envelope(ch.channel, "p1"), deadline())
    (d,) = await b.receive(sub.id, 1, 1 << 20, deadline())
    before = await b.observe_subscription(sub.id)
    with pytest.raises(ValidationError) as info:
        await b.settle(d.token, Completed(), settlement_id)
    assert info.value.field == "settlement_id"
    assert await b.observe_subscription(sub.id) == before
    assert isinstance(before, Known) and before.value.leased == 1


@pytest.mark.anyio
async def test_a_hand_made_token_with_wrong_field_types_is_refused() -> None:
    b, _, sub = await setup()
    token = DeliveryToken(sub.id, 1, 1, "1")
    msgspec.structs.force_setattr(token, "sequence", "1")
    with pytest.raises(ValidationError) as info:
        await b.settle(token, Completed(), "s")
    assert info.value.field == "token.sequence"
    with pytest.raises(ValidationError) as info:
        await b.renew(DeliveryToken(sub.id, -1, 1, "1"))
    assert info.value.field == "token.sequence"


@pytest.mark.anyio
@pytest.mark.parametrize("bad", ["soon", None, b"1", True, math.inf, 10**400])
async def test_deadlines_are_checked_even_when_no_wait_is_needed(bad: Any) -> None:
    b, ch, sub = await setup()
    with pytest.raises(ValidationError) as info:
        await b.publish(make_envelope(ch.channel, "p1"), bad)
    assert info.value.field == "deadline"
    with pytest.raises(ValidationError) as info:
        await b.receive(sub.id, 1, 1, bad)
    assert info.value.field == "deadline"
    assert b.stored(ch.channel) == []


@pytest.mark.anyio
async def test_control_state_refuses_a_key_that_is_not_a_str() -> None:
    b, ch, _ = await setup(b_durable_control=True)
    for bad in (None, 5, b"k", ""):
        with pytest.raises(ValidationError) as info:
            await b.control_state(ch.channel, bad)  # type: ignore[arg-type]
        assert info.value.field == "key"


@pytest.mark.anyio
async def test_close_names_the_bad_element() -> None:
    b, ch, _ = await setup()
    with pytest.raises(ValidationError) as info:
        await b.close([ch.channel, "f.r.n"], "g")  # type: ignore[list-item]
    assert info.value.field == "owned[1]"
    with pytest.raises(ValidationError) as info:
        await b.close("f.r.n", "g")  # type: ignore[arg-type]
    assert info.value.field == "owned"
    assert await b.channel_ids() == [ch.channel]


@pytest.mark.anyio
async def test_allocation_refuses_nonsense_operation_ids_and_requests() -> None:
    b = MemoryAllocationBackend([whole_node("n1", 2)])
    snap = await b.inventory({})
    assert isinstance(snap, Known)
    plan = await b.plan([], snap.value)
    for bad in (math.nan, b"op", object(), "", None):
        with pytest.raises(ValidationError) as info:
            await b.reserve(plan, bad, None)  # type: ignore[arg-type]
        assert info.value.field == "operation_id"
    with pytest.raises(ValidationError) as info:
        await b.plan("", snap.value)  # type: ignore[arg-type]
    assert info.value.field == "requests"
    for scope, field in (
        ({"zone": "a"}, "scope"),
        ({"nodes": "n1"}, "scope.nodes"),
        ({"labels": {"a": 1}}, "scope.labels['a']"),
    ):
        with pytest.raises(ValidationError) as info:
            await b.inventory(scope)  # type: ignore[arg-type]
        assert info.value.field == field
    with pytest.raises(ValidationError) as info:
        await b.reconcile("c", "gone", "1")  # type: ignore[arg-type]  # the runtime check
    assert info.value.field == "desired"
    assert b.mutations() == []


@pytest.mark.anyio
async def test_scan_refuses_a_lone_surrogate_like_get(tmp_path: Path) -> None:
    for s in (MemoryRuntimeStore(), FileRuntimeStore(str(tmp_path / "s"))):
        for call in (s.scan("\ud800"), s.get("\ud800")):
            with pytest.raises(ValidationError):
                await call


@pytest.mark.anyio
async def test_the_memory_and_file_stores_refuse_the_same_inputs_the_same_way(
    tmp_path: Path,
) -> None:
    stores = [MemoryRuntimeStore(), FileRuntimeStore(str(tmp_path / "s"))]
    calls: list[tuple[str, tuple[Any, ...]]] = [
        ("get", (5,)),
        ("cas", ("k", None, "v")),
        ("cas", ("k", 3, b"v")),
        ("delete", (b"k", None)),
        ("scan", (None,)),
        ("append", ("", b"r")),
        ("log_entries", (["l"],)),
    ]
    for name, args in calls:
        seen = []
        for s in stores:
            with pytest.raises(ValidationError) as info:
                await getattr(s, name)(*args)
            seen.append((type(info.value), info.value.field, str(info.value)))
        assert seen[0] == seen[1], (name, seen)


@pytest.mark.anyio
async def test_model_controls_are_checked_against_their_own_hints() -> None:
    b, ch, sub = await setup()
    with pytest.raises(ValidationError) as info:
        b.fail_observation(sub.id, 5)  # type: ignore[arg-type]
    assert info.value.field == "reason"
    with pytest.raises(ValidationError):
        b.cancel_publication(ch.channel, None)  # type: ignore[arg-type]
    a = MemoryAllocationBackend([whole_node("n1", 2)])
    with pytest.raises(ValidationError) as info:
        a.bind_workload("n1", "w", True)
    assert info.value.field == "units"
    assert a.mutations() == []


def test_terminal_reason_is_a_str() -> None:
    with pytest.raises(ValidationError):
        Terminal(reason=5)  # type: ignore[arg-type]
    assert Terminal("x").reason == "x"


# -- the rules, on their own -----------------------------------------------------------------


class _Scope(TypedDict, total=False):
    nodes: Sequence[str]
    labels: Mapping[str, str]


@pytest.mark.parametrize(
    ("hint", "good", "bad"),
    [
        (str, ["", "é", "a b"], [b"x", None, 1, "\ud800"]),
        (NonEmptyStr, ["x"], [""]),
        (Token, ["a-b_c"], ["", "a b", "a.b", "*", ">", "a\n"]),
        (Annotated[str, OneOf(("a", "b"))], ["a"], ["c", 1]),
        (bytes, [b"", b"x"], ["x", bytearray(b"x"), memoryview(b"x"), None]),
        (int, [0, -5, 10**30], [True, 1.0, "1", None]),
        (float, [0, 1.5, -2, 10**300], [True, math.nan, math.inf, -math.inf, 10**400, "1"]),
        (bool, [True, False], [0, 1, None, "true"]),
        (float | None, [None, 1.0], [math.nan, "x"]),
        (Sequence[str], [[], ("a",), ["a", "b"]], ["ab", b"ab", [1], None, {"a": 1}]),
        (tuple[str, ...], [(), ("a",)], [["a"], ("a", 1)]),
        (dict[str, int], [{}, {"a": 1}], [{"a": "1"}, {1: 1}, [("a", 1)]]),
        (Mapping[str, Any], [{}, {"a": object()}], [[("a", 1)], "a", None]),
        (_Scope, [{}, {"nodes": ["a"]}, {"labels": {"k": "v"}}], [{"zone": 1}, {"nodes": "a"}]),
        (SubscriptionId, [SubscriptionId(ChannelId("f", "r", "n"), "c")], ["f.r.n/c", None]),
        (Completed | Retry | Terminal, [Completed(), Retry(1.0), Terminal()], [None, "ok"]),
    ],
)
def test_what_each_hint_accepts(hint: Any, good: list[Any], bad: list[Any]) -> None:
    spec = spec_for(hint)
    for value in good:
        spec.check(value, "x")
    for value in bad:
        with pytest.raises(ValidationError):
            spec.check(value, "x")


def test_an_int_is_accepted_for_a_float_and_passed_on_unchanged() -> None:
    seen: list[object] = []

    class Recording(MemoryRuntimeStore):
        async def scan(self, prefix: str) -> list[tuple[str, bytes, str]]:
            seen.append(prefix)
            return await super().scan(prefix)

    _run(lambda: Recording().scan("é"))  # non-ASCII: the precise path accepts it
    assert seen == ["é"]


def test_errors_name_the_field_and_carry_the_value() -> None:
    with pytest.raises(ValidationError) as info:
        spec_for(Sequence[SubscriptionId]).check([object()], "required")
    assert info.value.field == "required[0]"
    assert "must be a SubscriptionId" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_struct_valid_from_birth_costs_one_type_test_at_the_boundary() -> None:
    # decoding runs __post_init__ too: a bad wire envelope never becomes an Envelope
    raw = msgspec.json.encode(
        {"channel": {"flow_id": "f", "run_id": "r", "node": "n"}, "publication_id": ""}
    )
    with pytest.raises(msgspec.ValidationError):
        msgspec.json.decode(raw, type=Envelope)
