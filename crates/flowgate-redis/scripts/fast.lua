-- Flowgate decide, fast path: a batch of requests of ONE item each, all of one algorithm (the
-- common case, and what a coalesced call of single-rule requests carries). Assembled at startup
-- as this prologue followed by the `-- @@fast` section of the algorithm's file: straight-line
-- code with no function definitions (Redis would create every closure again on each call).
-- Each request is decided and written before the next one is read, so requests of one call that
-- share a key see each other exactly as if they had arrived one after another; a request of one
-- item is all-or-nothing by itself (a shadow item behaves as an enforced one).
--
-- KEYS[i]: the state key of the i-th request (see the algorithm's file for its type).
-- ARGV[1]: '' to read the clock with redis.call('TIME') (production), or an explicit `now` in
--          microseconds since the epoch (TEST ONLY: the store's clock override).
-- ARGV[2]: extra expiry in ms added to every key (0 in production; test-only slack).
-- ARGV[3]: the number B of distinct parameter blocks (limits) in the call.
-- ARGV[4 ..]: B blocks of the algorithm's fast-path parameters (listed in its `@@fast` section),
--          then for each request in order: the index of its block (from 0), its cost, and for
--          concurrency the lease id to grant.
-- Returns integers: { now, then for each request: allowed (1/0), remaining, reset_after (us),
--          retry_after (us, -1 for none), wait (us) }.

local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local slack = tonumber(ARGV[2])
local nb = tonumber(ARGV[3])
local floor = math.floor
local fmt = string.format
local call = redis.call
local out = { now }
local o = 1
local a = 4
