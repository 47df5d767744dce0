"""Lua scripts of :class:`RedisPayloadStore` (standalone Redis 7).

Key layout under namespace ``ns`` (``<k>`` is the payload key, i.e. the content id):

- ``ns:o:<k>``  the object bytes (STRING, with the object's TTL)
- ``ns:m:<k>``  metadata HASH ``{size, digest, gen, created}`` (same TTL; ``created`` in server ms)
- ``ns:s:<k>``  obligation set: ZSET obligation id → deadline (server ms); key TTL = last deadline
- ``ns:used``   bytes of the objects in the ledger; ``ns:sz`` HASH key → size (the ledger)
- ``ns:lru``    ZSET key → access tick (``ns:tick`` INCR), the adapter's LRU for the evictable
  budget (puts and reads both count as an access)
- ``ns:gen``    store-wide generation counter (INCR: never reused)
- ``ns:seen:<k>`` first time ``reconcile`` saw a set-less object that has no metadata
- ``ns:op:<rid>`` request marker (see ``_client``): the JSON result of the write that applied

Every write script starts by checking its request marker (a replay returns the recorded
result, a fenced id returns ``f``) and ends by recording its result there. Results are JSON.
Obligations vanish at their deadline: each script first drops members whose deadline has
passed (``prune``), and Redis deletes a ZSET whose last member goes, so an emptied set no
longer exists. Scripts that must run under memory pressure (release, reconcile, cleanup) carry
``flags=allow-oom``; the put script carries a shebang without it, so under OOM Redis refuses
it before it starts (no partial effects).

The store's constants (namespace, marker window, tier, budget, forwarding, grace, intent
prefix) are rendered into each store's copy of the scripts (:func:`render`), so a call sends
only what varies.
"""

from __future__ import annotations

import re

from ._acl import guard

_SAFE_NS = re.compile(r"^[A-Za-z0-9_.:/-]{1,200}$")


def render(
    source: str,
    *,
    ns: str,
    window_ms: int,
    tier: str,
    budget: int,
    forward: bool,
    grace_ms: float,
    intent: str,
    intent_grace_ms: float = 0.0,
) -> str:
    """``source`` with the store's constants filled in (``ns`` must be a safe name)."""
    if not _SAFE_NS.match(ns):
        raise ValueError(f"namespace {ns!r} must match {_SAFE_NS.pattern}")
    if not _SAFE_NS.match(intent.rstrip("/")) or "'" in intent:
        raise ValueError(f"intent prefix {intent!r} is not a safe literal")
    rendered = (
        source.replace("__NS__", ns)
        .replace("__WINDOW__", str(int(window_ms)))
        .replace("__TIER__", "durable" if tier == "durable" else "evictable")
        .replace("__BUDGET__", str(int(budget)))
        .replace("__FORWARD__", "1" if forward else "0")
        .replace("__INTENT_GRACE__", repr(float(intent_grace_ms)))
        .replace("__GRACE__", repr(float(grace_ms)))
        .replace("__INTENT__", intent)
    )
    return guard(rendered, ns)


_PRELUDE = """
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end
-- drop expired obligations; the live count (0: the set is absent, or was just emptied and
-- so no longer exists)
local function prune(s, now)
  redis.call('ZREMRANGEBYSCORE', s, '-inf', now)
  return redis.call('ZCARD', s)
end
local function extend(o, m, at)  -- never shorten; no TTL stays no TTL. Returns the expiry.
  local cur = redis.call('PEXPIRETIME', o)
  if cur >= 0 and cur < at then
    redis.call('PEXPIREAT', o, at)
    redis.call('PEXPIREAT', m, at)
    return at
  end
  return cur
end
local function finish(mk, window, result)
  local r = cjson.encode(result)
  redis.call('SET', mk, r, 'PX', window)
  return r
end
"""

_MARKER = """
local ns = '__NS__'
local mk = ns .. ':op:' .. ARGV[1]
local window = __WINDOW__
local prior = redis.call('GET', mk)
if prior then return prior end
"""

