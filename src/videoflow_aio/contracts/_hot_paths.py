"""The checks of the hot paths, written out by hand: the checked wrappers of the contract
methods called per message, record or frame, and the field tests of ``Envelope`` and
``ChannelId``.

Every other method gets its wrapper from :mod:`._boundary`, which composes the parameters'
fast tests (one call each), and every other checked Struct its field test from
:mod:`._specs`; these run on every message or record, so their test is one
inline expression — what the hints of the contract ask for, in the order
:mod:`._specs` checks it, for the well-formed values callers pass (ASCII strs, an empty or
str-to-str ``headers``). Anything it does not accept goes to ``slow``, the precise check,
which raises the same :class:`~videoflow_aio.contracts.errors.ValidationError` as everywhere
else or finds nothing wrong (a non-ASCII str). ``tests/contracts/test_boundary_hand_written.py``
feeds each one the wrong values of every parameter's hint and the valid ones it must let
through.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._boundary import Slow, hand_written
from ._specs import hand_written_fields
from .messaging import (
    KINDS,
    ChannelId,
    Completed,
    DeliveryToken,
    Envelope,
    MessagingBackend,
    Retry,
    SubscriptionId,
    Terminal,
)
from .payload import ImmutablePayloadRef, PayloadStore, RetentionContract
from .runtime_store import RuntimeStore

_MAX_FLOAT = 1.7976931348623157e308  # an int deadline must fit a float
_OUTCOMES = frozenset({Completed, Retry, Terminal})
_KINDS = frozenset(KINDS)
_NOT_IN_TOKEN = frozenset(" .*>\t\n")  # Token: a non-empty ASCII str without these

Impl = Callable[..., Any]


def _str_to_str(headers: dict[Any, Any]) -> bool:
    for k, v in headers.items():
        if not (type(k) is str and k.isascii() and type(v) is str and v.isascii()):
            return False
    return True


def _token_ok(token: Any) -> bool:
    return (
        type(token) is DeliveryToken
        and type(token.subscription) is SubscriptionId
        and type(token.sequence) is int
        and token.sequence >= 0
        and type(token.attempt) is int
        and token.attempt >= 0
        and type(token.lease_id) is str
        and token.lease_id.isascii()
        and type(token.opaque) is str
        and token.opaque.isascii()
    )


def _token(value: Any) -> bool:
    return (
        type(value) is str and value.isascii() and value != "" and _NOT_IN_TOKEN.isdisjoint(value)
    )


def _ref_ok(ref: Any) -> bool:
    return (
        type(ref) is ImmutablePayloadRef
        and _non_empty(ref.key)
        and type(ref.size) is int
        and ref.size >= 0
        and type(ref.digest) is type(ref.generation) is type(ref.store) is str
        and (ref.digest + ref.generation + ref.store).isascii()  # each of them ASCII
    )


def _non_empty(value: Any) -> bool:
    return type(value) is str and value.isascii() and value != ""


@hand_written_fields(ChannelId)
def _channel_id(c: Any) -> bool:
    if not (type(c.flow_id) is type(c.run_id) is type(c.node) is str):
        return False
    if c.flow_id == "" or c.run_id == "" or c.node == "":
        return False
    joined = c.flow_id + c.run_id + c.node  # ASCII and without those if each one is
    return joined.isascii() and _NOT_IN_TOKEN.isdisjoint(joined)


@hand_written_fields(Envelope)
def _envelope(e: Any) -> bool:
    return (
        type(e.channel) is ChannelId
        and type(e.publication_id) is str
        and e.publication_id.isascii()
        and e.publication_id != ""
        and type(e.body) is bytes
        and type(e.event_id) is str
        and e.event_id.isascii()
        and type(e.kind) is str
        and e.kind in _KINDS
        and (e.partition_key is None or _token(e.partition_key))
        and (
            e.event_ts is None
            or (type(e.event_ts) is float and e.event_ts - e.event_ts == 0.0)  # finite
            or (type(e.event_ts) is int and -_MAX_FLOAT <= e.event_ts <= _MAX_FLOAT)
        )
        and (e.source_epoch is None or (type(e.source_epoch) is str and e.source_epoch.isascii()))
        and (e.source_offset is None or type(e.source_offset) is int)
        and type(e.headers) is dict
        and (not e.headers or _str_to_str(e.headers))
    )


@hand_written(MessagingBackend.publish)
def _publish(impl: Impl, slow: Slow) -> Impl:
    async def publish(self: Any, envelope: Any, deadline: Any) -> Any:
        if not (
            type(envelope) is Envelope
            and type(envelope.headers) is dict
            and (not envelope.headers or _str_to_str(envelope.headers))
            and (
                (type(deadline) is float and deadline - deadline == 0.0)  # finite
                or (type(deadline) is int and -_MAX_FLOAT <= deadline <= _MAX_FLOAT)
            )
        ):
            slow(envelope, deadline)
        return await impl(self, envelope, deadline)

    return publish


@hand_written(MessagingBackend.receive)
def _receive(impl: Impl, slow: Slow) -> Impl:
    async def receive(
        self: Any, subscription: Any, item_credit: Any, byte_credit: Any, deadline: Any
    ) -> Any:
        if not (
            type(subscription) is SubscriptionId
            and type(item_credit) is int
            and item_credit >= 1
            and type(byte_credit) is int
            and byte_credit >= 1
            and (
                (type(deadline) is float and deadline - deadline == 0.0)  # finite
                or (type(deadline) is int and -_MAX_FLOAT <= deadline <= _MAX_FLOAT)
            )
        ):
            slow(subscription, item_credit, byte_credit, deadline)
        return await impl(self, subscription, item_credit, byte_credit, deadline)

    return receive


@hand_written(MessagingBackend.settle)
def _settle(impl: Impl, slow: Slow) -> Impl:
    async def settle(self: Any, token: Any, outcome: Any, settlement_id: Any) -> Any:
        if not (  # _token_ok inline: settle is the hottest call
            type(token) is DeliveryToken
            and type(token.subscription) is SubscriptionId
            and type(token.sequence) is type(token.attempt) is int
            and token.sequence >= 0
            and token.attempt >= 0
            and type(token.lease_id) is type(token.opaque) is str
            and token.lease_id.isascii()
            and token.opaque.isascii()
            and type(outcome) in _OUTCOMES
            and type(settlement_id) is str
            and settlement_id.isascii()
            and settlement_id != ""
        ):
            slow(token, outcome, settlement_id)
        return await impl(self, token, outcome, settlement_id)

    return settle


@hand_written(MessagingBackend.renew)
def _renew(impl: Impl, slow: Slow) -> Impl:
    async def renew(self: Any, token: Any) -> Any:
        if not _token_ok(token):
            slow(token)
        return await impl(self, token)

    return renew


@hand_written(RuntimeStore.get)
def _get(impl: Impl, slow: Slow) -> Impl:
    async def get(self: Any, key: Any) -> Any:
        if not (type(key) is str and key.isascii() and key != ""):
            slow(key)
        return await impl(self, key)

    return get


@hand_written(RuntimeStore.cas)
def _cas(impl: Impl, slow: Slow) -> Impl:
    async def cas(self: Any, key: Any, expected_version: Any, value: Any) -> Any:
        if not (
            type(key) is str
            and key.isascii()
            and key != ""
            and (
                expected_version is None
                or (type(expected_version) is str and expected_version.isascii())
            )
            and type(value) is bytes
        ):
            slow(key, expected_version, value)
        return await impl(self, key, expected_version, value)

    return cas


@hand_written(PayloadStore.put)
def _put(impl: Impl, slow: Slow) -> Impl:
    async def put(self: Any, data: Any, content_id: Any, contract: Any) -> Any:
        if not (
            type(data) is bytes and _non_empty(content_id) and type(contract) is RetentionContract
        ):
            slow(data, content_id, contract)
        return await impl(self, data, content_id, contract)

    return put


def _finite(deadline: Any) -> bool:
    if type(deadline) is float:
        return deadline - deadline == 0.0  # finite
    return type(deadline) is int and -_MAX_FLOAT <= deadline <= _MAX_FLOAT


@hand_written(PayloadStore.acquire_obligation)
@hand_written(PayloadStore.renew_obligation)
def _obligation(impl: Impl, slow: Slow) -> Impl:
    async def obligation(self: Any, ref: Any, obligation_id: Any, deadline: Any) -> Any:
        if not (_ref_ok(ref) and _non_empty(obligation_id) and _finite(deadline)):
            slow(ref, obligation_id, deadline)
        return await impl(self, ref, obligation_id, deadline)

    return obligation


@hand_written(PayloadStore.release_obligation)
def _release_obligation(impl: Impl, slow: Slow) -> Impl:
    async def release_obligation(
        self: Any, ref: Any, obligation_id: Any, completion_receipt: Any
    ) -> Any:
        if not (_ref_ok(ref) and _non_empty(obligation_id) and _non_empty(completion_receipt)):
            slow(ref, obligation_id, completion_receipt)
        return await impl(self, ref, obligation_id, completion_receipt)

    return release_obligation


__all__: list[str] = []
