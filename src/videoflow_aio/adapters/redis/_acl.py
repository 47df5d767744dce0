"""The least-privilege Redis ACL for the adapters: exactly the commands they send, on their
namespaces' keys only.

:func:`acl_rules` is what ``docs/security.md`` prints and what the tests give the ACL user, so
the documented rule set and the tested one cannot drift apart.

- Sent directly: ``EVALSHA`` and ``SCRIPT LOAD`` (every write and several reads run as a
  script; redis-py loads a script the server does not know yet), ``HMGET``, ``LRANGE``,
  ``GET``, ``STRLEN`` in ``MULTI``/``EXEC`` (reads), ``SCAN`` and ``UNLINK`` (inventory,
  reconcile, ``drop_namespace``).
- Run inside the scripts: Redis checks a script's commands and keys against the ACL too.
- Not granted: ``CONFIG`` (it reads every password in the server's configuration). Without it
  ``RedisPayloadStore`` cannot check ``maxmemory-policy`` against its tier (the check is
  skipped, as on a managed server) and ``RedisRuntimeStore.capabilities()`` reports
  ``durable=False``. ``SCAN`` lists key names outside the namespace too (Redis does not filter
  SCAN by key pattern); it cannot read or change them. No pub/sub channel is granted.
"""

from __future__ import annotations

from collections.abc import Iterable

DIRECT_COMMANDS = (
    "evalsha",
    "script|load",
    "hmget",
    "lrange",
    "get",
    "strlen",
    "multi",
    "exec",
    "scan",
    "unlink",
)
SCRIPT_COMMANDS = (
    "decrby",
    "del",
    "exists",
    "get",
    "hdel",
    "hget",
    "hgetall",
    "hmget",
    "hset",
    "incr",
    "incrby",
    "pexpire",
    "pexpireat",
    "pexpiretime",
    "rpush",
    "set",
    "time",
    "zadd",
    "zcard",
    "zrange",
    "zrangebylex",
    "zrem",
    "zremrangebyscore",
    "zscore",
)


def acl_commands() -> list[str]:
    """Every command the adapters need, sorted (``container|subcommand`` where Redis grants a
    subcommand alone)."""
    return sorted(set(DIRECT_COMMANDS) | set(SCRIPT_COMMANDS))


def acl_rules(namespaces: Iterable[str]) -> str:
    """The ACL rules (for ``ACL SETUSER name on >password <rules>`` or an ACL file line) that
    let a user run :class:`RedisRuntimeStore` and :class:`RedisPayloadStore` on the given
    namespaces and nothing else: no other key, no channel, no other command."""
    names = list(namespaces)
    if not names:
        raise ValueError("acl_rules needs at least one namespace")
    keys = " ".join(f"~{ns}:*" for ns in names)
    cmds = " ".join(f"+{c}" for c in acl_commands())
    return f"resetkeys {keys} resetchannels -@all {cmds}"


__all__ = ["acl_commands", "acl_rules"]