# ARGV: request id, key, data, size, digest, ttl_ms
PUT = (
    "#!lua\n"
    + _PRELUDE
    + _MARKER
    + """
local used_k, sz_k, lru_k, gen_k, tick_k = ns .. ':used', ns .. ':sz', ns .. ':lru',
  ns .. ':gen', ns .. ':tick'
local key, data, size, digest = ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5]
local ttl, tier, budget, forward = tonumber(ARGV[6]), '__TIER__', __BUDGET__, '__FORWARD__'
local o, m, s = ns .. ':o:' .. key, ns .. ':m:' .. key, ns .. ':s:' .. key
local now = now_ms()
local cur_gen = redis.call('HGET', m, 'gen')
local exists = redis.call('EXISTS', o) == 1
if exists and cur_gen then
  local n = prune(s, now)
  if forward == '1' and redis.call('HGET', m, 'digest') == digest
      and redis.call('GET', o) == data then
    -- the forwarded object lives at least ttl from now (GT: never shortened)
    redis.call('PEXPIRE', o, ttl, 'GT')
    redis.call('PEXPIRE', m, ttl, 'GT')
    if tier == 'evictable' then  -- a forwarded put is an access, as in the model
      redis.call('ZADD', lru_k, 'XX', redis.call('INCR', tick_k), key)
    end
    return finish(mk, window, {s = 'forward', gen = cur_gen, created = now})
  end
  if n > 0 then
    return finish(mk, window, {s = 'conflict', gen = cur_gen, n = n})
  end
end
local function forget(k)  -- drop a key from the ledger; returns the bytes it accounted
  local old = redis.call('HGET', sz_k, k)
  if not old then return 0 end
  old = tonumber(old)
  redis.call('HDEL', sz_k, k)
  if tier == 'evictable' then redis.call('ZREM', lru_k, k) end
  if old > 0 then redis.call('DECRBY', used_k, old) end
  return old
end
local function used_now()  -- exact: drop ledger entries whose object is gone
  local all = redis.call('HGETALL', sz_k)
  for i = 1, #all, 2 do
    if redis.call('EXISTS', ns .. ':o:' .. all[i]) == 0 then forget(all[i]) end
  end
  return tonumber(redis.call('GET', used_k) or '0')
end
local evicted = {}
if budget >= 0 then
  local mine = tonumber(redis.call('HGET', sz_k, key) or '0')
  local used = tonumber(redis.call('GET', used_k) or '0') - mine
  if used + size > budget then
    used = used_now() - tonumber(redis.call('HGET', sz_k, key) or '0')
  end
  if used + size > budget then
    if tier == 'durable' or size > budget then
      return cjson.encode({s = 'budget', used = used, budget = budget})
    end
    -- choose victims least recently used first; if even all of them cannot make room,
    -- evict nothing and refuse (as the model does)
    local victims, freed = {}, 0
    for _, victim in ipairs(redis.call('ZRANGE', lru_k, 0, -1)) do
      if used - freed + size <= budget then break end
      if victim ~= key then
        victims[#victims + 1] = victim
        freed = freed + tonumber(redis.call('HGET', sz_k, victim) or '0')
      end
    end
    if used - freed + size > budget then
      return cjson.encode({s = 'budget', used = used, budget = budget})
    end
    for _, victim in ipairs(victims) do
      redis.call('DEL', ns .. ':o:' .. victim, ns .. ':m:' .. victim)
      used = used - forget(victim)
      evicted[#evicted + 1] = victim
    end
  end
end
forget(key)
redis.call('DEL', o, m, s)
local gen = tostring(redis.call('INCR', gen_k))
redis.call('SET', o, data, 'PX', ttl)
redis.call('HSET', m, 'size', size, 'digest', digest, 'gen', gen, 'created', now)
redis.call('PEXPIRE', m, ttl)
redis.call('HSET', sz_k, key, size)
if tier == 'evictable' then redis.call('ZADD', lru_k, redis.call('INCR', tick_k), key) end
redis.call('INCRBY', used_k, size)
return finish(mk, window, {s = 'new', gen = gen, created = now, evicted = evicted})
"""
)

