"""Nothing lost: random schedules of publishes, receives, settles, lease expiries, evictions and
pauses, optionally ended by ``close``; every accepted publication ends in exactly one recorded
fate per subscription that sees it, and ``observe_subscription`` agrees with the observation log.
After a close nothing is left open: every pair has its fate, and every held publication its
``reject``."""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from videoflow_aio.contracts import Known
from videoflow_aio.contracts.messaging import (
    Completed,
    Delivery,
    Kind,
    Retry,
    SettleConfirmed,
    SettleOutcome,
    SubscriptionId,
    Terminal,
    make_channel,
    make_envelope,
    make_subscription,
)
from videoflow_aio.memory.messaging import MemoryMessagingBackend
from videoflow_aio.observe import ObservationLog
from videoflow_aio.vtime import Backend, VirtualClock
from videoflow_aio.vtime import run as vrun

OUTCOMES: dict[str, SettleOutcome] = {"ok": Completed(), "retry": Retry(), "term": Terminal("x")}
SUBS = ("a", "b", "e")  # two data subscriptions and one eos subscription
KIND_OF: dict[str, Kind] = {"a": "data", "b": "data", "e": "eos"}

# one flat tuple per step: (action, pid, subscription, n/index, outcome, kind, sleep);
# repetition in the action list weights the choice
ACTIONS = (
    ["pub"] * 5 + ["recv"] * 4 + ["settle"] * 4 + ["sleep"] * 2 + ["pause", "resume", "cancel"]
)
op = st.tuples(
    st.sampled_from(ACTIONS),
    st.integers(0, 30),
    st.sampled_from(SUBS),
    st.integers(0, 9),
    st.sampled_from(["ok", "ok", "retry", "term"]),
    st.sampled_from(["data", "data", "data", "eos"]),
    st.sampled_from([0.5, 2.0, 6.0]),
)
config = st.fixed_dictionaries(
    {
        "retention": st.sampled_from(["limits", "interest"]),
        "max_msgs": st.integers(2, 8),
        "per_subject_limits": st.booleans(),
        "max_deliver": st.sampled_from([1, 2, 3, -1]),
    }
)


async def drive(cfg: dict[str, Any], ops: list[tuple[Any, ...]], close: bool = False) -> None:
    log = ObservationLog()
    b = MemoryMessagingBackend(log=log, dedup_window_seconds=1_000_000)
    cid = make_channel("f", "r", "n", "work", "limits").channel
    sids = {name: SubscriptionId(cid, name) for name in SUBS}
    spec = make_channel(
        "f", "r", "n", "work", cfg["retention"],
        required=tuple(sids.values()) if cfg["retention"] == "interest" else (),
        max_msgs=cfg["max_msgs"], per_subject_limits=cfg["per_subject_limits"],
        dedup_window_seconds=1_000_000,
    )  # fmt: skip
    await b.ensure_channel(spec, "op")
    for name in SUBS:
        sub = make_subscription(
            cid, name, ack_wait_seconds=5.0, max_deliver=cfg["max_deliver"], item_credit=3,
            kind=KIND_OF[name],
        )  # fmt: skip
        await b.ensure_subscription(sub, "op")
    held: dict[str, list[Delivery]] = {name: [] for name in SUBS}
    n_settle = 0
    for action, pid, name, n, outcome_name, kind, pause in ops:
        now = anyio.current_time()
        if action == "pub":
            await b.publish(make_envelope(cid, f"p{pid}", kind=kind), now + 1.0)
        elif action == "recv":
            held[name] += await b.receive(sids[name], n % 4 + 1, 1 << 20, now + 1.0)
        elif action == "settle":
            mine = held[name]
            if mine:
                d = mine.pop(n % len(mine))
                outcome = OUTCOMES[outcome_name]
                n_settle += 1
                ans = await b.settle(d.token, outcome, f"s{n_settle}")
                assert isinstance(ans, SettleConfirmed) or ans.reason
        elif action == "sleep":
            await anyio.sleep(pause)
        elif action == "pause":
            b.pause_acceptance(cid)
        elif action == "resume":
            b.resume_acceptance(cid)
        else:
            b.cancel_publication(cid, f"p{pid}")
    if close:
        waiting = [h for h in b._broker.channels[cid].held if h.outcome is None]
        await b.close([cid], "g")
        rejects = [e for e in log.events("reject") if e.attrs["reason"] == "channel closed"]
        assert sorted(e.ident for e in rejects) == sorted(h.env.publication_id for h in waiting)
        assert all(h.outcome is not None for h in waiting)
    else:
        b.resume_acceptance(cid)
    await check(b, log, cid, sids, closed=close)


