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
    audit = _MessagingAudit()
    for e in log.events(
        ("publish", "deliver", "unresolved", "subscription_created", "channel_closed", *FATES)
    ):
        audit.see(e)
    return audit.finish()


class _MessagingAudit:
    """The messaging invariants, checked one event at a time."""

    def __init__(self) -> None:
        self.found: list[str] = []
        self.state: dict[tuple[str, int, str], str] = {}  # (channel, seq, subscription) -> fate
        self.accepted: dict[str, set[int]] = {}
        self.fated: list[tuple[str, int, Event]] = []

    def see(self, e: Event) -> None:
        ch = e.subject
        if e.kind == "channel_closed":
            self.state = {k: v for k, v in self.state.items() if k[0] != ch}
            self._close(ch)
            return
        if e.kind == "subscription_created":
            self.state = {
                k: v for k, v in self.state.items() if not (k[0] == ch and k[2] == e.ident)
            }
            return
        seq = e.attrs.get("seq")
        if not isinstance(seq, int):
            return
        if e.kind == "publish":
            if not e.attrs.get("duplicate"):
                self.accepted.setdefault(ch, set()).add(seq)
            return
        for name in _names(e):
            self._fate(e, ch, seq, name)
        if e.kind != "deliver":
            self.fated.append((ch, seq, e))

    def _fate(self, e: Event, ch: str, seq: int, name: str) -> None:
        where = f"{e.kind} of {e.ident!r} (channel {ch}, seq {seq}, at {e.at!r}, event {e.seq})"
        key = (ch, seq, name)
        before = self.state.get(key)
        if e.kind == "deliver":
            if before is not None:
                self.found.append(f"{where}: delivered to {name} after {before}")
            return
        if before is not None and before != "unresolved":
            self.found.append(f"{where}: a second fate for {name}, after {before}")
        elif before == "unresolved" and e.kind == "unresolved":
            self.found.append(f"{where}: unresolved twice for {name}")
        self.state[key] = e.kind

    def _close(self, ch: str) -> None:
        """Fates on ``ch`` for sequences it never accepted are violations; forget ``ch``."""
        self.found.extend(_unaccepted(self.fated, self.accepted, ch))
        self.fated = [f for f in self.fated if f[0] != ch]
        self.accepted.pop(ch, None)

    def finish(self) -> list[str]:
        for ch in list(self.accepted) + [f[0] for f in self.fated]:
            self.found.extend(_unaccepted(self.fated, self.accepted, ch))
            self.fated = [f for f in self.fated if f[0] != ch]
        return self.found


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
