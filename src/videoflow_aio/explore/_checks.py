"""Invariants the explorer checks on every run's ObservationLog, whatever the program did.

Messaging (per channel, from its events alone): a publication's fate for a subscription —
``settle``, ``dead_letter`` or ``drop`` — is recorded at most once; ``unresolved`` at most
once and never after a fate; nothing is delivered to a subscription after its fate or
after it became unresolved; and every fate names a sequence the channel accepted. A
channel closed (or a subscription created again) starts afresh. What the log cannot show
(that every accepted publication *does* end in a fate or is still retained) needs the
model's own counts: the ``PROP-MSG-NOTHING-LOST`` property checks that.
"""

from __future__ import annotations

from ..observe import Event, ObservationLog

FATES = frozenset({"settle", "dead_letter", "drop"})


def _names(event: Event) -> list[str]:
    if event.kind == "drop":
        names = event.attrs.get("subscriptions", [])
        return [str(n) for n in names] if isinstance(names, list) else []
    return [str(event.attrs.get("subscription", ""))]


def messaging_violations(log: ObservationLog) -> list[str]:
    """What breaks the messaging invariants above, in log order (empty: nothing)."""
    found: list[str] = []
    state: dict[tuple[str, int, str], str] = {}  # (channel, seq, subscription) -> fate
    accepted: dict[str, set[int]] = {}
    fated: list[tuple[str, int, Event]] = []
    for e in log.events(
        ("publish", "deliver", "unresolved", "subscription_created", "channel_closed", *FATES)
    ):
        ch = e.subject
        if e.kind == "channel_closed":
            state = {k: v for k, v in state.items() if k[0] != ch}
            found.extend(_unaccepted(fated, accepted, ch))
            fated = [f for f in fated if f[0] != ch]
            accepted.pop(ch, None)
            continue
        if e.kind == "subscription_created":
            state = {k: v for k, v in state.items() if not (k[0] == ch and k[2] == e.ident)}
            continue
        seq = e.attrs.get("seq")
        if not isinstance(seq, int):
            continue
        if e.kind == "publish":
            if not e.attrs.get("duplicate"):
                accepted.setdefault(ch, set()).add(seq)
            continue
        where = f"{e.kind} of {e.ident!r} (channel {ch}, seq {seq}, at {e.at!r}, event {e.seq})"
        for name in _names(e):
            key = (ch, seq, name)
            before = state.get(key)
            if e.kind == "deliver":
                if before is not None:
                    found.append(f"{where}: delivered to {name} after {before}")
                continue
            if before is not None and before != "unresolved":
                found.append(f"{where}: a second fate for {name}, after {before}")
            elif before == "unresolved" and e.kind == "unresolved":
                found.append(f"{where}: unresolved twice for {name}")
            state[key] = e.kind
        if e.kind != "deliver":
            fated.append((ch, seq, e))
    for ch in list(accepted) + [f[0] for f in fated]:
        found.extend(_unaccepted(fated, accepted, ch))
        fated = [f for f in fated if f[0] != ch]
    return found


def _unaccepted(
    fated: list[tuple[str, int, Event]], accepted: dict[str, set[int]], channel: str
) -> list[str]:
    seqs = accepted.get(channel, set())
    return [
        f"{e.kind} of {e.ident!r} (channel {channel}, seq {seq}): a fate for a sequence the "
        "channel never accepted"
        for ch, seq, e in fated
        if ch == channel and seq not in seqs
    ]


def log_violations(log: ObservationLog) -> list[str]:
    """Every invariant the explorer checks on a log (today: messaging's)."""
    return messaging_violations(log)
