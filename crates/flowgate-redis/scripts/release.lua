-- Flowgate release: gives back a concurrency lease. The key keeps its expiry.
-- KEYS[1]: flowgate:{<key>}:c (see concurrency.lua).
-- ARGV[1]: the lease id (decimal).
-- Returns 1 when the lease was held, 0 otherwise.

local v = make(CONCURRENCY).release(redis.call('GET', KEYS[1]), tonumber(ARGV[1]))
if not v then
  return 0
end
redis.call('SET', KEYS[1], v, 'KEEPTTL')
return 1
