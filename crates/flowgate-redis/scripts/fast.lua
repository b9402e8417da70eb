-- Flowgate decide, fast path: straight-line code with no function definitions (Redis would
-- create every closure again on each call). Assembled at startup as this driver with the
-- `-- @@fast` fragment of each algorithm's file in the dispatch marked below.
--
-- One or more requests, each of one or more items (limits), decided in order, each request
-- all-or-nothing: its items are checked against the state before the request, and their writes
-- are made only if every enforced item admits (shadow items, enforce 0, that admit are recorded
-- with it; those that reject are not). Requests are decided and written one after the other, so
-- requests of one call that share a key see each other exactly as if they had arrived one after
-- another. The keys of ONE request must be distinct (the client sends requests that repeat a key
-- to driver.lua instead).
--
-- KEYS[k]: the state key of the k-th item over all requests, in order (see each algorithm's
--          file for its type).
-- ARGV[1]: '' to read the clock with redis.call('TIME') (production), or an explicit `now` in
--          microseconds since the epoch (TEST ONLY: the store's clock override).
-- ARGV[2]: extra expiry in ms added to every key (0 in production; test-only slack).
-- ARGV[3]: the number B of distinct parameter blocks (limits) in the call.
-- Then B blocks: algorithm code (1 token/leaky bucket, 2 fixed window, 3 sliding window, 4
--          sliding log, 5 concurrency), limit, then the algorithm's parameters: 1: T, burst,
--          max_wait; 2: window; 3: window, bucket width, buckets; 4: window; 5: window.
-- Then for each request: its number of items n, then per item: the index of its block (from
--          0), its cost, enforce (1 or 0), and for concurrency the lease id to grant.
-- Returns integers: { now, then for each item in order: allowed (1/0), remaining,
--          reset_after (us), retry_after (us, -1 for none), wait (us) }.
-- Each fragment sees: key, cost, b (its block), limit, lease, now, slack, px, pexpire, ms0, fmod, mmax, the
-- block arrays B1..B4 and the helpers below; it sets allowed, rem, reset, retry, wait and, when it admits
-- with a cost, appends its writes (argument lists of redis.call) to W[nw + 1 ..].

local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local slack = tonumber(ARGV[2])
local floor, fmt, match, gmatch = math.floor, string.format, string.match, string.gmatch
-- Expiry in whole ms, rounded up exactly: `v = ttl_us + 999; (v - fmod(v, 1000)) / 1000` (C fmod
-- is exact on integers, where floor(v / 1000) may round up), plus slack, at least 1.
local fmod, mmax = math.fmod, math.max
local concat, unpack, call = table.concat, unpack, redis.call
-- Expiries: absolute on Redis's clock (PXAT / PEXPIREAT, which Redis need not rewrite to
-- propagate them: cheaper), at least the relative ttl after `now` rounded up to the next ms; with
-- a clock override, relative (PX / PEXPIRE). Fragments write `px, fmt('%d', ms0 + ms)` for a ttl
-- of `ms` milliseconds.
local px, pexpire, ms0 = 'PX', 'PEXPIRE', 0
if ARGV[1] == '' then
  px, pexpire, ms0 = 'PXAT', 'PEXPIREAT', floor(now / 1000) + 1
end
local BC, B1, B2, B3, B4 = {}, {}, {}, {}, {}
local ai = 4
for j = 0, tonumber(ARGV[3]) - 1 do
  local c = tonumber(ARGV[ai])
  BC[j], B1[j], B2[j] = c, tonumber(ARGV[ai + 1]), tonumber(ARGV[ai + 2])
  ai = ai + 3
  if c == 1 or c == 3 then
    B3[j], B4[j] = tonumber(ARGV[ai]), tonumber(ARGV[ai + 1])
    ai = ai + 2
  end
end
local out = { now }
local oi = 1
local ki = 0
local nkeys = #KEYS
local W = {}
while ki < nkeys do
  local ni = tonumber(ARGV[ai])
  ai = ai + 1
  local admitted = true
  local nw = 0
  for _ = 1, ni do
    ki = ki + 1
    local key = KEYS[ki]
    local b, cost = tonumber(ARGV[ai]), tonumber(ARGV[ai + 1])
    local enforce = ARGV[ai + 2] == '1'
    ai = ai + 3
    local code, limit = BC[b], B1[b]
    local lease = nil
    if code == 5 then
      lease = ARGV[ai]
      ai = ai + 1
    end
    local allowed, rem, reset, retry, wait = 0, 0, 0, -1, 0
    if limit > 0 or cost == 0 then
@ALGORITHMS@
    end
    if allowed == 0 and enforce then
      admitted = false
    end
    out[oi + 1], out[oi + 2], out[oi + 3], out[oi + 4], out[oi + 5] =
      allowed, rem, reset, retry, wait
    oi = oi + 5
  end
  if admitted then
    for i = 1, nw do
      call(unpack(W[i]))
    end
  end
end
return out
