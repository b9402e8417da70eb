-- Flowgate commit: claims reservations' records (reservations.lua's `claim`) and applies each
-- commit's release and charge (charge.lua) in the same call, so that a commit is applied whole or
-- not at all. The commits of one call (coalesced, see the client's batch.rs) are each handled
-- independently, in order, exactly as if sent one after another: one that cannot be applied
-- answers its error, changes nothing, and the others go on. For a single Redis (or Sentinel),
-- where the records and the state keys may be used together; on a cluster the server claims,
-- then charges.
--
-- KEYS: 1 {flowgate:res}:expiry, 2 {flowgate:res}:outstanding (as reservations.lua), then for
--       each commit its record {flowgate:res}:r:<id> and its charge's distinct state keys.
-- ARGV: for each commit, five: the number of its state keys, its id, the phase the caller read
--       ("o" open: the charge gives the estimate back and charges; "r" released by a sweeper:
--       it only charges), the items' text it read, the charge's call string (charge.lua's
--       ARGV[1]).
-- Returns a list, one answer per commit: {"unknown"} | {"committed"} | {"changed", phase,
-- expiry, items' text} (the record is not as read: nothing done, the caller builds its charge
-- again) | {"done", expiry, charge.lua's reply} | {"error", message} (nothing done).

-- Takes an open record out of the outstanding ones; `f` is what `read` read of it (its first
-- label and units: a record of more labels reads the others here).
local function outstanding(rec, id, f)
  redis.call('ZREM', KEYS[1], id)
  local k = tonumber(f[4] or '0')
  for i = 1, k do
    local label, units = f[5], tonumber(f[6])
    if i > 1 then
      label, units = redis.call('HGET', rec, 'l' .. i), tonumber(redis.call('HGET', rec, 'u' .. i))
    end
    local n = redis.call('HINCRBY', KEYS[2], 'n' .. label, -1)
    local u = redis.call('HINCRBY', KEYS[2], 'u' .. label, -units)
    if n <= 0 or u < 0 then
      redis.call('HDEL', KEYS[2], 'n' .. label, 'u' .. label)
    end
  end
end

-- Reads a commit's record (in one HMGET: its phase, expiry, items' text, number of labels and
-- first label and units, records.lua's fields) and computes its charge, writing nothing: an
-- answer when there is nothing to do, else nil, the record's phase, expiry and fields read, and
-- the charge's write.
local function read(rec, phase, text, call, keys)
  local f = redis.call('HMGET', rec, 's', 'e', 'b', 'k', 'l1', 'u1')
  local s, e, b = f[1], f[2], f[3]
  if not s then
    return {'unknown'}
  end
  if s == 'c' then
    return {'committed'}
  end
  if s ~= phase or b ~= text then
    return {'changed', s, e, b}
  end
  if #keys == 0 then
    return nil, s, e, f, function()
      return { 0, {} }
    end
  end
  return nil, s, e, f, charges(call)(keys)
end

local function commit(rec, id, phase, text, call, keys)
  -- Everything that can fail (a record or a state that cannot be read, a malformed call) fails
  -- in `read`, before this commit's first write: it answers its error, the others go on.
  local ok, answer, s, e, f, write = pcall(read, rec, phase, text, call, keys)
  if not ok then
    if type(answer) == 'table' and answer.err then
      answer = answer.err
    end
    return {'error', tostring(answer)}
  end
  if answer then
    return answer
  end
  redis.call('HSET', rec, 's', 'c')
  if s == 'o' then
    outstanding(rec, id, f)
  end
  return {'done', e, write()}
end

local out, at = {}, 3
for c = 0, #ARGV / 5 - 1 do
  local nkeys = tonumber(ARGV[c * 5 + 1])
  local keys = {}
  for k = 1, nkeys do
    keys[k] = KEYS[at + k]
  end
  out[#out + 1] = commit(KEYS[at], ARGV[c * 5 + 2], ARGV[c * 5 + 3], ARGV[c * 5 + 4],
    ARGV[c * 5 + 5], keys)
  at = at + 1 + nkeys
end
return out
