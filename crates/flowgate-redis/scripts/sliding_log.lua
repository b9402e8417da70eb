-- sliding_log: the instant and cost of each admitted request in the last window.
-- Mirrors flowgate-core src/algorithm/sliding_log.rs.
-- Key flowgate:{<key>}:S<window> holds one '<dI4' entry (instant, cost) per admission instant,
-- oldest first, then '<I4I4': how many entries at the front are dead (left the window: they count as
-- absent), and the total cost of the others. Requests admitted in the same microsecond share one
-- entry, as in Rust.
-- Parameters: the window.
-- A log costs 12 bytes per entry and is read whole on every decision: for limits in the
-- thousands, sliding_window costs less.

-- The parameters the other functions take: the limit and the window.
local function params(limit, window)
  return limit, window
end

-- The log stored as `v`: the byte where its live entries start and where they end (an entry at
-- each 12 bytes between), and their total; nil for none.
local function log_of(v)
  if v and #v >= 8 and (#v - 8) % 12 == 0 then
    local dead, sum = unpack_at('<I4I4', v, #v - 7)
    if 12 * dead <= #v - 8 then
      return 12 * dead + 1, #v - 8, sum
    end
  end
  return nil
end

-- Admits as Rust does. The new entry (or, at the same instant or a clock that stepped back, the
-- newest one with the cost added) and the trailer are written over the old trailer (a patch at
-- byte `at`: making the whole log a new Lua string would cost more than the decision), the
-- entries that left the window staying as dead ones. The log is rewritten without them once
-- they cost more than a rewrite (Redis's Lua hashes every byte of the log it reads: about when
-- dead^2 > 4 live + 150, in Redis instructions), and when it reaches its limit (a string that
-- SETRANGE grows keeps the spare room Redis gave it: a full log is stored at its size).
local function admit(v, now, cost, _, limit, window)
  local from, to, sum = log_of(v)
  if not from then
    from, to, sum = 1, 0, 0
  end
  -- Entries at or before now - window have left it.
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
  local old, at = last + window, to
  if first < to and last >= now then
    at, c = to - 12, c + cost
  else
    last, c = now, cost
  end
  local dead, live = (first - 1) / 12, (at - first + 1) / 12
  if to > 0 and dead * dead <= 4 * live + 150 and sum + cost < limit then
    return true, pack('<dI4I4I4', last, c, dead, sum + cost), last + window, old, at
  end
  return true, sub(v or '', first, at) .. pack('<dI4I4I4', last, c, 0, sum + cost), last + window,
    old
end

local function idle_at(v, limit, window)
  local from, to = log_of(v)
  if not from or to < from then
    return 0
  end
  return unpack_at('<d', v, to - 11) + window
end

-- Takes `cost` off the entry that recorded a request admitted at `at` (the first at or after it:
-- the request was logged at max(at, newest)).
local function refund(v, at, cost)
  local from, to, sum = log_of(v)
  if not from then
    return v
  end
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

-- A release of `n` units taken at `taken`, as Rust's sliding_log::release: from the first live
-- entry at or after `taken` (a request is logged at the newest instant if the clock stepped
-- back), while `taken` is in the window; an emptied entry leaves the log. `first` to `to`: the
-- live entries, summing `sum`.
local function release(v, now, n, taken, first, to, sum, window)
  if now >= window and taken <= now - window then
    return nil, 0, 0
  end
  for i = first, to - 11, 12 do
    local ts, c = unpack_at('<dI4', v, i)
    if ts >= taken then
      local take = min(n, c)
      if take == 0 then
        return nil, 0, 0
      end
      local entry = c > take and pack('<dI4', ts, c - take) or ''
      local rest = sub(v, first, i - 1) .. entry .. sub(v, i + 12, to)
      local idle = #rest > 0 and unpack_at('<d', rest, #rest - 11) + window or now
      return rest .. pack('<I4I4', 0, sum - take), idle, take
    end
  end
  return nil, 0, 0
end

-- A charge of `n` units at `now` (`kind` 0), a refund (1) or a release (2), as Rust's
-- sliding_log::charge, refund and release: logged as one entry up to a live sum of
-- limit + max_debt, taken from the newest live entries, to an empty log, or released (above).
-- Answers the new state (nil: unchanged), when it is empty again, the units applied, and for a
-- patch the byte it starts at (see admit).
local function charge(v, now, n, kind, taken, max_debt, limit, window)
  local from, to, sum = log_of(v)
  if not from then
    from, to, sum = 1, 0, 0
  end
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
  if kind == 2 then
    return release(v, now, n, taken, first, to, sum, window)
  end
  if kind == 0 then
    local applied = min(n, max(limit + max_debt - sum, 0))
    if applied == 0 then
      return nil, 0, 0
    end
    local _, new, idle, _, patch = admit(v, now, applied, 0, BOUND, window)
    return new, idle, applied, patch
  end
  local given, last = 0, to - 11
  while last >= first and given < n do
    local ts, c = unpack_at('<dI4', v, last)
    local take = min(n - given, c)
    given = given + take
    if take < c then
      return sub(v, first, last - 1) .. pack('<dI4I4I4', ts, c - take, 0, sum - given), ts + window,
        given
    end
    last = last - 12
  end
  if given == 0 then
    return nil, 0, 0
  end
  local idle = last >= first and unpack_at('<d', v, last) + window or now
  return sub(v, first, last + 11) .. pack('<I4I4', 0, sum - given), idle, given
end

return { params = params, admit = admit, idle_at = idle_at, refund = refund, charge = charge }
