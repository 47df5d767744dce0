"""Names on the server: stream names, consumer names and subjects for channels and kinds.

A channel ``flow.run.node`` has these streams (``<base>`` is ``<p>.<flow>.<run>.<node>``):

* ``<P>__<flow>__<run>__<node>`` on subjects ``<base>.{data,eos,control}.>`` (the run's slot:
  its limits apply to these kinds together);
* ``…__idx`` on ``<base>.idx``: the index records the adapter's publishers write in batches
  (stream sequence → kind and partition key of each publication they stored), so any client
  attributes an evicted sequence to the subscriptions it matched;
* ``…__dlq`` on ``<base>.dlq.<consumer>.…`` (dead letters, outside the slot; the settling
  subscription in the subject, so they are counted per subscription on the server);
* ``…__adv`` capturing this channel's consumer advisories durably (``MAX_DELIVERIES``,
  ``MSG_TERMINATED``, ``CREATED``, ``DELETED``): the unresolved / drop / incarnation ledger;
* ``…__acct`` one record per subscription on ``<base>.acct.<consumer>``: the drop accounting
  every client shares (written under compare-and-set);
* ``…__ctl`` and ``…__arc`` when the ``durable_control`` / ``archive`` profiles are offered
  (see ``_profiles``).

A message's subject is ``<base>.<kind>.n`` without a partition key and ``<base>.<kind>.k.<key>``
with one, so a partition subscription filters ``<base>.<kind>.k.<p>`` and an unpartitioned one
``<base>.<kind>.>``; a dead letter's is ``<base>.dlq.<consumer>.n`` / ``….k.<key>``. Stream
and consumer names allow no ``.``, so tokens are escaped: every byte outside ``[A-Za-z0-9-]``
becomes ``_xx`` (hex); ``__`` therefore never occurs inside an escaped token and separates
them.
"""

from __future__ import annotations

from ...contracts.messaging import ChannelId, SubscriptionId

SLOT_KINDS = ("data", "eos", "control")
_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")
ADV_MAX_DELIVERIES = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES"
ADV_TERMINATED = "$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED"
ADV_CREATED = "$JS.EVENT.ADVISORY.CONSUMER.CREATED"
ADV_DELETED = "$JS.EVENT.ADVISORY.CONSUMER.DELETED"
ADV_NAKED = "$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED"
METRIC_ACK = "$JS.EVENT.METRIC.CONSUMER.ACK"
AUDIT = "$JS.EVENT.ADVISORY.API"


def escape(token: str) -> str:
    """``token`` with every byte outside ``[A-Za-z0-9-]`` as ``_xx``: a valid name part."""
    out: list[str] = []
    for b in token.encode():
        out.append(chr(b) if b in _SAFE else f"_{b:02x}")
    return "".join(out)


def unescape(part: str) -> str:
    raw = bytearray()
    i = 0
    while i < len(part):
        c = part[i]
        if c == "_":
            raw.append(int(part[i + 1 : i + 3], 16))
            i += 3
        else:
            raw.append(ord(c))
            i += 1
    return raw.decode()