async def check(
    b: MemoryMessagingBackend,
    log: ObservationLog,
    cid: Any,
    sids: dict[str, SubscriptionId],
    closed: bool = False,
) -> None:
    if not closed:  # timers are stamped and fire lazily: bring the log up to date
        for sid in sids.values():
            await b.observe_subscription(sid)
    accepted = {
        int(e.attrs["seq"]): e.attrs.get("msg_kind")  # type: ignore[arg-type]
        for e in log.events("publish")
        if not e.attrs["duplicate"]
    }
    fates: dict[tuple[int, str], list[str]] = {}
    for e in log.events(("settle", "dead_letter", "drop", "unresolved")):
        seq = int(e.attrs["seq"])  # type: ignore[arg-type]
        names = e.attrs["subscriptions"] if e.kind == "drop" else [e.attrs["subscription"]]
        assert isinstance(names, list)
        for name in names:
            fates.setdefault((seq, str(name)), []).append(e.kind)
    retained = set() if closed else {s for s, env in enumerate_stored(b, cid) if env.kind != "dlq"}
    for name, sid in sids.items():
        open_pairs = 0
        unresolved = 0
        dropped = 0
        dead = 0
        for seq, kind in accepted.items():
            if kind != KIND_OF[name]:
                assert (seq, sid.name) not in fates, (
                    "a fate for a message the subscription never sees"
                )
                continue
            events = fates.get((seq, sid.name), [])
            final = [k for k in events if k != "unresolved"]
            assert len(final) <= 1, f"seq {seq} on {name}: more than one fate {events}"
            if "unresolved" in events:
                assert events.index("unresolved") == 0 and events.count("unresolved") == 1, events
            if final == ["drop"]:
                dropped += 1
            elif final == ["dead_letter"]:
                dead += 1
            elif not final:
                # unresolved or still pending/leased: it must still be retained
                assert seq in retained, f"seq {seq} on {name}: no fate and not retained"
                open_pairs += 1
                unresolved += events == ["unresolved"]
        if closed:
            continue  # the subscription is gone; no pair was left open (retained is empty)
        obs = await b.observe_subscription(sid)
        assert isinstance(obs, Known)
        v = obs.value
        assert v.pending + v.leased + v.unresolved == open_pairs, (name, v, open_pairs)
        assert v.unresolved == unresolved, (name, v)
        assert v.dropped == dropped, (name, v)
        assert v.dead_lettered == dead, (name, v)
    counts = Counter(e.kind for e in log)
    assert counts["publish"] >= len(accepted)
    for kind in ("drop", "unresolved", "dead_letter", "settle", "late_accept", "expire", "cancel"):
        if counts[kind]:
            event(f"schedule has {kind}")
    if closed:
        event("schedule ends in close")  # coverage, shown by --hypothesis-show-statistics


def enumerate_stored(b: MemoryMessagingBackend, cid: Any) -> list[tuple[int, Any]]:
    ch = b._broker.channels[cid]  # the model's own sequence numbers, for the cross-check only
    return [(seq, m.env) for seq, m in ch.msgs.items()]


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cfg=config, ops=st.lists(op, min_size=10, max_size=80), close=st.booleans())
def test_nothing_lost_asyncio(cfg: dict[str, Any], ops: list[tuple[Any, ...]], close: bool) -> None:
    vrun(drive, cfg, ops, close, backend="asyncio", clock=VirtualClock())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cfg=config, ops=st.lists(op, min_size=10, max_size=80), close=st.booleans())
def test_nothing_lost_trio(cfg: dict[str, Any], ops: list[tuple[Any, ...]], close: bool) -> None:
    vrun(drive, cfg, ops, close, backend="trio", clock=VirtualClock())


@pytest.mark.parametrize("close", [False, True])
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_check_catches_a_silent_loss(backend: Backend, close: bool) -> None:
    """The property is not vacuous: a message removed without a record is caught, before or
    across a close."""

    async def lose() -> None:
        log = ObservationLog()
        b = MemoryMessagingBackend(log=log)
        spec = make_channel("f", "r", "n", "work", "limits")
        await b.ensure_channel(spec, "op")
        sid = SubscriptionId(spec.channel, "a")
        await b.ensure_subscription(make_subscription(spec.channel, "a"), "op")
        await b.publish(make_envelope(spec.channel, "p1"), anyio.current_time() + 1)
        ch = b._broker.channels[spec.channel]
        ch.msgs.clear()  # sabotage: the message vanishes with no drop event
        ch.count = 0
        if close:
            await b.close([spec.channel], "g")
        with pytest.raises(AssertionError):
            await check(b, log, spec.channel, {"a": sid}, closed=close)

    vrun(lose, backend=backend, clock=VirtualClock())
