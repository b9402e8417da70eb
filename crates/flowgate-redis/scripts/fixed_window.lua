-- fixed_window: one counter per epoch-aligned window.
-- Mirrors flowgate-core src/algorithm/fixed_window.rs.
-- Key flowgate:{<key>}:f<window> holds '<dI4' (12 bytes): the end of the window counted (us, a
-- multiple of the window) and the units admitted in it.

-- The parameters the other functions take: the limit and the window.
local function params(limit, window)
  return limit, window
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

local function admit(v, now, cost, _, limit, window)
  -- The current window and its count; a clock that stepped back counts in the newer window.
  local e0, c = window_of(v)
  local e = idiv(now, window) * window + window
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
local function refund(v, at, cost, _, limit, window)
  local e, c = window_of(v)
  if e == idiv(at, window) * window + window then
    return pack('<dI4', e, max(c - cost, 0))
  end
  return v
end

return { params = params, admit = admit, idle_at = idle_at, refund = refund }
