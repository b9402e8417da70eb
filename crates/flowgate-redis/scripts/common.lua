-- Flowgate: what every script shares. Assembled before the algorithm files; the algorithm codes
-- (GCRA, FIXED_WINDOW, SLIDING_WINDOW, SLIDING_LOG, CONCURRENCY) are defined above this file by
-- the Rust code that assembles the scripts (scripts.rs), their one definition.
--
-- Numbers are Lua doubles, exact for integers below 2^53; flowgate-core's validation keeps every
-- quantity below that. Time is integer microseconds since the Unix epoch. Every state is a
-- little-endian binary string (Lua's `struct`), read and written whole.

-- The algorithms by code; each algorithm's file registers itself.
local ALG = {}

-- The library functions every file uses, as locals (a global is two table lookups).
local pack, unpack_at, sub, max, min = struct.pack, struct.unpack, string.sub, math.max, math.min
local redis_call = redis.call

-- Every instant or index a script writes is an integer in [0, BOUND), 2^52; a state holding
-- anything else counts as none.
local BOUND = 4503599627370496

-- floor(a / b) for integers a >= 0, b > 0 (exact: % and the division of a multiple are, below
-- 2^53).
local function idiv(a, b)
  return (a - a % b) / b
end

-- The clock: production reads Redis's TIME; a test clock override passes `now` and an extra
-- expiry in ms (its clock may run slower than Redis's).
local NOW, SLACK
local function clock(now, slack)
  if now == 0 then
    local t = redis.call('TIME')
    NOW, SLACK = t[1] * 1000000 + t[2], nil
  else
    NOW, SLACK = now, slack
  end
  return NOW
end

-- Writes a key's state `v`, empty again at `idle_at` (us); `old` is its state before (nil if
-- none) and `old_idle` when that was empty. It expires at the next whole second of Redis's clock
-- after `idle_at`, or with a test clock at `idle_at - now` rounded up to the ms plus the slack.
-- When the expiry stays, the key is overwritten in place (SETRANGE, for a value of the same
-- length) or with KEEPTTL: both cost Redis about half a SET with a new expiry.
local function store(key, v, idle_at, old, old_idle)
  if SLACK then
    local ms = max(1, idiv(max(idle_at - NOW, 0) + 999, 1000) + SLACK)
    redis_call('SET', key, v, 'PX', string.format('%d', ms))
    return
  end
  -- The next whole second of Redis's clock at or after when it is empty, in ms.
  local e = idle_at + 999999
  e = (e - e % 1000000) / 1000
  local e0 = old and old_idle + 999999
  if old and e == (e0 - e0 % 1000000) / 1000 then
    if #v == #old then
      redis_call('SETRANGE', key, '0', v)
    else
      redis_call('SET', key, v, 'KEEPTTL')
    end
  else
    -- (a string: Redis formats a number argument with %.17g, which costs more)
    redis_call('SET', key, v, 'PXAT', string.format('%d', e))
  end
end
