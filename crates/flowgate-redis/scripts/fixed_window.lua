-- fixed_window: one counter per epoch-aligned window, or per calendar period.
-- Mirrors flowgate-core src/algorithm/fixed_window.rs.
-- Key flowgate:{<key>}:f<window> (or f<unit>[@<zone>] for a calendar window) holds '<dI4' (12
-- bytes): the end of the window counted (us) and the units admitted in it.
-- Parameters: the limit and the window (us), 0, 0; or for a calendar window (whose periods
-- need a time zone database Lua has not) the limit and, around the client's clock, the start
-- of the current period, its end and the next period's end.

-- The parameters the other functions take.
local function params(limit, window, e1, e2)
  return limit, window, e1, e2
end

-- How far before the periods sent Redis's clock may be (12 hours, less than any period: the
-- period before `start` then surely ends at `start`). As call.rs's CALENDAR_REACH.
local CALENDAR_REACH = 43200000000

-- The end of the window holding `now`: epoch-aligned, or the calendar period holding `now`
-- among those sent (for a calendar window `window` is the current period's start; the period
-- before it ends there); an error when Redis's clock is beyond them (a period or more from the
-- client's): nothing is then counted.
local function window_end(now, window, e1, e2)
  if e1 == 0 then
    return idiv(now, window) * window + window
  elseif now < window then
    if now >= window - CALENDAR_REACH then
      return window
    end
  elseif now < e1 then
    return e1
  elseif now < e2 then
    return e2
  end
  error('flowgate: Redis\'s clock is beyond the calendar periods sent')
end

-- The window's end and count stored as `v` (0, 0 for none).
local function window_of(v)
  if v and #v == 12 then
    local e, c = unpack_at('<dI4', v)
    if e >= 0 and e < BOUND and e % 1 == 0 then
      return e, c
    end
  end
  return 0, 0
end

local function admit(v, now, cost, _, limit, window, e1, e2)
  -- The current window and its count; a clock that stepped back counts in the newer window.
  local e0, c = window_of(v)
  local e = window_end(now, window, e1, e2)
  if e0 >= e then
    e = e0
  else
    c = 0
  end
  if c + cost > limit then
    return false
  end
  if cost == 0 then
    return true
  end
  return true, pack('<dI4', e, c + cost), e, e0
end

local function idle_at(v)
  return (window_of(v))
end

-- Gives back `cost` units taken at `at`, if the window of `at` is still the one counted.
local function refund(v, at, cost, _, limit, window, e1, e2)
  local e, c = window_of(v)
  if e == window_end(at, window, e1, e2) then
    return pack('<dI4', e, max(c - cost, 0))
  end
  return v
end

-- A charge of `n` units at `now` (`kind` 0), a refund (1) or a release (2), as Rust's
-- fixed_window::charge, refund and release: counted up to limit + max_debt (and 2^32 - 1), given
-- back down to 0; a release only while the window counted is `taken`'s (`taken` is that
-- window's end). Answers the new state (nil: unchanged), when it is empty again, and the units
-- applied.
local function charge(v, now, n, kind, taken, max_debt, limit, window, e1, e2)
  local e0, c = window_of(v)
  local e = window_end(now, window, e1, e2)
  if e0 >= e then
    e = e0
  else
    c = 0
  end
  if kind == 2 and taken ~= e then
    return nil, 0, 0
  end
  local applied
  if kind > 0 then
    applied = min(n, c)
    c = c - applied
  else
    applied = min(n, max(min(limit + max_debt, 4294967295) - c, 0))
    c = c + applied
  end
  if applied == 0 then
    return nil, 0, 0
  end
  return pack('<dI4', e, c), e, applied
end

return { params = params, admit = admit, idle_at = idle_at, refund = refund, charge = charge }
