-- sliding_window: a ring of buckets + 1 epoch-aligned counters of width ceil(window / buckets).
-- Mirrors flowgate-core src/algorithm/sliding_window.rs: counts every bucket that intersects
-- (now - window, now], including the partially expired oldest one.
-- KEYS[i]: flowgate:{<key>}:W  -- string of 4 * (buckets + 1) + 16 bytes (struct 'I4' buckets
--          + 1 times, then '<dd'): the counts of the buckets head, head - 1, ..., head - buckets
--          (newest first; little-endian u32s, 0 for a bucket before the epoch), then the index
--          (start / width) of the newest bucket written, head, and the total of the counts,
--          little-endian doubles. The total lets a decision read only the few counts that are
--          not live (or only the live ones, when fewer). Newest first lets the ring move on in
--          one struct.pack: the new bucket's count, a zero per bucket skipped, and the kept
--          counts as a prefix of the old string (Redis's Lua hashes every byte of every string
--          it makes, so a cut-out piece costs as much as its length). A ring of another length
--          (the rule changed its bucket count) counts as no state. (The suffix is `W`: the
--          former `w` held the counts in ring order after the head and total, and its keys are
--          left to expire rather than misread.)
-- Item parameters used: p.window, p.width, p.buckets, p.limit, p.cost.

-- The struct format of a ring of `ring` buckets.
local function sw_format(ring)
  return '<' .. string.rep('I4', ring) .. 'dd'
end

-- The state stored at `key`: `counts` in ring order (bucket j at index j % ring + 1).
local function sw_load(key, p)
  local v = redis.call('GET', key)
  local s = { head = 0, n = 0, counts = {} }
  local ring = p.buckets + 1
  if v and #v == 16 + 4 * ring then
    local all = { struct.unpack(sw_format(ring), v) }
    local head, total = all[ring + 1], all[ring + 2]
    if not (head >= 0 and head < 4503599627370496 and total >= 0
        and total < 4503599627370496 and total % 1 == 0) then
      return s -- a head or total no script writes: no state
    end
    s.head = head
    s.n = 1
    for q = 0, ring - 1 do
      s.counts[(head - q) % ring + 1] = all[q + 1]
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
  local ring = #s.counts
  local total = 0
  local all = {}
  for q = 0, ring - 1 do
    local c = s.counts[(s.head - q) % ring + 1]
    all[q + 1] = c
    total = total + c
  end
  all[ring + 1], all[ring + 2] = s.head, total
  return struct.pack(sw_format(ring), unpack(all))
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
-- width, buckets. Reads the head, the total and the fewest counts that give the live sum (the
-- stale ones, to subtract from the total, or the live ones). The new ring is one pack: when it
-- moves on, of the new count, a zero per bucket skipped and the old counts kept (a prefix of
-- `s`: its format, cached in SF at minus one minus its length, says how long); in the head's
-- bucket, of the head's new count and the rest.
local window, width, ring = P1, P2, P3 + 1
local L = 4 * ring -- the counts' bytes
local head, total = -1, 0
if s and #s == L + 16 then
  head, total = sunpack('<dd', s, L + 1)
  -- A head or total no script writes (the head drives the loops below) counts as no state.
  if not (head >= 0 and head < 4503599627370496 and total >= 0 and total < 4503599627370496
      and total % 1 == 0) then
    head = -1
  end
end
local sum = 0
local cs, cv = -1, 0 -- the last stale position read, and its count (the oldest: the first to go)
if head >= 0 then
  -- The live buckets: from the oldest that intersects (now - window, now] (and is still held
  -- in the ring) to head; bucket j is at position head - j.
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
      for q = head - lo + 1, head - first do
        cs = q
        cv = sunpack('<I4', s, 1 + 4 * q)
        sum = sum - cv
      end
    else
      for q = 0, head - lo do
        sum = sum + sunpack('<I4', s, 1 + 4 * q)
      end
    end
  end
end
if sum + cost <= limit then
  allowed = 1
  if cost > 0 then
    -- (in bulk, see fast.lua, when every item of the call on it fits)
    if shared == 1 and sum + tot <= limit then
      cost = tot
      Z[k] = tot
    end
    local target = (now - now % width) / width -- idiv(now, width)
    if head >= 0 then
      ex0 = (head + 1) * width + window - 1 -- leaves_at(head)
    end
    if head < 0 or target - head >= ring then
      -- A new ring: every count starts over, the target's takes the cost.
      nv = spack('<I4c0dd', cost, srep('\0', L - 4), target, cost)
      head = target
    elseif target <= head then
      -- The head's bucket (where a clock that stepped back counts too: conservative).
      nv = spack('<I4c0dd', sunpack('<I4', s) + cost, ssub(s, 5, L), head, total + cost)
    else
      -- The ring moves on by z buckets: its oldest z counts go.
      local z = target - head
      for q = ring - z, ring - 1 do
        if q == cs then
          total = total - cv
        else
          total = total - sunpack('<I4', s, 1 + 4 * q)
        end
      end
      local n = L - 4 * z -- the bytes of the counts kept
      local f = SF[-1 - n]
      if not f then
        f = sformat('<I4c0c%ddd', n)
        SF[-1 - n] = f
      end
      local skipped = ''
      if z > 1 then
        skipped = srep('\0', 4 * (z - 1))
      end
      nv = spack(f, cost, skipped, s, target, total + cost)
      head = target
    end
    ex = (head + 1) * width + window - 1 -- leaves_at(head)
  end
end
