-- sliding_window: a ring of buckets + 1 epoch-aligned counters of width ceil(window / buckets).
-- Mirrors flowgate-core src/algorithm/sliding_window.rs: counts every bucket that intersects
-- (now - window, now], including the partially expired oldest one.
-- KEYS[i]: flowgate:{<key>}:w  -- string '<head>:<c0>,<c1>,...,<c_buckets>': the index
--          (start / width) of the newest bucket written and the ring, bucket j at slot j % ring.
-- Item parameters used: p.window, p.width, p.buckets, p.limit, p.cost.

local function sw_load(key, p)
  local v = redis.call('GET', key)
  local s = { head = 0, n = 0, counts = {} }
  if v then
    local head, rest = string.match(v, '^(%d+):(.*)$')
    if head then
      s.head = tonumber(head)
      s.n = 1
      local ring = p.buckets + 1
      for c in string.gmatch(rest, '%d+') do
        if #s.counts < ring then
          s.counts[#s.counts + 1] = tonumber(c)
        end
      end
      for i = #s.counts + 1, ring do
        s.counts[i] = 0
      end
    end
  end
  return s
end

-- Lua index of bucket j in the ring.
local function sw_slot(p, j)
  local ring = p.buckets + 1
  return j - idiv(j, ring) * ring + 1
end

local function sw_leaves_at(p, j)
  return (j + 1) * p.width + p.window - 1
end

-- The first bucket to count (the oldest live one still held in the ring), or nil.
local function sw_first(p, s, now)
  if s.n == 0 then
    return nil
  end
  local lo = math.max(idiv(sat(now + 1 - p.window), p.width), sat(s.head + 1 - (p.buckets + 1)))
  if lo <= s.head then
    return lo
  end
  return nil
end

local function sw_check(p, s, now, cost)
  local lo = sw_first(p, s, now)
  local sum = 0
  if lo then
    for j = lo, s.head do
      sum = sum + s.counts[sw_slot(p, j)]
    end
  end
  local d = decision()
  d.allowed = sum + cost <= p.limit
  local used = sum
  if d.allowed then
    used = sum + cost
  end
  d.remaining = sat(p.limit - used)
  local newest = nil
  if d.allowed and cost > 0 then
    newest = math.max(s.head, idiv(now, p.width))
  elseif lo then
    for j = s.head, lo, -1 do
      if s.counts[sw_slot(p, j)] > 0 then
        newest = j
        break
      end
    end
  end
  if newest then
    d.reset = sat(sw_leaves_at(p, newest) - now)
  end
  if not d.allowed and cost <= p.limit and lo then
    local freed = 0
    for j = lo, s.head do
      local c = s.counts[sw_slot(p, j)]
      if c > 0 then
        freed = freed + c
        if sum - freed + cost <= p.limit then
          d.retry = sw_leaves_at(p, j) - now
          break
        end
      end
    end
  end
  return d
end

local function sw_apply(p, s, now, cost)
  local ring = p.buckets + 1
  local target = idiv(now, p.width)
  if s.n == 0 then
    s.n = 1
    s.counts = {}
    for i = 1, ring do
      s.counts[i] = 0
    end
    s.head = target
  elseif target > s.head then
    if target - s.head >= ring then
      for i = 1, ring do
        s.counts[i] = 0
      end
    else
      for j = s.head + 1, target do
        s.counts[sw_slot(p, j)] = 0
      end
    end
    s.head = target
  end
  -- A clock that stepped back counts in the newest bucket (conservative).
  local i = sw_slot(p, s.head)
  s.counts[i] = s.counts[i] + cost
  s.idle_at = sw_leaves_at(p, s.head)
end

local function sw_encode(s)
  local parts = {}
  for i = 1, #s.counts do
    parts[i] = fmt(s.counts[i])
  end
  return fmt(s.head) .. ':' .. table.concat(parts, ',')
end

local function sw_store(key, s, now, slack)
  redis.call('SET', key, sw_encode(s), 'PX', ttl_ms(s.idle_at, now, slack))
end

local function sw_refund(key, p, at, cost)
  local s = sw_load(key, p)
  local j = idiv(at, p.width)
  if s.n == 1 and j <= s.head and s.head - j <= p.buckets then
    local i = sw_slot(p, j)
    s.counts[i] = sat(s.counts[i] - cost)
    redis.call('SET', key, sw_encode(s), 'KEEPTTL')
  end
end

ALG[3] = { load = sw_load, check = sw_check, apply = sw_apply, store = sw_store, refund = sw_refund }

-- @@fast
-- Fast fragment (see fast.lua). Block: limit, window, width, buckets (B1..B4).
local window, width, ring = B2[b], B3[b], B4[b] + 1
local head, n = 0, 0
local counts = {}
local texts = {} -- the counts as stored: only changed ones are formatted again
local v = call('GET', key)
if v then
  local h, rest = match(v, '^(%d+):(.*)$')
  if h then
    head = tonumber(h)
    n = 1
    local k = 0
    for c in gmatch(rest, '%d+') do
      if k < ring then
        k = k + 1
        counts[k] = tonumber(c)
        texts[k] = c
      end
    end
    for z = k + 1, ring do
      counts[z] = 0
      texts[z] = '0'
    end
  end
end
-- lo: the first bucket to count (the oldest live one still held in the ring), or nil.
local lo = nil
local lo_slot = 0
if n == 1 then
  local x = now + 1 - window
  if x < 0 then
    x = 0
  end
  local l1 = floor(x / width)
  if l1 * width > x then
    l1 = l1 - 1
  end
  local l2 = head + 1 - ring
  if l2 < 0 then
    l2 = 0
  end
  if l2 > l1 then
    l1 = l2
  end
  if l1 <= head then
    lo = l1
    local q = floor(lo / ring)
    if q * ring > lo then
      q = q - 1
    end
    lo_slot = lo - q * ring + 1
  end
end
local sum = 0
if lo then
  local s = lo_slot
  for _ = lo, head do
    sum = sum + counts[s]
    s = s + 1
    if s > ring then
      s = 1
    end
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
local target = floor(now / width)
if target * width > now then
  target = target - 1
end
local newest = nil
if allowed == 1 and cost > 0 then
  newest = head
  if target > head then
    newest = target
  end
elseif lo then
  -- the newest bucket with a count, from head down to lo
  local s = lo_slot + (head - lo)
  while s > ring do
    s = s - ring
  end
  for jj = head, lo, -1 do
    if counts[s] > 0 then
      newest = jj
      break
    end
    s = s - 1
    if s < 1 then
      s = ring
    end
  end
end
if newest then
  reset = (newest + 1) * width + window - 1 - now
  if reset < 0 then
    reset = 0
  end
end
if allowed == 0 then
  if cost <= limit and lo then
    local freed = 0
    local s = lo_slot
    for jj = lo, head do
      local c = counts[s]
      if c > 0 then
        freed = freed + c
        if sum - freed + cost <= limit then
          retry = (jj + 1) * width + window - 1 - now
          break
        end
      end
      s = s + 1
      if s > ring then
        s = 1
      end
    end
  end
elseif cost > 0 then
  if n == 0 then
    for z = 1, ring do
      counts[z] = 0
      texts[z] = '0'
    end
    head = target
  elseif target > head then
    if target - head >= ring then
      for z = 1, ring do
        counts[z] = 0
        texts[z] = '0'
      end
    else
      for jj = head + 1, target do
        local q = floor(jj / ring)
        if q * ring > jj then
          q = q - 1
        end
        counts[jj - q * ring + 1] = 0
        texts[jj - q * ring + 1] = '0'
      end
    end
    head = target
  end
  -- A clock that stepped back counts in the newest bucket (conservative).
  local q = floor(head / ring)
  if q * ring > head then
    q = q - 1
  end
  local s = head - q * ring + 1
  counts[s] = counts[s] + cost
  texts[s] = fmt('%d', counts[s])
  local idle = (head + 1) * width + window - 1 - now -- ttl_ms(leaves_at(head), now, slack)
  if idle < 0 then
    idle = 0
  end
  local v = idle + 999
  local ms = mmax(1, (v - fmod(v, 1000)) / 1000 + slack)
  nw = nw + 1
  W[nw] = { 'SET', key, fmt('%d', head) .. ':' .. concat(texts, ','), px, fmt('%d', ms0 + ms) }
end
