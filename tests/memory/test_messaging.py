"""Unit tests of the messaging model beyond the conformance cases: timers, controls, the log,
bad input (typed errors, nothing changed), core-only details, capabilities."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from _msg_helpers import deadline, settle_all, setup
from videoflow_aio.contracts import Known, Unknown
from videoflow_aio.contracts.errors import (
    ConflictError,
    NotFound,
    Unsupported,
    ValidationError,
)
from videoflow_aio.contracts.messaging import (
    Accepted,
    ChannelId,
    Completed,
    DeliveryToken,
    Envelope,
    Kind,
    PublicationUnknown,
    PublicationUnresolvable,
    Rejected,
    Retry,
    SettleConfirmed,
    SettleStale,
    SubscriptionId,
    Terminal,
    make_channel,
    make_envelope,
    make_subscription,
)
from videoflow_aio.memory.messaging import MemoryMessagingBackend
from videoflow_aio.observe import ObservationLog
from videoflow_aio.vtime import VirtualClock

pytestmark = pytest.mark.anyio


# -- construction-time validation -----------------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"max_msgs": 0}, "max_msgs"),
        ({"max_msgs": -3}, "max_msgs"),
        ({"retention": "forever"}, "retention"),
        ({"overflow": "drop_newest"}, "overflow"),
        ({"max_bytes": 0}, "max_bytes"),
        ({"max_age_seconds": 0.0}, "max_age_seconds"),
        ({"replicas": 0}, "replicas"),
        ({"dedup_window_seconds": -1}, "dedup_window_seconds"),
    ],
)
def test_invalid_channel_spec_is_refused_at_construction(kw: dict[str, object], field: str) -> None:
    args: dict[str, object] = {"retention": "limits", **kw}
    with pytest.raises(ValidationError) as info:
        make_channel("f", "r", "n", "work", **args)  # type: ignore[arg-type]
    assert info.value.fields["field"] == field


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        ({"ack_wait_seconds": 0.0}, "ack_wait_seconds"),
        ({"ack_wait_seconds": -1.0}, "ack_wait_seconds"),
        ({"max_deliver": 0}, "max_deliver"),
        ({"max_deliver": -2}, "max_deliver"),
        ({"item_credit": 0}, "item_credit"),
        ({"byte_credit": 0}, "byte_credit"),
        ({"kind": "video"}, "kind"),
        ({"partition": -1}, "partition"),
    ],
)
def test_invalid_subscription_spec_is_refused(kw: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        make_subscription(ChannelId("f", "r", "n"), "w", **kw)  # type: ignore[arg-type]
    assert info.value.fields["field"] == field


def test_invalid_envelopes_and_ids() -> None:
    cid = ChannelId("f", "r", "n")
    with pytest.raises(ValidationError):
        make_envelope(cid, "")
    with pytest.raises(ValidationError):
        make_envelope(cid, "p", kind="frame")  # type: ignore[arg-type]  # the runtime check
    with pytest.raises(ValidationError):
        make_envelope(cid, "p", partition_key="a.b")
    with pytest.raises(ValidationError):
        ChannelId("f", "r", "has space")
    with pytest.raises(ValidationError):
        Retry(-1.0)
    with pytest.raises(ValidationError):
        make_channel(
            "f",
            "r",
            "n",
            "work",
            "interest",
            required=(SubscriptionId(ChannelId("f", "r", "other"), "w"),),
        )


def test_make_envelope_defaults() -> None:
    env = make_envelope(ChannelId("f", "r", "n"), "p1")
    assert (env.body, env.event_id, env.kind, env.headers) == (b"x", "p1", "data", {})


def test_model_constructor_validates() -> None:
    with pytest.raises(ValidationError):
        MemoryMessagingBackend(max_payload_bytes=0)
    with pytest.raises(ValidationError):
        MemoryMessagingBackend(client_queue_limit=0)


# -- bad input: typed errors, nothing changed -------------------------------------------------


async def test_oversize_body_rejected_with_reason_and_nothing_stored() -> None:
    log = ObservationLog()
    b, ch, sub = await setup(b_max_payload_bytes=100, log=log)
    out = await b.publish(make_envelope(ch.channel, "big", body=b"x" * 101), deadline())
    assert isinstance(out, Rejected)
    assert "max_payload_bytes" in out.reason
    assert b.stored(ch.channel) == []
    assert await b.receive(sub.id, 10, 1 << 20, deadline()) == []
    assert [e.kind for e in log.events("reject")] == ["reject"]
    assert isinstance(await b.observe_publication(make_envelope(ch.channel, "big")), Rejected)


async def test_unknown_channel_and_subscription_are_typed_errors() -> None:
    b, ch, _sub = await setup()
    await b.publish(make_envelope(ch.channel, "p1"), deadline())
    before = b.stored(ch.channel)
    other = ChannelId(
        "f", "r2", "n"
    )  # same node, another run: the envelope's channel does not match
    with pytest.raises(NotFound) as info:
        await b.publish(make_envelope(other, "p2"), deadline())
    assert info.value.fields["kind"] == "channel"
    nobody = SubscriptionId(ch.channel, "nobody")
    with pytest.raises(NotFound) as info2:
        await b.receive(nobody, 1, 10, deadline())
    assert info2.value.fields["kind"] == "subscription"
    with pytest.raises(NotFound):
        await b.settle(DeliveryToken(nobody, 1, 1, "x"), Completed(), "s")
    with pytest.raises(NotFound):
        await b.renew(DeliveryToken(nobody, 1, 1, "x"))
    with pytest.raises(NotFound):
        await b.observe_ack_floor(nobody)
    with pytest.raises(NotFound):
        b.pause_acceptance(other)
    with pytest.raises(NotFound):
        b.fail_observation(nobody)
    assert b.stored(ch.channel) == before
    assert await b.channel_ids() == [ch.channel]


async def test_refused_calls_change_nothing() -> None:
    b, ch, sub = await setup(max_msgs=2, overflow="reject")
    await b.publish(make_envelope(ch.channel, "p1"), deadline())
    await b.publish(make_envelope(ch.channel, "p2"), deadline())
    snap = (
        b.stored(ch.channel),
        await b.observe_channel(ch.channel),
        await b.observe_subscription(sub.id),
    )
    assert isinstance(await b.publish(make_envelope(ch.channel, "p3"), deadline()), Rejected)
    with pytest.raises(ValidationError):
        await b.publish(make_envelope(ch.channel, "d", kind="dlq"), deadline())
    with pytest.raises(ValidationError):
        await b.receive(sub.id, 0, 10, deadline())
    with pytest.raises(ValidationError):
        await b.receive(sub.id, 1, 0, deadline())
    got = await b.receive(sub.id, 1, 100, deadline())
    with pytest.raises(ValidationError):
        await b.settle(got[0].token, Completed(), "")
    await b.settle(got[0].token, Completed(), "s")
    snap2 = (b.stored(ch.channel), await b.observe_channel(ch.channel))
    assert snap2 == snap[:2]


@pytest.mark.parametrize(
    ("key", "expected_version", "value", "field"),
    [
        ("k", None, 5, "value"),  # bytes(5) would store five zero bytes
        ("k", None, None, "value"),
        ("k", None, "on", "value"),
        ("k", None, bytearray(b"on"), "value"),
        ("", None, b"on", "key"),
        (7, None, b"on", "key"),
        ("k", 1, b"on", "expected_version"),
    ],
)
async def test_commit_control_refuses_bad_arguments_and_changes_nothing(
    key: object, expected_version: object, value: object, field: str
) -> None:
    log = ObservationLog()
    b, ch, _ = await setup(log=log, b_durable_control=True)
    assert await b.commit_control(ch.channel, "k", None, b"v")
    before = await b.control_state(ch.channel, "k")
    with pytest.raises(ValidationError) as info:
        await b.commit_control(ch.channel, key, expected_version, value)  # type: ignore[arg-type]
    assert info.value.field == field
    assert await b.control_state(ch.channel, "k") == before
    with pytest.raises(ValidationError):
        await b.control_state(ch.channel, "")
    assert len(log.events("control_commit")) == 1


async def test_profiles_not_offered_are_unsupported() -> None:
    b, ch, _ = await setup()
    with pytest.raises(Unsupported):
        await b.commit_control(ch.channel, "k", None, b"v")
    with pytest.raises(Unsupported):
        await b.control_state(ch.channel, "k")
    with pytest.raises(Unsupported):
        await b.replay(ch.channel, "e")
    with pytest.raises(Unsupported):
        await b.ensure_channel(make_channel("f", "r", "x", "latest_per_key", "limits"), "op")
    with pytest.raises(Unsupported):
        await b.ensure_channel(make_channel("f", "r", "x", "work", "limits", replicas=3), "op")
    with pytest.raises(Unsupported):
        await b.ensure_channel(
            make_channel("f", "r", "x", "work", "limits", persistence=True), "op"
        )
    assert await b.channel_ids() == [ch.channel]


# -- time: leases, retries, deadlines are real waits -----------------------------------------


async def test_lease_expiry_is_recorded_at_its_due_time() -> None:
    log = ObservationLog()
    b, ch, sub = await setup(log=log, sub_kw={"ack_wait_seconds": 7.0, "max_deliver": 2})
    t0 = anyio.current_time()
    await b.publish(make_envelope(ch.channel, "p1"), deadline())
    await b.receive(sub.id, 1, 100, deadline())
    await anyio.sleep(100)  # nobody touches the backend meanwhile
    obs = await b.observe_subscription(sub.id)
    assert isinstance(obs, Known)
    assert (obs.value.pending, obs.value.leased) == (1, 0)
    (expired,) = log.events("expire")
    assert expired.at == pytest.approx(t0 + 7.0)
    second = await b.receive(sub.id, 1, 100, deadline())
    assert second[0].attempt == 2
    await anyio.sleep(50)
    obs2 = await b.observe_subscription(sub.id)
    assert isinstance(obs2, Known) and obs2.value.unresolved == 1
    (unres,) = log.events("unresolved")
    assert unres.at == pytest.approx(t0 + 100 + 7.0)


async def test_retry_at_the_cap_is_unresolved() -> None:
    b, ch, sub = await setup(sub_kw={"max_deliver": 1})
    await b.publish(make_envelope(ch.channel, "p1"), deadline())
    got = await b.receive(sub.id, 1, 100, deadline())
    assert isinstance(await b.settle(got[0].token, Retry(5.0), "r"), SettleConfirmed)
    assert await b.receive(sub.id, 1, 100, deadline(20)) == []
    obs = await b.observe_subscription(sub.id)
    assert isinstance(obs, Known)
    assert (obs.value.unresolved, obs.value.pending) == (1, 0)


async def test_paused_publish_waits_and_resume_before_deadline_answers_it() -> None:
    b, ch, _ = await setup()
    b.pause_acceptance(ch.channel)
    result: list[object] = []

    async def publisher() -> None:
        result.append(await b.publish(make_envelope(ch.channel, "p1"), deadline(10)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(publisher)
        await anyio.sleep(3)
        assert result == []
        outcomes = b.resume_acceptance(ch.channel)
    assert isinstance(outcomes[0], Accepted)
    assert result == outcomes


async def test_cancel_while_the_publisher_waits_is_a_definite_rejection() -> None:
    b, ch, _ = await setup()
    b.pause_acceptance(ch.channel)
    result: list[object] = []

    async def publisher() -> None:
        result.append(await b.publish(make_envelope(ch.channel, "p1"), deadline(10)))

    async with anyio.create_task_group() as tg:
        tg.start_soon(publisher)
        await anyio.sleep(1)
        assert b.cancel_publication(ch.channel, "p1")
    assert isinstance(result[0], Rejected)
    assert b.resume_acceptance(ch.channel) == []
    assert b.stored(ch.channel) == []


async def test_held_publication_reads_as_unknown_and_resume_returns_outcomes_in_order() -> None:
    b, ch, _ = await setup()
    b.pause_acceptance(ch.channel)
    envs = [make_envelope(ch.channel, f"p{i}") for i in range(3)]
    for env in envs:
        assert isinstance(await b.publish(env, deadline(0.5)), PublicationUnknown)
    assert isinstance(await b.observe_publication(envs[0]), PublicationUnknown)
    assert b.cancel_publication(ch.channel, "p1")
    outcomes = b.resume_acceptance(ch.channel)
    assert [o.publication_id for o in outcomes] == ["p0", "p2"]
    assert [e.publication_id for e in b.stored(ch.channel)] == ["p0", "p2"]
    assert isinstance(await b.observe_publication(envs[1]), Rejected)


async def test_close_wakes_a_waiting_receiver_with_not_found() -> None:
    b, ch, sub = await setup()
    errors: list[BaseException] = []
    t0 = anyio.current_time()

    async def receiver() -> None:
        try:
            await b.receive(sub.id, 1, 100, deadline(60))
        except NotFound as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(receiver)
        await anyio.sleep(1)
        await b.close([ch.channel], "g")
    assert len(errors) == 1
    assert anyio.current_time() - t0 == pytest.approx(1.0)


async def test_non_competing_subscription_refuses_a_second_receiver() -> None:
    b, _ch, sub = await setup(sub_kw={"competing": False})
    errors: list[BaseException] = []

    async def first() -> None:
        await b.receive(sub.id, 1, 100, deadline(5))

    async with anyio.create_task_group() as tg:
        tg.start_soon(first)
        await anyio.sleep(1)
        with pytest.raises(ConflictError):
            await b.receive(sub.id, 1, 100, deadline(5))
        errors.append(ValueError())
    assert errors


async def test_model_reads_the_given_clock(vclock: VirtualClock) -> None:
    b = MemoryMessagingBackend(clock=vclock)
    ch = make_channel("f", "r", "n", "work", "limits")
    await b.ensure_channel(ch, "op")
    sub = make_subscription(ch.channel, "w", ack_wait_seconds=5)
    await b.ensure_subscription(sub, "op")
    await b.publish(make_envelope(ch.channel, "p"), vclock.monotonic() + 1)
    (d,) = await b.receive(sub.id, 1, 10, vclock.monotonic() + 1)
    assert d.lease_deadline == pytest.approx(vclock.monotonic() + 5)


# -- dedup -------------------------------------------------------------------------------------


async def test_duplicate_does_not_extend_the_window() -> None:
    b, ch, _ = await setup(dedup_window_seconds=20)
    first = await b.publish(make_envelope(ch.channel, "p"), deadline())
    await anyio.sleep(15)
    dup = await b.publish(make_envelope(ch.channel, "p"), deadline())
    await anyio.sleep(10)
    new = await b.publish(make_envelope(ch.channel, "p"), deadline())
    assert isinstance(first, Accepted) and isinstance(dup, Accepted) and isinstance(new, Accepted)
    assert dup.duplicate and dup.sequence == first.sequence
    assert not new.duplicate and new.sequence > first.sequence


async def test_effective_dedup_window_is_capped_by_the_backend() -> None:
    b = MemoryMessagingBackend(dedup_window_seconds=30)
    v = await b.ensure_channel(
        make_channel("f", "r", "n", "work", "limits", dedup_window_seconds=600), "op"
    )
    assert v.effective.dedup_window_seconds == 30


async def test_dedup_entry_outlives_eviction() -> None:
    b, ch, _ = await setup(max_msgs=1)
    a = await b.publish(make_envelope(ch.channel, "A"), deadline())
    await b.publish(make_envelope(ch.channel, "B"), deadline())
    again = await b.publish(make_envelope(ch.channel, "A"), deadline())
    assert isinstance(a, Accepted) and isinstance(again, Accepted)
    assert again.duplicate and again.sequence == a.sequence
    assert [e.publication_id for e in b.stored(ch.channel)] == ["B"]


# -- retention corners ---------------------------------------------------------------------------


async def test_interest_keeps_a_message_until_a_missing_required_subscription_settles() -> None:
    cid = ChannelId("f", "r", "n")
    late = SubscriptionId(cid, "late")
    b, _ch, sub = await setup(retention="interest", required=(SubscriptionId(cid, "w"), late))
    await b.publish(make_envelope(cid, "p1"), deadline())
    await settle_all(b, await b.receive(sub.id, 10, 100, deadline()))
    assert len(b.stored(cid)) == 1
    await b.ensure_subscription(make_subscription(cid, "late"), "op")
    await settle_all(b, await b.receive(late, 10, 100, deadline()))
    assert b.stored(cid) == []


async def test_terminal_dead_letter_headers_and_log() -> None:
    log = ObservationLog()
    b, ch, sub = await setup(log=log)
    await b.publish(make_envelope(ch.channel, "p1", headers={"trace": "t"}), deadline())
    (d,) = await b.receive(sub.id, 1, 100, deadline())
    await b.settle(d.token, Terminal("bad frame"), "t")
    dead = [e for e in b.stored(ch.channel) if e.kind == "dlq"]
    assert len(dead) == 1
    assert dead[0].headers["dlq-reason"] == "bad frame"
    assert dead[0].headers["trace"] == "t"
    assert [e.ident for e in log.events("dead_letter")] == ["p1"]
    obs = await b.observe_channel(ch.channel)
    assert isinstance(obs, Known) and (obs.value.messages, obs.value.dead_letters) == (1, 1)


async def test_reconciling_a_smaller_max_msgs_evicts_with_drops() -> None:
    b, ch, sub = await setup(max_msgs=10)
    for i in range(5):
        await b.publish(make_envelope(ch.channel, f"p{i}"), deadline())
    smaller = make_channel("f", "r", "n", "work", "limits", max_msgs=2)
    v = await b.ensure_channel(smaller, "op2")
    assert v.updated and v.effective.max_msgs == 2
    assert [e.publication_id for e in b.stored(ch.channel)] == ["p3", "p4"]
    obs = await b.observe_subscription(sub.id)
    assert isinstance(obs, Known) and obs.value.dropped == 3


async def test_reconciled_limits_record_the_cap_that_evicted() -> None:
    log = ObservationLog()
    b, ch, _ = await setup(log=log, max_msgs=10)
    for i in range(5):
        await b.publish(make_envelope(ch.channel, f"p{i}", body=b"abcd"), deadline())
    fewer_bytes = make_channel("f", "r", "n", "work", "limits", max_msgs=10, max_bytes=8)
    await b.ensure_channel(fewer_bytes, "op2")
    fewer_msgs = make_channel("f", "r", "n", "work", "limits", max_msgs=1, max_bytes=8)
    await b.ensure_channel(fewer_msgs, "op3")
    drops = [(e.ident, e.attrs["reason"]) for e in log.events("drop")]
    assert drops == [
        ("p0", "max_bytes"),
        ("p1", "max_bytes"),
        ("p2", "max_bytes"),
        ("p3", "max_msgs"),
    ]


async def test_switching_to_per_subject_limits_counts_what_is_already_stored() -> None:
    """Per-kind counts are kept only while limits are per kind: turning them on counts the
    messages already stored (and drops past the per-kind cap), turning them off and on again
    starts over from what is stored then."""
    b, ch, _ = await setup(max_msgs=10)
    kinds: list[Kind] = ["data", "eos", "data", "data", "control", "data"]
    for i, kind in enumerate(kinds):
        await b.publish(make_envelope(ch.channel, f"p{i}", kind=kind), deadline())

    def per_kind(max_msgs: int, on: bool) -> Any:
        return make_channel(
            "f", "r", "n", "work", "limits", max_msgs=max_msgs, per_subject_limits=on
        )

    await b.ensure_channel(per_kind(2, True), "on")  # data 4 -> 2; eos, control stay
    assert [e.publication_id for e in b.stored(ch.channel)] == ["p1", "p3", "p4", "p5"]
    await b.ensure_channel(per_kind(10, False), "off")
    for i in range(6, 9):
        await b.publish(make_envelope(ch.channel, f"p{i}", kind="eos"), deadline())
    await b.ensure_channel(per_kind(2, True), "on-again")  # eos 4 -> 2
    assert [e.publication_id for e in b.stored(ch.channel)] == ["p3", "p4", "p5", "p7", "p8"]
    await b.publish(make_envelope(ch.channel, "p9"), deadline())  # data at its cap: evicts p3
    assert [e.publication_id for e in b.stored(ch.channel)] == ["p4", "p5", "p7", "p8", "p9"]
    obs = await b.observe_channel(ch.channel)
    assert isinstance(obs, Known) and obs.value.messages == 5


async def test_settle_is_stale_for_an_expired_lease_not_yet_redelivered() -> None:
    b, ch, sub = await setup(sub_kw={"ack_wait_seconds": 5.0})
    await b.publish(make_envelope(ch.channel, "p1"), deadline())
    (d,) = await b.receive(sub.id, 1, 100, deadline())
    await anyio.sleep(6)
    ans = await b.settle(d.token, Completed(), "late")
    assert isinstance(ans, SettleStale)
    assert "redelivery" in ans.reason
    lease = await b.renew(d.token)
    assert not lease.held


async def test_a_settlement_id_reused_for_another_message_is_refused() -> None:
    b, ch, sub = await setup()
    for i in range(2):
        await b.publish(make_envelope(ch.channel, f"p{i}"), deadline())
    d1, d2 = await b.receive(sub.id, 2, 100, deadline())
    await b.settle(d1.token, Completed(), "same")
    with pytest.raises(ValidationError):
        await b.settle(d2.token, Completed(), "same")
    obs = await b.observe_subscription(sub.id)
    assert isinstance(obs, Known) and obs.value.leased == 1


async def test_head_message_larger_than_byte_credit_returns_empty_at_once() -> None:
    b, ch, sub = await setup()
    await b.publish(make_envelope(ch.channel, "big", body=b"x" * 500), deadline())
    t0 = anyio.current_time()
    assert await b.receive(sub.id, 5, 100, deadline(30)) == []
    assert anyio.current_time() == t0
    assert len(await b.receive(sub.id, 5, 1000, deadline())) == 1


# -- core-only ----------------------------------------------------------------------------------


async def test_core_only_details() -> None:
    b, ch, sub = await setup(b_core_only=True)
    caps = await b.capabilities()
    assert caps.core_only and not caps.publication_ledger
    env = make_envelope(ch.channel, "p1")
    await b.publish(env, deadline())
    (d,) = await b.receive(sub.id, 5, 100, deadline())
    assert not (await b.renew(d.token)).held
    assert isinstance(await b.settle(d.token, Completed(), "s"), SettleConfirmed)
    assert isinstance(await b.observe_ack_floor(sub.id), Unknown)
    assert isinstance(await b.observe_publication(env), PublicationUnresolvable)
    assert b.stored(ch.channel) == []


async def test_fail_observation_also_hides_the_ack_floor() -> None:
    b, _ch, sub = await setup()
    b.fail_observation(sub.id, "broker timeout")
    assert await b.observe_ack_floor(sub.id) == Unknown("broker timeout")
    assert await b.observe_subscription(sub.id) == Unknown("broker timeout")
    b.fail_observation(sub.id, None)
    assert isinstance(await b.observe_subscription(sub.id), Known)


async def test_log_records_every_step_of_a_cycle() -> None:
    log = ObservationLog()
    b, ch, sub = await setup(log=log, max_msgs=1)
    await b.publish(make_envelope(ch.channel, "p1"), deadline())
    (d,) = await b.receive(sub.id, 1, 100, deadline())
    await b.settle(d.token, Completed(), "s")
    await b.publish(make_envelope(ch.channel, "p2"), deadline())  # evicts p1, settled: no drop
    await b.publish(make_envelope(ch.channel, "p3"), deadline())  # evicts p2, unsettled: drop
    kinds = [e.kind for e in log.events(("publish", "deliver", "settle", "drop", "evict"))]
    assert kinds == ["publish", "deliver", "settle", "evict", "publish", "drop", "publish"]
    (drop,) = log.events("drop")
    assert (drop.ident, drop.attrs["subscriptions"]) == ("p2", ["f.r.n/w"])


async def test_capabilities_reflect_constructor() -> None:
    b = MemoryMessagingBackend(
        durable_control=True, archive=True, latest_per_key=True, mixed_retention=True
    )
    caps = await b.capabilities()
    assert caps.profiles() == {"durable_control", "archive", "latest_per_key", "mixed_retention"}
    assert caps.archive_horizon_seconds == 3600.0


def test_envelope_round_trips_through_msgspec() -> None:
    import msgspec

    env = make_envelope(ChannelId("f", "r", "n"), "p", body=b"\x00\x01", headers={"a": "b"})
    assert msgspec.json.decode(msgspec.json.encode(env), type=Envelope) == env


def test_outcomes_are_tagged_unions_that_round_trip() -> None:
    import msgspec

    from videoflow_aio.contracts.messaging import PublishOutcome, SettleAnswer, SettleOutcome

    for out in (Accepted("p", 3, True), Rejected("p", "full"), PublicationUnknown("p", "t")):
        raw = msgspec.json.encode(out)
        assert msgspec.json.decode(raw, type=PublishOutcome) == out
    for settle in (Completed(), Retry(2.5), Terminal("bad")):
        assert msgspec.json.decode(msgspec.json.encode(settle), type=SettleOutcome) == settle
    stale = SettleStale("expired")
    assert msgspec.json.decode(msgspec.json.encode(stale), type=SettleAnswer) == stale


async def test_channel_bytes_count_the_bodies_in_the_model() -> None:
    b, ch, _ = await setup(max_msgs=2)
    for i in range(3):
        await b.publish(make_envelope(ch.channel, f"p{i}", body=b"abcd"), deadline())
    obs = await b.observe_channel(ch.channel)
    assert isinstance(obs, Known) and (obs.value.messages, obs.value.bytes) == (2, 8)


async def test_a_receive_outliving_its_subscription_does_not_touch_the_new_one() -> None:
    b, ch, sub = await setup()
    errors: list[BaseException] = []

    async def receiver() -> None:
        try:
            await b.receive(sub.id, 1, 100, deadline(60))
        except NotFound as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(receiver)
        await anyio.sleep(1)
        await b.close([ch.channel], "g")
        await b.ensure_channel(ch, "again")
        await b.ensure_subscription(sub, "again")
    assert len(errors) == 1
    assert b._broker.subs[sub.id].receivers == 0


async def test_a_tight_publish_loop_lets_other_tasks_run() -> None:
    b, ch, sub = await setup(max_msgs=1_000_000)
    seen: list[int] = []

    async def consumer() -> None:
        got = await b.receive(sub.id, 10, 1 << 20, deadline(60))
        seen.append(len(got))

    async with anyio.create_task_group() as tg:
        tg.start_soon(consumer)
        for i in range(1000):  # never sleeps
            await b.publish(make_envelope(ch.channel, f"p{i}"), deadline())
        published_before_consumer_ran = not seen
    assert seen and seen[0] >= 1
    assert not published_before_consumer_ran
