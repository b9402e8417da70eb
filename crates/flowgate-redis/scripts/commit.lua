-- Flowgate commit: claims a reservation's record (reservations.lua's `claim`) and applies its
-- commit's release and charge (charge.lua) in one call, so that a commit is applied whole or not
-- at all. For a single Redis (or Sentinel), where the records and the state keys may be used
-- together; on a cluster the server claims, then charges.
--
-- KEYS: 1 {flowgate:res}:expiry, 2 {flowgate:res}:outstanding, 3 {flowgate:res}:r:<id> (as
--       reservations.lua), then the charge's distinct state keys.
-- ARGV: 1 id, 2 the phase the caller read ("o" open: the charge gives the estimate back and
--       charges; "r" released by a sweeper: it only charges), 3 the items' text it read,
--       4 the charge's call string (charge.lua's ARGV[1]).
-- Returns {"unknown"} | {"committed"} | {"changed", phase, expiry, items' text} (the record is
-- not as read: nothing done, the caller builds its charge again) | {"done", expiry, charge.lua's
-- reply}.

local rec, id = KEYS[3], ARGV[1]
local s = redis.call('HGET', rec, 's')
if not s then
  return {'unknown'}
end
if s == 'c' then
  return {'committed'}
end
local e, b = redis.call('HGET', rec, 'e'), redis.call('HGET', rec, 'b')
if s ~= ARGV[2] or b ~= ARGV[3] then
  return {'changed', s, e, b}
end

local keys = {}
for k = 4, #KEYS do
  keys[#keys + 1] = KEYS[k]
end
-- Everything that can fail (a malformed call, a state that cannot be read) fails here, before
-- the first write.
local write
if #keys > 0 then
  write = charges(ARGV[4])(keys)
else
  write = function()
    return { 0, {} }
  end
end

redis.call('HSET', rec, 's', 'c')
if s == 'o' then
  redis.call('ZREM', KEYS[1], id)
  local k = tonumber(redis.call('HGET', rec, 'k') or '0')
  for i = 1, k do
    local label = redis.call('HGET', rec, 'l' .. i)
    local units = tonumber(redis.call('HGET', rec, 'u' .. i))
    local n = redis.call('HINCRBY', KEYS[2], 'n' .. label, -1)
    local u = redis.call('HINCRBY', KEYS[2], 'u' .. label, -units)
    if n <= 0 or u < 0 then
      redis.call('HDEL', KEYS[2], 'n' .. label, 'u' .. label)
    end
  end
end
return {'done', e, write()}