# ARGV: request id, key, gen, rel_ms, mode ('attach'|'acquire'|'renew'), ids...
# Attaches/extends obligations (ZADD GT: deadlines never move backwards).
OBLIGE = (
    "#!lua\n"
    + _PRELUDE
    + _MARKER
    + """
local key, gen, rel, mode, tier = ARGV[2], ARGV[3], tonumber(ARGV[4]), ARGV[5], '__TIER__'
local o, m, s = ns .. ':o:' .. key, ns .. ':m:' .. key, ns .. ':s:' .. key
local now = now_ms()
if redis.call('EXISTS', o) == 0 then return finish(mk, window, {s = 'notfound'}) end
local g = redis.call('HGET', m, 'gen')
if g ~= gen then return finish(mk, window, {s = 'conflict', gen = g or ''}) end
local n = prune(s, now)
local dl = now + rel
if mode == 'renew' and (n <= 0 or not redis.call('ZSCORE', s, ARGV[6])) then
  return finish(mk, window, {s = 'nosuch'})
end
local score = dl
for i = 6, #ARGV do
  -- GT: a deadline never moves backwards; CH: 0 means an existing later deadline stays
  if redis.call('ZADD', s, 'GT', 'CH', dl, ARGV[i]) == 0 and i == 6 then
    score = tonumber(redis.call('ZSCORE', s, ARGV[i]))
  end
end
local exp
if #ARGV >= 6 then
  -- the set lives until its last deadline (an existing set already has a TTL: only extend)
  if n > 0 then
    redis.call('PEXPIREAT', s, math.ceil(dl), 'GT')
  else
    redis.call('PEXPIREAT', s, math.ceil(dl))
  end
  if tier == 'durable' then exp = extend(o, m, math.ceil(math.max(dl, score))) end
end
if not exp then exp = redis.call('PEXPIRETIME', o) end
-- relative times keep full precision through cjson (which prints 14 significant digits)
local exp_rel = -1
if exp >= 0 then exp_rel = exp - now end
return finish(mk, window, {s = 'ok', mine = (score <= dl) and 1 or 0, score = score,
  score_rel = score - now, exp_rel = exp_rel})
"""
)

# ARGV: request id, key, gen, obligation id
RELEASE = (
    "#!lua flags=allow-oom\n"
    + _PRELUDE
    + _MARKER
    + """
local used_k, sz_k, lru_k = ns .. ':used', ns .. ':sz', ns .. ':lru'
local key, gen, oid = ARGV[2], ARGV[3], ARGV[4]
local o, m, s = ns .. ':o:' .. key, ns .. ':m:' .. key, ns .. ':s:' .. key
local now = now_ms()
if redis.call('EXISTS', o) == 0 then return finish(mk, window, {s = 'object-absent', n = 0}) end
if redis.call('HGET', m, 'gen') ~= gen then
  return finish(mk, window, {s = 'stale-generation', n = 0})
end
local n = prune(s, now)
if n <= 0 then return finish(mk, window, {s = 'no-obligation-set', n = 0}) end
if redis.call('ZREM', s, oid) == 0 then
  return finish(mk, window, {s = 'already-released', n = n})
end
n = n - 1
if n > 0 then return finish(mk, window, {s = 'released', n = n}) end
local old = tonumber(redis.call('HGET', sz_k, key) or '0')
redis.call('DEL', o, m, s)
redis.call('HDEL', sz_k, key)
if '__TIER__' == 'evictable' then redis.call('ZREM', lru_k, key) end
if old > 0 then redis.call('DECRBY', used_k, old) end
return finish(mk, window, {s = 'reclaimed', n = 0})
"""
)

