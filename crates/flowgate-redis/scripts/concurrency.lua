-- concurrency: at most `limit` units in flight, held as leases that expire after `window`.
-- Mirrors flowgate-core src/algorithm/concurrency.rs.
-- KEYS[i]: flowgate:{<key>}:c  -- string: the total cost of its leases (struct '<I4', a
--          little-endian u32), then one 20-byte lease per grant in order of expiry ('<ddI4':
--          its expiry in microseconds since the epoch and its id, little-endian doubles, and its
--          cost). Lease ids are chosen by the client, below 2^52 and never 0. The total lets a
--          decision read only the expired leases at the front (usually none).
-- Item parameters used: p.window, p.limit, p.cost, p.lease.

-- The leases stored as `v` ({ exp, id, c } each, in order of expiry; none for anything else).
local function conc_decode(v)
  local leases = {}
  if v and #v >= 4 and (#v - 4) % 20 == 0 then
    for i = 0, (#v - 4) / 20 - 1 do
      local x, id, c = struct.unpack('<ddI4', v, 5 + 20 * i)
      leases[i + 1] = { exp = x, id = id, c = c }
    end
  end
  return leases
end

local function conc_encode(leases)
  local parts = {}
  local total = 0
  for i = 1, #leases do
    local x = leases[i]
    parts[i] = struct.pack('<ddI4', x.exp, x.id, x.c)
    total = total + x.c
  end
  return struct.pack('<I4', total) .. table.concat(parts)
end

local function conc_load(key)
  return { leases = conc_decode(redis.call('GET', key)) }
end

local function conc_check(p, s, now, cost)
  local held = 0
  local newest = 0
  for i = 1, #s.leases do
    local x = s.leases[i]
    if x.exp > now then
      held = held + x.c
    end
    if x.exp > newest then
      newest = x.exp
    end
  end
  local d = decision()
  d.allowed = held + cost <= p.limit
  local used = held
  if d.allowed then
    used = held + cost
  end
  d.remaining = sat(p.limit - used)
  if d.allowed and cost > 0 then
    newest = math.max(newest, now + p.window)
  end
  d.reset = sat(newest - now)
  if not d.allowed and cost <= p.limit then
    -- Leases are in order of expiry (as stored).
    local freed = 0
    for i = 1, #s.leases do
      local x = s.leases[i]
      if x.exp > now then
        freed = freed + x.c
        if held - freed + cost <= p.limit then
          d.retry = x.exp - now
          break
        end
      end
    end
  end
  return d
end

local function conc_apply(p, s, now, cost)
  local live = {}
  local idle_at = now + p.window
  for i = 1, #s.leases do
    local x = s.leases[i]
    if x.exp > now then
      live[#live + 1] = x
      if x.exp > idle_at then
        idle_at = x.exp
      end
    end
  end
  local e = { exp = now + p.window, id = tonumber(p.lease), c = cost }
  -- Keep the order of expiry.
  local at = #live + 1
  while at > 1 and live[at - 1].exp > e.exp do
    at = at - 1
  end
  table.insert(live, at, e)
  s.leases = live
  s.idle_at = idle_at
end

local function conc_store(key, s, now, slack)
  redis.call('SET', key, conc_encode(s.leases), expiry(s.idle_at, now, slack))
end

-- Removes lease `id` (decimal); answers 1 when it was held. The key keeps its expiry.
local function conc_release(key, id)
  local v = redis.call('GET', key)
  local want = tonumber(id)
  if not (v and want and #v >= 4 and (#v - 4) % 20 == 0) then
    return 0
  end
  for i = 0, (#v - 4) / 20 - 1 do
    local _, lid, c = struct.unpack('<ddI4', v, 5 + 20 * i)
    if lid == want then
      local total = struct.unpack('<I4', v)
      redis.call('SET', key, struct.pack('<I4', total - c) .. string.sub(v, 5, 4 + 20 * i)
        .. string.sub(v, 25 + 20 * i), 'KEEPTTL')
      return 1
    end
  end
  return 0
end

local function conc_refund(key, p, at, cost)
  conc_release(key, p.lease)
end

ALG[5] = { load = conc_load, check = conc_check, apply = conc_apply, store = conc_store, refund = conc_refund }

-- @@fast
-- Fast fragment (see fast.lua): admission and the new leases. Block: limit, P1 = window; the
-- item carries `lease`. Reads the expired leases at the front only (the header holds the total;
-- one unpack reads it with the first lease), and appends the new lease after the live ones
-- (their order of expiry, unless the clock stepped back or the window changed).
-- A key that several requests of the call share (a global limit) is not rebuilt as a string
-- by every admitted request (Redis's Lua hashes every byte of every string it makes, and a hot
-- lease list is kilobytes): its state within the call becomes a table { b = the stored value,
-- o = where its live leases start in it, P = the leases appended in the call (packed), n = how
-- many of P are this state's, held = the units held }, which fast.lua turns into the string
-- once, when it writes the key. Every request of a call sees the same `now`, so the stored
-- leases live at the first request stay live and the appended ones expire last, in order.
local window = P1
-- (the item's lease id follows it in the call when it has a cost: fast.lua)
local lease = 0
if cost > 0 then
  lease, ip = sunpack('<d', IT, ip)
end
if type(s) == 'table' then
  if s.held + cost <= limit then
    allowed = 1
    if cost > 0 then
      -- (a request that ends rejected leaves P[n + 1] behind; the next admission overwrites it)
      local n1 = s.n + 1
      s.P[n1] = spack('<ddI4', now + window, lease, cost)
      nv = { b = s.b, o = s.o, P = s.P, n = n1, held = s.held + cost }
      ex = now + window
    end
  end
else
  local n, total = 0, 0
  local x1, c1 = 0, 0 -- the first lease's expiry and cost
  if s and #s >= 4 and (#s - 4) % 20 == 0 then
    n = (#s - 4) / 20
    if n > 0 then
      local _
      total, x1, _, c1 = sunpack('<I4ddI4', s)
    else
      total = sunpack('<I4', s)
    end
  end
  local k0, stale = 0, 0 -- the leases expired at now
  if n > 0 and x1 <= now then
    k0, stale = 1, c1
    while k0 < n do
      local x, _, c = sunpack('<ddI4', s, 5 + 20 * k0)
      if x > now then
        break
      end
      stale = stale + c
      k0 = k0 + 1
    end
  end
  local held = total - stale
  if held + cost <= limit then
    allowed = 1
    if cost > 0 then
      local exp = now + window
      if n > 0 then
        ex0 = x1 -- the last lease's expiry
        if n > 1 then
          ex0 = sunpack('<d', s, 5 + 20 * (n - 1))
        end
      end
      ex = exp
      if k0 == n then
        nv = spack('<I4ddI4', held + cost, exp, lease, cost)
      elseif ex0 <= exp then
        if shared ~= 0 then
          nv = { b = s, o = 5 + 20 * k0, P = { spack('<ddI4', exp, lease, cost) }, n = 1,
            held = held + cost }
        else
          nv = spack('<I4', held + cost) .. ssub(s, 5 + 20 * k0) .. spack('<ddI4', exp, lease, cost)
        end
      else
        -- Keep the order of expiry: after the live leases that expire at or before this one.
        local live = ssub(s, 5 + 20 * k0)
        local at = n - k0
        while at > 0 and sunpack('<d', live, 1 + 20 * (at - 1)) > exp do
          at = at - 1
        end
        nv = spack('<I4', held + cost) .. ssub(live, 1, 20 * at)
          .. spack('<ddI4', exp, lease, cost) .. ssub(live, 20 * at + 1)
        ex = ex0
      end
    end
  end
end
