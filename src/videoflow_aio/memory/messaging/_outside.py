"""What happens to a broker from outside its clients: an administrator acting out of band, and
a crash of the server process. The model controls of the same names call these.

* :func:`purge` / :func:`delete_message` — the messages leave the slot (dead letters stay):
  each is a ``drop`` for every subscription that sees it and had not settled it, and a lease
  on one ends (a settle of it is ``SettleStale``, a renewal not held) — what the contract
  promises for any removal, whoever made it.
* :func:`delete_subscription` — the subscription is gone (``NotFound``) with its cursor,
  leases and counters; ensured again, it is a new subscription starting at the channel's
  first retained message, with nothing of the old one.
* :func:`restart` — the server is killed and started again on the same store. The model is
  a server whose every confirmed change is durable (a JetStream cluster with replicated
  consumers and ``sync_interval: always``): a channel with ``persistence`` keeps its
  messages, subscriptions, settlements and leases (a lease expires when it was due, as if no
  time had been lost); a channel without it is gone, with everything in it; publications
  held by a paused channel were never stored and are lost (their publishers' deadlines pass:
  ``PublicationUnknown``); acceptance is no longer paused. Core NATS keeps nothing on the
  server: its channels and client queues belong to the clients, which reconnect, so a
  restart changes nothing there.
"""

from __future__ import annotations

from ._broker import Broker
from ._channel import Channel
from ._stream import StreamBroker
from ._subscription import Sub

PURGED = "purge"
DELETED = "deleted"
RESTARTED = "restart"


def _due(broker: Broker, ch: Channel) -> None:
    """Fire what was due before the outside action (expiries and retries, at their times)."""
    if isinstance(broker, StreamBroker):
        now = broker.now()
        for sub in list(ch.subs.values()):
            broker.catch_up(sub, now)


def purge(broker: Broker, ch: Channel) -> int:
    """Remove every message of ``ch``'s slot; how many."""
    _due(broker, ch)
    victims = [m for m in ch.msgs.values() if m.slot]
    for m in victims:
        ch.discard(m, PURGED)
    return len(victims)


def delete_message(broker: Broker, ch: Channel, sequence: int) -> bool:
    """Remove the slot message ``sequence``; False when there is none."""
    _due(broker, ch)
    m = ch.msgs.get(sequence)
    if m is None or not m.slot:
        return False
    ch.discard(m, DELETED)
    return True


def delete_subscription(broker: Broker, sub: Sub) -> None:
    """Remove the subscription; a receive waiting on it wakes (to ``NotFound``)."""
    ch = sub.channel
    ch.subs.pop(sub.id, None)
    broker.subs.pop(sub.id, None)
    sub.wake()
    ch.record("subscription_deleted", sub.id.name)


def restart(broker: Broker) -> None:
    """The server crashes and restarts on the same store (see the module docstring)."""
    stream = isinstance(broker, StreamBroker)
    for ch in list(broker.channels.values()):
        for held in ch.held:  # never stored: gone with the process
            held.cancelled = True
            ch.record("held_lost", held.env.publication_id, reason=RESTARTED)
        ch.held = []
        ch.paused = False
        if stream and not ch.spec.persistence:
            _due(broker, ch)
            del broker.channels[ch.id]
            for m in list(ch.msgs.values()):
                ch.discard(m, RESTARTED)
            for sid, sub in ch.subs.items():
                broker.subs.pop(sid, None)
                sub.wake()
            ch.record("channel_lost", ch.id.name, reason=RESTARTED)
