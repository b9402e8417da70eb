-- fixed_window: one counter per epoch-aligned window.
-- Mirrors flowgate-core src/algorithm/fixed_window.rs.
-- KEYS[i]: flowgate:{<key>}:f  -- string '<end>:<count>': the end of the window counted
--          (microseconds since the epoch, a multiple of the window) and the units admitted in it.
-- Item parameters used: p.window, p.limit, p.cost.

local function fw_load(key)
  local v = redis.call('GET', key)
  if v then
    local e, c = string.match(v, '^(%d+):(%d+)$')
    if e then
      return { e = tonumber(e), c = tonumber(c) }
    end
  end
  return { e = 0, c = 0 }
end

-- The end of the current window and its count; a clock that stepped back keeps counting in
-- the newer window.
local function fw_current(p, s, now)
  local e = (idiv(now, p.window) + 1) * p.window
  if s.e >= e then
    return s.e, s.c
  end
  return e, 0
end

local function fw_check(p, s, now, cost)
  local e, count = fw_current(p, s, now)
  local d = decision()
  d.allowed = count + cost <= p.limit
  local used = count
  if d.allowed then
    used = count + cost
  end
  d.remaining = sat(p.limit - used)
  if used > 0 then
    d.reset = e - now
  end
  if not d.allowed and cost <= p.limit then
    d.retry = e - now
  end
  return d
end

local function fw_apply(p, s, now, cost)
  local e, count = fw_current(p, s, now)
  s.e = e
  s.c = count + cost
end

local function fw_store(key, s, now, slack)
  redis.call('SET', key, fmt(s.e) .. ':' .. fmt(s.c), 'PX', ttl_ms(s.e, now, slack))
end

local function fw_refund(key, p, at, cost)
  local s = fw_load(key)
  if s.c > 0 and s.e == (idiv(at, p.window) + 1) * p.window then
    redis.call('SET', key, fmt(s.e) .. ':' .. fmt(sat(s.c - cost)), 'KEEPTTL')
  end
end

ALG[2] = { load = fw_load, check = fw_check, apply = fw_apply, store = fw_store, refund = fw_refund }

-- @@fast
-- Fast fragment (see fast.lua). Block: limit, window (B1, B2).
local window = B2[b]
local e = floor(now / window) -- idiv(now, window)
if e * window > now then
  e = e - 1
elseif (e + 1) * window <= now then
  e = e + 1
end
e = (e + 1) * window
local count = 0
local v = call('GET', key)
if v then
  local se, sc = match(v, '^(%d+):(%d+)$')
  if se then
    se = tonumber(se)
    if se >= e then
      e = se
      count = tonumber(sc)
    end
  end
end
local used = count
if count + cost <= limit then
  allowed = 1
  used = count + cost
end
rem = limit - used
if rem < 0 then
  rem = 0
end
if used > 0 then
  reset = e - now
end
if allowed == 0 then
  if cost <= limit then
    retry = e - now
  end
elseif cost > 0 then
  local v = e - now + 999 -- ttl_ms(e, now, slack); e > now
  local ms = mmax(1, (v - fmod(v, 1000)) / 1000 + slack)
  nw = nw + 1
  W[nw] = { 'SET', key, fmt('%d:%d', e, used), px, fmt('%d', ms0 + ms) }
end
