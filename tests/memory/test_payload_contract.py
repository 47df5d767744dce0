"""The payload contract module: Structs round-trip, the read union decodes by tag, and the
shared validators (fast paths included) refuse what they must."""

from __future__ import annotations

import math
from typing import Any

import msgspec
import pytest

from videoflow_aio.contracts import Known, Unknown
from videoflow_aio.contracts.errors import ValidationError
from videoflow_aio.contracts.payload import (
    Corrupt,
    DurableReceipt,
    ImmutablePayloadRef,
    InventoryObservation,
    Missing,
    PayloadBytes,
    PayloadCapabilities,
    PayloadReadResult,
    ReclamationObservation,
    ReleaseReceipt,
    RetentionContract,
    TransientFailure,
    payload_digest,
    validate_contract,
    validate_deadline,
    validate_id,
    validate_put,
    validate_ref,
)

REF = ImmutablePayloadRef("k", 3, payload_digest(b"abc"), "g1", "memory")


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (REF, ImmutablePayloadRef),
        (RetentionContract(obligations=("a",), required_tier="durable"), RetentionContract),
        (DurableReceipt("k", "g1", "a", 10.0, None, True), DurableReceipt),
        (ReleaseReceipt("k", "g1", "a", "done", "reclaimed", 0), ReleaseReceipt),
        (ReclamationObservation("op", 2, (("k", "a"),), ("k",)), ReclamationObservation),
        (PayloadCapabilities("m", "evictable", True, True, 10, True, 60.0), PayloadCapabilities),
    ],
)
def test_structs_round_trip(value: Any, kind: type) -> None:
    assert msgspec.json.decode(msgspec.json.encode(value), type=kind) == value
    assert msgspec.msgpack.decode(msgspec.msgpack.encode(value), type=kind) == value


@pytest.mark.parametrize(
    "result",
    [
        PayloadBytes(REF, b"abc", True),
        TransientFailure("k", "reset"),
        Missing("k", "g1", "expired"),
        Corrupt("k", "g1", "digest mismatch", 3, 3, REF.digest, "sha256:00"),
    ],
)
def test_read_results_decode_by_tag(result: Any) -> None:
    encoded = msgspec.json.encode(result)
    assert msgspec.json.decode(encoded, type=PayloadReadResult) == result


def test_inventory_observation_decodes() -> None:
    for obs in (Known((REF,)), Unknown("down")):
        encoded = msgspec.json.encode(obs)
        assert msgspec.json.decode(encoded, type=InventoryObservation) == obs


def test_properties() -> None:
    assert REF.verifiable
    assert not ImmutablePayloadRef("k", 0, "", "", "m").verifiable
    assert ReleaseReceipt("k", "g", "a", "r", "released", 1).changed
    assert not ReleaseReceipt("k", "g", "a", "r", "no-obligation-set", 0).changed
    assert PayloadCapabilities("m", "durable", False, False, None, True, 1.0).durable
    assert payload_digest(b"") == "sha256:" + "e3b0c44298fc1c149afbf4c8996fb924" + (
        "27ae41e4649b934ca495991b7852b855"
    )


def test_contract_cache_does_not_admit_bool_or_int_lookalikes() -> None:
    good = RetentionContract(ttl_seconds=1.0, obligation_seconds=1.0)
    assert validate_contract(good) is good
    assert validate_contract(good) is good  # cached
    lookalikes: list[dict[str, Any]] = [
        {"ttl_seconds": True, "obligation_seconds": 1.0},  # True == 1.0, same hash
        {"ttl_seconds": 1.0, "obligation_seconds": True},
    ]
    for bad in lookalikes:
        with pytest.raises(ValidationError):  # refused where it is built, never cached
            validate_contract(RetentionContract(**bad))
    assert (
        validate_contract(RetentionContract(ttl_seconds=2, obligation_seconds=3)).ttl_seconds == 2
    )


def test_contract_nan_is_never_cached() -> None:
    for _ in range(2):
        with pytest.raises(ValidationError):
            validate_contract(RetentionContract(ttl_seconds=math.nan))


def test_validate_put_and_ref_and_ids() -> None:
    assert validate_put(b"x", "k", RetentionContract()) == RetentionContract()
    assert validate_ref(REF, "memory") is REF
    with pytest.raises(ValidationError):
        validate_ref(REF, "other")

    class Sub(ImmutablePayloadRef, frozen=True):  # not the exact type: the slow path accepts it
        pass

    sub = Sub("k", 1, "", "", "memory")
    assert validate_ref(sub, "memory") is sub
    with pytest.raises(ValidationError):
        validate_ref(ImmutablePayloadRef("k", True, "", "", "memory"), "memory")
    assert validate_id("a", "f") == "a"
    with pytest.raises(ValidationError):
        validate_id(b"a", "f")


@pytest.mark.parametrize("deadline", [-1.0, 5.0, 10.0, math.inf, -math.inf, math.nan, True, "11"])
def test_validate_deadline_refuses(deadline: Any) -> None:
    with pytest.raises(ValidationError) as info:
        validate_deadline(deadline, 10.0)
    assert info.value.field == "deadline"


def test_validate_deadline_accepts_ints_and_floats() -> None:
    assert validate_deadline(11, 10.0) == 11.0
    assert validate_deadline(10.5, 10.0) == 10.5
