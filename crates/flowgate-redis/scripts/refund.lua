-- Flowgate refund (Redis Cluster compensation): gives back what a decide call took in one slot
-- when another slot of the same request rejected it. Each key keeps its expiry.
-- KEYS: the state keys, each named by its items.
-- ARGV[1]: as decide.lua's call string, `now` being the instant the decide call decided at;
--          each item's cost is what it took, and its lease field (sent for every item here) the
--          concurrency lease granted, or for a sliding window the bucket it counted in + 1 (0:
--          the bucket of `now`), or for a warm-up bucket its cooling position + 1.
-- Returns the number of items given back.

local call = ARGV[1]
local at_instant, _, nblocks, nitems, at = unpack_at('<ddHI4', call)

local blocks = {}
for b = 1, nblocks do
  local code, limit, x, y, z, u, w
  code, limit, x, y, z, u, w, at = unpack_at('<Bdddddd', call, at)
  ALG[code] = ALG[code] or make(code)
  blocks[b] = { ALG[code].refund, ALG[code].params(limit, x, y, z, u, w) }
end

for _ = 1, nitems do
  local cost, b, k1, k2 = string.byte(call, at, at + 4)
  at = at + 5
  if cost == 255 then
    cost, at = unpack_at('<d', call, at)
  end
  local extra
  extra, at = unpack_at('<d', call, at)
  local key = KEYS[k1 + 256 * k2]
  local v = redis.call('GET', key)
  if v then
    local refund = blocks[b][1]
    redis.call('SET', key, refund(v, at_instant, cost, extra, unpack(blocks[b], 2)), 'KEEPTTL')
  end
end
return nitems
