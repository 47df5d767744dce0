"""A pipeline's shape as data, and :func:`ensure_pipeline`, which creates its channels and
subscriptions on any :class:`~videoflow_aio.contracts.messaging.MessagingBackend`.

Naming (stable, so a restarted process finds what an earlier one created): node ``n``'s
output is the channel ``flow.run.n``; stage ``s`` reads each of its inputs through the data
subscription ``s`` and the end-of-stream subscription ``s-eos`` on that input's channel.
Only nodes that something reads get a channel. Channels keep ``interest`` retention with
every reading subscription required, so a message is gone once every reader settled it.
Operation ids are derived from the names, so ensuring twice is a no-op.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import msgspec

from ..contracts.errors import ValidationError
from ..contracts.messaging import (
    ChannelId,
    MessagingBackend,
    Overflow,
    SubscriptionId,
    make_channel,
    make_subscription,
)

PROFILE = "pipeline"
"""The channel profile :func:`ensure_pipeline` asks for."""
EOS_SUFFIX = "-eos"
"""Stage ``s``'s end-of-stream subscription on an input is the consumer ``s`` + this."""


class Node(msgspec.Struct, frozen=True, kw_only=True):
    """One pipeline node: a source (no ``inputs``) or a stage reading ``inputs``.

    Subscription settings (``ack_wait_seconds``, ``max_deliver``, ``item_credit`` — leases
    outstanding at once, shared by the stage's replicas) apply to the stage's subscriptions;
    channel settings (``max_msgs``, ``overflow``, ``dedup_window_seconds``) to the node's
    output channel.
    """

    name: str
    inputs: tuple[str, ...] = ()
    ack_wait_seconds: float = 30.0
    max_deliver: int = 4
    item_credit: int = 64
    max_msgs: int = 10000
    overflow: Overflow = "evict_oldest"
    dedup_window_seconds: int = 120


