"""The optional profiles a broker may offer: latest-per-key slots, durable control records
(MSG-018) and the archive (MSG-024). Each is advertised by ``capabilities()``; a backend that
does not offer one raises :class:`~videoflow_aio.contracts.errors.Unsupported` for it."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from ...contracts.messaging import ChannelId, Envelope


class LatestPerKey:
    """``latest_per_key`` (JetStream ``max_msgs_per_subject=1``): a channel keeps only the
    newest envelope per (kind, ``partition_key``); the one it supersedes leaves the channel.
    Envelopes without a partition key are not keyed."""

    __slots__ = ("_seqs",)

    def __init__(self) -> None:
        self._seqs: dict[tuple[str, str], int] = {}

    def previous(self, env: Envelope) -> int | None:
        """The sequence of the envelope ``env`` would supersede (it may have left already)."""
        key = env.partition_key
        return None if key is None else self._seqs.get((env.kind, key))

    def note(self, env: Envelope, seq: int) -> None:
        key = env.partition_key
        if key is not None:
            self._seqs[(env.kind, key)] = seq


class ControlRecords:
    """``durable_control`` (MSG-018, a KV bucket): versioned control records of one channel.
    ``commit`` is a compare-and-swap on the version (None: the key must not exist); versions
    are fresh opaque strings drawn from ``versions``, a counter shared by the whole broker."""

    __slots__ = ("_records",)

    def __init__(self) -> None:
        self._records: dict[str, tuple[bytes, str]] = {}

    def commit(
        self, key: str, expected_version: str | None, value: bytes, versions: Iterator[int]
    ) -> str | None:
        """Store ``value`` under a fresh version, or None when the version moved on."""
        current = self._records.get(key)
        if (None if current is None else current[1]) != expected_version:
            return None
        version = str(next(versions))
        self._records[key] = (value, version)
        return version

    def state(self, key: str) -> tuple[bytes | None, str | None]:
        """``(value, version)``, or ``(None, None)`` for a key never committed."""
        current = self._records.get(key)
        return (None, None) if current is None else current


class Archive:
    """``archive`` (MSG-024): every stored slot envelope by ``(channel, event_id)``,
    replayable for ``horizon`` seconds after its acceptance. It belongs to the broker, not to
    a channel, so it outlives ``close``. Expired entries are pruned in acceptance order."""

    __slots__ = ("_entries", "_order", "horizon")

    def __init__(self, horizon: float) -> None:
        self.horizon = horizon
        self._entries: dict[tuple[ChannelId, str], tuple[Envelope, float]] = {}
        self._order: deque[tuple[float, ChannelId, str]] = deque()

    def put(self, channel: ChannelId, env: Envelope, now: float) -> None:
        self._prune(now)
        self._entries[(channel, env.event_id)] = (env, now)
        self._order.append((now, channel, env.event_id))

    def get(self, channel: ChannelId, event_id: str, now: float) -> Envelope | None:
        """The envelope while within the horizon of its acceptance, else None."""
        self._prune(now)
        entry = self._entries.get((channel, event_id))
        if entry is None or entry[1] + self.horizon <= now:
            return None
        return entry[0]

    def _prune(self, now: float) -> None:
        order = self._order
        entries = self._entries
        horizon = self.horizon
        while order and order[0][0] + horizon <= now:
            at, channel, event_id = order.popleft()
            entry = entries.get((channel, event_id))
            if entry is not None and entry[1] == at:
                del entries[(channel, event_id)]
