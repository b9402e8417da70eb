-- fixed_window: one counter per epoch-aligned window.
-- Mirrors flowgate-core src/algorithm/fixed_window.rs.
-- KEYS[i]: flowgate:{<key>}:f  -- string of 12 bytes (struct '<dI4'): the end of the window
--          counted (microseconds since the epoch, a multiple of the window; a little-endian
--          double) and the units admitted in it (a little-endian u32, as every limit fits).
-- Item parameters used: p.window, p.limit, p.cost.

local function fw_load(key)
  local v = redis.call('GET', key)
  if v and #v == 12 then
    local e, c = struct.unpack('<dI4', v)
    if e >= 0 and e < 4503599627370496 then
      return { e = e, c = c }
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
  redis.call('SET', key, struct.pack('<dI4', s.e, s.c), expiry(s.e, now, slack))
end

local function fw_refund(key, p, at, cost)
  local s = fw_load(key)
  if s.c > 0 and s.e == (idiv(at, p.window) + 1) * p.window then
    redis.call('SET', key, struct.pack('<dI4', s.e, sat(s.c - cost)), 'KEEPTTL')
  end
end

ALG[2] = { load = fw_load, check = fw_check, apply = fw_apply, store = fw_store, refund = fw_refund }

-- @@fast
-- Fast fragment (see fast.lua): admission and the new count. Block: limit, P1 = window.
local window = P1
-- The end of the current window: idiv(now, window) + 1 windows (% and the division of a
-- multiple are exact below 2^53).
local e = now - now % window + window
local count = 0
local se = -1
if s and #s == 12 then
  local c
  se, c = sunpack('<dI4', s)
  if not (se >= 0 and se < 4503599627370496) then -- no script writes it: no state
    se, c = -1, 0
  end
  if se >= e then
    e = se
    count = c
  end
end
if count + cost <= limit then
  allowed = 1
  if cost > 0 then
    -- (in bulk, see fast.lua, when every item of the call on it fits)
    if shared == 1 and count + tot <= limit then
      cost = tot
      Z[k] = tot
    end
    nv, ex, ex0 = spack('<dI4', e, count + cost), e, se
  end
end