class Pipeline(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`ensure_pipeline` set up: per node its output channel (if read), per stage
    one data and one end-of-stream subscription per input, and per node the consumer names
    that read its output (the obligation ids its payloads need)."""

    flow_id: str
    run_id: str
    nodes: tuple[Node, ...]
    channels: dict[str, ChannelId]
    subscriptions: dict[str, tuple[SubscriptionId, ...]]
    eos_subscriptions: dict[str, tuple[SubscriptionId, ...]]
    readers: dict[str, tuple[str, ...]]

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise ValidationError(f"no node {name!r} in this pipeline", field="node", value=name)

    def output(self, name: str) -> ChannelId | None:
        """The channel node ``name`` publishes to; None when nothing reads it (a sink)."""
        self.node(name)
        return self.channels.get(name)

    def stages(self) -> list[Node]:
        """The nodes with inputs, in dependency order."""
        return [n for n in self.nodes if n.inputs]


NAME_FORBIDDEN = " .*>\t\n@#/"
"""Characters a node name cannot hold: they separate channel tokens (``.``), are subject
wildcards (``*``, ``>``), or delimit the derived ids (``@``, ``#``, ``/``)."""


def _check_name(name: object, field: str) -> None:
    if (
        not isinstance(name, str)
        or not name
        or any(c in name for c in NAME_FORBIDDEN)
        or not name.isprintable()
    ):
        raise ValidationError(
            f"a name must be a non-empty string without control characters or any of "
            f"{NAME_FORBIDDEN!r}",
            field=field,
            value=name,
        )


def order_nodes(nodes: Sequence[Node]) -> tuple[Node, ...]:
    """``nodes`` in dependency order (inputs first); ValidationError for duplicate names,
    unknown inputs and cycles."""
    by_name: dict[str, Node] = {}
    for n in nodes:
        if not isinstance(n, Node):
            raise ValidationError("stages must be Node objects", field="stages", value=n)
        _check_name(n.name, "name")
        if not isinstance(n.inputs, tuple | list):
            raise ValidationError(
                f"node {n.name!r}: inputs must be a tuple of node names",
                field="inputs",
                value=n.inputs,
            )
        for i in n.inputs:
            _check_name(i, "inputs")
        if n.name in by_name:
            raise ValidationError(f"duplicate node {n.name!r}", field="name", value=n.name)
        by_name[n.name] = n
    for n in nodes:
        for i in n.inputs:
            if i not in by_name:
                raise ValidationError(
                    f"node {n.name!r} reads unknown node {i!r}", field="inputs", value=i
                )
        if len(set(n.inputs)) != len(n.inputs):
            raise ValidationError(
                f"node {n.name!r} lists an input twice", field="inputs", value=n.inputs
            )
    done: dict[str, None] = {}
    visiting: set[str] = set()

    def visit(name: str) -> None:
        if name in done:
            return
        if name in visiting:
            raise ValidationError(f"cycle through node {name!r}", field="inputs", value=name)
        visiting.add(name)
        for i in by_name[name].inputs:
            visit(i)
        visiting.discard(name)
        done[name] = None

    for n in nodes:
        visit(n.name)
    return tuple(by_name[name] for name in done)


def plan_pipeline(flow_id: str, run_id: str, stages: Sequence[Node]) -> Pipeline:
    """The names :func:`ensure_pipeline` creates, without touching a backend."""
    for value, field in ((flow_id, "flow_id"), (run_id, "run_id")):
        _check_name(value, field)
    if not isinstance(stages, Sequence) or isinstance(stages, str | bytes):
        raise ValidationError(
            "stages must be a sequence of Node objects", field="stages", value=stages
        )
    nodes = order_nodes(stages)
    readers: dict[str, list[str]] = {n.name: [] for n in nodes}
    for n in nodes:
        for i in n.inputs:
            readers[i].append(n.name)
    channels = {n.name: ChannelId(flow_id, run_id, n.name) for n in nodes if readers[n.name]}
    subs: dict[str, tuple[SubscriptionId, ...]] = {}
    eos: dict[str, tuple[SubscriptionId, ...]] = {}
    for n in nodes:
        if n.inputs:
            subs[n.name] = tuple(SubscriptionId(channels[i], n.name) for i in n.inputs)
            eos[n.name] = tuple(SubscriptionId(channels[i], n.name + EOS_SUFFIX) for i in n.inputs)
    return Pipeline(
        flow_id=flow_id,
        run_id=run_id,
        nodes=nodes,
        channels=channels,
        subscriptions=subs,
        eos_subscriptions=eos,
        readers={k: tuple(v) for k, v in readers.items()},
    )


async def ensure_pipeline(
    backend: MessagingBackend, flow_id: str, run_id: str, stages: Sequence[Node]
) -> Pipeline:
    """Create (or verify) every channel and subscription of the pipeline; idempotent.

    Raises :class:`ValidationError` for a malformed pipeline before touching the backend,
    and whatever ``ensure_channel``/``ensure_subscription`` raise (``IncompatibleProfile``
    when an existing channel was created with other immutable settings).
    """
    pipe = plan_pipeline(flow_id, run_id, stages)
    by_name: Mapping[str, Node] = {n.name: n for n in pipe.nodes}
    for name, channel in pipe.channels.items():
        node = by_name[name]
        required = [
            sub
            for reader in pipe.readers[name]
            for sub in pipe.subscriptions[reader] + pipe.eos_subscriptions[reader]
            if sub.channel == channel
        ]
        spec = make_channel(
            flow_id,
            run_id,
            name,
            profile=PROFILE,
            retention="interest",
            required=required,
            max_msgs=node.max_msgs,
            overflow=node.overflow,
            dedup_window_seconds=node.dedup_window_seconds,
        )
        await backend.ensure_channel(spec, operation_id=f"ensure:{channel.name}")
    for node in pipe.stages():
        for sub, eos_sub in zip(
            pipe.subscriptions[node.name], pipe.eos_subscriptions[node.name], strict=True
        ):
            data = make_subscription(
                sub.channel,
                sub.consumer,
                ack_wait_seconds=node.ack_wait_seconds,
                max_deliver=node.max_deliver,
                item_credit=node.item_credit,
            )
            await backend.ensure_subscription(data, operation_id=f"ensure:{sub.name}")
            end = make_subscription(
                eos_sub.channel,
                eos_sub.consumer,
                ack_wait_seconds=node.ack_wait_seconds,
                max_deliver=-1,
                item_credit=1,
                kind="eos",
            )
            await backend.ensure_subscription(end, operation_id=f"ensure:{eos_sub.name}")
    return pipe


__all__ = ["EOS_SUFFIX", "PROFILE", "Node", "Pipeline", "ensure_pipeline", "plan_pipeline"]
