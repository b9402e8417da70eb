-- concurrency: at most `limit` units in flight, held as leases that expire after `window`.
-- Mirrors flowgate-core src/algorithm/concurrency.rs.
-- Key flowgate:{<key>}:c holds '<I4' (the total cost of its leases), then one '<ddI4' lease per
-- grant (its expiry in us, its id, its cost), in order of expiry. Lease ids are chosen by the
-- client, below 2^52 and never 0.
-- Parameters: the window (a lease's lifetime).

-- The parameters the other functions take: the limit and the window.
local function params(limit, window)
  return limit, window
end

-- Whether `v` holds leases (their total, then each lease).
local function holds_leases(v)
  return v and #v >= 4 and (#v - 4) % 20 == 0
end

-- The latest expiry of `v`'s leases (its last lease's), 0 for none.
local function latest(v)
  return holds_leases(v) and #v > 4 and unpack_at('<d', v, #v - 19) or 0
end

-- Admits when the units held (the total less the expired leases') and the cost fit. The new
-- lease goes after the held ones that expire at or before it (after all of them unless the
-- window changed or the clock stepped back).
local function admit(v, now, cost, lease, limit, window)
  local held, from = 0, 5
  if holds_leases(v) then
    held = unpack_at('<I4', v)
    -- The expired leases: a prefix, the leases being in order of expiry.
    local n = #v
    while from < n do
      local exp, _, c = unpack_at('<ddI4', v, from)
      if exp > now then
        break
      end
      from, held = from + 20, held - c
    end
  else
    v = ''
  end
  if held + cost > limit then
    return false
  end
  if cost == 0 then
    return true
  end
  local exp, at = now + window, #v + 1
  local old = at > 5 and unpack_at('<d', v, at - 20) or 0
  if old > exp then
    repeat
      at = at - 20
    until at <= from or unpack_at('<d', v, at - 20) <= exp
  end
  return true, pack('<I4c0ddI4c0', held + cost, sub(v, from, at - 1), exp, lease, cost, sub(v, at)),
    old > exp and old or exp, old
end

local function idle_at(v)
  return latest(v)
end

-- Removes lease `id`; answers the new state, or nil when it was not held.
local function release(v, id)
  if not holds_leases(v) then
    return nil
  end
  for i = 5, #v, 20 do
    local _, lid, c = unpack_at('<ddI4', v, i)
    if lid == id then
      return pack('<I4c0c0', max(unpack_at('<I4', v) - c, 0), sub(v, 5, i - 1), sub(v, i + 20))
    end
  end
  return nil
end

-- Gives back a lease granted by a request another slot rejected.
local function refund(v, at, cost, lease)
  return release(v, lease) or v
end

return { params = params, admit = admit, idle_at = idle_at, release = release, refund = refund }
