-- sliding_log: the instant and cost of each admitted request in the last window.
-- Mirrors flowgate-core src/algorithm/sliding_log.rs.
-- Key flowgate:{<key>}:S holds one '<dI4' entry (instant, cost) per admission instant, oldest
-- first, then '<I4I4': how many entries at the front are dead (left the window: they count as
-- absent; this script writes 0), and the total cost of the others. Requests admitted in the same
-- microsecond share one entry, as in Rust.
-- Parameters: the window.
-- A log costs 12 bytes per entry and is read whole on every decision: for limits in the
-- thousands, sliding_window costs less.

-- The parameters the other functions take: the limit and the window.
local function params(limit, window)
  return limit, window
end

-- The log stored as `v`: the byte where its live entries start and where they end (an entry at
-- each 12 bytes between), and their total; 1, 0, 0 for none.
local function log_of(v)
  if v and #v >= 8 and (#v - 8) % 12 == 0 then
    local dead, sum = unpack_at('<I4I4', v, #v - 7)
    if 12 * dead <= #v - 8 then
      return 12 * dead + 1, #v - 8, sum
    end
  end
  return 1, 0, 0
end

local function admit(v, now, cost, _, limit, window)
  v = v or ''
  local from, to, sum = log_of(v)
  -- Entries at or before now - window have left it: dropped from the front.
  local first = from
  if now >= window then
    while first < to do
      local ts, c = unpack_at('<dI4', v, first)
      if ts > now - window then
        break
      end
      sum = sum - c
      first = first + 12
    end
  end
  if sum + cost > limit then
    return false
  end
  if cost == 0 then
    return true
  end
  local last, c = 0, 0
  if to > from then
    last, c = unpack_at('<dI4', v, to - 11)
  end
  local old = last + window
  -- The live entries, then the new one (or, at the same instant or a clock that stepped back,
  -- the newest one with the cost added), then the trailer.
  local new
  if first <= to - 11 and last >= now then
    new = sub(v, first, to - 12) .. pack('<dI4I4I4', last, c + cost, 0, sum + cost)
  else
    last = now
    new = sub(v, first, to) .. pack('<dI4I4I4', now, cost, 0, sum + cost)
  end
  return true, new, last + window, old
end

local function idle_at(v, limit, window)
  local from, to = log_of(v)
  if to < from then
    return 0
  end
  return unpack_at('<d', v, to - 11) + window
end

-- Takes `cost` off the entry that recorded a request admitted at `at` (the first at or after it:
-- the request was logged at max(at, newest)).
local function refund(v, at, cost)
  local from, to, sum = log_of(v)
  local b, n = sub(v, from, to), (to - from + 1) / 12
  for i = 0, n - 1 do
    local ts, c = unpack_at('<dI4', b, 12 * i + 1)
    if ts >= at then
      local entry = c > cost and pack('<dI4', ts, c - cost) or ''
      return sub(b, 1, 12 * i) .. entry .. sub(b, 12 * i + 13)
        .. pack('<I4I4', 0, max(sum - min(c, cost), 0))
    end
  end
  return v
end

ALG[SLIDING_LOG] = { params = params, admit = admit, idle_at = idle_at, refund = refund }
