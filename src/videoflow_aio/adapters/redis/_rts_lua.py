"""Lua scripts of :class:`RedisRuntimeStore` (standalone Redis: scripts touch several keys).

Key layout under namespace ``ns``:
``ns:rs:k:<key>`` hash ``{v, ver}``; ``ns:rs:rev`` store-wide version counter (INCR, never
reused); ``ns:rs:idx`` sorted set of key names (score 0, lexicographic order for scan);
``ns:rs:log:<log>`` list of records (``RPUSH`` length = dense log number);
``ns:op:<rid>`` request marker (see ``_client``).

Every write returns -1 when its request id was already fenced by a resolver.
"""

# KEYS: hash, rev, idx, marker. ARGV: has_expected ('1'/'0'), expected, value, key, window ms
CAS = """
local m = redis.call('GET', KEYS[4])
if m then if m == 'f' then return -1 end return -2 end
local cur = redis.call('HGET', KEYS[1], 'ver')
if ARGV[1] == '1' then
  if cur ~= ARGV[2] then return 0 end
elseif cur then
  return 0
end
local ver = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'v', ARGV[3], 'ver', ver)
redis.call('ZADD', KEYS[3], 0, ARGV[4])
redis.call('SET', KEYS[4], 'c', 'PX', ARGV[5])
return ver
"""

# KEYS: hash, idx, marker. ARGV: has_expected, expected, key, window ms
DELETE = """
local m = redis.call('GET', KEYS[3])
if m then if m == 'f' then return -1 end return -2 end
local cur = redis.call('HGET', KEYS[1], 'ver')
if not cur then return 0 end
if ARGV[1] == '1' and cur ~= ARGV[2] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[3])
redis.call('SET', KEYS[3], 'c', 'PX', ARGV[4])
return 1
"""

# KEYS: list, marker. ARGV: record, window ms. Returns the dense log number.
APPEND = """
local m = redis.call('GET', KEYS[2])
if m then if m == 'f' then return -1 end return tonumber(m) end
local n = redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('SET', KEYS[2], n, 'PX', ARGV[2])
return n
"""

# KEYS: idx. ARGV: min, max, count, hash prefix. One page of (key, value, version)
# triples, then the number of names read and the last name (the next page starts after it).
SCAN = """
local names = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for _, k in ipairs(names) do
  local h = redis.call('HMGET', ARGV[4] .. k, 'v', 'ver')
  if h[1] then
    out[#out + 1] = k
    out[#out + 1] = h[1]
    out[#out + 1] = h[2]
  end
end
out[#out + 1] = #names
out[#out + 1] = names[#names] or ''
return out
"""
