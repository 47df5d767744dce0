"""The JetStream adapter on a 3-node cluster, R3 channels: what a single server never showed.

- a pull's status overtakes its deliveries (``409 MaxBytes`` arrives first): the receive still
  returns what fitted;
- a consumer whose leader lags the stream answers "that is all" early: a receive still returns
  what this client published before it;
- after this client settled a message on every required subscription, an observation of the
  interest channel no longer counts it (the stream's leader removes it after the acks).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from functools import partial
from typing import Any

import anyio
import anyio.to_thread
import pytest

from videoflow_aio.adapters.nats._connection import server_list
from videoflow_aio.conformance.providers._cluster import heal
from videoflow_aio.contracts import Known
from videoflow_aio.contracts.messaging import (
    ChannelId,
    ChannelSpec,
    Completed,
    SettleConfirmed,
    SettleStale,
    SettleUnknown,
    SubscriptionId,
    Terminal,
    make_channel,
    make_envelope,
    make_subscription,
)
from videoflow_aio.testing.clusters import ClusterProcess, NatsCluster
from videoflow_aio.testing.replicated import replicated_backend

TRIES = 5
pytestmark = [pytest.mark.cluster]


def test_a_comma_separated_url_is_several_servers() -> None:
    assert server_list("nats://a:1, nats://b:2,") == ["nats://a:1", "nats://b:2"]
    assert server_list(["nats://a:1"]) == ["nats://a:1"]


async def _fresh(cluster: ClusterProcess, spec_kw: dict[str, Any]) -> tuple[Any, ChannelSpec]:
    tag = uuid.uuid4().hex[:6]
    b = replicated_backend(
        cluster.urls, 3, stream_prefix=f"T{tag}", subject_prefix=f"t{tag}", request_timeout=2.0
    )
    spec = make_channel("flow", "run1", "n1", "work", **spec_kw)
    with anyio.fail_after(30):
        while True:  # a new R3 stream elects its leader first
            try:
                await b.ensure_channel(spec, "op")
                break
            except Exception:
                await anyio.sleep(0.1)
    return b, spec


def test_a_byte_credit_receive_returns_what_fits(nats_cluster: ClusterProcess) -> None:
    async def main() -> list[int]:
        got = []
        for _ in range(TRIES):
            b, spec = await _fresh(nats_cluster, {"retention": "limits"})
            sub = make_subscription(spec.channel, "w", item_credit=64)
            await b.ensure_subscription(sub, "op-sub")
            for i in range(10):
                await b.publish(
                    make_envelope(spec.channel, f"p{i}", b"z" * 1000),
                    anyio.current_time() + 2,
                )
            out = await b.receive(sub.id, 10, 2500, anyio.current_time() + 5)
            got.append(len(out))
            await b.drop_namespace()
            await b.aclose()
        return got

    assert anyio.run(main) == [2] * TRIES


def test_own_settles_are_visible_on_an_interest_channel(nats_cluster: ClusterProcess) -> None:
    async def main() -> list[tuple[int, int, int]]:
        seen = []
        for _ in range(TRIES):
            cid = ChannelId("flow", "run1", "n1")
            ra, rb = SubscriptionId(cid, "a"), SubscriptionId(cid, "b")
            b, _spec = await _fresh(nats_cluster, {"retention": "interest", "required": (ra, rb)})
            for name in ("a", "b"):
                await b.ensure_subscription(make_subscription(cid, name), f"op-{name}")
            for pid in ("p1", "p2"):
                await b.publish(make_envelope(cid, pid), anyio.current_time() + 2)
            got_a = await b.receive(ra, 64, 1 << 30, anyio.current_time() + 2)
            for d in got_a:
                await b.settle(d.token, Completed(), f"a-{d.sequence}")
            got_b = await b.receive(rb, 64, 1 << 30, anyio.current_time() + 2)
            await b.settle(got_b[0].token, Completed(), "b-1")
            await b.settle(got_b[-1].token, Terminal("bad"), "b-2")
            obs = await b.observe_channel(cid)
            assert isinstance(obs, Known)
            seen.append((len(got_a), len(got_b), obs.value.messages))
            await b.drop_namespace()
            await b.aclose()
        return seen

    assert anyio.run(main) == [(2, 2, 0)] * TRIES


async def _led(b: Any, find: Callable[[], Any], good: Callable[[Any], bool], down: str) -> Any:
    """The member ``find`` names leader, once ``good`` says so (``down``, a step-down API
    subject, moves the leadership meanwhile)."""
    with anyio.fail_after(60):
        while True:
            leader = await anyio.to_thread.run_sync(find)
            if leader is not None and good(leader):
                return leader
            if leader is not None:
                await b._c.api(down)
            await anyio.sleep(0.2)


async def _consumer_leader_not_ours(cluster: ClusterProcess, b: Any, sub: SubscriptionId) -> Any:
    """The member leading ``sub``'s consumer, once it is not the server ``b`` is connected to
    (a step-down moves it): killing it then leaves ``b`` connected, asking a group with no
    leader — no responders — rather than reconnecting."""
    spec = cluster.options
    assert isinstance(spec, NatsCluster)
    stream, consumer = b.names.stream(sub.channel), b.names.consumer(sub)
    return await _led(
        b,
        partial(spec.consumer_leader, cluster, stream, consumer),
        lambda m: str(m.port) != str(b._c.nc.connected_url.port),
        f"CONSUMER.LEADER.STEPDOWN.{stream}.{consumer}",
    )


async def _two_published(cluster: ClusterProcess) -> tuple[Any, Any]:
    """A backend and a subscription (ack wait 120 s) of a new R3 channel holding p1 and p2."""
    b, spec = await _fresh(cluster, {"retention": "limits"})
    sub = make_subscription(spec.channel, "w", ack_wait_seconds=120.0)
    await b.ensure_subscription(sub, "op-sub")
    for pid in ("p1", "p2"):
        await b.publish(make_envelope(spec.channel, pid), anyio.current_time() + 2)
    return b, sub


def test_settle_and_renew_during_a_consumer_leader_election_are_never_stale(
    nats_cluster: ClusterProcess,
) -> None:
    """Issue #25 items 1 and 7: right after the consumer's leader is killed nobody answers its
    ack subject ("no responders"), which on a cluster means "no leader yet", not "gone": a
    settle was answered ``SettleStale`` and a renewal ``held=False``, though the lease was
    live and the same settle applied once a leader was elected."""

    async def main() -> tuple[Any, Any, Any]:
        b, sub = await _two_published(nats_cluster)
        got = await b.receive(sub.id, 2, 1 << 20, anyio.current_time() + 2)
        assert len(got) == 2
        leader = await _consumer_leader_not_ours(nats_cluster, b, sub.id)
        await anyio.to_thread.run_sync(leader.kill)
        try:
            renewed = await b.renew(got[1].token)
            first = await b.settle(got[0].token, Completed(), "s-1")
        finally:
            await anyio.to_thread.run_sync(heal, nats_cluster)
        with anyio.fail_after(60):  # once a leader is elected, the same settle is confirmed
            while True:
                again = await b.settle(got[0].token, Completed(), "s-1")
                if not isinstance(again, SettleUnknown):
                    break
                await anyio.sleep(0.2)
        await b.drop_namespace()
        await b.aclose()
        return renewed, first, again

    renewed, first, again = anyio.run(main)
    assert renewed.held is not False, renewed
    assert not isinstance(first, SettleStale), first
    assert isinstance(again, SettleConfirmed), again


def test_a_receive_during_a_consumer_leader_election_waits_for_the_new_leader(
    nats_cluster: ClusterProcess,
) -> None:
    """Nobody answers a pull while the consumer has no leader (no responders), which on a
    cluster means "no leader yet": a receive raised BackendUnavailable at once (seen on a
    new consumer whose leader's interest had not yet reached this client's server, in a full
    run on an idle machine). Now it asks again until its deadline and returns the message."""

    async def main() -> tuple[list[str], float]:
        b, sub = await _two_published(nats_cluster)
        first = await b.receive(sub.id, 1, 1 << 20, anyio.current_time() + 5)
        leader = await _consumer_leader_not_ours(nats_cluster, b, sub.id)
        await anyio.to_thread.run_sync(leader.kill)
        try:
            start = anyio.current_time()
            rest = await b.receive(sub.id, 1, 1 << 20, start + 60)
            took = anyio.current_time() - start
        finally:
            await anyio.to_thread.run_sync(heal, nats_cluster)
        await b.drop_namespace()
        await b.aclose()
        return [d.envelope.publication_id for d in first + rest], took

    got, took = anyio.run(main)
    assert got == ["p1", "p2"], (got, took)


async def _adv_led_by(cluster: ClusterProcess, b: Any, channel: ChannelId, member: Any) -> None:
    """Step the channel's ``__adv`` stream down until ``member`` leads it: the advisory the
    consumer's leader emits as it dies is then stored, unreplicated, by the same member."""
    spec = cluster.options
    assert isinstance(spec, NatsCluster)
    adv = b.names.adv_stream(channel)
    find = partial(spec.stream_leader, cluster, adv)
    await _led(b, find, lambda m: m.port == member.port, f"STREAM.LEADER.STEPDOWN.{adv}")


