"""The controls a case may use, one Protocol per contract: what ``h.controls(backend)`` returns.

Controls are not part of a contract: the reference models implement every one (sync or async;
the harness makes each awaitable), a real provider those it can really perform. A case
declares the ones it uses (``controls=``), checked at registration against the Protocol of its
contract.

``MemberControls`` (kill -9, restart, pause, resume a member; find the leader) are shared by
the messaging, payload and runtime-store Protocols: the cluster providers perform them.

Adding a control is a one-place change here: a method on the contract's Protocol (its name
is then a valid ``controls=`` entry, and mypy checks every call of it in the cases). Then
implement it on the model (the memory provider requires every control) and, where an engine
can really do it, on that provider's controls object.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from ..contracts.messaging import ChannelId, MessagingBackend, PublishOutcome, SubscriptionId

if TYPE_CHECKING:
    from ..memory.allocation import NodeFixture


class MemberControls(Protocol):
    """Faults on one member of a replicated deployment (the cluster providers perform them on
    the processes they started, by PID; cases using them need the ``replicated`` capability).
    Members are named as the cluster names them (``n1``, ``e2``, ``r1``, …)."""

    async def members(self) -> list[str]:
        """Every member's name."""
        ...

    async def leader(self) -> str:
        """The member that leads now (etcd leader, Redis primary, JetStream meta leader); waits
        for an election in progress."""
        ...

    async def kill_member(self, member: str) -> None:
        """``kill -9`` the member: nothing flushed; its data stays on disk."""

    async def restart_member(self, member: str) -> None:
        """Start the member again on the same ports and data; returns once the cluster has
        formed again."""

    async def pause_member(self, member: str) -> None:
        """SIGSTOP the member: its peers see a partition, its clients no answer."""

    async def resume_member(self, member: str) -> None:
        """SIGCONT a paused member."""


class MessagingControls(MemberControls, Protocol):
    """Controls of the messaging contract."""

    async def pause_acceptance(self, channel_id: ChannelId) -> None:
        """Hold every publication to the channel until resumed (callers' deadlines pass)."""

    async def resume_acceptance(self, channel_id: ChannelId) -> list[PublishOutcome]:
        """Store the held publications (late acceptance); their outcomes where known."""
        ...

    async def cancel_publication(self, channel_id: ChannelId, publication_id: str) -> bool:
        """Definitely cancel a held publication; False when it was not held."""
        ...

    async def fail_observation(
        self, subscription: SubscriptionId, reason: str | None = "timeout"
    ) -> None:
        """Observations of ``subscription`` return ``Unknown(reason)`` until called with None."""

    async def another_client(self) -> MessagingBackend:
        """Another client of the same broker (a new backend on its own connection): it sees
        the same channels and subscriptions once it ensures them."""
        ...

    async def restart_server(self) -> None:
        """The broker crashes (kill -9) and restarts on the same store; returns once every
        client is connected again."""

    async def lose_reply(self, subscription: SubscriptionId) -> None:
        """The next settle or renew on ``subscription`` by this client is applied, but its
        answer is lost: the client answers ``SettleUnknown`` / ``held=None``."""

    async def purge(self, channel_id: ChannelId) -> None:
        """An administrator purges the channel's messages out of band."""

    async def delete_message(self, channel_id: ChannelId, sequence: int) -> None:
        """An administrator deletes one message of the channel out of band."""

    async def delete_subscription(self, subscription: SubscriptionId) -> None:
        """An administrator deletes the subscription out of band (ensured again, it is new)."""

    async def subscription_leader(self, subscription: SubscriptionId) -> str:
        """The member leading the subscription's replicated consumer (cluster providers)."""
        ...

    async def channel_leader(self, channel_id: ChannelId) -> str:
        """The member leading the channel's replicated stream (cluster providers)."""
        ...


