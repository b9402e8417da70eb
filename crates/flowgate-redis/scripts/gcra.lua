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
-- Fast path (see fast.lua). Block parameters: limit, T, burst, max_wait.
local BL, BT, BB, BW, BQ = {}, {}, {}, {}, {}
for j = 0, nb - 1 do
  local t, w = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 3])
  BL[j], BT[j], BB[j], BW[j] = tonumber(ARGV[a]), t, tonumber(ARGV[a + 2]), w
  local q = floor(w / t) -- idiv(max_wait, T)
  if q * t > w then
    q = q - 1
  elseif (q + 1) * t <= w then
    q = q + 1
  end
  BQ[j] = q
  a = a + 4
end
for i = 1, #KEYS do
  local j, cost = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  a = a + 2
  local limit = BL[j]
  local allowed, rem, reset, retry, wait = 0, 0, 0, -1, 0
  if limit > 0 or cost == 0 then
    local key = KEYS[i]
    local t, burst, mw = BT[j], BB[j], BW[j]
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
    if cost <= burst + BQ[j] then
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
          -- ttl_ms(new, now, slack); new > now here
          local ms = floor((new - now + 999) / 1000)
          if ms * 1000 > new - now + 999 then
            ms = ms - 1
          end
          ms = ms + slack
          if ms < 1 then
            ms = 1
          end
          call('SET', key, fmt('%d', new), 'PX', ms)
        end
      else
        retry = new - tau - mw - now
      end
    end
  end
  out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = allowed, rem, reset, retry, wait
  o = o + 5
end
return out