def test_a_final_attempt_lapsing_during_a_consumer_leader_election_is_seen_by_others(
    nats_cluster: ClusterProcess,
) -> None:
    """Issue #25 item 5: with ``max_deliver=1`` on R3, the consumer's leader killed as the
    final attempt's lease runs out — its ``MAX_DELIVERIES`` advisory was missing in 6 of 10
    rounds, and every other client said pending=0, leased=0, unresolved=0 (Known) for a
    message retained, never redelivered and above the ack floor. Now another client's Known
    observation always accounts for the message, and names it unresolved once the server
    decided it."""

    async def round_(late: float, stop: str) -> list[tuple[int, int, int, int]]:
        b, spec = await _fresh(nats_cluster, {"retention": "limits"})
        other = replicated_backend(
            nats_cluster.urls,
            3,
            stream_prefix=b.names.stream_prefix,
            subject_prefix=b.names.subject_prefix,
            request_timeout=2.0,
        )
        sub = make_subscription(spec.channel, "w", ack_wait_seconds=1.0, max_deliver=1)
        await b.ensure_subscription(sub, "op-sub")
        await b.publish(make_envelope(spec.channel, "p1"), anyio.current_time() + 2)
        got = await b.receive(sub.id, 1, 1 << 20, anyio.current_time() + 2)
        assert len(got) == 1
        leader = await _consumer_leader_not_ours(nats_cluster, b, sub.id)
        await _adv_led_by(nats_cluster, b, spec.channel, leader)
        # the lease runs out and the server decides the lapse (its timer: up to ~1.5 s later)
        await anyio.sleep_until(got[0].lease_deadline + late)
        await anyio.to_thread.run_sync(getattr(leader, stop))
        seen: list[tuple[int, int, int, int]] = []
        try:
            await anyio.sleep(3.0)  # a new leader is elected meanwhile
        finally:
            await anyio.to_thread.run_sync(heal, nats_cluster)
        with anyio.fail_after(60):
            while not seen or seen[-1][0] + seen[-1][1]:  # until the server decided
                o = await other.observe_subscription(sub.id)
                if isinstance(o, Known):
                    v = o.value
                    seen.append((v.pending, v.leased, v.unresolved, v.dropped))
                await anyio.sleep(0.2)
        await other.aclose()
        await b.drop_namespace()
        await b.aclose()
        return seen

    async def main() -> list[list[tuple[int, int, int, int]]]:
        return [await round_(late, stop) for late in (0.0, 1.0) for stop in ("kill", "pause")]

    for seen in anyio.run(main):
        # every Known observation accounts for the one retained message
        assert all(p + le + u == 1 and d == 0 for p, le, u, d in seen), seen


