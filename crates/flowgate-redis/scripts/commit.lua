-- Flowgate commit: claims reservations' records (records.lua's form) and applies each commit's
-- release and charge (charge.lua) in the same call, so that a commit is applied whole or not at
-- all. The commits of one call (coalesced, see the client's batch.rs) are each handled
-- independently, in order, exactly as if sent one after another: one that cannot be applied
-- answers its error, changes nothing, and the others go on. For a single Redis (or Sentinel),
-- where the records and the state keys may be used together; on a cluster the server claims,
-- then charges.
--
-- KEYS: 1 {flowgate:res}:expiry (as reservations.lua), then for each commit its record
--       {flowgate:res}:r:<id> and its charge's distinct state keys.
-- ARGV: for each commit, four: the number of its state keys, the record's index member, the
--       record's value the caller read (open: the charge gives the estimate back and charges;
--       released by a sweeper: it only charges), the charge's call string (charge.lua's
--       ARGV[1]).
-- Returns a list, one answer per commit: {"unknown"} | {"committed"} | {"changed", phase,
-- expiry, items' text} (the record is not as read: nothing done, the caller builds its charge
-- again) | {"done", charge.lua's reply} | {"error", message} (nothing done).

-- Reads a commit's record (KEYS[at]) and its charge's states (the `nkeys` after it) and
-- computes its charge, writing nothing: an answer when there is nothing to do, else nil, the
-- states read and the charge.
local function read(at, nkeys, value, call)
  -- (the record and the charge's states in one read)
  local got = redis.call('MGET', unpack(KEYS, at, at + nkeys))
  local v = got[1]
  if not v then
    return {'unknown'}
  end
  if v == 'c' then
    return {'committed'}
  end
  if v ~= value then
    local s, e, b = record_of(v)
    return {'changed', s, e, b}
  end
  if nkeys == 0 then
    return nil, got, 0
  end
  return nil, got, charges(call, got, 2, nkeys)
end

local function commit(at, nkeys, member, value, call)
  -- Everything that can fail (a record or a state that cannot be read, a malformed call) fails
  -- in `read`, before this commit's first write: it answers its error, the others go on.
  local ok, answer, got, now, slack, states, idle, applied = pcall(read, at, nkeys, value, call)
  if not ok then
    if type(answer) == 'table' and answer.err then
      answer = answer.err
    end
    return {'error', tostring(answer)}
  end
  if answer then
    return answer
  end
  if nkeys > 0 then
    write_charged(at + 1, nkeys, now, slack, states, idle)
  end
  redis.call('SET', KEYS[at], 'c', 'KEEPTTL')
  if string.sub(value, 1, 1) == 'o' then
    redis.call('ZREM', KEYS[1], member)
  end
  if nkeys == 0 then
    return {'done', { 0, {} }}
  end
  return {'done', { now, applied, unpack(got, 2, nkeys + 1) }}
end

local out, at = {}, 2
for c = 0, #ARGV / 4 - 1 do
  local nkeys = tonumber(ARGV[c * 4 + 1])
  out[#out + 1] = commit(at, nkeys, ARGV[c * 4 + 2], ARGV[c * 4 + 3], ARGV[c * 4 + 4])
  at = at + 1 + nkeys
end
return out
