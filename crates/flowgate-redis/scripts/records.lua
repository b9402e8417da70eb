-- Flowgate: a reservation's record written (reservations.lua's `put`, and decide.lua's with the
-- decision that takes its units). `expiry` and `outstanding` are reservations.lua's KEYS[1] and
-- KEYS[2]; `rec` the record's key; its arguments are `args` from `at` on: id, expiry (us),
-- forget_at (us), items' text, k, then k pairs (label, units).
local function put_record(expiry, outstanding, rec, args, at)
  local id, e, k = args[at], args[at + 1], tonumber(args[at + 4])
  local fields = {'s', 'o', 'e', e, 'b', args[at + 3], 'k', args[at + 4]}
  for i = 1, k do
    fields[#fields + 1], fields[#fields + 2] = 'l' .. i, args[at + 3 + 2 * i]
    fields[#fields + 1], fields[#fields + 2] = 'u' .. i, args[at + 4 + 2 * i]
  end
  -- (the record first: a key that cannot take it fails here, before anything is counted)
  redis.call('HSET', rec, unpack(fields))
  redis.call('PEXPIREAT', rec, math.ceil(tonumber(args[at + 2]) / 1000))
  redis.call('ZADD', expiry, e, id)
  for i = 1, k do
    redis.call('HINCRBY', outstanding, 'n' .. args[at + 3 + 2 * i], 1)
    redis.call('HINCRBY', outstanding, 'u' .. args[at + 3 + 2 * i], args[at + 4 + 2 * i])
  end
end