def test_a_pull_lost_with_its_consumer_leader_is_sent_again(
    nats_cluster: ClusterProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A waiting pull lives on the consumer's leader only: sent to a leader that just died,
    or waiting there when it dies, it is never answered. A 60 s receive then waited its whole
    deadline and raised ``BackendUnavailable`` though the message was there (CI, right after
    a consumer leader's kill). A replicated consumer's pull now waits at most
    ``REPLICATED_PULL_SLICE``; one never answered is sent again. Here the first pull is lost."""
    from videoflow_aio.adapters.nats import _pull

    async def main() -> tuple[list[str], float]:
        b, sub = await _two_published(nats_cluster)
        nc = b._c.nc
        real = nc.publish
        lost: list[str] = []

        async def lose_the_first_pull(subject: str, *args: Any, **kwargs: Any) -> Any:
            if ".CONSUMER.MSG.NEXT." in subject and not lost:
                lost.append(subject)
                return None  # the request never reaches a leader
            return await real(subject, *args, **kwargs)

        monkeypatch.setattr(nc, "publish", lose_the_first_pull)
        start = anyio.current_time()
        got = await b.receive(sub.id, 2, 1 << 20, start + 60)
        took = anyio.current_time() - start
        monkeypatch.undo()
        assert lost
        await b.drop_namespace()
        await b.aclose()
        return [d.envelope.publication_id for d in got], took

    got, took = anyio.run(main)
    assert got == ["p1", "p2"], (got, took)
    assert took < _pull.REPLICATED_PULL_SLICE + 2 * 2.0 + 5, took  # not the 60 s deadline
