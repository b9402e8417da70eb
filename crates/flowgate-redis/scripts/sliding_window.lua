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
