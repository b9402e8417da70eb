-- sliding_window: a ring of buckets + 1 epoch-aligned counters of width ceil(window / buckets).
-- Mirrors flowgate-core src/algorithm/sliding_window.rs: counts every bucket that intersects
-- (now - window, now], including the partially expired oldest one.
-- KEYS[i]: flowgate:{<key>}:w  -- string of 16 + 4 * (buckets + 1) bytes (struct '<dd'
--          followed by buckets + 1 times 'I4'): the index (start / width) of the newest bucket
--          written and the total of the ring's counts, little-endian doubles, then the ring of
--          counts, little-endian u32s, bucket j at slot j % ring. The total lets a decision read
--          only the few slots that are not live (or only the live ones, when fewer) and rewrite
--          only the slots that change. A ring of another length (the rule changed its bucket
--          count) counts as no state.
-- Item parameters used: p.window, p.width, p.buckets, p.limit, p.cost.

-- The struct format of a ring of `ring` buckets.
local function sw_format(ring)
  return '<dd' .. string.rep('I4', ring)
end

local function sw_load(key, p)
  local v = redis.call('GET', key)
  local s = { head = 0, n = 0, counts = {} }
  local ring = p.buckets + 1
  if v and #v == 16 + 4 * ring then
    local all = { struct.unpack(sw_format(ring), v) }
    if not (all[1] >= 0 and all[1] < 4503599627370496 and all[2] >= 0
        and all[2] < 4503599627370496 and all[2] % 1 == 0) then
      return s -- a head or total no script writes: no state
    end
    s.head = all[1]
    s.n = 1
    for i = 1, ring do
      s.counts[i] = all[i + 2]
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
  local total = 0
  for i = 1, #s.counts do
    total = total + s.counts[i]
  end
  return struct.pack(sw_format(#s.counts), s.head, total, unpack(s.counts))
end

local function sw_store(key, s, now, slack)
  redis.call('SET', key, sw_encode(s), expiry(s.idle_at, now, slack))
end

-- Gives back `cost` units taken at `at` (cluster compensation), from the bucket they counted in:
-- p.lease is that bucket + 1 when the client knows it (the newest bucket, if the clock had
-- stepped back), '0' for the bucket of `at`.
local function sw_refund(key, p, at, cost)
  local s = sw_load(key, p)
  local j = idiv(at, p.width)
  local b = tonumber(p.lease)
  if b and b > 0 then
    j = b - 1
  end
  if s.n == 1 and j <= s.head and s.head - j <= p.buckets then
    local i = sw_slot(p, j)
    s.counts[i] = sat(s.counts[i] - cost)
    redis.call('SET', key, sw_encode(s), 'KEEPTTL')
  end
end

ALG[3] = { load = sw_load, check = sw_check, apply = sw_apply, store = sw_store, refund = sw_refund }

-- @@fast
-- Fast fragment (see fast.lua): admission and the new ring. Block: limit, P1..P3 = window,
-- width, buckets. Reads the header and the fewest slots that give the live sum (the stale ones,
-- to subtract from the total, or the live ones), and rewrites only the slots that change: the
-- head's, or those of the buckets the ring moves on to (the last of them takes the cost).
local window, width, ring = P1, P2, P3 + 1
local head, total = -1, 0
if s and #s == 16 + 4 * ring then
  head, total = sunpack('<dd', s)
  -- A head or total no script writes (the head drives the loops below) counts as no state.
  if not (head >= 0 and head < 4503599627370496 and total >= 0 and total < 4503599627370496
      and total % 1 == 0) then
    head = -1
  end
end
local sum = 0
local cs, cv = -1, 0 -- the last stale slot read, and its count (often the first to start over)
if head >= 0 then
  -- The live buckets: from the oldest that intersects (now - window, now] (and is still held
  -- in the ring) to head.
  local x = now + 1 - window
  if x < 0 then
    x = 0
  end
  local lo = (x - x % width) / width -- idiv(x, width): exact below 2^53
  local first = head + 1 - ring -- the oldest bucket the ring holds
  if first < 0 then
    first = 0
  end
  if lo < first then
    lo = first
  end
  if lo <= head then
    if lo - first <= head + 1 - lo then
      sum = total
      for j = first, lo - 1 do
        cs = j % ring
        cv = sunpack('<I4', s, 17 + 4 * cs)
        sum = sum - cv
      end
    else
      for j = lo, head do
        sum = sum + sunpack('<I4', s, 17 + 4 * (j % ring))
      end
    end
  end
end
if sum + cost <= limit then
  allowed = 1
  if cost > 0 then
    local target = (now - now % width) / width -- idiv(now, width)
    if head >= 0 then
      ex0 = (head + 1) * width + window - 1 -- leaves_at(head)
    end
    if head < 0 or target - head >= ring then
      -- A new ring: every slot starts over, the target's takes the cost.
      local a = target % ring
      nv = spack('<dd', target, cost) .. srep('\0', 4 * a) .. spack('<I4', cost)
        .. srep('\0', 4 * (ring - 1 - a))
      head = target
    else
      -- Slots a .. a + z - 1 (circular) become z - 1 zeros then c.
      local a, z, c
      if target <= head then
        -- The head's bucket (where a clock that stepped back counts too: conservative).
        a, z = head % ring, 1
        c = sunpack('<I4', s, 17 + 4 * a) + cost
        total = total + cost
      else
        -- The buckets head + 1 .. target take over their slots.
        a, z, c = (head + 1) % ring, target - head, cost
        for j = head + 1, target do
          local sl = j % ring
          if sl == cs then
            total = total - cv
          else
            total = total - sunpack('<I4', s, 17 + 4 * sl)
          end
        end
        total = total + cost
        head = target
      end
      local e = a + z -- one past the last slot replaced
      if z == 1 then
        -- (the usual case, in one pack)
        nv = spack('<ddc0I4c0', head, total, ssub(s, 17, 16 + 4 * a), c, ssub(s, 17 + 4 * e))
      else
        local run = srep('\0', 4 * (z - 1)) .. spack('<I4', c)
        local hd = spack('<dd', head, total)
        if e <= ring then
          nv = hd .. ssub(s, 17, 16 + 4 * a) .. run .. ssub(s, 17 + 4 * e)
        else
          local w = e - ring -- the run wraps: its last w slots are slots 0 .. w - 1
          nv = hd .. ssub(run, 4 * (z - w) + 1) .. ssub(s, 17 + 4 * w, 16 + 4 * a)
            .. ssub(run, 1, 4 * (z - w))
        end
      end
    end
    ex = (head + 1) * width + window - 1 -- leaves_at(head)
  end
end
