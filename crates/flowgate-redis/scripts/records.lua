-- Flowgate: reservations' records (reservations.lua's ops, decide.lua's writes with the decisions
-- that take their units, commit.lua's claims). A record is one string,
-- `<phase><expiry (us)>:<items' text>` (phase "o" open, "r" released by a sweeper), or "c" once
-- committed; it expires (a tombstone) at its forget_at. An open record is indexed in `expiry`
-- (reservations.lua's KEYS[1]) under `<id>\30<items' text>`, its expiry the score, so that
-- the open reservations' units per rule are read from the index alone.

-- A record's phase, expiry and items' text.
local function record_of(v)
  local colon = string.find(v, ':', 2, true)
  if not colon then
    error('not a reservation record')
  end
  return string.sub(v, 1, 1), string.sub(v, 2, colon - 1), string.sub(v, colon + 1)
end

-- Writes a record at `rec` and indexes it in `expiry`; its arguments are `args` from `at` on:
-- its index member, its value, its expiry (us), when it is forgotten (ms since the epoch).
local function put_record(expiry, rec, args, at)
  -- (the record first: a key that already holds one fails here, before it is indexed; an id is
  -- 128 random bits, so this is another program's key)
  if not redis.call('SET', rec, args[at + 1], 'NX', 'PXAT', args[at + 3]) then
    error('a key exists under this reservation id')
  end
  redis.call('ZADD', expiry, args[at + 2], args[at])
end
