-- concurrency: at most `limit` units in flight, held as leases that expire after `window`.
-- Mirrors flowgate-core src/algorithm/concurrency.rs.
-- KEYS[i]: flowgate:{<key>}:c  -- sorted set: score = the lease's expiry (microseconds since
--          the epoch), member '<lease id>:<cost>'. Lease ids are random u64s chosen by the
--          client (decimal strings, never 0).
-- Item parameters used: p.window, p.limit, p.cost, p.lease.

local function conc_load(key)
  local raw = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
  local leases = {}
  for i = 1, #raw, 2 do
    local c = tonumber(string.match(raw[i], ':(%d+)$')) or 0
    leases[#leases + 1] = { exp = tonumber(raw[i + 1]), c = c, m = raw[i] }
  end
  return { leases = leases, trim = false, ops = {} }
end

local function conc_check(p, s, now, cost)
  local held = 0
  local newest = 0
  for i = 1, #s.leases do
    local x = s.leases[i]
    if x.exp > now then
      held = held + x.c
    end
    if x.exp > newest then
      newest = x.exp
    end
  end
  local d = decision()
  d.allowed = held + cost <= p.limit
  local used = held
  if d.allowed then
    used = held + cost
  end
  d.remaining = sat(p.limit - used)
  if d.allowed and cost > 0 then
    newest = math.max(newest, now + p.window)
  end
  d.reset = sat(newest - now)
  if not d.allowed and cost <= p.limit then
    -- Leases are in order of expiry (the sorted set's order).
    local freed = 0
    for i = 1, #s.leases do
      local x = s.leases[i]
      if x.exp > now then
        freed = freed + x.c
        if held - freed + cost <= p.limit then
          d.retry = x.exp - now
          break
        end
      end
    end
  end
  return d
end

local function conc_apply(p, s, now, cost)
  s.trim = true
  local live = {}
  local idle_at = now + p.window
  for i = 1, #s.leases do
    local x = s.leases[i]
    if x.exp > now then
      live[#live + 1] = x
      if x.exp > idle_at then
        idle_at = x.exp
      end
    end
  end
  local e = { exp = now + p.window, c = cost, m = p.lease .. ':' .. fmt(cost) }
  -- Keep the order of expiry.
  local at = #live + 1
  while at > 1 and live[at - 1].exp > e.exp do
    at = at - 1
  end
  table.insert(live, at, e)
  s.leases = live
  s.ops[#s.ops + 1] = { e.exp, e.m }
  s.idle_at = idle_at
end

local function conc_store(key, s, now, slack)
  if s.trim then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(now))
  end
  for i = 1, #s.ops do
    redis.call('ZADD', key, fmt(s.ops[i][1]), s.ops[i][2])
  end
  set_expiry(key, s.idle_at, now, slack)
end

-- Removes lease `id`; answers 1 when it was held.
local function conc_release(key, id)
  local prefix = id .. ':'
  local members = redis.call('ZRANGE', key, 0, -1)
  for i = 1, #members do
    if string.sub(members[i], 1, #prefix) == prefix then
      redis.call('ZREM', key, members[i])
      return 1
    end
  end
  return 0
end

local function conc_refund(key, p, at, cost)
  conc_release(key, p.lease)
end

ALG[5] = { load = conc_load, check = conc_check, apply = conc_apply, store = conc_store, refund = conc_refund }

-- @@fast
-- Fast fragment (see fast.lua). Block: limit, P1 = window; the item carries `lease`. Trims
-- the leases only when one has expired, and moves the key's expiry only when the whole second
-- it falls in changes (common.lua `set_expiry`: the next whole second after the last lease
-- expires).
local window = P1
local raw = call('ZRANGE', key, 0, -1, 'WITHSCORES')
local n = #raw
local cs, xs = {}, {}
local held, newest, idle, stale, live = 0, 0, now + window, false, 0
for k = 1, n, 2 do
  local c = tonumber(match(raw[k], ':(%d+)$')) or 0
  local exp = tonumber(raw[k + 1])
  cs[k], xs[k] = c, exp
  if exp > now then
    held = held + c
    live = live + 1
    if exp > idle then
      idle = exp
    end
  else
    stale = true
  end
  if exp > newest then
    newest = exp
  end
end
-- The expiry the key has (none when a trim would empty it: Redis deletes an empty set).
local e0 = -1
if live > 0 then
  e0 = newest + 999999
  e0 = (e0 - e0 % 1000000) / 1000
end
local used = held
if held + cost <= limit then
  allowed = 1
  used = held + cost
end
rem = limit - used
if rem < 0 then
  rem = 0
end
if allowed == 1 and cost > 0 and now + window > newest then
  newest = now + window
end
reset = newest - now
if reset < 0 then
  reset = 0
end
if allowed == 0 then
  if cost <= limit then
    -- Leases are in order of expiry (the sorted set's order).
    local freed = 0
    for k = 1, n, 2 do
      local exp = xs[k]
      if exp > now then
        freed = freed + cs[k]
        if held - freed + cost <= limit then
          retry = exp - now
          break
        end
      end
    end
  end
elseif cost > 0 then
  if stale then
    nw = nw + 1
    W[nw] = { 'ZREMRANGEBYSCORE', key, '-inf', fmt('%d', now) }
  end
  nw = nw + 1
  W[nw] = { 'ZADD', key, fmt('%d', now + window), lease .. ':' .. fmt('%d', cost) }
  if prod then
    local e = idle + 999999
    e = (e - e % 1000000) / 1000
    if e ~= e0 then
      nw = nw + 1
      W[nw] = { 'PEXPIREAT', key, e }
    end
  else
    local v = idle - now + 999 -- ttl_ms(idle, now, slack)
    nw = nw + 1
    W[nw] = { 'PEXPIRE', key, mmax(1, (v - v % 1000) / 1000 + slack) }
  end
end
