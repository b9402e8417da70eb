-- The item parameters every script receives.
-- Reads the 11 parameters of one item from ARGV[a .. a + 10].
-- ARGV[a]: algorithm (1 token/leaky bucket, 2 fixed window, 3 sliding window, 4 sliding log,
--          5 concurrency); a+1: limit; a+2: window (us); a+3: burst; a+4: emission interval T
--          (us); a+5: bucket width (us); a+6: buckets; a+7: max_wait (us, 0 in reject mode);
--          a+8: cost; a+9: enforce (1 or 0); a+10: lease id for a concurrency grant ('0' if none).
local ITEM_ARGS = 11
local function read_item(a)
  return {
    alg = tonumber(ARGV[a]),
    limit = tonumber(ARGV[a + 1]),
    window = tonumber(ARGV[a + 2]),
    burst = tonumber(ARGV[a + 3]),
    t = tonumber(ARGV[a + 4]),
    width = tonumber(ARGV[a + 5]),
    buckets = tonumber(ARGV[a + 6]),
    max_wait = tonumber(ARGV[a + 7]),
    cost = tonumber(ARGV[a + 8]),
    enforce = ARGV[a + 9] == '1',
    lease = ARGV[a + 10],
  }
end