# ARGV: key, listed ('1'/'0'), required obligation ids...
# One key's reconcile step; returns JSON (no marker: it is repeatable by construction).
RECONCILE_KEY = (
    "#!lua flags=allow-oom\n"
    + _PRELUDE
    + """
local ns = '__NS__'
local used_k, sz_k, lru_k = ns .. ':used', ns .. ':sz', ns .. ':lru'
local key, listed, grace, intent = ARGV[1], ARGV[2] == '1', __GRACE__, '__INTENT__'
local intent_grace = __INTENT_GRACE__
local o, m, s = ns .. ':o:' .. key, ns .. ':m:' .. key, ns .. ':s:' .. key
if redis.call('EXISTS', o) == 0 then return cjson.encode({examined = 0}) end
local now = now_ms()
local created = tonumber(redis.call('HGET', m, 'created') or '')
if not created then
  local seen = ns .. ':seen:' .. key
  redis.call('SET', seen, now, 'NX', 'PX', math.max(60000, grace * 10))
  created = tonumber(redis.call('GET', seen))
end
local age = now - created
local required = {}
local nreq = 0
for i = 3, #ARGV do required[ARGV[i]] = true; nreq = nreq + 1 end
local function reclaim()
  local old = tonumber(redis.call('HGET', sz_k, key) or '0')
  redis.call('DEL', o, m, s, ns .. ':seen:' .. key)
  redis.call('HDEL', sz_k, key)
  redis.call('ZREM', lru_k, key)
  if old > 0 then redis.call('DECRBY', used_k, old) end
end
local n = prune(s, now)
local cancelled = {}
local outcome = ''
if n > 0 then
  for _, id in ipairs(redis.call('ZRANGE', s, 0, -1)) do
    local cancel
    if listed then cancel = not required[id]
    else
      cancel = (intent_grace == 0 or age > intent_grace) and string.sub(id, 1, #intent) == intent
    end
    if cancel then
      redis.call('ZREM', s, id)
      cancelled[#cancelled + 1] = id
    end
  end
  if #cancelled > 0 and redis.call('EXISTS', s) == 0 then reclaim(); outcome = 'reclaimed' end
elseif listed and nreq > 0 then
  outcome = 'required'
elseif age > grace then
  reclaim(); outcome = 'orphan-reclaimed'
else
  outcome = 'in-grace'
end
return cjson.encode({examined = 1, cancelled = cancelled, outcome = outcome})
"""
)

# ARGV: key. Deletes an obligation set whose object is gone.
DANGLING = """#!lua flags=allow-oom
local o, s = '__NS__:o:' .. ARGV[1], '__NS__:s:' .. ARGV[1]
if redis.call('EXISTS', o) == 1 or redis.call('EXISTS', s) == 0 then return 0 end
redis.call('DEL', s)
return 1
"""

# The exact byte count of the objects present (fixes the ledger).
STORED_BYTES = """#!lua flags=allow-oom
local all = redis.call('HGETALL', '__NS__:sz')
for i = 1, #all, 2 do
  if redis.call('EXISTS', '__NS__:o:' .. all[i]) == 0 then
    redis.call('HDEL', '__NS__:sz', all[i])
    redis.call('DECRBY', '__NS__:used', tonumber(all[i + 1]))
  end
end
return tonumber(redis.call('GET', '__NS__:used') or '0')
"""

# ARGV: key. A read that counts as an access for the adapter's LRU.
READ_TOUCH = """
local o = '__NS__:o:' .. ARGV[1]
if redis.call('EXISTS', o) == 1 then
  redis.call('ZADD', '__NS__:lru', 'XX', redis.call('INCR', '__NS__:tick'), ARGV[1])
end
local meta = redis.call('HMGET', '__NS__:m:' .. ARGV[1], 'size', 'digest', 'gen')
return {redis.call('GET', o), meta[1], meta[2], meta[3]}
"""
