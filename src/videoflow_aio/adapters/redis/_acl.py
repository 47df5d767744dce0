"""The least-privilege Redis ACL for the adapters: exactly the commands they send, on their
namespaces' keys only.

:func:`acl_rules` is what ``docs/security.md`` prints and what the tests give the ACL user, so
the documented rule set and the tested one cannot drift apart.

- Sent directly: ``EVALSHA`` and ``SCRIPT LOAD`` (every write and several reads run as a
  script; redis-py loads a script the server does not know yet), ``HMGET``, ``LRANGE``,
  ``GET``, ``STRLEN`` in ``MULTI``/``EXEC`` (reads), ``SCAN`` and ``UNLINK`` (inventory,
  reconcile, ``drop_namespace``); with ``wait_replicas``, ``WAIT`` after each write and, after
  a lost reply resolved as applied, ``PEXPIRE`` of its marker.
- Run inside the scripts: Redis checks a script's commands and keys against the ACL too.
- Not granted: ``CONFIG`` (it reads every password in the server's configuration). Without it
  ``RedisPayloadStore`` cannot check ``maxmemory-policy`` against its tier (the check is
  skipped, as on a managed server) and ``RedisRuntimeStore.capabilities()`` reports
  ``durable=False``. ``SCAN`` lists key names outside the namespace too (Redis does not filter
  SCAN by key pattern); it cannot read or change them. No pub/sub channel is granted.
"""

from __future__ import annotations

import re
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
    "wait",
    "pexpire",
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


# the arguments after the key that make each command's ACL check well-formed
_CHECK_ARGS: dict[str, tuple[str, ...]] = {
    "decrby": ("1",),
    "hdel": ("f",),
    "hget": ("f",),
    "hmget": ("f",),
    "hset": ("f", "v"),
    "incrby": ("1",),
    "pexpire": ("1",),
    "pexpireat": ("1",),
    "rpush": ("v",),
    "set": ("v",),
    "zadd": ("0", "m"),
    "zrange": ("0", "1"),
    "zrangebylex": ("-", "+"),
    "zrem": ("m",),
    "zremrangebyscore": ("0", "0"),
    "zscore": ("m",),
}
_KEYLESS = frozenset({"time"})
_CALL = re.compile(r"redis\.call\('([A-Za-z]+)'")


def guard(source: str, ns: str) -> str:
    """``source`` with a check of every command it may run, on a key of ``ns``, before its
    first statement (after a ``#!lua`` line).

    Redis checks a script's commands against the ACL one at a time, as they run, and keeps
    the writes made before a refused one: a permission withdrawn from the user between two
    calls would leave half a write behind. ``redis.acl_check_cmd`` (Redis 7) asks first, so a
    refused script changes nothing and fails with ``NOPERM`` (``AccessDenied``).
    """
    commands = sorted({c.lower() for c in _CALL.findall(source)})
    key = f"{ns}:acl"
    checks = []
    for cmd in commands:
        args = () if cmd in _KEYLESS else (key, *_CHECK_ARGS.get(cmd, ()))
        checks.append("{" + ", ".join(f"'{a}'" for a in (cmd, *args)) + "}")
    block = (
        f"for _, a in ipairs({{{', '.join(checks)}}}) do\n"
        "  if not redis.acl_check_cmd(unpack(a)) then\n"
        "    return redis.error_reply('NOPERM this user has no permissions to run the ' ..\n"
        "      a[1] .. ' command on this namespace (checked before any write)')\n"
        "  end\n"
        "end\n"
    )
    if source.startswith("#!"):
        first, _, rest = source.partition("\n")
        return f"{first}\n{block}{rest}"
    return block + source.lstrip("\n")


__all__ = ["acl_commands", "acl_rules", "guard"]
