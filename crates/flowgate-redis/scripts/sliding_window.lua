-- sliding_window: a ring of buckets + 1 epoch-aligned counters of width ceil(window / buckets).
-- Mirrors flowgate-core src/algorithm/sliding_window.rs: counts every bucket that intersects
-- (now - window, now], the partially expired oldest one included.
-- Key flowgate:{<key>}:W<window>/<buckets> holds 'I4' buckets + 1 times, then '<dd': the counts
-- of the buckets head, head - 1, ..., head - buckets (newest first), the index (start / width) of
-- the newest bucket, head, and the total of the counts. A ring of another length (the rule changed its
-- bucket count) counts as no state. The total lets a decision read only the counts that went
-- stale; newest first lets the ring move on by keeping a prefix of the stored counts.

-- The parameters the other functions take: the limit, the window, the bucket width and the
-- ring's length (buckets + 1).
local function params(limit, window, width, buckets)
  return limit, window, width, buckets + 1
end

-- The head and total stored as `v`; nil for none (a head whose bucket starts at or past 2^52
-- microseconds is none too: no script writes it, and its instants would not be exact).
local function ring_of(v, ring, width)
  if v and #v == 4 * ring + 16 then
    local head, total = unpack_at('<dd', v, 4 * ring + 1)
    if head >= 0 and head * width < BOUND and head % 1 == 0 and total >= 0 and total < BOUND
        and total % 1 == 0 then
      return head, total
    end
  end
  return nil
end

-- The count of bucket head - q.
local function count(v, q)
  return unpack_at('<I4', v, 4 * q + 1)
end

local function leaves_at(j, window, width)
  return (j + 1) * width + window - 1
end

local function admit(v, now, cost, _, limit, window, width, ring)
  local head, total = ring_of(v, ring, width)
  -- The live sum: the total less the buckets still in the ring that no longer intersect the
  -- window (from the oldest one that does, at most the whole ring).
  local sum = 0
  if head then
    local lo = max(idiv(max(now + 1 - window, 0), width), head + 1 - ring)
    if lo <= head then
      sum = total
      for q = head - lo + 1, ring - 1 do
        sum = sum - count(v, q)
      end
    end
  end
  if sum + cost > limit then
    return false
  end
  if cost == 0 then
    return true
  end
  local old = head and leaves_at(head, window, width) or 0
  -- The ring moves on to the bucket of now: its new count, a zero per bucket skipped, then the
  -- counts kept; a clock that stepped back counts in the head (conservative). (One pack: Redis's
  -- Lua hashes every byte of every string it makes, a concatenation's pieces too.)
  local target = idiv(now, width)
  local new
  if not head or target - head >= ring then
    new = pack('<I4c0dd', cost, string.rep('\0', 4 * ring - 4), target, cost)
    head = target
  elseif target <= head then
    new = pack('<I4c0dd', count(v, 0) + cost, sub(v, 5, 4 * ring), head, total + cost)
  else
    local z = target - head
    for q = ring - z, ring - 1 do
      total = total - count(v, q)
    end
    new = pack('<I4c0c0dd', cost, string.rep('\0', 4 * z - 4), sub(v, 1, 4 * (ring - z)), target,
      total + cost)
    head = target
  end
  return true, new, leaves_at(head, window, width), old
end

local function idle_at(v, limit, window, width, ring)
  local head = ring_of(v, ring, width)
  return head and leaves_at(head, window, width) or 0
end

-- Gives back `cost` units from the bucket they counted in: `charged` - 1 when the client knows
-- it (the newest bucket, if the clock had stepped back), else the bucket of `at`.
local function refund(v, at, cost, charged, limit, window, width, ring)
  local head, total = ring_of(v, ring, width)
  local q = head and head - (charged > 0 and charged - 1 or idiv(at, width))
  if not head or q < 0 or q >= ring then
    return v
  end
  local c = count(v, q)
  return sub(v, 1, 4 * q) .. pack('<I4', max(c - cost, 0)) .. sub(v, 4 * q + 5, 4 * ring)
    .. pack('<dd', head, total - min(c, cost))
end

-- The oldest bucket still counted at `now` and the live sum (see admit).
local function live(v, now, head, total, window, width, ring)
  local lo = max(idiv(max(now + 1 - window, 0), width), head + 1 - ring)
  local sum = 0
  if lo <= head then
    sum = total
    for q = head - lo + 1, ring - 1 do
      sum = sum - count(v, q)
    end
  end
  return lo, sum
end

-- A release of `n` units taken at `taken`, as Rust's sliding_window::release: from the bucket
-- `taken` fell in, while it is live (from `lo` to `head`).
local function release(v, n, taken, head, total, lo, window, width, ring)
  local j = idiv(taken, width)
  if not head or j < lo or j > head then
    return nil, 0, 0
  end
  local q = head - j
  local c = count(v, q)
  local take = min(n, c)
  if take == 0 then
    return nil, 0, 0
  end
  return sub(v, 1, 4 * q) .. pack('<I4', c - take) .. sub(v, 4 * q + 5, 4 * ring)
    .. pack('<dd', head, total - take), leaves_at(head, window, width), take
end

-- A charge of `n` units at `now` (`kind` 0), a refund (1) or a release (2) as Rust's
-- sliding_window::charge, refund and release: counted in now's bucket up to a live sum of
-- limit + max_debt, given back from the newest live bucket down, to 0, or released (above).
-- Answers the new state (nil: unchanged), when it is empty again, and the units applied.
local function charge(v, now, n, kind, taken, max_debt, limit, window, width, ring)
  local head, total = ring_of(v, ring, width)
  local lo, sum = 0, 0
  if head then
    lo, sum = live(v, now, head, total, window, width, ring)
  end
  if kind == 2 then
    return release(v, n, taken, head, total, lo, window, width, ring)
  end
  if kind == 0 then
    local applied = min(n, max(limit + max_debt - sum, 0))
    if applied == 0 then
      return nil, 0, 0
    end
    local _, new, idle = admit(v, now, applied, 0, BOUND, window, width, ring)
    return new, idle, applied
  end
  if not head or lo > head then
    return nil, 0, 0
  end
  local counts, given = {}, 0
  for q = 0, ring - 1 do
    local c = count(v, q)
    if q <= head - lo and given < n then
      local take = min(n - given, c)
      c, given = c - take, given + take
    end
    counts[q + 1] = pack('<I4', c)
  end
  if given == 0 then
    return nil, 0, 0
  end
  return table.concat(counts) .. pack('<dd', head, total - given), leaves_at(head, window, width),
    given
end

return { params = params, admit = admit, idle_at = idle_at, refund = refund, charge = charge }
