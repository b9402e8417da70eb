-- token_bucket / leaky_bucket: GCRA over one theoretical arrival time (TAT).
-- Mirrors flowgate-core src/algorithm/gcra.rs.
-- KEYS[i]: flowgate:{<key>}:g  -- string: the TAT, microseconds since the epoch.
-- Item parameters used: p.t (emission interval T), p.burst, p.max_wait (0 in reject mode),
-- p.limit, p.cost.

local function gcra_load(key)
  return { tat = tonumber(redis.call('GET', key)) or 0 }
end

local function gcra_check(p, s, now, cost)
  local t = p.t
  local tau = p.burst * t
  local base = math.max(s.tat, now)
  local d = decision()
  d.remaining = idiv(sat(now + tau - base), t)
  d.reset = base - now
  if cost > p.burst + idiv(p.max_wait, t) then
    return d
  end
  local new_tat = base + cost * t
  local wait = sat(new_tat - now - tau)
  if wait <= p.max_wait then
    d.allowed = true
    d.wait = wait
    d.remaining = idiv(sat(now + tau - new_tat), t)
    d.reset = new_tat - now
  else
    d.retry = new_tat - tau - p.max_wait - now
  end
  return d
end

local function gcra_apply(p, s, now, cost)
  s.tat = math.max(s.tat, now) + cost * p.t
end

local function gcra_store(key, s, now, slack)
  redis.call('SET', key, fmt(s.tat), 'PX', ttl_ms(s.tat, now, slack))
end

-- Gives back `cost` units taken at `at` (cluster compensation): the TAT moves back by cost * T.
local function gcra_refund(key, p, at, cost)
  local tat = tonumber(redis.call('GET', key))
  if tat then
    redis.call('SET', key, fmt(sat(tat - cost * p.t)), 'KEEPTTL')
  end
end

ALG[1] = { load = gcra_load, check = gcra_check, apply = gcra_apply, store = gcra_store, refund = gcra_refund }

-- @@fast
-- Fast fragment (see fast.lua). Block: limit, T, burst, max_wait (B1..B4).
local t, burst, mw = B2[b], B3[b], B4[b]
local tat = tonumber(call('GET', key)) or 0
local tau = burst * t
local base = now
if tat > now then
  base = tat
end
local x = now + tau - base
if x < 0 then
  x = 0
end
rem = floor(x / t)
if rem * t > x then
  rem = rem - 1
elseif (rem + 1) * t <= x then
  rem = rem + 1
end
reset = base - now
local q = floor(mw / t) -- idiv(max_wait, T)
if q * t > mw then
  q = q - 1
end
if cost <= burst + q then
  local new = base + cost * t
  local w = new - now - tau
  if w < 0 then
    w = 0
  end
  if w <= mw then
    allowed = 1
    wait = w
    reset = new - now
    x = now + tau - new
    if x < 0 then
      x = 0
    end
    rem = floor(x / t)
    if rem * t > x then
      rem = rem - 1
    elseif (rem + 1) * t <= x then
      rem = rem + 1
    end
    if cost > 0 then
      local v = new - now + 999 -- ttl_ms(new, now, slack); new > now here
      local ms = mmax(1, (v - fmod(v, 1000)) / 1000 + slack)
      nw = nw + 1
      W[nw] = { 'SET', key, fmt('%d', new), px, fmt('%d', ms0 + ms) }
    end
  else
    retry = new - tau - mw - now
  end
end
