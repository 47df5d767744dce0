"""Built-in providers: one table, :data:`BUILTIN`, names each provider and where it lives.

Nothing here is imported until a provider is used: ``provider_names()`` reads the table (and
the ``videoflow_aio.providers`` entry points of other packages), ``get_provider(name)`` imports
that provider's module. A module whose optional dependency is missing (``ImportError``, e.g.
nats-py not installed) does not break the others: an :class:`UnimportableProvider` takes its
place, and ``unavailable()`` gives the import error, so its cases are skipped with that reason
(or fail where servers are required). Any other error while importing is a
:class:`~videoflow_aio.conformance.ProviderLoadError`.

Adding a built-in provider: its module here and one line in :data:`BUILTIN`. A provider in
another package declares an entry point instead (``docs/conformance.md``, "Adding a provider").
"""

from __future__ import annotations

from typing import NamedTuple

from .._registry import IMPORT_ERRORS, UnimportableProvider


class Builtin(NamedTuple):
    """One built-in provider: its ``name`` (``-p NAME``), its ``target`` (``"module:attribute"``
    in this package) and whether the CLI has a ``--NAME-url`` flag for it (``url_flag``)."""

    name: str
    target: str
    url_flag: bool = False


BUILTIN: tuple[Builtin, ...] = (
    Builtin("memory", "memory:MemoryProvider"),
    Builtin("file", "file:FileProvider"),
    Builtin("nats", "nats:NatsProvider", url_flag=True),
    Builtin("nats-cluster", "nats_cluster:NatsClusterProvider"),
    Builtin("nats-secure", "nats_secure:SecureNatsProvider"),
    Builtin("redis", "redis:RedisProvider", url_flag=True),
    Builtin("redis-replicated", "redis_replicated:RedisReplicatedProvider"),
    Builtin("redis-secure", "redis_secure:SecureRedisProvider"),
    Builtin("etcd", "etcd:EtcdProvider", url_flag=True),
    Builtin("etcd-cluster", "etcd_cluster:EtcdClusterProvider"),
    Builtin("etcd-secure", "etcd_secure:SecureEtcdProvider"),
)
"""The built-in providers; a target's module is relative to this package."""

__all__ = ["BUILTIN", "IMPORT_ERRORS", "Builtin", "UnimportableProvider"]
