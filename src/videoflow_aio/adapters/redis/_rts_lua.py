"""Lua scripts of :class:`RedisRuntimeStore` (standalone Redis: scripts touch several keys).

Key layout under namespace ``ns``:
``ns:rs:k:<key>`` hash ``{v, ver}``; ``ns:rs:rev`` store-wide version counter (INCR, never
reused); ``ns:rs:idx`` sorted set of key names (score 0, lexicographic order for scan);
``ns:rs:log:<log>`` list of records (``RPUSH`` length = dense log number);
``ns:op:<rid>`` request marker (see ``_client``).

The namespace and the marker window are rendered into each store's copy of the scripts
(:func:`render`), so a call sends only what varies: fewer arguments to encode per command.
Every write returns -1 when its request id was already fenced by a resolver, -2 (or the
recorded log number) when the same request id already applied.
"""

from __future__ import annotations

import re

from ._acl import guard

_SAFE_NS = re.compile(r"^[A-Za-z0-9_.:/-]{1,200}$")


def render(source: str, *, ns: str, window_ms: int) -> str:
    """``source`` with ``__NS__`` and ``__WINDOW__`` filled in (``ns`` must be a safe name)."""
    if not _SAFE_NS.match(ns):
        raise ValueError(f"namespace {ns!r} must match {_SAFE_NS.pattern}")
    return guard(source.replace("__NS__", ns).replace("__WINDOW__", str(int(window_ms))), ns)


# ARGV: key, expected version number ('' = must not exist), value, request id
CAS = """
local mk = '__NS__:op:' .. ARGV[4]
local m = redis.call('GET', mk)
if m then if m == 'f' then return -1 end return -2 end
local h = '__NS__:rs:k:' .. ARGV[1]
local cur = redis.call('HGET', h, 'ver')
if ARGV[2] ~= '' then
  if cur ~= ARGV[2] then return 0 end
elseif cur then
  return 0
end
local ver = redis.call('INCR', '__NS__:rs:rev')
redis.call('HSET', h, 'v', ARGV[3], 'ver', ver)
redis.call('ZADD', '__NS__:rs:idx', 0, ARGV[1])
redis.call('SET', mk, 'c', 'PX', __WINDOW__)
return ver
"""

# ARGV: key, expected version number ('' = unconditionally), request id
DELETE = """
local mk = '__NS__:op:' .. ARGV[3]
local m = redis.call('GET', mk)
if m then if m == 'f' then return -1 end return -2 end
local h = '__NS__:rs:k:' .. ARGV[1]
local cur = redis.call('HGET', h, 'ver')
if not cur then return 0 end
if ARGV[2] ~= '' and cur ~= ARGV[2] then return 0 end
redis.call('DEL', h)
redis.call('ZREM', '__NS__:rs:idx', ARGV[1])
redis.call('SET', mk, 'c', 'PX', __WINDOW__)
return 1
"""

# ARGV: log, record, request id. Returns the dense log number.
APPEND = """
local mk = '__NS__:op:' .. ARGV[3]
local m = redis.call('GET', mk)
if m then if m == 'f' then return -1 end return tonumber(m) end
local n = redis.call('RPUSH', '__NS__:rs:log:' .. ARGV[1], ARGV[2])
redis.call('SET', mk, n, 'PX', __WINDOW__)
return n
"""

# ARGV: min, max, count, max bytes. One page of (key, value, version) triples — at most
# ``count`` keys, and it stops after the entry that reaches ``max bytes`` of values — then
# 1/0 (more may follow) and the last name read (the next page starts after it).
SCAN = """
local names = redis.call('ZRANGEBYLEX', '__NS__:rs:idx', ARGV[1], ARGV[2], 'LIMIT', 0,
  tonumber(ARGV[3]))
local out = {}
local total, limit, last, more = 0, tonumber(ARGV[4]), '', 0
if #names == tonumber(ARGV[3]) then more = 1 end
for i, k in ipairs(names) do
  local h = redis.call('HMGET', '__NS__:rs:k:' .. k, 'v', 'ver')
  last = k
  if h[1] then
    out[#out + 1] = k
    out[#out + 1] = h[1]
    out[#out + 1] = h[2]
    total = total + #h[1]
    if total >= limit and i < #names then
      more = 1
      break
    end
  end
end
out[#out + 1] = more
out[#out + 1] = last
return out
"""
