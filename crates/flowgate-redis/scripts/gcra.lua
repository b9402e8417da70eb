-- token_bucket / leaky_bucket: GCRA over one theoretical arrival time (TAT).
-- Mirrors flowgate-core src/algorithm/gcra.rs.
-- KEYS[i]: flowgate:{<key>}:g  -- string of 8 bytes: the TAT, microseconds since the epoch, as a
--          little-endian double (struct '<d'; exact below 2^53). Binary states cost Redis less to
--          read and write than decimal ones, which it converts to and from integers.
-- Item parameters used: p.t (emission interval T), p.burst, p.max_wait (0 in reject mode),
-- p.limit, p.cost.

-- The TAT stored as `v` (0 for none, or anything else).
local function gcra_decode(v)
  if v and #v == 8 then
    local tat = struct.unpack('<d', v)
    if tat >= 0 and tat < 4503599627370496 then
      return tat
    end
  end
  return 0
end

local function gcra_load(key)
  return { tat = gcra_decode(redis.call('GET', key)) }
end

local function gcra_check(p, s, now, cost)
  local t = p.t
  local tau = p.burst * t
  local base = math.max(s.tat, now)
  local d = decision()
  d.remaining = idiv(sat(now + tau - base), t)
  d.reset = base - now
  if cost > p.burst + idiv(p.max_wait, t) then
    return d
  end
  local new_tat = base + cost * t
  local wait = sat(new_tat - now - tau)
  if wait <= p.max_wait then
    d.allowed = true
    d.wait = wait
    d.remaining = idiv(sat(now + tau - new_tat), t)
    d.reset = new_tat - now
  else
    d.retry = new_tat - tau - p.max_wait - now
  end
  return d
end

local function gcra_apply(p, s, now, cost)
  s.tat = math.max(s.tat, now) + cost * p.t
end

local function gcra_store(key, s, now, slack)
  redis.call('SET', key, struct.pack('<d', s.tat), expiry(s.tat, now, slack))
end

-- Gives back `cost` units taken at `at` (cluster compensation): the TAT moves back by cost * T.
local function gcra_refund(key, p, at, cost)
  local v = redis.call('GET', key)
  if v and #v == 8 then
    redis.call('SET', key, struct.pack('<d', sat(gcra_decode(v) - cost * p.t)), 'KEEPTTL')
  end
end

ALG[1] = { load = gcra_load, check = gcra_check, apply = gcra_apply, store = gcra_store, refund = gcra_refund }

-- @@fast
-- Fast fragment (see fast.lua): admission and the new TAT. Block: limit, P1..P3 = T, tau, max_wait.
-- Admits when the wait (new TAT - now - tau) is within max_wait, which also refuses a cost
-- above burst + max_wait / T (Rust's max_cost).
-- A key that several requests of the call share (a global or per-channel limit) keeps its TAT
-- within the call as a number once a request of the call has written it (x0; fast.lua packs
-- it when it writes the key): no unpack and no new string per admitted request.
local tat = 0
if x0 then
  tat = s
elseif s and #s == 8 then
  tat = sunpack('<d', s)
  if not (tat >= 0 and tat < 4503599627370496) then -- no script writes it: no state
    tat, s = 0, false
  end
end
local new = now + cost * P1
if tat > now then
  new = tat + cost * P1
end
if new - now - P2 <= P3 then
  allowed = 1
  if cost > 0 then
    if shared > 0 then
      -- (in bulk, see fast.lua, when the TAT still admits after every item of the call on it)
      if shared < 2 and new + (tot - cost) * P1 - now - P2 <= P3 then
        new = new + (tot - cost) * P1
        Z[k] = tot
      end
      nv = new
    else
      nv = spack('<d', new)
    end
    ex = new
    if s then
      ex0 = tat
    end -- (s is false when its TAT was out of bounds)
  end
end
