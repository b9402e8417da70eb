-- Reservation records shared by a cluster (flowgate_core::reservation; the memory twin is
-- MemoryReservations): each claimed exactly once, by its commit or by one node's sweeper.
--
-- KEYS (one hash tag, one slot, apart from the limits' state keys):
--   1 {flowgate:res}:expiry       zset: id -> expiry (us), the open records only
--   2 {flowgate:res}:outstanding  hash: "n<label>" -> open records, "u<label>" -> their units
--   3 {flowgate:res}:r:<id>       hash (claim, unclaim; a put has one per record, KEYS[3..]):
--                                 s phase ("o" open, "r" released, "c" committed), e expiry, b the items' text, k the number of
--                                 labels, l<i> and u<i> each label and its units; expires (a
--                                 tombstone) at its forget_at
-- ARGV: 1 op, then
--   put      for each record of KEYS[3..] in order: id, expiry (us), forget_at (us), items'
--            text, k, then k pairs (label, units)  -> per record: 1, or its error's text
--   claim    2 id                      -> {"unknown"} | {"committed"} | {"released", e, b}
--                                         | {"open", e, b}
--   peek     2 id                      -> as claim, changing nothing
--   unclaim  2 id, 3 the phase to restore ("o" or "r")               -> 1 (0: not claimed)
--   expire   2 now (us), 3 max         -> flat list: id, e, b of each record released

local op = ARGV[1]
local PREFIX = '{flowgate:res}:r:'

local function count(rec, by)
  local k = tonumber(redis.call('HGET', rec, 'k') or '0')
  for i = 1, k do
    local label = redis.call('HGET', rec, 'l' .. i)
    local units = tonumber(redis.call('HGET', rec, 'u' .. i))
    local n = redis.call('HINCRBY', KEYS[2], 'n' .. label, by)
    local u = redis.call('HINCRBY', KEYS[2], 'u' .. label, by * units)
    if n <= 0 or u < 0 then
      redis.call('HDEL', KEYS[2], 'n' .. label, 'u' .. label)
    end
  end
end

if op == 'put' then
  -- One call may carry several records (coalesced, see the client's batch.rs), each written
  -- independently: one that cannot be answers its error, and the others are written.
  local out, at = {}, 2
  for r = 3, #KEYS do
    local ok, err = pcall(put_record, KEYS[1], KEYS[2], KEYS[r], ARGV, at)
    if ok then
      out[#out + 1] = 1
    else
      if type(err) == 'table' and err.err then
        err = err.err
      end
      out[#out + 1] = tostring(err)
    end
    at = at + 5 + 2 * tonumber(ARGV[at + 4])
  end
  return out
elseif op == 'peek' then
  local s = redis.call('HGET', KEYS[3], 's')
  if not s then
    return {'unknown'}
  end
  if s == 'c' then
    return {'committed'}
  end
  local state = s == 'r' and 'released' or 'open'
  return {state, redis.call('HGET', KEYS[3], 'e'), redis.call('HGET', KEYS[3], 'b')}
elseif op == 'claim' then
  local rec, id = KEYS[3], ARGV[2]
  local s = redis.call('HGET', rec, 's')
  if not s then
    return {'unknown'}
  end
  if s == 'c' then
    return {'committed'}
  end
  redis.call('HSET', rec, 's', 'c')
  local e, b = redis.call('HGET', rec, 'e'), redis.call('HGET', rec, 'b')
  if s == 'r' then
    return {'released', e, b}
  end
  redis.call('ZREM', KEYS[1], id)
  count(rec, -1)
  return {'open', e, b}
elseif op == 'unclaim' then
  local rec, id = KEYS[3], ARGV[2]
  if redis.call('HGET', rec, 's') ~= 'c' then
    return 0
  end
  redis.call('HSET', rec, 's', ARGV[3])
  if ARGV[3] == 'o' then
    redis.call('ZADD', KEYS[1], redis.call('HGET', rec, 'e'), id)
    count(rec, 1)
  end
  return 1
elseif op == 'expire' then
  local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
  local out = {}
  for _, id in ipairs(ids) do
    redis.call('ZREM', KEYS[1], id)
    local rec = PREFIX .. id
    if redis.call('HGET', rec, 's') == 'o' then
      redis.call('HSET', rec, 's', 'r')
      count(rec, -1)
      out[#out + 1] = id
      out[#out + 1] = redis.call('HGET', rec, 'e')
      out[#out + 1] = redis.call('HGET', rec, 'b')
    end
  end
  return out
end
return redis.error_reply('reservations.lua: unknown op ' .. tostring(op))
