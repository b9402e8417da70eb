-- Flowgate: helpers shared by every algorithm.
-- Numbers are Lua doubles, exact for integers below 2^53; flowgate-core's validation
-- (quota.rs MAX_WINDOW, MAX_LIMIT) keeps every quantity below that. Time is integer
-- microseconds since the Unix epoch.

-- The algorithms by code (1 token/leaky bucket, 2 fixed window, 3 sliding window, 4 sliding
-- log, 5 concurrency); each algorithm's file registers itself.
local ALG = {}

-- floor(a / b) for integers a >= 0, b > 0, corrected for the rounding of the division.
local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

-- max(x, 0): Rust's saturating_sub.
local function sat(x)
  if x < 0 then
    return 0
  end
  return x
end

-- An integer as its decimal string ('..' would print 1.7e+15).
local function fmt(x)
  return string.format('%d', x)
end

-- A rejection with nothing to report yet.
local function decision()
  return { allowed = false, remaining = 0, reset = 0, retry = -1, wait = 0 }
end

-- The key's expiry in ms: when its state is empty again, rounded up, plus `slack` (test-only,
-- for clock overrides whose time runs slower than Redis's), at least 1 ms.
local function ttl_ms(idle_at, now, slack)
  local ms = idiv(sat(idle_at - now) + 999, 1000) + slack
  if ms < 1 then
    ms = 1
  end
  return ms
end

-- Production (the decide scripts read Redis's TIME) or a test clock override (ARGV[1] is `now`).
local PROD = ARGV[1] == ''

-- The expiry arguments of SET for a state (every state is a string) that is empty again at
-- `ex` (us). In production PXAT the next whole second of Redis's
-- clock at or after `ex`: every writer rounds so, which lets fast.lua tell from a key's state
-- which expiry it has (and write KEEPTTL when it need not move). With a test clock override,
-- PX the exact ms after `now` plus `slack`.
local function expiry(ex, now, slack)
  if PROD then
    local e = ex + 999999
    return 'PXAT', (e - math.fmod(e, 1000000)) / 1000
  end
  return 'PX', ttl_ms(ex, now, slack)
end

-- A copy of a state: tables one level deep are copied (entries are replaced, never mutated).
local function copy(s)
  local c = {}
  for k, v in pairs(s) do
    if type(v) == 'table' then
      local t = {}
      for i = 1, #v do
        t[i] = v[i]
      end
      c[k] = t
    else
      c[k] = v
    end
  end
  return c
end