class PayloadControls(MemberControls, Protocol):
    """Controls of the payload contract: damage and outside actions on stored objects."""

    async def corrupt(self, key: str) -> None:
        """Flip the object's first byte (same length, different digest)."""

    async def truncate(self, key: str, size: int) -> None:
        """Cut the object's bytes to ``size``; its metadata still names the original."""

    async def delete(self, key: str) -> None:
        """Delete the object and its metadata (not its obligation set)."""

    async def expire_obligation(self, key: str, obligation_id: str) -> None:
        """One obligation record vanishes."""

    async def expire_obligation_set(self, key: str) -> None:
        """The whole obligation set vanishes while the bytes remain (PAY-008)."""

    async def put_bare(self, key: str, data: bytes) -> None:
        """Bytes without metadata or obligations, as an RFC 0002 publisher writes them."""

    async def fail_reads(self, reasons: list[str]) -> None:
        """The next ``len(reasons)`` reads return ``TransientFailure`` with these reasons."""

    async def fail_inventory(self, reason: str | None) -> None:
        """``inventory`` returns ``Unknown(reason)`` until called with None."""

    async def obligations(self, key: str) -> dict[str, float]:
        """Live obligation id → deadline (the loop's clock) of the set at ``key``."""
        ...

    async def object_count(self) -> int:
        """Objects present now."""
        ...

    async def stored_bytes(self) -> int:
        """Bytes held now."""
        ...


class RuntimeStoreControls(MemberControls, Protocol):
    """Controls of the runtime-store contract: the member faults (races are staged at fault
    barriers)."""


class AllocationControls(Protocol):
    """Controls of the allocation contract: the cluster's side of the story."""

    async def bind_workload(self, node: str, workload_id: str, units: int) -> None:
        """A workload (ours or foreign) now holds ``units`` devices on ``node``."""

    async def unbind_workload(self, node: str, workload_id: str) -> None:
        """The workload no longer holds devices on ``node``."""

    async def mark_workload_ready(self, claim_id: str) -> None:
        """The claim's workloads are running."""

    async def fail_reads(self, kind: str, reason: str | None = "timeout") -> None:
        """``nodes`` / ``pods`` / ``config`` reads fail (``reason=None`` restores them)."""

    async def fail_geometry(self, node_name: str) -> None:
        """Every geometry write on ``node_name`` ends ``state=failed``."""

    async def mutations(
        self, kinds: Sequence[str] | None = None
    ) -> list[tuple[str, str, str, str]]:
        """Every state change so far as ``(kind, subject, by, detail)``, oldest first."""
        ...

    async def node(self, name: str) -> NodeFixture:
        """The live fixture of node ``name``."""
        ...

    async def pointer(self) -> str:
        """The MIG config the manager reads."""
        ...

    async def shared_config(self) -> tuple[dict[str, dict[str, int]], int, bool]:
        """The shared MIG config: ``(entries, resource_version, tombstoned)``."""
        ...


def control_names(protocol: type) -> frozenset[str]:
    """The controls a Protocol declares (its public methods, inherited ones included)."""
    return frozenset(
        name
        for klass in protocol.__mro__
        for name, member in vars(klass).items()
        if not name.startswith("_") and inspect.isfunction(member)
    )


CONTROLS: Mapping[str, frozenset[str]] = {
    "messaging": control_names(MessagingControls),
    "payload": control_names(PayloadControls),
    "runtime_store": control_names(RuntimeStoreControls),
    "allocation": control_names(AllocationControls),
}
"""Contract → the names ``controls=`` may list."""


def offered_controls(contract: str, target: type) -> frozenset[str]:
    """The controls of ``contract`` that ``target`` (a controls class) implements."""
    return frozenset(n for n in CONTROLS[contract] if callable(getattr(target, n, None)))


def check_controls(contract: str, names: frozenset[str], where: str) -> None:
    """``ValueError`` naming the first of ``names`` that ``contract`` has no control for."""
    unknown = sorted(names - CONTROLS[contract])
    if unknown:
        known = ", ".join(sorted(CONTROLS[contract])) or "none"
        raise ValueError(f"{where}: {contract} has no control {unknown[0]!r}; known: {known}")


__all__ = [
    "CONTROLS",
    "AllocationControls",
    "MemberControls",
    "MessagingControls",
    "PayloadControls",
    "RuntimeStoreControls",
    "control_names",
    "offered_controls",
]
