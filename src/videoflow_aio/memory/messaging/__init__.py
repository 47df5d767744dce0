"""The in-memory MessagingBackend: a faithful model of a JetStream-like broker (and, in
``core_only`` mode, of Core NATS) on virtual time — the executable specification of the
messaging contract.

Behaviour emerges from real waiting: ``publish`` on a paused channel waits until its deadline
and answers :class:`~videoflow_aio.contracts.messaging.PublicationUnknown`; ``receive``
blocks until a message arrives or its deadline passes; a lease is a timer that redelivers
with ``attempt + 1``. Timers are stamped with their due time and processed at the next call
that touches the subscription (a waiting receive wakes for the next one), so they behave the
same under asyncio and trio.

Read it in this order, one job per module:

* ``backend``: :class:`MemoryMessagingBackend`, the client — the contract's methods, their
  argument checks and their waits;
* ``_controls``: the model controls (pause / resume acceptance, cancel a publication, fail
  observation, see what is stored), not part of the contract;
* ``_broker``: what a broker offers (:class:`~._broker.BrokerConfig`) and the server-side
  state every client shares — channels, subscriptions, leases, timers, dedup ledgers;
* ``_stream``: the JetStream-like broker (retention, leases, settlement, dead letters);
* ``_core``: the Core NATS broker (client queues, slow-consumer drops, nothing retained);
* ``_channel``: a channel — its slot (admit, evict, append), retention and dedup ledger;
* ``_subscription``: a subscription — cursor, ack floor, settlement ledger, counters;
* ``_leases``: leases, credit, lease expiry, redelivery and ``max_deliver``;
* ``_observe``: what observing a stream broker reports;
* ``_profiles``: the optional profiles (latest-per-key, durable control, archive);
* ``_records``: a stored message and a held publication.
"""

from __future__ import annotations

from ...contracts.messaging import make_channel, make_envelope, make_subscription
from .backend import MemoryMessagingBackend

__all__ = [
    "MemoryMessagingBackend",
    "make_channel",
    "make_envelope",
    "make_subscription",
]
