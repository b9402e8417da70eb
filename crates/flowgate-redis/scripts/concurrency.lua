-- concurrency: at most `limit` units in flight, held as leases that expire after `window`.
-- Mirrors flowgate-core src/algorithm/concurrency.rs.
-- Key flowgate:{<key>}:c holds '<I4' (the total cost of its leases), then one '<ddI4' lease per
-- grant (its expiry in us, its id, its cost). Lease ids are chosen by the client, below 2^52 and
-- never 0.
-- Parameters: the window (a lease's lifetime).

-- The parameters the other functions take: the limit and the window.
local function params(limit, window)
  return limit, window
end

-- The leases stored as `v`, without the total ('' for none).
local function leases_of(v)
  if v and #v >= 4 and (#v - 4) % 20 == 0 then
    return sub(v, 5)
  end
  return ''
end

-- The leases of `b` still held at `now`: their bytes (`b` itself when none expired), their
-- total cost, their latest expiry; and the latest expiry of all.
local function live(b, now)
  local kept, held, latest, all, expired = {}, 0, 0, 0, false
  for i = 0, #b / 20 - 1 do
    local exp, _, c = unpack_at('<ddI4', b, 20 * i + 1)
    if exp > now then
      kept[#kept + 1] = sub(b, 20 * i + 1, 20 * i + 20)
      held = held + c
      latest = max(latest, exp)
    else
      expired = true
    end
    all = max(all, exp)
  end
  return expired and table.concat(kept) or b, held, latest, all
end

local function admit(v, now, cost, lease, limit, window)
  local kept, held, latest, old = live(leases_of(v), now)
  if held + cost > limit then
    return false
  end
  if cost == 0 then
    return true
  end
  local exp = now + window
  return true, pack('<I4', held + cost) .. kept .. pack('<ddI4', exp, lease, cost),
    max(latest, exp), old
end

local function idle_at(v)
  local _, _, latest = live(leases_of(v), 0)
  return latest
end

-- Removes lease `id`; answers the new state, or nil when it was not held.
local function release(v, id)
  local b = leases_of(v)
  for i = 0, #b / 20 - 1 do
    local _, lid, c = unpack_at('<ddI4', b, 20 * i + 1)
    if lid == id then
      local total = unpack_at('<I4', v)
      return pack('<I4', max(total - c, 0)) .. sub(b, 1, 20 * i)
        .. sub(b, 20 * i + 21)
    end
  end
  return nil
end

-- Gives back a lease granted by a request another slot rejected.
local function refund(v, at, cost, lease)
  return release(v, lease) or v
end

ALG[CONCURRENCY] = { params = params, admit = admit, idle_at = idle_at, release = release, refund = refund }