class Names:
    """Every server-side name of this library under one ``stream_prefix``/``subject_prefix``."""

    def __init__(self, stream_prefix: str = "VF", subject_prefix: str = "vf") -> None:
        if not stream_prefix or escape(stream_prefix) != stream_prefix:
            raise ValueError(f"stream_prefix must match [A-Za-z0-9-]+: {stream_prefix!r}")
        if not subject_prefix or any(c in subject_prefix for c in " *>\t\n"):
            raise ValueError(
                f"subject_prefix must be a subject without wildcards: {subject_prefix!r}"
            )
        self.stream_prefix = stream_prefix
        self.subject_prefix = subject_prefix

    # streams
    def stream(self, ch: ChannelId) -> str:
        return "__".join(
            (self.stream_prefix, escape(ch.flow_id), escape(ch.run_id), escape(ch.node))
        )

    def dlq_stream(self, ch: ChannelId) -> str:
        return self.stream(ch) + "__dlq"

    def adv_stream(self, ch: ChannelId) -> str:
        return self.stream(ch) + "__adv"

    def idx_stream(self, ch: ChannelId) -> str:
        return self.stream(ch) + "__idx"

    def acct_stream(self, ch: ChannelId) -> str:
        return self.stream(ch) + "__acct"

    def channel_of(self, stream: str) -> ChannelId | None:
        """The channel whose main stream is ``stream``, or None (another stream)."""
        parts = stream.split("__")
        if len(parts) != 4 or parts[0] != self.stream_prefix:
            return None
        try:
            return ChannelId(unescape(parts[1]), unescape(parts[2]), unescape(parts[3]))
        except (ValueError, IndexError, UnicodeDecodeError):
            return None

    # subjects
    def base(self, ch: ChannelId) -> str:
        return f"{self.subject_prefix}.{ch.flow_id}.{ch.run_id}.{ch.node}"

    def slot_subjects(self, ch: ChannelId) -> list[str]:
        b = self.base(ch)
        return [f"{b}.{k}.>" for k in SLOT_KINDS]

    def dlq_subjects(self, ch: ChannelId) -> list[str]:
        return [f"{self.base(ch)}.dlq.>"]

    def index_subject(self, ch: ChannelId) -> str:
        return f"{self.base(ch)}.idx"

    def adv_subjects(self, ch: ChannelId) -> list[str]:
        s = self.stream(ch)
        kinds = (ADV_MAX_DELIVERIES, ADV_TERMINATED, ADV_CREATED, ADV_DELETED)
        return [f"{k}.{s}.*" for k in kinds] + [f"{ADV_MAX_DELIVERIES}.{s}__dlq.*"]

    def acct_subjects(self, ch: ChannelId) -> list[str]:
        return [f"{self.base(ch)}.acct.*"]

    def acct_subject(self, sub: SubscriptionId) -> str:
        return f"{self.base(sub.channel)}.acct.{self.consumer(sub)}"

    def subject(self, ch: ChannelId, kind: str, partition_key: str | None) -> str:
        b = self.base(ch)
        return f"{b}.{kind}.n" if partition_key is None else f"{b}.{kind}.k.{partition_key}"

    def dlq_subject(self, sub: SubscriptionId, partition_key: str | None) -> str:
        """A dead letter settled by ``sub`` (its consumer in the subject)."""
        b = f"{self.base(sub.channel)}.dlq.{sub.consumer}"
        return f"{b}.n" if partition_key is None else f"{b}.k.{partition_key}"

    def dlq_count_filter(self, sub: SubscriptionId) -> str:
        """Every dead letter ``sub`` settled (to count them on the server)."""
        return f"{self.base(sub.channel)}.dlq.{sub.consumer}.>"

    def filter(self, ch: ChannelId, kind: str, partition: int | None) -> str:
        b = self.base(ch)
        if kind == "dlq":
            return f"{b}.dlq.>" if partition is None else f"{b}.dlq.*.k.{partition}"
        return f"{b}.{kind}.>" if partition is None else f"{b}.{kind}.k.{partition}"

    def kind_of(self, ch: ChannelId, subject: str) -> tuple[str, str | None]:
        """``(kind, partition_key)`` of a message subject of channel ``ch``."""
        rest = subject[len(self.base(ch)) + 1 :]
        kind, _, tail = rest.partition(".")
        if kind == "dlq":  # dlq.<consumer>.n | dlq.<consumer>.k.<key>
            tail = tail.partition(".")[2]
        if tail.startswith("k."):
            return kind, tail[2:]
        return kind, None

    # consumers
    def consumer(self, sub: SubscriptionId) -> str:
        return escape(sub.consumer)

    def consumer_id(self, ch: ChannelId, name: str) -> SubscriptionId | None:
        try:
            return SubscriptionId(ch, unescape(name))
        except (ValueError, IndexError, UnicodeDecodeError):
            return None
