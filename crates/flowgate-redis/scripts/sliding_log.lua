-- sliding_log: the timestamp and cost of each admitted request in the last window.
-- Mirrors flowgate-core src/algorithm/sliding_log.rs.
-- KEYS[i]: flowgate:{<key>}:l  -- sorted set: score = admission time (microseconds since the
--          epoch), member '<time>:<cost>'. Requests admitted in the same microsecond are merged
--          into one member carrying their summed cost (as the Rust log merges them), so members
--          are unique by construction and same-instant requests all count.
-- Item parameters used: p.window, p.limit, p.cost.

local function log_load(key, p, now)
  local horizon = -1
  if now >= p.window then
    horizon = now - p.window -- entries at or before it have left the window
  end
  local raw = redis.call('ZRANGEBYSCORE', key, '(' .. fmt(horizon), '+inf', 'WITHSCORES')
  local entries = {}
  for i = 1, #raw, 2 do
    local c = tonumber(string.match(raw[i], ':(%d+)$')) or 0
    entries[#entries + 1] = { ts = tonumber(raw[i + 1]), c = c, m = raw[i] }
  end
  return { entries = entries, horizon = horizon, trim = false, ops = {} }
end

local function log_check(p, s, now, cost)
  local sum = 0
  for i = 1, #s.entries do
    sum = sum + s.entries[i].c
  end
  local d = decision()
  d.allowed = sum + cost <= p.limit
  local used = sum
  if d.allowed then
    used = sum + cost
  end
  d.remaining = sat(p.limit - used)
  local last = s.entries[#s.entries]
  local newest = nil
  if d.allowed and cost > 0 then
    newest = now
    if last and last.ts > now then
      newest = last.ts
    end
  elseif last then
    newest = last.ts
  end
  if newest then
    d.reset = sat(newest + p.window - now)
  end
  if not d.allowed and cost <= p.limit then
    local freed = 0
    for i = 1, #s.entries do
      freed = freed + s.entries[i].c
      if sum - freed + cost <= p.limit then
        d.retry = s.entries[i].ts + p.window - now
        break
      end
    end
  end
  return d
end

local function log_apply(p, s, now, cost)
  s.trim = s.horizon >= 0
  local n = #s.entries
  local last = s.entries[n]
  local e
  if last and last.ts >= now then
    -- Same instant (or a clock that stepped back): merge, keeping the log ordered.
    s.ops[#s.ops + 1] = { 'ZREM', last.m }
    local c = last.c + cost
    e = { ts = last.ts, c = c, m = fmt(last.ts) .. ':' .. fmt(c) }
    s.entries[n] = e
  else
    e = { ts = now, c = cost, m = fmt(now) .. ':' .. fmt(cost) }
    s.entries[n + 1] = e
  end
  s.ops[#s.ops + 1] = { 'ZADD', e.ts, e.m }
  s.idle_at = e.ts + p.window
end

local function log_store(key, s, now, slack)
  if s.trim then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(s.horizon))
  end
  for i = 1, #s.ops do
    local op = s.ops[i]
    if op[1] == 'ZREM' then
      redis.call('ZREM', key, op[2])
    else
      redis.call('ZADD', key, fmt(op[2]), op[3])
    end
  end
  set_expiry(key, s.idle_at, now, slack)
end

-- Takes `cost` off the entry that recorded a request admitted at `at` (the first entry at or
-- after it: the request was logged at max(at, newest)).
local function log_refund(key, p, at, cost)
  local raw = redis.call('ZRANGEBYSCORE', key, fmt(at), '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if #raw == 2 then
    local ts = tonumber(raw[2])
    local c = tonumber(string.match(raw[1], ':(%d+)$')) or 0
    -- The reduced entry goes in before the old one goes out (their costs differ): a set that
    -- emptied would be deleted, and the ZADD would make a key without an expiry.
    if c > cost then
      redis.call('ZADD', key, fmt(ts), fmt(ts) .. ':' .. fmt(c - cost))
    end
    redis.call('ZREM', key, raw[1])
  end
end

ALG[4] = { load = log_load, check = log_check, apply = log_apply, store = log_store, refund = log_refund }

-- @@fast
-- Fast fragment (see fast.lua). Block: limit, P1 = window. Reads the whole log (members
-- carry their time, so Redis need not format scores); trims it only when something is stale,
-- and moves its expiry only when the whole second it falls in changes (common.lua
-- `set_expiry`: the key expires at the next whole second after its newest entry + window).
local window = P1
local horizon = now - window -- entries at or before it have left the window
local raw = call('ZRANGE', key, 0, -1)
local n = #raw
local ts, cs, ms = {}, {}, {}
local m, stale, sum, tn = 0, false, 0, 0
for k = 1, n do
  local t, c = match(raw[k], '^(%d+):(%d+)$')
  t, c = tonumber(t) or 0, tonumber(c) or 0
  tn = t
  if t <= horizon then
    stale = true
  else
    m = m + 1
    ts[m], cs[m], ms[m] = t, c, raw[k]
    sum = sum + c
  end
end
local used = sum
if sum + cost <= limit then
  allowed = 1
  used = sum + cost
end
rem = limit - used
if rem < 0 then
  rem = 0
end
local last_ts = nil
if m > 0 then
  last_ts = ts[m]
end
local newest = last_ts
if allowed == 1 and cost > 0 then
  newest = now
  if last_ts and last_ts > now then
    newest = last_ts
  end
end
if newest then
  reset = newest + window - now
  if reset < 0 then
    reset = 0
  end
end
if allowed == 0 then
  if cost <= limit then
    local freed = 0
    for k = 1, m do
      freed = freed + cs[k]
      if sum - freed + cost <= limit then
        retry = ts[k] + window - now
        break
      end
    end
  end
elseif cost > 0 then
  if stale then
    nw = nw + 1
    W[nw] = { 'ZREMRANGEBYSCORE', key, '-inf', fmt('%d', horizon) }
  end
  local at = now
  if last_ts and last_ts >= now then
    -- Same instant (or a clock that stepped back): merge, keeping the log ordered. The merged
    -- member is added before the old one goes (their costs differ), so the set never empties
    -- and keeps its expiry.
    at = last_ts
    nw = nw + 1
    W[nw] = { 'ZADD', key, fmt('%d', at), fmt('%d:%d', at, cs[m] + cost) }
    nw = nw + 1
    W[nw] = { 'ZREM', key, ms[m] }
  else
    nw = nw + 1
    W[nw] = { 'ZADD', key, fmt('%d', at), fmt('%d:%d', at, cost) }
  end
  if prod then
    local e = at + window + 999999
    e = (e - e % 1000000) / 1000
    -- The expiry the key has (none when the trim empties it: Redis deletes an empty set).
    local e0 = -1
    if m > 0 then
      e0 = tn + window + 999999
      e0 = (e0 - e0 % 1000000) / 1000
    end
    if e ~= e0 then
      nw = nw + 1
      W[nw] = { 'PEXPIREAT', key, e }
    end
  else
    local v = at + window - now + 999 -- ttl_ms(at + window, now, slack)
    nw = nw + 1
    W[nw] = { 'PEXPIRE', key, mmax(1, (v - v % 1000) / 1000 + slack) }
  end
end
