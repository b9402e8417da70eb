-- sliding_window: a ring of buckets + 1 epoch-aligned counters of width ceil(window / buckets).
-- Mirrors flowgate-core src/algorithm/sliding_window.rs: counts every bucket that intersects
-- (now - window, now], including the partially expired oldest one.
-- KEYS[i]: flowgate:{<key>}:w  -- string of 8 + 4 * (buckets + 1) bytes (struct '<d' followed
--          by buckets + 1 times 'I4'): the index (start / width) of the newest bucket written, a
--          little-endian double, then the ring of counts, little-endian u32s, bucket j at slot
--          j % ring. A ring of another length (the rule changed its bucket count) counts as
--          no state.
-- Item parameters used: p.window, p.width, p.buckets, p.limit, p.cost.

-- The struct format of a ring of `ring` buckets.
local function sw_format(ring)
  return '<d' .. string.rep('I4', ring)
end

local function sw_load(key, p)
  local v = redis.call('GET', key)
  local s = { head = 0, n = 0, counts = {} }
  local ring = p.buckets + 1
  if v and #v == 8 + 4 * ring then
    local all = { struct.unpack(sw_format(ring), v) }
    if not (all[1] >= 0 and all[1] < 4503599627370496) then
      return s -- a head no script writes: no state
    end
    s.head = all[1]
    s.n = 1
    for i = 1, ring do
      s.counts[i] = all[i + 1]
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
  return struct.pack(sw_format(#s.counts), s.head, unpack(s.counts))
end

local function sw_store(key, s, now, slack)
  redis.call('SET', key, sw_encode(s), expiry(s.idle_at, now, slack))
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
-- Fast fragment (see fast.lua): admission and the new ring. Block: limit, P1..P4 = window,
-- width, buckets, and the ring's struct format. R holds the head then the ring: the count of
-- slot sl (1-based) is R[sl + 1].
local window, width, ring, F = P1, P2, P3 + 1, P4
local R = nil
if s and #s == 8 + 4 * ring then
  R = { sunpack(F, s) }
  -- A head no script writes (it would drive the loops below) counts as no state.
  if not (R[1] >= 0 and R[1] < 4503599627370496) then
    R = nil
  end
end
-- The live buckets: from the oldest that intersects (now - window, now] (and is still held in
-- the ring) to head.
local sum = 0
if R then
  local head = R[1]
  local x = now + 1 - window
  if x < 0 then
    x = 0
  end
  local lo = (x - x % width) / width -- idiv(x, width): exact below 2^53
  if head + 1 - ring > lo then
    lo = head + 1 - ring
  end
  if lo <= head then
    local sl = lo % ring + 2
    for _ = lo, head do
      sum = sum + R[sl]
      sl = sl + 1
      if sl > ring + 1 then
        sl = 2
      end
    end
  end
end
if sum + cost <= limit then
  allowed = 1
  if cost > 0 then
    local target = (now - now % width) / width -- idiv(now, width)
    if R then
      local head = R[1]
      ex0 = (head + 1) * width + window - 1 -- leaves_at(head)
      if target - head >= ring then
        for z = 2, ring + 1 do
          R[z] = 0
        end
        R[1] = target
      elseif target > head then
        for j = head + 1, target do
          R[j % ring + 2] = 0
        end
        R[1] = target
      end
    else
      R = { target }
      for z = 2, ring + 1 do
        R[z] = 0
      end
    end
    -- A clock that stepped back counts in the newest bucket (conservative).
    local head = R[1]
    local sl = head % ring + 2
    R[sl] = R[sl] + cost
    nv = spack(F, unpack(R, 1, ring + 1))
    ex = (head + 1) * width + window - 1 -- leaves_at(head)
  end
end
