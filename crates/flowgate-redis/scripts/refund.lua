-- Flowgate refund (Redis Cluster compensation): gives back what a decide call took in one slot
-- when another slot of the same request rejected it.
-- KEYS[k]: the state key of the k-th item to give back.
-- ARGV[1]: the `now` the decide call returned (microseconds since the epoch).
-- ARGV[2]: the number of items n, followed by n items of ITEM_ARGS parameters (see read_item);
--          `cost` is what was taken, `lease` the concurrency lease granted (for a sliding window:
--          the bucket the cost counted in + 1, or 0 for the bucket of ARGV[1]).
-- Returns the number of items given back.
local at = tonumber(ARGV[1])
local n = tonumber(ARGV[2])
local a = 3
for i = 1, n do
  local p = read_item(a)
  ALG[p.alg].refund(KEYS[i], p, at, p.cost)
  a = a + ITEM_ARGS
end
return n
