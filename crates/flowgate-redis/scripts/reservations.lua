-- Reservation records shared by a cluster (flowgate_core::reservation; the memory twin is
-- MemoryReservations): each claimed exactly once, by its commit or by one node's sweeper. The
-- records' form is records.lua's.
--
-- KEYS (one hash tag, one slot, apart from the limits' state keys):
--   1 {flowgate:res}:expiry   zset: the open records' index members -> expiry (us)
--   2.. {flowgate:res}:r:<id> the records (claim, peek, unclaim: one; put: one per record)
-- ARGV: 1 op, then
--   put      per record of KEYS[2..] in order: its index member, value, expiry (us), forget_at
--            (ms)                       -> per record: 1, or its error's text
--   claim    2 id                      -> {"unknown"} | {"committed"} | {"released", e, b}
--                                         | {"open", e, b}
--   peek     2 id                      -> as claim, changing nothing
--   unclaim  2 id, 3 the record's value to restore                    -> 1 (0: not claimed)
--   cancel   2 id, 3 its index member, 4 forget_at (ms)
--                                      -> 1 (the caller gives the units back) | 0 (released)
--   expire   2 now (us), 3 max         -> flat list: id, e, b of each record released

local op = ARGV[1]
local PREFIX = '{flowgate:res}:r:'

if op == 'put' then
  -- One call may carry several records (coalesced, see the client's batch.rs), each written
  -- independently: one that cannot be answers its error, and the others are written.
  local out, at = {}, 2
  for r = 2, #KEYS do
    local ok, err = pcall(put_record, KEYS[1], KEYS[r], ARGV, at)
    if ok then
      out[#out + 1] = 1
    else
      if type(err) == 'table' and err.err then
        err = err.err
      end
      out[#out + 1] = tostring(err)
    end
    at = at + 4
  end
  return out
elseif op == 'peek' or op == 'claim' then
  local rec = KEYS[2]
  local v = redis.call('GET', rec)
  if not v then
    return {'unknown'}
  end
  if v == 'c' then
    return {'committed'}
  end
  local s, e, b = record_of(v)
  if op == 'claim' then
    redis.call('SET', rec, 'c', 'KEEPTTL')
    if s == 'o' then
      redis.call('ZREM', KEYS[1], ARGV[2] .. '\30' .. b)
    end
  end
  return {s == 'r' and 'released' or 'open', e, b}
elseif op == 'unclaim' then
  local rec, value = KEYS[2], ARGV[3]
  if redis.call('GET', rec) ~= 'c' then
    return 0
  end
  redis.call('SET', rec, value, 'KEEPTTL')
  local s, e, b = record_of(value)
  if s == 'o' then
    redis.call('ZADD', KEYS[1], e, ARGV[2] .. '\30' .. b)
  end
  return 1
elseif op == 'cancel' then
  -- A put that failed may be applied still (its call timed out, or waits in a batch): an open
  -- record is claimed, and where there is none a tombstone makes that put fail.
  local rec = KEYS[2]
  local v = redis.call('GET', rec)
  if not v then
    redis.call('SET', rec, 'c', 'PXAT', ARGV[4])
    return 1
  end
  if string.sub(v, 1, 1) == 'o' then
    redis.call('SET', rec, 'c', 'KEEPTTL')
    redis.call('ZREM', KEYS[1], ARGV[3])
    return 1
  end
  return 0
elseif op == 'expire' then
  local members = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'LIMIT', 0,
    tonumber(ARGV[3]))
  local out = {}
  for _, m in ipairs(members) do
    redis.call('ZREM', KEYS[1], m)
    -- (a member without items, or a record in another form, is an earlier version's or
    -- another program's: it leaves the index, and its units are left to time)
    local sep = string.find(m, '\30', 1, true)
    local rec = PREFIX .. string.sub(m, 1, (sep or 1) - 1)
    local v = sep and redis.pcall('GET', rec)
    local ok, s, e, b = false
    if type(v) == 'string' and string.sub(v, 1, 1) == 'o' then
      ok, s, e, b = pcall(record_of, v)
    end
    if ok then
      redis.call('SETRANGE', rec, 0, 'r')
      out[#out + 1] = string.sub(m, 1, sep - 1)
      out[#out + 1] = e
      out[#out + 1] = b
    end
  end
  return out
end
return redis.error_reply('reservations.lua: unknown op ' .. tostring(op))
